"""Feeds lines to the parsers that apply to one file.

Sniffing: a parser whose ``SNIFF`` pattern shows up in the file's text is
switched on (before the text that showed it is parsed), so several parsers can
apply to one file and none misses its first line.  Parsers without ``SNIFF``
are always on.

Prefiltering: only lines containing one of the active parsers' ``TRIGGERS`` are
split off and fed.  Triggers are looked for over a whole block of lines at once,
by a scanner (:mod:`.triggers`): the stdlib one here, or a faster one the
application passes in.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Callable, Iterable, Optional, Sequence

from .base import LineContext, LineParser
from .events import Event
from .prefix import split_prefix
from .timestamps import leading_timestamp
from .triggers import FindScanner, ScannerFactory

_find_scanner = lru_cache(maxsize=64)(FindScanner)

Handler = Callable[[str, LineContext], list[Event]]


class ParserSet:
    def __init__(self, file: str, parser_classes: Sequence[type[LineParser]], *, sniff: bool = True,
                 scanner: Optional[ScannerFactory] = None) -> None:
        """With ``sniff=False`` every parser is on from the start.  ``scanner`` builds
        the trigger scanner from a tuple of trigger patterns (see :mod:`.triggers`);
        it is called again whenever sniffing switches a parser on, so it should cache."""
        self.file = file
        self._scanner_factory = scanner or _find_scanner
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
        self._routes: list[tuple[str, Handler]] = [route for parser in self.active for route in parser.routes()]
        self._scanner = self._scanner_factory(tuple(pattern for pattern, _ in self._routes))

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
        hits = self._scanner.scan(text)
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
                handler = routes[idx][1]
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
