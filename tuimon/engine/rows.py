"""A block's plain timer lines read by the compiled core into columns (see
:mod:`tuimon.parsers.columns`): which of the block's hit lines the core reads, what it
read, and the :class:`TimerRows` they make, closed into the block's events where the
events' order needs it (:class:`tuimon.engine.blocks.BlockEngine` drives it)."""
from __future__ import annotations

from functools import lru_cache
from typing import Any, Optional

from tuimon.parsers.columns import TimerRows
from tuimon.parsers.timers import COMM_OP_NAME, MINMAX

from . import native

#: LineParser.COLUMNS' kinds -> the kind numbers of tuimon._core.TimerLines
COLUMN_KINDS = {"time-list": 0, "minmax": 1}


@lru_cache(maxsize=4)
def _timer_lines(core: Any) -> Any:
    return core.TimerLines(MINMAX, COMM_OP_NAME)


class BlockRows:
    """A block's plain timer lines, read by the core into one :class:`TimerRows` that
    follows the block's other events.  The lines are read before the block's events are
    made, so a line the core leaves to its hook still goes to it in line order."""

    __slots__ = ("file", "verdict", "names", "name_index", "ms", "counts", "comm", "ranks", "read_at",
                 "line", "rank", "node", "wall", "pairs_at")

    def __init__(self, file: str, text: str, hits: list, frames: list) -> None:
        """``hits``: the block's (line start, order, rule, match or None), in line order;
        ``frames``: the core's frame of each of their lines (tuimon._core.frame)."""
        self.file = file
        self.verdict: dict[int, int] = {}  # frame -> the core's verdict (0 nothing, 2 timers; hooks not kept)
        spans: list[tuple[int, int, int]] = []
        at: list[int] = []
        parser = None
        line_no = -1
        last = None
        for k, hit in enumerate(hits):
            if hit[0] == last:
                continue
            last = hit[0]
            line_no += 1
            rule = hit[2]
            if hit[3] is not None or rule.column is None or (k + 1 < len(hits) and hits[k + 1][0] == last):
                continue  # a data rule's, no core reader, or more than one rule on the line
            frame = frames[line_no]
            if frame[2] is None:
                continue  # not ASCII
            spans.append((frame[2], frame[1], rule.column))
            at.append(line_no)
            parser = rule.handler.__self__  # (the timer parser: the one that declares COLUMNS)
        self.line: list[int] = []
        self.rank: list[Optional[int]] = []
        self.node: list[Optional[str]] = []
        self.wall: list[Optional[float]] = []
        self.pairs_at = 0  # rows and pairs of the rows closed already
        self.read_at = 0
        verdicts: list[int] = []
        self.ranks, self.counts, self.comm, self.names, self.name_index, self.ms = [], [], [], [], [], []
        if parser is not None:  # (the core's answer: tuimon._core.TimerLines.read)
            verdicts, self.ranks, self.counts, self.comm, self.names, self.name_index, self.ms = \
                _timer_lines(native.core).read(text, spans, parser.offload_said())
        self.verdict = {line_no: v for line_no, v in zip(at, verdicts) if v != 1}

    def take(self, line_no: int, number: int, rank: Optional[int], node: Optional[str],
             wall: Optional[float]) -> None:
        """Line ``line_no``, which the core read: its row, if it gives one."""
        if self.verdict[line_no] == 2:
            tag = self.ranks[len(self.line) + self.read_at]
            self.line.append(number)
            self.rank.append(rank if tag is None else tag)
            self.node.append(node)
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
