"""User format regexes, bounded in time.

A static check (:mod:`parsers.regex_safety`) cannot refuse every regex that backtracks
without end (``(?:a|aa)+$`` has no nested repeat).  A user format's regexes are
therefore run by the ``regex`` module, whose matching takes a timeout (Python's ``re``
has none and cannot be interrupted, even by Ctrl-C): a search that runs over
:data:`USER_REGEX_TIMEOUT_S` raises :class:`RegexTimeout` and the engine turns the
format off (:mod:`.guard`).  :func:`harden` gives a parsed user format these patterns
and probes them, as ``tuimon formats check`` and every load do.  (Here, not in
``parsers/``: the parsers use the standard library alone.)
"""
from __future__ import annotations

import dataclasses
from typing import Any, Optional

from tuimon.parsers.schema import Format, FormatError

USER_REGEX_TIMEOUT_S = 1.0


class RegexTimeout(Exception):
    """A user regex ran over its time bound (``args[0]`` is its source)."""


class TimedPattern:
    """A compiled user regex with ``re.Pattern``'s methods the engine uses, each bounded
    in time.  ``finditer`` returns a list: the bound must hold over the whole walk."""

    __slots__ = ("_compiled", "pattern", "groupindex", "timeout")

    def __init__(self, source: str, multiline: bool = False, timeout: float = USER_REGEX_TIMEOUT_S) -> None:
        import regex

        flags = regex.VERSION0 | (regex.MULTILINE if multiline else 0)
        self._compiled = regex.compile(source, flags)
        self.pattern = source
        self.groupindex = dict(self._compiled.groupindex)
        self.timeout = timeout

    def search(self, string: str, pos: int = 0, endpos: Optional[int] = None) -> Any:
        try:
            return self._compiled.search(string, pos, len(string) if endpos is None else endpos, timeout=self.timeout)
        except TimeoutError:
            raise RegexTimeout(self.pattern) from None

    def finditer(self, string: str, pos: int = 0, endpos: Optional[int] = None) -> list[Any]:
        try:
            return list(self._compiled.finditer(string, pos, len(string) if endpos is None else endpos,
                                                timeout=self.timeout))
        except TimeoutError:
            raise RegexTimeout(self.pattern) from None

    def findall(self, string: str) -> list[Any]:
        try:
            return self._compiled.findall(string, timeout=self.timeout)
        except TimeoutError:
            raise RegexTimeout(self.pattern) from None

    def __reduce__(self) -> tuple:
        return (TimedPattern, (self.pattern, bool(self._compiled.flags & 8), self.timeout))


def compile_user(source: str, multiline: bool = False) -> TimedPattern:
    """A user regex, time-bounded; raises ``re.error`` (as ``re.compile`` would) when it
    does not compile."""
    import re

    import regex

    try:
        return TimedPattern(source, multiline)
    except regex.error as exc:
        raise re.error(str(exc)) from None


# -- the probe: the same check at load as at ``formats check`` ------------------------------

PROBE_LINE = 4096  # characters: longer than almost every log line, short enough for sane regexes
PROBE_LIMIT_S = 2.0  # for all of a format's regexes over all probe lines


def probe_lines(samples: list[str]) -> list[str]:
    """Lines built to make backtracking regexes slow: the sample lines grown long, each
    cut short by a late mismatch, and runs of one character class."""
    out = []
    for line in samples:
        out.append((line * (PROBE_LINE // max(1, len(line)) + 1))[:PROBE_LINE])  # the sample, over and over
        out.append(line[: len(line) // 2] + "x" * PROBE_LINE)  # a match that fails late
    for run in ("a", "0", " ", "a ", "1.", "ab", ":", "|", "-", "\t"):
        out.append((run * PROBE_LINE)[:PROBE_LINE] + "!")
    return out


def slow_patterns(patterns: list[TimedPattern], samples: list[str], limit_s: float = PROBE_LIMIT_S) -> Optional[str]:
    """None, or why the patterns are refused: one of them did not get through the probe
    lines within ``limit_s`` seconds in all (each search bounded by what is left)."""
    import time

    import regex

    deadline = time.monotonic() + limit_s
    for text in probe_lines(samples):
        for p in patterns:
            left = deadline - time.monotonic()
            try:
                if left <= 0:
                    raise TimeoutError
                p._compiled.search(text, timeout=left)
                p._compiled.findall(text, timeout=max(1e-3, deadline - time.monotonic()))
            except TimeoutError:
                return (f"a regex took over {limit_s:.0f} s on lines of {PROBE_LINE} characters (it backtracks "
                        f"without end on some input and would stall tuimon): simplify it, bound its repeats")
            except regex.error:
                continue
    return None


def harden(fmt: Format) -> Format:
    """``fmt`` (a user's, parsed with ``re``) with time-bounded patterns, after the probe;
    raises :class:`FormatError` when a regex is too slow on the probe lines or the
    ``regex`` module cannot compile it."""
    import re

    lines = []
    try:
        for entry in fmt.lines:
            pairs = compile_user(entry.pairs_pattern.pattern) if entry.pairs_pattern is not None else None
            lines.append(dataclasses.replace(entry, pattern=compile_user(entry.pattern.pattern, multiline=True),
                                             pairs_pattern=pairs))
    except re.error as exc:
        raise FormatError(f"{fmt.origin}: bad regex: {exc}") from None
    patterns = [p for e in lines for p in (e.pattern, e.pairs_pattern) if p is not None]
    slow = slow_patterns(patterns, [s.line for e in lines for s in e.samples])
    if slow is not None:
        raise FormatError(f"{fmt.origin}: {slow}")
    return dataclasses.replace(fmt, lines=tuple(lines))
