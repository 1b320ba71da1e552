"""Timers into a job's running sums, in bulk and in line order.

A timer's sums depend on the order of its reports (float sums, the marks of
:class:`~tuimon.store.timers.TimerStat`), and a report counts as training or setup by
the state of its file when it was logged (the job of the file's run, whether that run
had logged progress).  Timer events and the compiled core's :class:`TimerRows` (a
block's plain timer lines, after the block's other events) are both taken in here:

* a file's events since its last rows form a *segment*; a timer event is held in it
  with the state at its place, and every event that moves the state leaves a mark
  (its line, the state after it);
* rows take the state of the last mark before their line (the engine closes a batch
  of rows before any event that comes out of line order, so the segment's events
  are in line order) and are merged with the held events by line;
* the merged reports are added name by name, a run of one state at a time.
"""
from __future__ import annotations

from bisect import bisect_left
from typing import Any, Optional

import numpy as np

from tuimon.parsers.columns import TimerRows
from tuimon.parsers.events import Timers
from tuimon.parsers.timers import COMM_OP, one_off_timer, timer_group

from .iteration_fold import seen_in
from .timers import TimerStat

FIRST_LOOK = 256  # a block's first reports, looked through for its names (see _first_seen)
#: (the job of the file's run, a store.job_store.Job; whether that run had logged progress; whether
#: its reports are put aside: logged after an evaluation pass, before the next iteration record)
State = tuple[Any, bool, bool]


class Segment:
    """One file's events since its last rows (see the module's doc)."""

    __slots__ = ("start", "lines", "states", "held", "progressed", "aside")

    def __init__(self, start: State) -> None:
        self.start = start
        self.lines: list[int] = []  # marks: the line of each event that moved the state ...
        self.states: list[State] = []  # ... and the state after it
        self.held: list[tuple[int, State, Timers]] = []
        self.progressed = start[1]  # the latest state's (progress once logged is never unlogged)
        self.aside = start[2]  # the latest state's

    def mark(self, line: Optional[int], state: State) -> None:
        """The state after the event at ``line`` (kept if it moved)."""
        last = self.states[-1] if self.states else self.start
        self.progressed, self.aside = state[1], state[2]
        if state[0] is not last[0] or state[1:] != last[1:]:
            self.lines.append(line or 0)
            self.states.append(state)

    def states_of(self, lines: list[int]) -> list[State]:
        """The state each of ``lines`` is in: that of the last mark before it."""
        states = [self.start, *self.states]
        if len(states) == 1:
            return [self.start] * len(lines)
        return [states[i] for i in np.searchsorted(self.lines, lines, side="left").tolist()]


def fold(segment: Segment, rows: Optional[TimerRows], max_timers: int, max_ranks: int) -> None:
    """Add ``segment``'s held timer events and ``rows`` (of its file) to their jobs."""
    runs: list[tuple[State, list[Any]]] = []  # (state, parts): each part a held event or a (start, end) of rows

    def put(state: State, part: Any) -> None:
        if runs and runs[-1][0][0] is state[0] and runs[-1][0][1:] == state[1:]:
            runs[-1][1].append(part)
        else:
            runs.append((state, [part]))

    held = segment.held
    i = 0
    if rows is not None and len(rows) and not segment.states:  # one state for every row (the common case)
        lines, state = rows.line, segment.start
        state[0].events += len(lines)
        seen_in(state[0], rows.rank, rows.wall_time, max_ranks)
        a = 0
        while i < len(held) and held[i][0] <= lines[-1]:  # (a held event and a row never share a line)
            k = bisect_left(lines, held[i][0], a)  # the rows before it
            if k > a:
                put(state, (a, k))
                a = k
            put(held[i][1], held[i][2])
            i += 1
        put(state, (a, len(lines)))
    elif rows is not None and len(rows):
        lines = rows.line
        states = segment.states_of(lines)
        _count_rows(rows, [state[0] for state in states], max_ranks)
        a, state = 0, states[0]
        for k, line in enumerate(lines):
            while i < len(held) and held[i][0] <= line:  # (a held event and a row never share a line)
                if k > a:
                    put(state, (a, k))
                    a = k
                put(held[i][1], held[i][2])
                i += 1
            now = states[k]
            if now[0] is not state[0] or now[1:] != state[1:]:
                if k > a:
                    put(state, (a, k))
                a, state = k, now
        put(state, (a, len(lines)))
    for _, st, ev in held[i:]:
        put(st, ev)
    for (job, training, aside), parts in runs:
        _add(job, training, aside, parts, rows, max_timers)


