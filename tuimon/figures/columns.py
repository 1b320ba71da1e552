"""The column registry: every column of every table tuimon shows or writes.

``tuimon summary`` (table, markdown, CSV), ``--columns``, the compare screen, the app's
jobs screen (its columns, the order they drop in at narrow widths, its sorts) and the
tables users put in reports (seed 001 by GPUs, size, DP, PP, batch, speed and TFLOPs;
seed 004 by method, throughput, size, layers, hidden, heads, sequence and batch) are
all read from :data:`COLUMNS`.  The field registry's own summary metrics
(:data:`tuimon.store.fields.FIELDS`) become columns here without a line of their own.

A column is a name, a header, a getter over a :class:`~tuimon.figures.record.Summary`
and the decimals a table shows.  Machines get raw values: JSON numbers or null, CSV
numbers or an empty cell; a fraction people read as a percent (MFU) is a percent in
tables and on screen, and the fraction in JSON and CSV.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Optional

from ..engine.native import json_indented
from ..store.fields import FIELDS, SHOWN, Field
from .cells import csv_text, duration, iter_time, num, safe_cell, short_num
from .ledger import LABELS as LEDGER_LABELS
from .ledger import PARTS as LEDGER_PARTS
from .record import SCHEMA_VERSION, Figure, Summary, achieved_tflops


@dataclass(frozen=True)
class Column:
    name: str
    header: str
    get: Callable[[Summary], Any]
    digits: Optional[int] = None  # None: text
    #: a fraction that people read as a percent (MFU: ``41.2%``); machines (JSON, CSV) get the fraction
    percent: bool = False
    #: the text people read where it says more than the value (``12/20``, ``failed (oom)``)
    show: Optional[Callable[[Summary], str]] = None
    right: Optional[bool] = None  # aligned right; by default numbers are
    #: the jobs screen: its header there (None: not on the screen), its compact text, the order
    #: columns drop in as the terminal narrows (lowest stays longest) and the sort a click picks
    screen: Optional[str] = None
    compact: Optional[Callable[[Summary], str]] = None
    keep: int = 99
    sort: Optional[str] = None
    #: the live view's own figure (ETA, last update, the trend): not a summary's, not in --columns
    live: bool = False

    @property
    def aligned_right(self) -> bool:
        return self.right if self.right is not None else self.digits is not None


def _hours(seconds: Optional[float]) -> Optional[float]:
    return None if seconds is None else round(seconds / 3600.0, 4)


def _percent(fraction: Optional[float]) -> str:
    return "-" if fraction is None else f"{100 * fraction:.0f}%"


def _cfg(key: str) -> Callable[[Summary], Any]:
    return lambda r: getattr(r.config, key)


def _gas(r: Summary) -> Optional[int]:
    gbs, mbs, dp = r.global_batch, r.config.micro_batch, r.config.dp
    if gbs and mbs and dp and gbs % (mbs * dp) == 0:
        return gbs // (mbs * dp)
    return None


def _speed(r: Summary) -> Optional[float]:
    return r.iter_time_ms.median / 1000.0 if r.iter_time_ms else None


def _speed_text(r: Summary) -> str:
    """Seconds per iteration to three decimals, and to three figures below 0.1 s (a 16.8 ms
    step is 0.0168, not 0.017; a 5.2 ms one 0.00520, not 0.005)."""
    s = _speed(r)
    if s is None or not math.isfinite(s):
        return "-"
    return f"{s:.{max(3, 2 - math.floor(math.log10(s))) if s > 0 else 3}f}"


def _tflops(r: Summary) -> Optional[float]:
    return achieved_tflops(r.tflops_per_gpu)[0]


def tflops_text(r: Summary) -> str:
    """TFLOPs per GPU in one cell (:func:`~tuimon.figures.record.achieved_tflops`): as the log reports
    them (``7.2r``), else computed (seed 001's, recomputation counted where the log says it is on)."""
    value, reported = achieved_tflops(r.tflops_per_gpu)
    if value is None:
        return "-"
    return num(value) + "r" if reported else num(value)


def _memory(r: Summary) -> Optional[float]:
    mb = r.memory.gpu_max_allocated_mb
    return round(mb / 1024.0, 2) if mb is not None else None


def status_label(r: Summary) -> str:
    return r.status + (f" ({r.failure.kind})" if r.failure and r.status == "failed" else "")


def progress_text(r: Summary) -> str:
    """``last/total`` (:attr:`Summary.last_progress`), ``-`` when the job has none."""
    last = r.last_progress
    if last is None:
        return "-"
    return f"{last}/{r.train_iters}" if r.train_iters else str(last)


def mfu_text(r: Summary) -> str:
    """``41.2%``; ``!`` marks a job whose figures are doubtful (see its ``checks``)."""
    if r.mfu is None:
        return "-" + ("!" if r.checks else "")
    return f"{100.0 * r.mfu:.1f}%" + ("!" if r.checks else "")


def figure_text(value: Figure, digits: int = 4) -> str:
    """A loss or evaluation figure; a diverged one (``nan``, ``inf``) stays a word."""
    return value if isinstance(value, str) else num(value, digits)


def eval_text(r: Summary) -> str:
    """``val lm loss 2.3456``: the evaluation metric a row shows, named (``-`` without one)."""
    if r.eval_metric is None:
        return "-"
    return f"{r.eval_metric} {figure_text(r.eval_value)}"


def _spread(r: Summary) -> Optional[str]:
    it = r.iter_time_ms
    return f"{it.p10 / 1000.0:.3f}-{it.p90 / 1000.0:.3f}" if it else None


def _spread_compact(r: Summary) -> str:
    it = r.iter_time_ms
    if not it:
        return "-"
    return f"{it.p10:.2f}-{it.p90:.2f}ms" if it.p90 < 10.0 else f"{it.p10 / 1000:.2f}-{it.p90 / 1000:.2f}s"


def _registry(f: Field, keep: int) -> Column:
    """A column of the field registry's own summary metric."""
    def get(r: Summary) -> Optional[float]:
        return r.metric(f.key)

    def compact(r: Summary) -> str:
        return short_num(r.metric(f.key), min(f.digits, 2))
    percent = f.unit == "ratio"  # a fraction people read as a percent, as MFU
    digits = 1 if percent else f.digits
    return Column(f.key, f.label, get, digits, percent=percent, screen=f.label if f.shown else None, keep=keep,
                  compact=compact)


def _none(_: Summary) -> None:
    return None


_BUILT_IN: tuple[Column, ...] = (
    Column("job", "Job", lambda r: r.job, screen="Job", keep=0, sort="job"),
    Column("method", "Method", lambda r: r.framework),  # already named by its offloading method when it has one
    Column("framework", "Framework", lambda r: r.framework, screen="Framework", keep=10),
    Column("status", "Status", lambda r: r.status, show=status_label, screen="Status", keep=1, sort="status"),
    Column("iterations", "Iterations", lambda r: r.last_progress, 0),
    Column("progress", "Iter", lambda r: r.last_progress, 0, show=progress_text, right=True,
           screen="Iter", compact=progress_text, keep=2),
    Column("eta", "ETA", _none, screen="ETA", keep=9, live=True),
    Column("train_iters", "Train iters", lambda r: r.train_iters, 0),
    Column("gpus", "GPUs", lambda r: r.world_size, 0),
    Column("size", "Params (B)", lambda r: r.params_billion, 3),  # parameters, billions
    Column("layers", "Layers", _cfg("num_layers"), 0),
    Column("hidden", "Hidden", _cfg("hidden_size"), 0),
    Column("heads", "Heads", _cfg("num_heads"), 0),
    Column("seq", "Seq", lambda r: r.seq_length, 0),
    Column("tp", "TP", _cfg("tp"), 0),
    Column("pp", "PP", _cfg("pp"), 0),
    Column("dp", "DP", _cfg("dp"), 0),
    Column("mbs", "MBS", _cfg("micro_batch"), 0),
    Column("gbs", "GBS", lambda r: r.global_batch, 0),
    Column("gas", "GAS", _gas, 0),
    Column("speed", "Speed (s/it)", _speed, 3, show=_speed_text, screen="Iter time", keep=3, sort="iter time",
           compact=lambda r: iter_time(r.iter_time_ms.median if r.iter_time_ms else None)),
    Column("spread", "p10-p90 (s)", _spread, right=True, screen="Spread", compact=_spread_compact, keep=15),
    Column("tflops", "TFLOPs", _tflops, 1, screen="TFLOPs", compact=tflops_text, keep=4, sort="tflops"),
    Column("tflops_reported", "TFLOPs rep", lambda r: r.tflops_per_gpu.reported, 1, screen="TFLOPs rep", keep=7,
           sort="tflops", compact=lambda r: num(r.tflops_per_gpu.reported)),
    Column("tflops_computed", "TFLOPs calc", lambda r: r.tflops_per_gpu.computed, 1, screen="TFLOPs calc", keep=6,
           sort="tflops", compact=lambda r: num(r.tflops_per_gpu.computed)),
    Column("tflops_hardware", "TFLOPs hw", lambda r: r.tflops_per_gpu.hardware, 1),
    Column("mfu", "MFU", lambda r: r.mfu, 1, percent=True, show=mfu_text, screen="MFU", compact=mfu_text, keep=5,
           sort="mfu"),
    Column("hfu", "HFU", lambda r: r.hfu, 1, percent=True),
    Column("flops_formula", "FLOPs formula", lambda r: r.flops_formula),
    Column("size_source", "Size from", lambda r: r.params_source),
    Column("loss", "Loss", lambda r: r.loss_last, 4, screen="Loss", keep=8, compact=lambda r: figure_text(r.loss_last)),
    Column("eval", "Eval", lambda r: r.eval_value, 4, show=eval_text, screen="Eval", keep=12,
           compact=lambda r: figure_text(r.eval_value)),
    Column("eval_metric", "Eval metric", lambda r: r.eval_metric),
    Column("startup", "Startup (s)", lambda r: r.startup_s, 0, screen="Startup", keep=16,
           compact=lambda r: duration(r.startup_s)),
    # MLPerf's headline figure: run_start to run_stop, its time to train
    Column("run_time", "Run time (s)", lambda r: r.run_time_s, 1),
    # the job's time ledger (figures.ledger): its runs together, on each of their rows
    Column("goodput", "Goodput", lambda r: r.ledger.goodput if r.ledger else None, 1, percent=True,
           screen="Goodput", keep=19, compact=lambda r: _percent(r.ledger.goodput if r.ledger else None)),
    Column("span_h", "Job span (h)", lambda r: _hours(r.ledger.whole_s) if r.ledger else None, 2),
    *(Column(f"{part}_h", f"{LEDGER_LABELS[part].capitalize()} (GPU-h)",
             (lambda p: lambda r: r.ledger.gpu_hours.get(p) if r.ledger else None)(part), 2)
      for part in LEDGER_PARTS if part != "gap"),
    Column("gap_h", "Between runs (h)", lambda r: _hours(r.ledger.seconds.get("gap")) if r.ledger else None, 2),
    Column("redone_iters", "Iterations redone", lambda r: r.ledger.redone_iterations if r.ledger else None, 0),
    Column("warnings", "Warnings", lambda r: sum(r.warnings.values()), 0),
    Column("ranks", "Ranks seen", lambda r: r.ranks_seen, 0),
    Column("gpu", "GPU", lambda r: r.gpu),
    Column("memory", "Memory (GiB)", _memory, 2),  # MB / 1024: GiB
    Column("updated", "Updated", _none, screen="Updated", keep=11, sort="updated", live=True),
    Column("trend", "TFLOPs trend", _none, screen="TFLOPs trend", keep=17, live=True),
    Column("checks", "Checks", lambda r: "; ".join(r.checks) or None),
)


def _with_registry(built_in: tuple[Column, ...]) -> tuple[Column, ...]:
    """The registry's metrics after the throughput columns (shown ones on the screen)."""
    named = {c.name for c in built_in}
    extra = tuple(_registry(f, 13 + i) for i, f in enumerate(f for f in FIELDS if f.summary) if f.key not in named)
    at = next(i for i, c in enumerate(built_in) if c.name == "spread") + 1
    return built_in[:at] + extra + built_in[at:]


COLUMNS: tuple[Column, ...] = _with_registry(_BUILT_IN)
BY_NAME = {c.name: c for c in COLUMNS}
#: what --columns and the compare screen take (the live view's own are not a summary's)
NAMES = tuple(c.name for c in COLUMNS if not c.live)
#: seed 001's table
DEFAULT = ("job", "gpus", "size", "dp", "pp", "mbs", "gbs", "speed", "tflops")
#: ``tuimon summary``'s table: progress, rates, TFLOPs both ways, MFU, the model, startup, loss, eval
SUMMARY = ("job", "framework", "status", "progress", "speed", "spread", *(f.key for f in SHOWN),
           "tflops_reported", "tflops_computed", "mfu", "hfu", "size", "gpus", "startup", "loss", "eval")
#: the CSV export: every summary column, one value a cell
CSV = tuple(n for n in NAMES if n not in ("progress", "spread"))
#: the jobs screen, left to right
SCREEN = tuple(c for c in COLUMNS if c.screen is not None)
#: the jobs screen's columns, the one kept longest first
SCREEN_PRIORITY = tuple(c.screen for c in sorted(SCREEN, key=lambda c: c.keep) if c.screen)
#: the jobs screen's sorts, and which header picks which
SORTS = tuple(dict.fromkeys(c.sort for c in SCREEN if c.sort))
HEADER_SORTS = {c.screen: c.sort for c in SCREEN if c.sort and c.screen}


class ColumnError(ValueError):
    """A --columns the user gave with a name we do not know (one line, exit status 2)."""


def columns_named(names: tuple[str, ...]) -> tuple[Column, ...]:
    return tuple(BY_NAME[n] for n in names)


def parse_columns(text: str) -> tuple[Column, ...]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in NAMES]
    if unknown or not names:
        what = f"unknown column {unknown[0]!r}" if unknown else "no column named"
        raise ColumnError(f"--columns: {what} (columns: {', '.join(NAMES)})")
    return tuple(BY_NAME[n] for n in names)


