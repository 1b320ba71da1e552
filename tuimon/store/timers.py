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

Each mark also keeps the value of the report it falls on: a systematic sample (every
``stride``-th report, every report until :data:`MAX_MARKS`) that gives a timer's steady
spread (p10-p90) in the same bounded memory.  A report logged just after an evaluation
pass (its interval timed the evaluation's forward passes too: NeoX's ``forward`` reads
7,685 ms after one where its neighbours read 103 ms) is put *aside*: counted, out of the
steady window.
"""
from __future__ import annotations

import math
from array import array
from bisect import bisect_left
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Optional, Sequence

import numpy as np

MAX_MARKS = 1024  # 24 KB a timer; a job keeps at most MAX_TIMERS timers
#: :meth:`TimerStat.add_many` sums more reports than this in numpy (a timer's in a block of a big log)
NUMPY_FROM = 256


def warmup_count(n: int) -> int:
    """How many of the first logged points are warm-up (compilation, allocator,
    NCCL setup): the first one always, then 10% of the run, keeping at least one."""
    if n <= 1:
        return 0
    return min(n - 1, max(1, round(0.1 * n)))


def _listed(values: "Sequence[float] | np.ndarray") -> "Sequence[float]":
    """Python floats (an array's elements one at a time would be numpy scalars, slower to take)."""
    return values.tolist() if isinstance(values, np.ndarray) else values


def percentiles(values: np.ndarray, qs: Sequence[float]) -> list[float]:
    """``np.percentile(values, qs)`` (its default, linear method), same to the bit.
    Not numpy's own: its first call imports ``numpy.ma`` (45 ms of a 0.3 s summary)."""
    ordered = np.sort(values)
    last = ordered.size - 1
    out = []
    for q in qs:
        at = (q / 100) * last
        lo = min(int(math.floor(at)), last)
        hi = min(lo + 1, last)
        a, b, t = ordered[lo], ordered[hi], at - lo
        diff = b - a
        out.append(float(b - diff * (1 - t) if t >= 0.5 else a + diff * t))  # numpy's _lerp
    return out


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
    _val: array = field(default_factory=lambda: array("d", [math.nan]))  # the report each mark falls on
    _stride: int = 1
    aside_count: int = 0  # reports out of the steady window (logged just after an evaluation)
    aside_ms: float = 0.0

    @property
    def mean_ms(self) -> float:
        """Over every report, warm-up and aside included (what the log printed, on average)."""
        n = self.count + self.aside_count
        return (self.total_ms + self.aside_ms) / n if n else 0.0

    @property
    def reports(self) -> int:
        """Every report, aside ones included."""
        return self.count + self.aside_count

    def add_aside(self, ms: np.ndarray, in_training: bool = True) -> None:
        """Reports that are no sample of the timer's steady work (see the module's doc)."""
        if in_training:
            self.in_training += len(ms)
        self.aside_count += len(ms)
        self.aside_ms += float(ms.sum())
        if len(ms):
            self.last_ms = float(ms[-1])

    def add(self, ms: float, in_training: bool = True) -> None:
        self.in_training += in_training
        total = self.total_ms = self.total_ms + ms
        n = self.count = self.count + 1
        self.last_ms = ms
        if n - self._at[-1] >= self._stride:
            self._mark(n, total, ms)

    def add_many(self, ms: "Sequence[float] | np.ndarray", in_training: bool = True) -> None:
        """:meth:`add` of each of ``ms`` (floats, in order), in bulk: the same sums (a running sum
        adds one after the other, as ``add`` does, in numpy's cumsum or itertools.accumulate) and
        the same marks, a run of marks up to each thinning at a time.  A few dozen reports (a
        timer's in a block of a small file) are summed in Python: numpy's cost a call (15 us) was
        most of such a file's fold."""
        k = len(ms)
        if not k:
            return
        if in_training:
            self.in_training += k
        n0 = self.count
        sums: "list[float] | np.ndarray"
        if isinstance(ms, np.ndarray) and k > NUMPY_FROM:
            sums = np.cumsum(np.concatenate(((self.total_ms,), ms)))  # sums[j]: the total after j of them
        else:
            ms = ms.tolist() if isinstance(ms, np.ndarray) else list(ms)
            sums = list(accumulate(ms, initial=self.total_ms))
        while True:
            # the first report at which a mark is due, as add() finds it (never behind the count)
            first = max(self._at[-1] + self._stride, n0 + 1)
            if first > n0 + k:
                break
            # the marks due until the next thinning, every stride reports from the first
            stride = self._stride
            last = min(n0 + k, first + (MAX_MARKS - len(self._at)) * stride)
            self._at.extend(range(first, last + 1, stride))
            self._sum.extend(_listed(sums[first - n0:last - n0 + 1:stride]))
            self._val.extend(_listed(ms[first - n0 - 1:last - n0:stride]))
            if len(self._at) > MAX_MARKS:
                self._thin()
        self.total_ms = float(sums[-1])
        self.count = n0 + k
        self.last_ms = float(ms[-1])

    def _mark(self, at: int, total: float, value: float) -> None:
        self._at.append(at)
        self._sum.append(total)
        self._val.append(value)
        if len(self._at) > MAX_MARKS:
            self._thin()

    def _mark_many(self, ats: Sequence[int], totals: Sequence[float], values: Sequence[float]) -> None:
        """:meth:`_mark` of each (at, total, value) in turn, a run at a time: each run fills the marks
        up to the one that makes them thin, as marking one at a time thins them (a job of a
        thousand rank files merged its files' marks a call a mark: 750,000 calls)."""
        i, n = 0, len(ats)
        while i < n:
            j = min(n, i + MAX_MARKS + 1 - len(self._at))  # (the marks never hold more than MAX_MARKS between calls)
            self._at.extend(ats[i:j])
            self._sum.extend(totals[i:j])
            self._val.extend(values[i:j])
            i = j
            if len(self._at) > MAX_MARKS:
                self._thin()

    def _thin(self) -> None:
        self._at, self._sum, self._val = self._at[::2], self._sum[::2], self._val[::2]  # keeps marks[0]
        self._stride *= 2

    def _window(self) -> int:
        """The first mark of the steady window (its reports: those after it)."""
        j = bisect_left(self._at, warmup_count(self.count))
        return j if j < len(self._at) and self._at[j] < self.count else 0

    def steady(self) -> tuple[int, Optional[float]]:
        """(steady reports, their mean ms): the reports after the warm-up.  A timer reported
        only after evaluation passes times the evaluation itself (Megatron's ``evaluate``):
        its reports are its own, all of them."""
        if not self.count:
            if self.aside_count:
                mean = self.aside_ms / self.aside_count
                return self.aside_count, (mean if math.isfinite(mean) else None)
            return 0, None
        j = self._window()
        at, before = self._at[j], self._sum[j]
        n = self.count - at
        mean = (self.total_ms - before) / n
        return n, (mean if math.isfinite(mean) else None)

    def spread(self) -> Optional[tuple[float, float]]:
        """(p10, p90) ms of the steady reports, from the marks' sample (every report while
        the stride is 1); None with fewer than three steady reports sampled."""
        values = np.frombuffer(self._val, dtype=np.float64)[self._window() + 1:]
        values = values[np.isfinite(values)]
        if values.size < 3:
            return None
        p10, p90 = percentiles(values, (10, 90))
        return p10, p90

    def merge(self, other: "TimerStat") -> None:
        """Take in ``other``'s reports, as if they followed this one's."""
        base_n, base_sum = self.count, self.total_ms
        if not base_n and len(self._at) == 1:  # the first part (most jobs are one file): its marks as they are
            self._at, self._sum = array("q", other._at), array("d", other._sum)  # (what marking each gives)
            self._val = array("d", other._val)
        else:
            self._mark_many([base_n + at for at in other._at[1:]], [base_sum + total for total in other._sum[1:]],
                            other._val[1:])
        self._stride = max(self._stride, other._stride)
        self.total_ms += other.total_ms
        self.count += other.count
        self.in_training += other.in_training
        self.aside_count += other.aside_count
        self.aside_ms += other.aside_ms
        if other.count:
            self.last_ms = other.last_ms