def _count_rows(rows: TimerRows, jobs: list[Any], max_ranks: int) -> None:
    """What every event counts for its job (see ``JobStore.add``), for each row (``jobs``: its job)."""
    for job, rank, wall in zip(jobs, rows.rank, rows.wall_time):
        job.events += 1
        if rank is not None and rank not in job.ranks_seen and len(job.ranks_seen) < max_ranks:
            job.ranks_seen.add(rank)
        if wall is not None and (job.launch_wall is None or wall >= job.launch_wall):
            if job.first_wall is None or wall < job.first_wall:
                job.first_wall = wall
            if job.last_wall is None or wall > job.last_wall:
                job.last_wall = wall


def _add(job: Any, training: bool, aside: bool, parts: list[Any], rows: Optional[TimerRows],
         max_timers: int) -> None:
    """The reports of ``parts`` (in order), name by name."""
    names: list[str] = []  # the names in order of first report, with their group
    groups: list[str] = []
    index: dict[str, int] = {}
    ids: list[np.ndarray] = []
    values: list[np.ndarray] = []
    for part in parts:
        if type(part) is tuple:  # rows a..b of the batch
            assert rows is not None
            a, b = part
            counts = np.frombuffer(rows.count, dtype=np.uint32)
            lo = int(counts[:a].sum())
            hi = lo + int(counts[a:b].sum())
            local = np.frombuffer(rows.name_index, dtype=np.uint32)[lo:hi]
            comm = np.repeat(np.frombuffer(rows.comm, dtype=np.uint8)[a:b], counts[a:b])  # per timer
            remap = np.empty(len(rows.names), dtype=np.int64)
            for j, at in _first_seen(local):
                name = rows.names[j]
                if name not in index:
                    index[name] = len(names)
                    names.append(name)
                    groups.append(COMM_OP if comm[at] else timer_group(name))  # (as its first report says)
                remap[j] = index[name]
            ids.append(remap[local])
            values.append(np.frombuffer(rows.ms, dtype=np.float64)[lo:hi])
        else:  # a held timer event
            ev = part
            for name in ev.timers:
                if name not in index:
                    index[name] = len(names)
                    names.append(name)
                    groups.append(ev.groups.get(name, "other"))
            ids.append(np.fromiter((index[n] for n in ev.timers), dtype=np.int64, count=len(ev.timers)))
            values.append(np.fromiter(ev.timers.values(), dtype=np.float64, count=len(ev.timers)))
    all_ids = np.concatenate(ids) if len(ids) > 1 else ids[0]
    all_values = np.concatenate(values) if len(values) > 1 else values[0]
    finite = np.isfinite(all_values)
    if not finite.all():
        all_ids, all_values = all_ids[finite], all_values[finite]
    # each name's reports, in order: one stable sort, not a mask a name (a block of a small file has a
    # dozen names of a few reports each, where numpy's cost a call was most of the fold)
    ordered = all_values[np.argsort(all_ids, kind="stable")]
    ends = np.cumsum(np.bincount(all_ids, minlength=len(names))).tolist()
    start = 0
    for k, name in enumerate(names):
        a, start = start, ends[k]
        stat = job.timers.get(name)
        if stat is None:
            if len(job.timers) >= max_timers:
                continue
            stat = job.timers[name] = TimerStat(groups[k])
        if aside and not one_off_timer(name):  # (an evaluation's own timer times the pass: it is its report)
            stat.add_aside(ordered[a:start], training)
        else:
            stat.add_many(ordered[a:start], training)


def _first_seen(ids: np.ndarray) -> list[tuple[int, int]]:
    """The distinct values of ``ids`` in order of first appearance, each with where it is first
    (a dict's keys keep that order).  A block's names all come in its first lines: where its first
    reports hold as many names as the whole, they alone are looked through (not np.unique, whose
    sorts cost 40 us a block of a small file, nor a list of every report of a big block)."""
    values = ids[:FIRST_LOOK].tolist()
    if len(ids) > FIRST_LOOK and len(dict.fromkeys(values)) < np.count_nonzero(np.bincount(ids)):
        values = ids.tolist()
    index = values.index  # (a name's first report is early: each search stops there)
    return [(j, index(j)) for j in dict.fromkeys(values)]