def raw(column: Column, row: Summary) -> Any:
    """The value for machines: a number, a string, or None."""
    value = column.get(row)
    if isinstance(value, float):
        if value != value:
            return None
        if column.digits is not None:  # 22.79695 rather than 22.796950000000002
            return round(value, column.digits + 3 + (2 if column.percent else 0))
    return value


def text(column: Column, row: Summary) -> str:
    """The text people read."""
    if column.show is not None:
        return column.show(row)
    value = raw(column, row)
    if value is None:
        return "-"
    if column.digits is None or isinstance(value, str):
        return str(value)
    if column.percent:
        return f"{100.0 * value:.{column.digits}f}%"
    return f"{value:.{column.digits}f}"


def notes(summaries: list[Summary], bullet: str = "!") -> list[str]:
    """One line per doubtful figure (the ``!`` of a row's MFU) and per job stuck in
    startup (with the last line it printed), below a table."""
    # a check may quote a log's line (a failure at teardown): log text, never raw on a terminal
    out = [f"{bullet} {safe_cell(s.job)}: {safe_cell(check)}" for s in summaries for check in s.checks]
    out += [f"{bullet} {safe_cell(s.job)}: stuck in startup: {s.failure.message}; last line: "
            f"{safe_cell(s.failure.last_line or '-')[:200]}"
            for s in summaries if s.status == "stuck-in-startup" and s.failure]
    return [""] + out if out else []


