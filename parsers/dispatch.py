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
from typing import Callable, Iterable, Optional, Sequence

from .base import LineContext, LineParser
from .events import Event
from .prefix import split_prefix
from .timestamps import leading_timestamp

Handler = Callable[[str, LineContext], list[Event]]
_META = set(".^$*+?{}[]|()")


def literal_of(pattern: str) -> Optional[str]:
    """The plain text a regex matches when it has no metacharacters, else None."""
    out = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            if i + 1 >= len(pattern) or pattern[i + 1].isalnum():
                return None  # \d, \w, \n ...: a class or an escape, not plain text
            out.append(pattern[i + 1])
            i += 2
            continue
        if ch in _META:
            return None
        out.append(ch)
        i += 1
    return "".join(out)


class ParserSet:
    def __init__(self, file: str, parser_classes: Sequence[type[LineParser]], *, sniff: bool = True) -> None:
        """With ``sniff=False`` every parser is on from the start."""
        self.file = file
        self._dormant = [cls for cls in parser_classes if sniff and cls.SNIFF is not None]
        self.active: list[LineParser] = [cls(file) for cls in parser_classes if cls not in self._dormant]
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
        # One scan per trigger: a literal is found with str.find and a pattern with
        # its own regex (one big alternation is tried at every offset: far slower).
        self._routes: list[tuple[Optional[str], Optional[re.Pattern[str]], Handler]] = []
        for parser in self.active:
            for pattern, handler in parser.routes():
                literal = literal_of(pattern)
                self._routes.append((literal, None if literal else re.compile(pattern), handler))

    @property
    def active_names(self) -> list[str]:
        return [p.name for p in self.active]

    # -- feeding ----------------------------------------------------------------------
    def feed_block(self, text: str, first_line: int) -> list[Event]:
        """Parse ``text`` (complete lines joined by ``\\n``); ``first_line`` is the
        1-based number of its first line."""
        if self._dormant:
            self.sniff(text)
        if not self._routes:
            return []
        hits = self._scan(text)
        events: list[Event] = []
        lineno = first_line
        counted_to = 0
        find = text.find
        count = text.count
        routes = self._routes
        for start in sorted(hits):
            end = find("\n", start)
            if end < 0:
                end = len(text)
            lineno += count("\n", counted_to, start)
            counted_to = start
            ids = hits[start]
            ctx = self._context(text[start:end], lineno)
            if ctx is None:
                continue
            body, lctx = ctx
            called: list[Handler] = []
            for idx in sorted(set(ids)) if len(ids) > 1 else ids:
                handler = routes[idx][2]
                if handler in called:
                    continue
                called.append(handler)
                try:
                    out = handler(body, lctx)
                except Exception:  # a parser bug must not stop the stream: drop the line
                    out = []
                if out:
                    events.extend(out)
        return events

    def _scan(self, text: str) -> dict[int, list[int]]:
        """Line start -> ids of the routes whose trigger the line contains."""
        hits: dict[int, list[int]] = {}
        find = text.find
        rfind = text.rfind
        for idx, (literal, rx, _) in enumerate(self._routes):
            pos = 0
            while True:
                if literal is not None:
                    at = find(literal, pos)
                    if at < 0:
                        break
                else:
                    m = rx.search(text, pos)  # type: ignore[union-attr]
                    if m is None:
                        break
                    at = m.start()
                start = rfind("\n", 0, at) + 1
                ids = hits.get(start)
                if ids is None:
                    hits[start] = [idx]
                else:
                    ids.append(idx)
                pos = find("\n", at)  # one hit per line and route is enough
                if pos < 0:
                    break
                pos += 1
        return hits

    def _context(self, line: str, lineno: int):
        self.lines_fed += 1
        pre = split_prefix(line)
        body = pre.body
        wall = leading_timestamp(body) if "-" in body[:40] else None
        if wall is not None:
            self._last_wall = wall
        return body, LineContext(self.file, lineno, pre.rank, pre.local_rank, pre.node,
                                 wall if wall is not None else self._last_wall)

    def feed_line(self, line: str, lineno: int) -> list[Event]:
        """Feed one line, unfiltered: every active parser sees it."""
        body, ctx = self._context(line, lineno)
        events: list[Event] = []
        for parser in self.active:
            try:
                out = parser.feed(body, ctx)
            except Exception:
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
