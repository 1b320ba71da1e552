"""Feeds lines to the parsers that apply to one file.

Sniffing: a parser whose ``SNIFF`` pattern shows up in the file's text is
switched on (before the text that showed it is parsed), so several parsers can
apply to one file and none misses its first line.  Parsers without ``SNIFF``
are always on.

Prefiltering: only lines containing one of the active parsers' ``TRIGGERS`` are
split off and fed; the scan for triggers runs in the regex engine over a whole
block of lines, which is what makes a 300 MB log parse at disk-like speed.
"""
from __future__ import annotations

import re
from typing import Iterable, Optional, Sequence

from .base import LineContext, LineParser
from .events import Event
from .prefix import split_prefix
from .timestamps import leading_timestamp


class ParserSet:
    def __init__(self, file: str, parser_classes: Sequence[type[LineParser]], *, sniff: bool = True) -> None:
        """With ``sniff=False`` every parser is on from the start."""
        self.file = file
        self._dormant = [cls for cls in parser_classes if sniff and cls.SNIFF is not None]
        self.active: list[LineParser] = [cls(file) for cls in parser_classes if cls not in self._dormant]
        self._triggers: list[re.Pattern[str]] = []
        self._last_wall: Optional[float] = None
        self.lines_fed = 0
        self._rebuild()

    # -- activation -------------------------------------------------------------------
    def sniff(self, text: str) -> None:
        woken = [cls for cls in self._dormant if cls.SNIFF.search(text)]  # type: ignore[union-attr]
        if woken:
            self._dormant = [cls for cls in self._dormant if cls not in woken]
            self.active.extend(cls(self.file) for cls in woken)
            self._rebuild()

    def _rebuild(self) -> None:
        # One pattern per trigger: each starts with a literal the regex engine can
        # search for quickly, where one big alternation is tried at every position.
        patterns: list[str] = []
        for parser in self.active:
            patterns.extend(parser.TRIGGERS)
        self._triggers = [re.compile(p) for p in dict.fromkeys(patterns)]

    @property
    def active_names(self) -> list[str]:
        return [p.name for p in self.active]

    # -- feeding ----------------------------------------------------------------------
    def feed_block(self, text: str, first_line: int) -> list[Event]:
        """Parse ``text`` (complete lines joined by ``\\n``); ``first_line`` is the
        1-based number of its first line."""
        if self._dormant:
            self.sniff(text)
        if not self._triggers:
            return []
        rfind = text.rfind
        starts: set[int] = set()
        for trigger in self._triggers:
            for m in trigger.finditer(text):
                starts.add(rfind("\n", 0, m.start()) + 1)
        events: list[Event] = []
        lineno = first_line
        counted_to = 0
        find = text.find
        count = text.count
        for start in sorted(starts):
            end = find("\n", start)
            if end < 0:
                end = len(text)
            lineno += count("\n", counted_to, start)
            counted_to = start
            events.extend(self.feed_line(text[start:end], lineno))
        return events

    def feed_line(self, line: str, lineno: int) -> list[Event]:
        self.lines_fed += 1
        pre = split_prefix(line)
        body = pre.body
        wall = leading_timestamp(body) if "-" in body[:40] else None
        if wall is not None:
            self._last_wall = wall
        ctx = LineContext(self.file, lineno, pre.rank, pre.local_rank, pre.node,
                          wall if wall is not None else self._last_wall)
        events: list[Event] = []
        for parser in self.active:
            try:
                out = parser.feed(body, ctx)
            except Exception:  # a parser bug must not stop the stream: drop the line
                out = []
            if out:
                events.extend(out)
        return events

    def flush(self) -> list[Event]:
        events: list[Event] = []
        for parser in self.active:
            try:
                events.extend(parser.flush())
            except Exception:
                pass
        return events


def feed_lines(parsers: ParserSet, lines: Iterable[str], first_line: int = 1) -> list[Event]:
    """Convenience for tests and samples: feed individual lines (no prefilter)."""
    events: list[Event] = []
    for offset, line in enumerate(lines):
        events.extend(parsers.feed_line(line, first_line + offset))
    return events
