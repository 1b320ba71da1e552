"""A block's plain timer lines read by the compiled core into columns (see
:mod:`tuimon.parsers.columns`), apart from the lines the hooks read: which lines the
core reads, what it read, and the :class:`TimerRows` they make, closed into the block's
events where the events' order needs it (:class:`tuimon.engine.blocks.BlockEngine`
walks them in line order with its other hit lines)."""
from __future__ import annotations

from functools import lru_cache
from typing import Any, Optional

from tuimon.parsers.columns import TimerRows
from tuimon.parsers.timers import COMM_OP_NAME, MINMAX

from . import native

#: LineParser.COLUMNS' kinds -> the kind numbers of tuimon._core.TimerLines
COLUMN_KINDS = {"time-list": 0, "minmax": 1}
#: the core's verdict on a line: nothing to read, left to its hook, a row
NOTHING, HOOK, ROW = 0, 1, 2


@lru_cache(maxsize=4)
def _timer_lines(core: Any) -> Any:
    return core.TimerLines(MINMAX, COMM_OP_NAME)


def split_rows(file: str, text: str, first_line: int, hits: list, columns: list) -> Optional["BlockRows"]:
    """The lines of ``columns`` ((rule, order, its lines' starts) of each hook rule the core
    has a reader for) that the core reads; every other of their lines goes into ``hits``
    as a hook's (the core leaves it, it is not ASCII, or another rule is on it too)."""
    taken = {hit[0] for hit in hits}
    owner: dict[int, tuple[Any, int]] = {}
    for rule, order, starts in columns:
        for start in starts:
            if start in owner or start in taken:
                taken.add(start)  # (two readers' line: both hooks read it)
            else:
                owner[start] = (rule, order)
    for rule, order, starts in columns:
        hits.extend([(start, order, rule, None) for start in starts if start in taken])
    starts = sorted(start for start in owner if start not in taken)
    if not starts:
        return None
    core = native.core
    assert core is not None  # (a rule has a column reader only with the core)
    frames = core.frame(text, starts, first_line)
    kept: list[int] = []
    spans: list[tuple[int, int, int]] = []
    parser = None
    for k, frame in enumerate(frames):
        rule, order = owner[starts[k]]
        if frame[2] is None:  # not ASCII: the hook reads it
            hits.append((starts[k], order, rule, None))
            continue
        kept.append(k)
        spans.append((frame[2], frame[1], rule.column))
        parser = rule.handler.__self__  # (the timer parser: the one that declares COLUMNS)
    if parser is None:
        return None
    verdicts, *read = _timer_lines(core).read(text, spans, parser.offload_said())
    lines, line_frames, line_verdicts = [], [], []
    for k, verdict in zip(kept, verdicts):
        if verdict == HOOK:
            rule, order = owner[starts[k]]
            hits.append((starts[k], order, rule, None))
        else:
            lines.append(starts[k])
            line_frames.append(frames[k])
            line_verdicts.append(verdict)
    return BlockRows(file, lines, line_frames, line_verdicts, read) if lines else None


class BlockRows:
    """A block's lines the core read (their starts, frames and verdicts, in line order)
    and their rows: :meth:`BlockEngine._events` walks them with its hook lines, taking
    each row's stamp, and closes the rows so far into one :class:`TimerRows` where the
    events' order needs it."""

    __slots__ = ("file", "starts", "frames", "verdicts", "names", "name_index", "ms", "counts", "comm", "ranks",
                 "at", "read_at", "pairs_at", "line", "rank", "node", "wall")

    def __init__(self, file: str, starts: list[int], frames: list, verdicts: list[int], read: list) -> None:
        self.file = file
        self.starts, self.frames, self.verdicts = starts, frames, verdicts
        self.ranks, self.counts, self.comm, self.names, self.name_index, self.ms = read
        self.at = 0  # the next line to walk
        self.read_at = 0  # rows closed already
        self.pairs_at = 0  # and their pairs
        self.line: list[int] = []
        self.rank: list[Optional[int]] = []
        self.node: list[Optional[str]] = []
        self.wall: list[Optional[float]] = []

    def take(self, frame: tuple, wall: Optional[float]) -> None:
        """A row of the line at ``frame`` (a ROW verdict), stamped ``wall``."""
        tag = self.ranks[len(self.line) + self.read_at]
        self.line.append(frame[0])
        self.rank.append(frame[3] if tag is None else tag)
        self.node.append(frame[5])
        self.wall.append(wall)

    def before(self, out: list, number: int, events: list) -> None:
        """``out``, a line's events, go after ``events``: the rows so far go first when one
        of them is of an earlier line (a held-back event: rows and events stay in line order)."""
        if self.line:
            for e in out:
                if e.line != number:
                    self.close(events)
                    return

    def close(self, events: list) -> None:
        if not self.line:
            return
        a, b = self.read_at, self.read_at + len(self.line)
        counts = self.counts[a:b]
        lo = self.pairs_at
        hi = lo + sum(counts)
        events.append(TimerRows(self.file, self.line, self.rank, self.node, self.wall, counts, self.comm[a:b],
                                self.names, self.name_index[lo:hi], self.ms[lo:hi]))
        self.read_at, self.pairs_at = b, hi
        self.line, self.rank, self.node, self.wall = [], [], [], []
