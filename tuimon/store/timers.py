"""A timer's reports, summed so that its steady-state mean can be read at any time.

The breakdown divides each timer's mean by the iteration time's, so both must leave
out the same warm-up (:func:`tuimon.figures.metrics.warmup_count`: the first report
and 10% of the run).  A timer's first report is often 100x its steady value (STRONGHOLD's
``offloading-func-call-overhead`` 1505.9 ms, then 14 ms), so a plain running mean is
no use.  Keeping every report would grow without bound in a month-long follow; a
running sum marked every ``stride`` reports does not: the marks are thinned (every
other one dropped, the stride doubled) past :data:`MAX_MARKS`, and the steady window
starts at the first mark at or after the warm-up, so at worst ``stride`` (under 0.2%
of the reports) steady reports are left out with it, never a warm-up one let in.
"""
from __future__ import annotations

import math
from array import array
from bisect import bisect_left
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

MAX_MARKS = 1024  # 16 KB a timer; a job keeps at most MAX_TIMERS timers


def warmup_count(n: int) -> int:
    """How many of the first logged points are warm-up (compilation, allocator,
    NCCL setup): the first one always, then 10% of the run, keeping at least one."""
    if n <= 1:
        return 0
    return min(n - 1, max(1, round(0.1 * n)))


@dataclass
class TimerStat:
    group: str
    total_ms: float = 0.0
    count: int = 0
    last_ms: float = 0.0
    in_training: int = 0  # reports after the job's first iteration or step (0: a setup timer)
    # (reports before the mark, the sum of those reports): marks[0] is (0, 0.0)
    _at: array = field(default_factory=lambda: array("q", [0]))
    _sum: array = field(default_factory=lambda: array("d", [0.0]))
    _stride: int = 1

    @property
    def mean_ms(self) -> float:
        """Over every report, warm-up included (what the log printed, on average)."""
        return self.total_ms / self.count if self.count else 0.0

    def add(self, ms: float, in_training: bool = True) -> None:
        self.in_training += in_training
        total = self.total_ms = self.total_ms + ms
        n = self.count = self.count + 1
        self.last_ms = ms
        if n - self._at[-1] >= self._stride:
            self._mark(n, total)

    def add_many(self, ms: np.ndarray, in_training: bool = True) -> None:
        """:meth:`add` of each of ``ms`` (float64, in order), in bulk: the same sums (a
        cumulative sum adds one after the other, as ``add`` does) and the same marks."""
        k = len(ms)
        if not k:
            return
        if in_training:
            self.in_training += k
        n0 = self.count
        sums = np.cumsum(np.concatenate(((self.total_ms,), ms)))  # sums[j]: the total after j of them
        while True:
            # the first report at which a mark is due, as add() finds it (never behind the count)
            first = max(self._at[-1] + self._stride, n0 + 1)
            if first > n0 + k:
                break
            # the marks due until the next thinning, every stride reports from the first
            room = MAX_MARKS + 1 - len(self._at)
            at = np.arange(first, min(n0 + k, first + (room - 1) * self._stride) + 1, self._stride)
            self._at.extend(at.tolist())
            self._sum.extend(sums[at - n0].tolist())
            if len(self._at) > MAX_MARKS:
                self._thin()
        self.total_ms = float(sums[-1])
        self.count = n0 + k
        self.last_ms = float(ms[-1])

    def _mark(self, at: int, total: float) -> None:
        self._at.append(at)
        self._sum.append(total)
        if len(self._at) > MAX_MARKS:
            self._thin()

    def _thin(self) -> None:
        self._at, self._sum = self._at[::2], self._sum[::2]  # keeps marks[0]
        self._stride *= 2

    def steady(self) -> tuple[int, Optional[float]]:
        """(steady reports, their mean ms): the reports after the warm-up."""
        if not self.count:
            return 0, None
        skip = warmup_count(self.count)
        j = bisect_left(self._at, skip)
        at, before = (self._at[j], self._sum[j]) if j < len(self._at) and self._at[j] < self.count else (0, 0.0)
        n = self.count - at
        mean = (self.total_ms - before) / n
        return n, (mean if math.isfinite(mean) else None)

    def merge(self, other: "TimerStat") -> None:
        """Take in ``other``'s reports, as if they followed this one's."""
        base_n, base_sum = self.count, self.total_ms
        if not base_n and len(self._at) == 1:  # the first part (most jobs are one file): its marks as they are
            self._at, self._sum = array("q", other._at), array("d", other._sum)  # (what marking each gives)
        else:
            for at, total in zip(other._at[1:], other._sum[1:]):
                self._mark(base_n + at, base_sum + total)
        self._stride = max(self._stride, other._stride)
        self.total_ms += other.total_ms
        self.count += other.count
        self.in_training += other.in_training
        if other.count:
            self.last_ms = other.last_ms
