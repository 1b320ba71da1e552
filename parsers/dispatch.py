"""Feeds lines to the parsers that apply to one file.

Sniffing: a parser whose ``SNIFF`` pattern shows up in the file's text is
switched on (before the block that showed it is parsed), so several parsers can
apply to one file and none misses its first line.  Parsers without ``SNIFF``
are always on.  The dormant parsers' patterns are looked for in the same scan as
the active parsers' triggers, so a parser that never shows up costs nothing a block.

Prefiltering: only lines containing one of the active parsers' ``TRIGGERS`` are
split off and fed.  Triggers are looked for over a whole block of lines at once,
by a scanner (:mod:`.triggers`): the stdlib one here, or a faster one the
application passes in.
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right
from functools import lru_cache
from itertools import repeat
from operator import add
from typing import Callable, Iterable, Optional, Sequence

from .base import LineContext, LineParser
from .events import Batch, Event, merge
from .lanes import LaneInput, group_by, pick_rows
from .prefix import may_have_prefix, split_prefix
from .timestamps import line_stamp
from .triggers import FindScanner, Heads, ScannerFactory

_find_scanner = lru_cache(maxsize=64)(FindScanner)

Handler = Callable[[str, LineContext], list[Event]]
Lane = Callable[[LaneInput, Callable[[Sequence[int]], list[Event]]], list[Event]]


class ParserSet:
    #: re-raise errors from lanes instead of falling back (tests set it: a lane that
    #: fails silently still gives right results, only slowly, and would go unnoticed)
    strict_lanes = False

    def __init__(self, file: str, parser_classes: Sequence[type[LineParser]], *, sniff: bool = True,
                 scanner: Optional[ScannerFactory] = None, lanes: bool = False) -> None:
        """With ``sniff=False`` every parser is on from the start.  ``scanner`` builds
        the trigger scanner from a tuple of trigger patterns (see :mod:`.triggers`);
        it is called again whenever sniffing switches a parser on, so it should cache.
        With ``lanes``, lines of routes that have a lane are parsed a block at a time
        and may come out as :class:`~parsers.events.Batch` events (see :mod:`.lanes`)."""
        self.file = file
        self.lanes = lanes
        self._scanner_factory = scanner or _find_scanner
        self._dormant = [cls for cls in parser_classes if sniff and cls.SNIFF is not None]
        self.active: list[LineParser] = [cls(file) for cls in parser_classes if cls not in self._dormant]
        self._drop_fallbacks()
        self._last_wall: Optional[float] = None
        self._flushes = 0
        self._warm = False
        self.lines_fed = 0
        self._rebuild()

    # -- activation -------------------------------------------------------------------
    def sniff(self, text: str) -> None:
        """Switch on the dormant parsers whose ``SNIFF`` shows up in ``text``."""
        self._wake([cls for cls in self._dormant if cls.SNIFF.search(text)])  # type: ignore[union-attr]

    def _wake(self, woken: list[type[LineParser]]) -> None:
        if woken:
            self._dormant = [cls for cls in self._dormant if cls not in woken]
            for cls in woken:
                parser = cls(self.file)
                if self._warm:
                    parser.warm()
                self.active.append(parser)
            self._drop_fallbacks()
            self._rebuild()

    def _drop_fallbacks(self) -> None:
        """Once a parser whose lines give the steps with their loss is on, fallback
        parsers are off (and no longer sniffed for): the run is read by its own."""
        if any(p.STEPS_WITH_LOSS for p in self.active):
            self._dormant = [cls for cls in self._dormant if not cls.FALLBACK]
            self.active = [p for p in self.active if not p.FALLBACK]

    def _sniffed(self, firsts: list[int], more: dict, by_trigger: Optional[dict]) -> list[type[LineParser]]:
        """The dormant parsers a scan found a ``SNIFF`` pattern of (its triggers past the routes')."""
        n = len(self._routes)
        found = {k for k in (by_trigger if by_trigger is not None else set(firsts)) if k >= n}
        if more:
            found.update(k for ids in more.values() for k in ids if k >= n)
        hit = {self._sniff_of[k - n] for k in found}
        return [cls for cls in self._dormant if cls in hit]

    # -- state --------------------------------------------------------------------------
    def warm(self) -> None:
        """Start in the middle of a file: whether once-only events were reported is
        unknown (see :meth:`LineParser.warm`)."""
        self._warm = True
        for parser in self.active:
            parser.warm()

    def snapshot(self) -> tuple:
        """Everything that decides what the next lines give: two sets with equal
        snapshots give the same events from here on."""
        return (tuple(p.name for p in self.active), tuple(c.name for c in self._dormant), self._last_wall,
                tuple(p.snapshot() for p in self.active))

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        for name in ("_scanner", "_routes", "_lane_of", "_has_lane", "_sniff_of"):
            del state[name]  # rebuilt on unpickling: the native scanner, routes bound to parsers
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._rebuild()

    def _rebuild(self) -> None:
        self._routes: list[tuple[str, Handler, Optional[Lane]]] = [
            route for parser in self.active for route in parser.routes()]
        # the dormant parsers' SNIFF patterns are looked for in the same pass as the routes'
        # triggers, after them: a search of its own for each (``in`` over a 1 MB block takes
        # 0.25-0.6 ms a text) cost a parser that stays dormant 7 % of a summary
        sniffs = [(pattern, cls) for cls in self._dormant for pattern in cls.SNIFF.patterns]  # type: ignore[union-attr]
        self._sniff_of = [cls for _, cls in sniffs]
        self._scanner = self._scanner_factory(tuple(route[0] for route in self._routes) +
                                              tuple(pattern for pattern, _ in sniffs))
        self._lane_of = {handler: lane for _, handler, lane in self._routes if lane is not None}
        self._has_lane = [lane is not None for _, _, lane in self._routes]

    @property
    def active_names(self) -> list[str]:
        return [p.name for p in self.active]

    # -- feeding ----------------------------------------------------------------------
    def feed_block(self, text: str, first_line: int, layout: object = None) -> list[Event]:
        """Parse ``text`` (complete lines joined by ``\\n``); ``first_line`` is the
        1-based number of its first line.  ``layout`` is what the application's
        framing knows of the text, handed to its scanner as it is."""
        if not self._routes and not self._dormant:
            return []
        found = self._scanner.lines(text, layout)
        if self._dormant and found[0]:
            woken = self._sniffed(found[2], found[4], found[6])
            if woken:  # switched on before the block is parsed, so they see its first line
                self._wake(woken)
                found = self._scanner.lines(text, layout)
        if not self._routes:
            return []
        starts, ends, firsts, rows, more, heads, by_trigger = found
        if not starts:
            return []
        lines = self._hit_lines(text, starts, ends, rows, first_line, heads)
        lanes = self.lanes
        if lanes and not more:
            if by_trigger is None:  # a scanner that does not group
                by_trigger = group_by(firsts)
            if all(map(self._has_lane.__getitem__, by_trigger)):  # the usual block: every line to a lane
                return self._run_lanes(self._by_handler(by_trigger), lines)
        events: list[Event] = []
        routes = self._routes
        # lines waiting for their lane, per handler; they are parsed before the next
        # line that takes the line-by-line path, so parser state sees lines in order
        waiting: dict[Handler, list[int]] = {}
        for i, first in enumerate(firsts):
            ids = more.get(i) if more else None
            if ids is None:
                route = routes[first]
                if lanes and route[2] is not None:
                    queue = waiting.get(route[1])
                    if queue is None:
                        waiting[route[1]] = [i]
                    else:
                        queue.append(i)
                    continue
                handlers = [route[1]]
            else:
                handlers = []
                for idx in ids:
                    if routes[idx][1] not in handlers:
                        handlers.append(routes[idx][1])
            if waiting:
                events.extend(self._run_lanes(waiting, lines))
                waiting = {}
            body, ctx = lines.context(i)
            for handler in handlers:
                try:
                    out = handler(body, ctx)
                except Exception:  # a parser bug must not stop the stream: drop the line
                    out = []
                if out:
                    events.extend(out)
        if waiting:
            events.extend(self._run_lanes(waiting, lines))
        return events

    def _by_handler(self, by_trigger: dict[int, list[int]]) -> dict[Handler, list[int]]:
        """Rows by trigger -> rows by handler (triggers sharing one are merged), in
        the order of each handler's first row."""
        out: dict[Handler, list[int]] = {}
        for trigger, rows in by_trigger.items():
            handler = self._routes[trigger][1]
            have = out.get(handler)
            out[handler] = rows if have is None else sorted(have + rows)
        return out

    def _hit_lines(self, text: str, starts: list[int], ends: list[int], rows: list[int],
                   first_line: int, heads: Optional[Heads] = None) -> "_Lines":
        """The lines at ``starts`` with their context, by column: line numbers,
        launcher prefixes split off, and the wall time of each (its own stamp, else
        the nearest earlier one of a line fed before it).  ``heads``, when the
        scanner read them, spare most lines the prefix test and the stamp reading."""
        numbers = list(map(add, rows, repeat(first_line)))
        raw = [text[start:end] for start, end in zip(starts, ends)]
        n = len(raw)
        bodies = raw
        ranks: list[Optional[int]] = [None] * n
        local_ranks: list[Optional[int]] = [None] * n
        nodes: list[Optional[str]] = [None] * n
        prefixed = heads.prefixed if heads else [i for i, line in enumerate(raw) if may_have_prefix(line)]
        for i in prefixed:
            pre = split_prefix(raw[i])
            if pre.body is not raw[i]:
                if bodies is raw:
                    bodies = list(raw)
                bodies[i], ranks[i], local_ranks[i], nodes[i] = pre.body, pre.rank, pre.local_rank, pre.node
        if heads:
            walls = list(heads.stamps)
            for i in heads.unsure:
                walls[i] = line_stamp(bodies[i])
        else:
            walls = list(map(line_stamp, bodies))
        last = self._last_wall
        if None in walls:  # a line without a stamp of its own takes the one before it
            for i, own in enumerate(walls):
                if own is None:
                    walls[i] = last
                else:
                    last = own
        self._last_wall = walls[-1]
        self.lines_fed += n
        return _Lines(self.file, bodies, numbers, ranks, local_ranks, nodes, walls, prefixed=bodies is not raw)

    def _run_lanes(self, waiting: dict[Handler, list[int]], lines: "_Lines") -> list[Event]:
        events: list[Event] = []
        for handler, rows in waiting.items():
            done = bytearray(len(rows))

            def fallback(idx: Sequence[int], handler=handler, rows=rows, done=done) -> list[Event]:
                out: list[Event] = []
                for k in idx:
                    if done[k]:
                        continue
                    done[k] = 1
                    body, ctx = lines.context(rows[k])
                    try:
                        out.extend(handler(body, ctx))
                    except Exception:
                        pass
                return out

            try:
                events.extend(self._lane_of[handler](lines.lane_input(rows), fallback))
            except Exception:  # a lane bug costs speed, not lines: the rest go one by one
                if self.strict_lanes:
                    raise
                events.extend(fallback(range(len(rows))))
        self._flushes += 1
        return _in_line_order([e._replace(flush=self._flushes) if type(e) is Batch else e for e in events])

    def _context(self, line: str, lineno: int):
        self.lines_fed += 1
        pre = split_prefix(line)
        body = pre.body
        wall = line_stamp(body)
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


class _Lines:
    """Hit lines of one block and their context, by column."""

    __slots__ = ("file", "bodies", "numbers", "ranks", "local_ranks", "nodes", "walls", "prefixed")

    def __init__(self, file: str, bodies: list[str], numbers: list[int], ranks: list, local_ranks: list,
                 nodes: list, walls: list, prefixed: bool = True) -> None:
        self.file, self.bodies, self.numbers = file, bodies, numbers
        self.ranks, self.local_ranks, self.nodes, self.walls = ranks, local_ranks, nodes, walls
        self.prefixed = prefixed  # False: no line had a launcher prefix, ranks and nodes are all None

    def context(self, i: int) -> tuple[str, LineContext]:
        return self.bodies[i], LineContext(self.file, self.numbers[i], self.ranks[i], self.local_ranks[i],
                                           self.nodes[i], self.walls[i])

    def lane_input(self, rows: list[int]) -> LaneInput:
        if len(rows) == len(self.bodies):
            return LaneInput(self.bodies, self.numbers, self.ranks, self.nodes, self.walls)
        if not self.prefixed:  # nothing to pick from columns of None
            bodies, numbers, walls = pick_rows(rows, self.bodies, self.numbers, self.walls)
            return LaneInput(bodies, numbers, [None] * len(rows), [None] * len(rows), walls)
        return LaneInput(*pick_rows(rows, self.bodies, self.numbers, self.ranks, self.nodes, self.walls))


def _in_line_order(events: list[Event]) -> list[Event]:
    """Events in line order, a batch counting at its last line and cut where a
    single event falls among its lines: whoever applies them in turn (the job
    store) sees every state change in the order the lines gave it.  A batch of a
    kind keyed by name (``KEYED_BY``, timers) counts at its first line: only the
    order of each name's values matters, and each name is then first seen in line order."""
    kinds: dict[type, list[Batch]] = {}
    for e in events:
        if type(e) is Batch:
            kinds.setdefault(e.kind, []).append(e)  # type: ignore[union-attr]
    if any(len(group) > 1 for group in kinds.values()):  # shapes of one kind interleave: one batch a kind
        events = [e for e in events if type(e) is not Batch] + [
            b for group in kinds.values() for b in (group if _apart(group) else [merge(group)])]
    singles = sorted(e.line for e in events if type(e) is not Batch)
    keyed: list[tuple[int, int, Event]] = []
    for e in events:
        if type(e) is not Batch:
            keyed.append((e.line, 0, e))
            continue
        lines = e.lines
        start = 0
        for cut in singles[bisect_left(singles, lines[0]):bisect_right(singles, lines[-1])]:
            stop = bisect_left(lines, cut)
            if stop > start:
                keyed.append((lines[start if _keyed_by(e.kind) else stop - 1], 1, e.slice(start, stop)))
                start = stop
        keyed.append((lines[start if _keyed_by(e.kind) else -1], 1, e.slice(start, len(lines)) if start else e))
    keyed.sort(key=_key)
    return [e for _, _, e in keyed]


def _apart(batches: list[Batch]) -> bool:
    """Whether batches of one kind may stay apart: a kind keyed by name, and no
    name in two of them (each name's values still come in line order).  This
    spares the merge, and the store the gaps a merge leaves."""
    key = _keyed_by(batches[0].kind)
    if key is None:
        return False
    seen: set = set()
    for b in batches:
        names = b.maps.get(key, {}).keys()
        if seen & names:
            return False
        seen |= names
    return True


def _keyed_by(kind: type) -> Optional[str]:
    """The map field whose keys are series of their own, for a record kind that declares one."""
    return getattr(kind, "KEYED_BY", None)


def _key(item: tuple) -> tuple[int, int]:
    return item[0], item[1]


def feed_lines(parsers: ParserSet, lines: Iterable[str], first_line: int = 1) -> list[Event]:
    """Convenience for tests and samples: feed individual lines (no prefilter)."""
    events: list[Event] = []
    for offset, line in enumerate(lines):
        events.extend(parsers.feed_line(line, first_line + offset))
    return events
