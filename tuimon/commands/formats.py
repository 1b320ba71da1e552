"""``tuimon formats list|check``: which formats read the logs, and whether a user's compile."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tuimon.parsers import ALL_PARSERS

from ..engine import catalog
from ..engine.user_regex import USER_REGEX_TIMEOUT_S
from ..sources.discover import PathError
from ..text import sanitize
from .settings import Settings
from .usage import EXIT_USAGE, sub_help


def cmd_formats(settings: Settings, parser: argparse.ArgumentParser) -> int:
    if settings.formats_verb == "list":
        return _list(settings.formats)
    if settings.formats_verb == "check":
        return _check(settings.files or [])
    return sub_help(parser, "formats")


def _list(extra: list[str]) -> int:
    missing = [raw for raw in extra if not Path(raw).expanduser().exists()]
    if missing:
        print(f"tuimon: error: --formats: no such file or directory: {sanitize(missing[0])}", file=sys.stderr)
        return EXIT_USAGE
    cat = catalog.load([Path(raw).expanduser() for raw in extra])
    # name, kind (a TOML/data format, a Python hook, or both), events, from, what it reads
    rows = [(f.name, "data", _events_of(f), f.origin, f.description) for f in cat.user]
    rows += [(f.name, "data", _events_of(f), "built-in", f.description) for f in cat.builtin]
    rows += [(cls.name, "hook", "(any)", "built-in", cls.READS) for cls in ALL_PARSERS]
    # one row per reader: a built-in that is both data and a hook (the launcher) is listed once
    merged: dict[tuple[str, str], tuple[str, str, str, str, str]] = {}
    for row in rows:
        key = (row[0], row[3])
        if key in merged:
            was = merged[key]
            row = (was[0], f"{was[1]}+{row[1]}", f"{was[2]}, {row[2]}", was[3], f"{was[4]}; {row[4]}")
        merged[key] = row
    rows = list(merged.values())
    width = max(len(r[0]) for r in rows)
    kinds = max(len("KIND"), *(len(r[1]) for r in rows))
    events = max(len(r[2]) for r in rows)
    origin = max(len(r[3]) for r in rows)
    out = [f"{'NAME':{width}}  {'KIND':{kinds}}  {'EVENTS':{events}}  {'FROM':{origin}}  READS"]
    for name, kind, evs, where, reads in rows:
        out.append(f"{name:{width}}  {kind:{kinds}}  {evs:{events}}  {where:{origin}}  {reads}")
    sys.stdout.write("".join(sanitize(line) + "\n" for line in out))
    for message in cat.errors:
        print(f"tuimon: warning: format left out: {sanitize(message)}", file=sys.stderr)
    dirs = ", ".join(str(d) for d in catalog.default_dirs())
    print(f"user formats are read from: {dirs}", file=sys.stderr)
    return 0


def _check(files: list[str]) -> int:
    bad = False
    for raw in files:
        path = Path(raw).expanduser()
        if not path.is_file():
            print(f"tuimon: error: {sanitize(raw)}: no such file", file=sys.stderr)
            bad = True
            continue
        fmt, _, errors = catalog.read_format(path)
        for message in errors:
            print(f"tuimon: error: {sanitize(message)}", file=sys.stderr)
        if errors or fmt is None:
            bad = True
            continue
        samples = sum(len(e.samples) for e in fmt.lines) + sum(len(b.samples) for b in fmt.blocks)
        blocks = f", {len(fmt.blocks)} block entries" if fmt.blocks else ""
        print(sanitize(f"{path}: ok: format {fmt.name!r}, {len(fmt.lines)} line entries{blocks}, "
                       f"{samples} samples checked"))
        for k, entry in enumerate(fmt.lines):
            given = entry_fields(entry)
            print(sanitize(f"  lines[{k}]: {entry.event}: gives {', '.join(given) or 'no field'}; feeds "
                           f"{', '.join(figures_fed(entry.event, given)) or 'no figure'}; {_engine_of(entry, fmt)}"))
        for k, block in enumerate(fmt.blocks):
            given = list(dict.fromkeys(block.keys.values()))
            print(sanitize(f"  blocks[{k}]: {block.event}: gives {', '.join(given) or 'no field'}; feeds "
                           f"{', '.join(figures_fed(block.event, given)) or 'no figure'}; pair lines "
                           f"{_engine_of_regex(block.pair)}"))
    return EXIT_USAGE if bad else 0


#: which figures of a job an event's field feeds (the summary's and the jobs screen's names)
_FEEDS: dict[str, tuple[str, ...]] = {
    "iteration": ("Iter",), "step": ("Iter",), "train_iters": ("Iter (of total)", "ETA"),
    "elapsed_ms": ("Iter time", "TFLOPs calc", "MFU", "Samples/s", "Tokens/s"), "iteration_time_s": ("Iter time",),
    "losses": ("Loss", "alerts: nan, loss-spike"), "loss": ("Loss", "alerts: nan, loss-spike"),
    "grad_norm": ("Grad norm", "alerts: grad-norm-spike"), "lr": ("LR",),
    "tflops_reported": ("TFLOPs rep",), "samples_per_sec": ("Samples/s",), "tokens_per_sec": ("Tokens/s",),
    "tokens_per_gpu_per_sec": ("Tokens/s/GPU",), "mfu": ("MFU rep",), "global_batch": ("GBS", "TFLOPs calc"),
    "num_layers": ("Params (B)",), "hidden_size": ("Params (B)",), "seq_length": ("Seq", "TFLOPs calc"),
    "vocab_size": ("Params (B)",), "padded_vocab_size": ("Params (B)",), "total_params_b": ("Params (B)",),
    "world_size": ("GPUs", "TFLOPs calc"), "tp": ("TP", "GPUs"), "pp": ("PP", "GPUs"), "dp": ("DP", "GPUs"),
    "micro_batch": ("MBS",), "gpu": ("GPU", "MFU"), "precision": ("MFU",), "metrics": ("Eval",),
    "gpu_max_allocated_mb": ("Memory (GiB)",), "gpu_max_reserved_mb": ("Memory (GiB)",),
    "save_ms": ("checkpoints",), "name": ("Startup (s)",), "duration_s": ("Startup (s)",),
    "kind": ("Status",), "status": ("Status",), "timers": ("timer breakdown",),
}


def _events_of(fmt) -> str:
    return ", ".join(dict.fromkeys([e.event for e in fmt.lines] + [b.event for b in fmt.blocks]))


def _engine_of_regex(regex: str) -> str:
    """Which engine runs a block's pair regex (tuimon.engine.block_rules)."""
    from ..engine.user_regex import core_reason

    reason = core_reason(regex)
    if reason is None:
        return "read by the compiled core (linear time; a line that is not ASCII goes to Python's regex)"
    return f"read by Python's regex, {USER_REGEX_TIMEOUT_S:g} s a search at most ({reason})"


