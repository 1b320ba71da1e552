"""Named summary columns (``tuimon summary --columns job,gpus,size,speed,tflops``): the
tables users put in reports (seed 001 by GPUs, size, DP, PP, batch, speed and TFLOPs;
seed 004 by method, throughput, size, layers, hidden, heads, sequence and batch).

A column is a name, a header, a getter over a summary row and the decimals a table
shows.  Machines get raw values: JSON numbers or null, CSV numbers or an empty cell;
a fraction people read as a percent (MFU) is a percent in tables and on screen, and the
fraction in JSON and CSV.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

from .cells import csv_text, safe_cell


@dataclass(frozen=True)
class Column:
    name: str
    header: str
    get: Callable[[dict], Any]
    digits: Optional[int] = None  # None: text
    #: a fraction that people read as a percent (MFU: ``41.2%``); machines (JSON, CSV) get the fraction
    percent: bool = False


def _cfg(key: str) -> Callable[[dict], Any]:
    return lambda r: r["config"].get(key)


def _method(r: dict) -> str:
    """A job's framework is already named by its offloading method when it has one
    (``Job.framework``): stronghold, l2l, zero-offload, zero-infinity, else megatron-lm..."""
    return str(r["framework"])


def _gas(r: dict) -> Optional[int]:
    gbs, mbs, dp = r["global_batch"], r["config"].get("micro_batch"), r["config"].get("dp")
    if gbs and mbs and dp and gbs % (mbs * dp) == 0:
        return gbs // (mbs * dp)
    return None


def _speed(r: dict) -> Optional[float]:
    return r["iter_time_ms"]["median"] / 1000.0 if r["iter_time_ms"] else None


def _tflops(r: dict) -> Optional[float]:
    t = r["tflops_per_gpu"]
    return t["computed"] if t["computed"] is not None else t["reported"]


def _iterations(r: dict) -> Optional[int]:
    return r["last_iteration"] if r["last_iteration"] is not None else r.get("last_step")


def _memory(r: dict) -> Optional[float]:
    mb = r["memory"]["gpu_max_allocated_mb"]
    return round(mb / 1024.0, 2) if mb is not None else None


COLUMNS: tuple[Column, ...] = (
    Column("job", "Job", lambda r: r["job"]),
    Column("method", "Method", _method),
    Column("framework", "Framework", lambda r: r["framework"]),
    Column("status", "Status", lambda r: r["status"]),
    Column("iterations", "Iterations", _iterations, 0),
    Column("gpus", "GPUs", lambda r: r["world_size"], 0),
    Column("size", "Size (B)", lambda r: r["params_billion"], 3),
    Column("layers", "Layers", _cfg("num_layers"), 0),
    Column("hidden", "Hidden", _cfg("hidden_size"), 0),
    Column("heads", "Heads", _cfg("num_heads"), 0),
    Column("seq", "Seq", lambda r: r["seq_length"], 0),
    Column("tp", "TP", _cfg("tp"), 0),
    Column("pp", "PP", _cfg("pp"), 0),
    Column("dp", "DP", _cfg("dp"), 0),
    Column("mbs", "MBS", _cfg("micro_batch"), 0),
    Column("gbs", "GBS", lambda r: r["global_batch"], 0),
    Column("gas", "GAS", _gas, 0),
    Column("speed", "Speed (s/it)", _speed, 3),
    Column("tflops", "TFLOPs", _tflops, 1),
    Column("tflops_reported", "TFLOPs rep", lambda r: r["tflops_per_gpu"]["reported"], 1),
    Column("tflops_computed", "TFLOPs calc", lambda r: r["tflops_per_gpu"]["computed"], 1),
    Column("mfu", "MFU", lambda r: r["mfu"], 1, percent=True),
    Column("samples_per_sec", "Samples/s", lambda r: r["samples_per_sec"], 3),
    Column("tokens_per_sec", "Tokens/s", lambda r: r["tokens_per_sec"], 0),
    Column("tokens_per_gpu_per_sec", "Tokens/s/GPU", lambda r: r["tokens_per_gpu_per_sec"], 0),
    Column("startup", "Startup (s)", lambda r: r["startup_s"], 0),
    Column("loss", "Loss", lambda r: r["loss_last"], 4),
    Column("eval", "Eval", lambda r: r["eval_value"], 4),
    Column("eval_metric", "Eval metric", lambda r: r["eval_metric"]),
    Column("warnings", "Warnings", lambda r: sum(r["warnings"].values()), 0),
    Column("ranks", "Ranks seen", lambda r: r["ranks_seen"], 0),
    Column("gpu", "GPU", lambda r: r["gpu"]),
    Column("memory", "Memory (GB)", _memory, 2),
)
BY_NAME = {c.name: c for c in COLUMNS}
NAMES = tuple(BY_NAME)
#: seed 001's table
DEFAULT = ("job", "gpus", "size", "dp", "pp", "mbs", "gbs", "speed", "tflops")


class ColumnError(ValueError):
    """A --columns the user gave with a name we do not know (one line, exit status 2)."""


def parse_columns(text: str) -> tuple[Column, ...]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in BY_NAME]
    if unknown or not names:
        what = f"unknown column {unknown[0]!r}" if unknown else "no column named"
        raise ColumnError(f"--columns: {what} (columns: {', '.join(NAMES)})")
    return tuple(BY_NAME[n] for n in names)


def raw(column: Column, row: dict) -> Any:
    """The value for machines: a number, a string, or None."""
    value = column.get(row)
    if isinstance(value, float):
        if value != value:
            return None
        if column.digits is not None:  # 22.79695 rather than 22.796950000000002
            return round(value, column.digits + 3 + (2 if column.percent else 0))
    return value


def text(column: Column, row: dict) -> str:
    value = raw(column, row)
    if value is None:
        return "-"
    if column.digits is None or isinstance(value, str):
        return str(value)
    if column.percent:
        return f"{100.0 * value:.{column.digits}f}%"
    return f"{value:.{column.digits}f}"


def render(summaries: list[dict], columns: tuple[Column, ...], fmt: str) -> str:
    """The rows in ``columns``, as table, markdown, csv or json."""
    import csv
    import io
    import json


    if fmt == "json":
        return json.dumps([{c.name: raw(c, r) for c in columns} for r in summaries], indent=2, allow_nan=False) + "\n"
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow([c.name for c in columns])
        for r in summaries:
            writer.writerow(["" if (v := raw(c, r)) is None else (csv_text(v) if isinstance(v, str) else v)
                             for c in columns])
        return buf.getvalue()
    head = [c.header for c in columns]
    rows = [[safe_cell(text(c, r)) for c in columns] for r in summaries]
    numeric = [c.digits is not None for c in columns]
    if fmt == "markdown":
        out = ["| " + " | ".join(head) + " |", "| " + " | ".join("--:" if n else "---" for n in numeric) + " |"]
        out += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(out) + "\n"
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(head)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.rjust(w) if numeric[i] else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths)))
    return "\n".join([line(head), line(["-" * w for w in widths])] + [line(r) for r in rows]) + "\n"
