"""Stores made of items as the engine hands them over, and what a store takes the event
path's way (JobStore._take, one event at a time): the tests of bulk folds count it."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator, Mapping, Optional, Sequence

from tuimon.parsers.columns import IterationRows, slices
from tuimon.store import job_store
from tuimon.store.job_store import JobStore


def stored(items: list, bounded: bool = False, slice_size: int = 0) -> JobStore:
    """A store of ``items`` added at once, or in slices of about ``slice_size`` (as a live
    session adds them)."""
    store = JobStore(bounded=bounded)
    for part in slices(items, slice_size) if slice_size else (items,):
        store.add(list(part))
    return store


@contextmanager
def events_taken() -> Iterator[list[str]]:
    """The type names of the events the store takes one by one inside the block."""
    taken: list[str] = []
    original = job_store.JobStore._take

    def counting(self, ev, segments):
        taken.append(type(ev).__name__)
        return original(self, ev, segments)

    job_store.JobStore._take = counting  # type: ignore[method-assign]
    try:
        yield taken
    finally:
        job_store.JobStore._take = original  # type: ignore[method-assign]


def iteration_rows(file: str, line: Sequence[int], rank: Sequence[Optional[int]], node: Sequence[Optional[str]],
                   wall_time: Sequence[Optional[float]], iteration: Sequence[int],
                   train_iters: Sequence[Optional[int]], fields: Sequence[Mapping[str, Any]]) -> IterationRows:
    """Iteration rows of each row's fields (a dict a row), as columns."""
    names = dict.fromkeys(name for row in fields for name in row)
    return IterationRows(file, line, rank, node, wall_time, iteration, train_iters,
                         {name: [row.get(name) for row in fields] for name in names})
