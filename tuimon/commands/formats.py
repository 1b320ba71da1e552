"""``tuimon formats list|check``: which formats read the logs, and whether a user's compile."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from parsers import ALL_PARSERS

from ..engine import catalog
from ..engine.probe import slow_regex
from ..sources.discover import PathError
from ..text import sanitize

EXIT_USAGE = 2


def cmd_formats(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    if args.formats_verb == "list":
        return _list()
    if args.formats_verb == "check":
        return _check(args.files)
    from .cli import _sub_help
    return _sub_help(parser, "formats")


def _list() -> int:
    cat = catalog.load()
    rows = [(f.name, ", ".join(dict.fromkeys(e.event for e in f.lines)), f.origin, f.description) for f in cat.user]
    rows += [(f.name, ", ".join(dict.fromkeys(e.event for e in f.lines)), "built-in", f.description)
             for f in cat.builtin]
    rows += [(cls.name, "(hook)", "built-in", (cls.__doc__ or "").strip().split("\n")[0]) for cls in ALL_PARSERS]
    width = max(len(r[0]) for r in rows)
    events = max(len(r[1]) for r in rows)
    out = [f"{'NAME':{width}}  {'EVENTS':{events}}  FROM"]
    for name, evs, origin, _ in rows:
        out.append(f"{name:{width}}  {evs:{events}}  {origin}")
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
        slow = slow_regex(fmt)
        if slow is not None:
            print(f"tuimon: error: {sanitize(str(path))}: {slow}", file=sys.stderr)
            bad = True
            continue
        samples = sum(len(e.samples) for e in fmt.lines)
        print(sanitize(f"{path}: ok: format {fmt.name!r}, {len(fmt.lines)} line entries, {samples} samples checked"))
    return EXIT_USAGE if bad else 0


__all__ = ["cmd_formats", "PathError"]
