"""A timed probe of a format's regexes: does any take seconds on one long line?

Python's ``re`` backtracks and cannot be interrupted, and not every regex that can
take exponential time has the nested repeat :mod:`parsers.regex_safety` refuses
(``(a|aa)+$`` has none).  ``tuimon formats check`` runs each regex of a format, in a
child process it can kill, over lines built to make backtracking regexes slow: the
format's own sample lines grown long, and runs of one character class cut short.
"""
from __future__ import annotations

import re
from typing import Optional

from parsers.schema import Format

LINE = 4096  # characters: longer than almost every log line, short enough to stay quick for sane regexes
LIMIT_S = 2.0


def _probes(fmt: Format) -> list[str]:
    lines = [s.line for entry in fmt.lines for s in entry.samples]
    out = []
    for line in lines:
        out.append((line * (LINE // max(1, len(line)) + 1))[:LINE])  # the sample, over and over
        out.append(line[: len(line) // 2] + "x" * LINE)  # a match that fails late
    for run in ("a", "0", " ", "a ", "1.", "ab", ":", "|", "-", "\t"):
        out.append((run * LINE)[:LINE] + "!")
    return out


def _run(patterns: list[tuple[str, Optional[str]]], probes: list[str]) -> None:
    compiled = [(re.compile(regex, re.MULTILINE), re.compile(pairs) if pairs else None) for regex, pairs in patterns]
    for text in probes:
        for rx, pairs in compiled:
            rx.search(text)
            if pairs is not None:
                pairs.findall(text)


def slow_regex(fmt: Format, limit_s: float = LIMIT_S) -> Optional[str]:
    """None, or why ``fmt`` is refused: its regexes did not get through the probe lines
    within ``limit_s`` seconds."""
    patterns = [(entry.regex, entry.pairs) for entry in fmt.lines]
    from .pool import process_context

    child = process_context().Process(target=_run, args=(patterns, _probes(fmt)), daemon=True)
    child.start()
    child.join(limit_s)
    if child.is_alive():
        child.kill()
        child.join()
        return (f"a regex took over {limit_s:.0f} s on lines of {LINE} characters (it backtracks without end "
                "on some input and would stall tuimon): simplify it, bound its repeats")
    return None