def _engine_of(entry, fmt) -> str:
    """Which engine runs an entry's line regex, and why not the compiled core; whether the core
    reads its lines into columns (tuimon.engine.data_rows: several times faster)."""
    from ..engine import native
    from ..engine.data_rows import data_reader
    from ..engine.user_regex import CorePattern, core_reason

    if isinstance(entry.pattern, CorePattern):
        rows = "; its lines read into columns there (a line of two matches, or a value only Python reads, goes to " \
               "Python)" if data_reader(entry, fmt, True, native.core) is not None else ""
        return f"run by the compiled core (linear time; a line that is not ASCII goes to Python's regex){rows}"
    return f"run by Python's regex, {USER_REGEX_TIMEOUT_S:g} s a search at most ({core_reason(entry.regex)})"


def entry_fields(entry) -> list[str]:
    """The event fields one format entry fills: its groups', its constants', its derived ones."""
    names = [name for _, name, _, _ in entry.plan] + list(entry.set)
    if entry.pairs_pattern is not None:
        names.append("timers" if entry.event == "timers" else "losses" if entry.event == "iteration" else "metrics")
    if entry.time_from:
        names.append("elapsed_ms")
    return list(dict.fromkeys(names))


def figures_fed(event: str, fields: list[str]) -> list[str]:
    out: list[str] = []
    for name in fields:
        out.extend(_FEEDS.get(name, ()))
    if event in ("failure", "exit"):
        out.append("Status")
    return list(dict.fromkeys(out))


__all__ = ["cmd_formats", "PathError"]
