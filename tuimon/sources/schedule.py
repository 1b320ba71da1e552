"""When the local follower looks at each followed path.  A path that changed lately is
*hot*: polled on its own backoff (0.05 s after a change, doubling while it stays the
same, up to the follower's interval), from a heap.  A path quiet that long is *cold*:
stat'ed on the sweeps, one pass over all of them per interval, which is what following
thousands of quiet files costs.  A cold path inotify watches (its changes wake the
loop at once) is looked at on one sweep in :data:`WATCHED_SWEEP_EVERY`, in turn."""
from __future__ import annotations

import heapq
from typing import Callable, Iterator, Optional

from .streams import MIN_INTERVAL, Followed

#: a quiet file inotify watches is stat'ed on one sweep in this many (a missed event costs seconds, not the
#: change); the others on every sweep
WATCHED_SWEEP_EVERY = 5


class Schedule:
    def __init__(self, max_interval: float, covered: Callable[[Followed], bool]) -> None:
        self.max_interval = max_interval
        self._covered = covered  # whether inotify sees a path's changes
        self._heap: list[tuple[float, int, Followed]] = []
        self._seq = 0
        self._count = 0
        self._cold: list[Followed] = []
        self._sweeps = 0
        #: per sweep turn, the cold paths it stats (every unwatched one, a fifth of the watched); None: to redo
        self._plan: Optional[list[list[Followed]]] = None

    def add(self, f: Followed, now: float) -> None:
        """A path newly followed (or back): hot, due now."""
        f.dead, f.missing_since, f.hot, f.interval = False, None, True, MIN_INTERVAL
        f.slot = self._count % WATCHED_SWEEP_EVERY
        self._count += 1
        self._push(f, now)

    def _push(self, f: Followed, when: float) -> None:
        f.due = when
        self._seq += 1
        heapq.heappush(self._heap, (when, self._seq, f))

    def due(self, now: float) -> Iterator[Followed]:
        """The hot paths due by ``now``; tell :meth:`polled` what each gave."""
        while self._heap and self._heap[0][0] <= now:
            due, _, f = heapq.heappop(self._heap)
            if f.dead or due != f.due or not f.hot:
                continue  # superseded entry
            yield f

    def polled(self, f: Followed, grew: bool, now: float) -> None:
        """A hot path was looked at: soon again if it grew, later if not, cold once it has
        been quiet for the follower's interval."""
        f.interval = MIN_INTERVAL if grew else min(f.interval * 2, self.max_interval)
        if f.interval >= self.max_interval and not f.dead:
            f.hot = False
            self._cold.append(f)
            self._plan = None
        else:
            self._push(f, now + f.interval)

    def heat(self, f: Followed, now: float) -> None:
        """A path seen to change (a sweep, an inotify event): hot, due now."""
        f.interval = MIN_INTERVAL
        if not f.hot:
            f.hot = True
            self._cold.remove(f)
            self._plan = None
        self._push(f, now)

    def sweep_turn(self) -> list[Followed]:
        """The cold paths this sweep stats."""
        self._sweeps += 1
        if self._plan is None:
            covered = self._covered
            self._plan = [[f for f in self._cold if f.slot == turn or not covered(f)]
                          for turn in range(WATCHED_SWEEP_EVERY)]
        return self._plan[self._sweeps % WATCHED_SWEEP_EVERY]

    def swept(self) -> None:
        """After a sweep that found changes: paths now hot or dead leave the cold list."""
        self._cold = [f for f in self._cold if not f.dead and not f.hot]
        self._plan = None

    def coverage_changed(self) -> None:
        """A watch came or went: which cold paths inotify covers is judged again."""
        self._plan = None

    def next_due(self) -> Optional[float]:
        return self._heap[0][0] if self._heap else None