def render(summaries: list[Summary], columns: tuple[Column, ...], fmt: str) -> str:
    """The rows in ``columns``, as table, markdown, csv or json: the one table renderer.
    A table or markdown with the MFU column says below it why a figure is marked ``!``."""
    if fmt == "json":
        records = [{"schema_version": SCHEMA_VERSION, **{c.name: raw(c, r) for c in columns}} for r in summaries]
        return json_indented(records) + "\n"
    if fmt == "csv":
        import csv  # (here: a table, the common case, never needs it)
        import io

        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow([c.name for c in columns])
        for r in summaries:
            writer.writerow(["" if (v := raw(c, r)) is None else (csv_text(v) if isinstance(v, str) else v)
                             for c in columns])
        return buf.getvalue()
    head = [c.header for c in columns]
    rows = [[safe_cell(text(c, r)) for c in columns] for r in summaries]
    right = [c.aligned_right for c in columns]
    below = notes(summaries, "-" if fmt == "markdown" else "!") if any(c.name == "mfu" for c in columns) else []
    if fmt == "markdown":
        out = ["| " + " | ".join(head) + " |", "| " + " | ".join("--:" if r else "---" for r in right) + " |"]
        out += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(out + below) + "\n"
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(head)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.rjust(w) if right[i] else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths)))
    return "\n".join([line(head), line(["-" * w for w in widths])] + [line(r) for r in rows] + below) + "\n"


def render_json(summaries: list[Summary]) -> str:
    """Every summary whole, as its record's JSON form (with ``schema_version``)."""
    return json_indented([s.as_dict() for s in summaries]) + "\n"


def render_summary(summaries: list[Summary], fmt: str) -> str:
    """``tuimon summary --format fmt`` without ``--columns``."""
    if fmt == "json":
        return render_json(summaries)
    return render(summaries, columns_named(CSV if fmt == "csv" else SUMMARY), fmt)
