"""The store takes the core's iteration rows as it takes their events, one by one.

Generated logs of iteration lines (ranks or none, counters going on, repeated by other
ranks, going back, another total, NaN losses and grad norms, skipped steps) among the
events a store sees beside them (reported rates, memory, configs with and without a
shape, a job script's start, steps, a hook's iteration, evaluations, after which the first
record is timed over the pass and timer reports are put aside until the second): their items as the engine hands
them over (each close's events, then its rows) must leave the store what their events,
in line order, leave it.
"""
from __future__ import annotations

import math
import random

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers.stores import events_taken, iteration_rows, stored
from tuimon.figures.summary import summarize
from tuimon.parsers.columns import IterationRows, KeyMaps, TimerRows, expand, has_none
from tuimon.parsers.events import (
    Evaluation,
    FrozenDict,
    Iteration,
    LogWarning,
    Memory,
    Milestone,
    RunConfig,
    Step,
    Throughput,
    Timers,
    frozen_map,
)

_RANKS = st.sampled_from([None, None, 0, 1, 2, 3])
_LOSS = st.sampled_from([2.5, 3.25, 1.0, math.nan, math.inf, None])
_GRAD = st.sampled_from([0.5, 1.25, None, math.nan, math.inf])


@st.composite
def _row(draw, counter: int) -> dict:
    loss = draw(_LOSS)
    fields: dict = {"elapsed_ms": draw(st.sampled_from([1000.0, 1250.5, None, -3.0])),
                    "lr": draw(st.sampled_from([1e-4, 3e-4, None])),
                    "grad_norm": draw(_GRAD),
                    "tflops_reported": draw(st.sampled_from([None, 150.5]))}
    if loss is not None:
        fields["losses"] = frozen_map({draw(st.sampled_from(["lm loss", "loss", "z loss"])): loss})
    if draw(st.booleans()):
        fields["skipped"] = draw(st.sampled_from([0, 1]))
    if draw(st.integers(0, 9)) == 0:
        fields["nan_count"] = 1
    if draw(st.booleans()):
        fields["global_batch"] = draw(st.sampled_from([64, 128]))
    fields = {k: v for k, v in fields.items() if v is not None}
    total = draw(st.sampled_from([1000, 1000, 1000, 2000, None]))
    return {"iteration": counter, "train_iters": total, "fields": fields}


_OTHERS = ["throughput", "memory", "warning", "config-plain", "config-shape", "config-total", "job-start",
           "step", "hook-iteration", "eval", "eval", "timers", "timers"]


def _other(kind: str, file: str, line: int, rank, wall, counter: int):
    common = dict(file=file, line=line, rank=rank, node=None, wall_time=wall)
    if kind == "throughput":
        return Throughput(**common, iteration=counter, tflops_reported=120.0 + line)
    if kind == "memory":
        return Memory(**common, gpu_max_allocated_mb=1000.0 + line)
    if kind == "warning":
        return LogWarning(**common, kind="python", message="w")
    if kind == "config-plain":
        return RunConfig(**common, total_params_b=1.5, tp=2)
    if kind == "config-shape":
        return RunConfig(**common, num_layers=24, hidden_size=2048, seq_length=2048)
    if kind == "config-total":
        return RunConfig(**common, train_iters=3000, global_batch=256)
    if kind == "job-start":
        return Milestone(**common, name="job-start")
    if kind == "step":
        return Step(**common, step=counter, loss=2.0, lr=1e-4)
    if kind == "timers":  # (reports between an evaluation and the record after it are put aside)
        return Timers(**common, timers=frozen_map({"forward-compute": 100.0 + line, "backward-compute": 250.5}),
                      iteration=counter)
    if kind == "eval":
        return Evaluation(**common, iteration=counter, metrics=frozen_map({"lm loss": 2.5}))
    return Iteration(**common, iteration=counter, train_iters=1000, elapsed_ms=900.0,
                     losses=frozen_map({"lm loss": 2.75}))


@st.composite
def _items(draw) -> list:
    """A log's items as the engine hands them over, for one or two files."""
    items: list = []
    for file in draw(st.sampled_from([["a.log"], ["a.log", "b.log"]])):
        counter, line = 0, 0
        events: list = []
        rows: list = []
        for _ in range(draw(st.integers(1, 40))):
            line += draw(st.integers(1, 3))
            wall = draw(st.sampled_from([None, 1.7e9 + line]))
            step = draw(st.sampled_from([1, 1, 1, 0, -5, -40]))  # on, a rank repeating it, back a little, a restart
            if draw(st.integers(0, 2)) > 0:
                counter = max(1, counter + step)
                rows.append((line, draw(_RANKS), wall, draw(_row(counter))))
            else:
                events.append(_other(draw(st.sampled_from(_OTHERS)), file, line, draw(_RANKS), wall, counter))
            if draw(st.integers(0, 12)) == 0 or not rows and not events:
                _close(items, file, events, rows)
                events, rows = [], []
        _close(items, file, events, rows)
    return items


def _close(items: list, file: str, events: list, rows: list) -> None:
    items.extend(events)
    if rows:
        items.append(iteration_rows(file, [r[0] for r in rows], [r[1] for r in rows], [None] * len(rows),
                                   [r[2] for r in rows], [r[3]["iteration"] for r in rows],
                                   [r[3]["train_iters"] for r in rows], [r[3]["fields"] for r in rows]))


def _state(items: list, bounded: bool = False, slice_size: int = 0) -> list:
    """What the store keeps (its config by key: the order its keys came in is not read)."""
    store = stored(items, bounded, slice_size)
    out = []
    for key, job in store.jobs.items():
        series = {k: s.points.tobytes() for k, s in job.ranks.items()}
        runs = {f: (r.progressed, dict(r.last), dict(r.shape), r.after_eval) for f, r in job.runs_by_file.items()}
        out.append((key, job.events, sorted(job.ranks_seen), job.first_wall, job.last_wall, job.first_step_wall,
                    job.last_iteration, job.last_progress, job.last_progress_wall, repr(job.last_losses), job.nan_at,
                    repr(job.nan_events), job.last_iteration_lr, job.last_loss_scale,
                    repr(sorted(job.config.items())), series, repr(runs), sorted(job.after_eval),
                    repr(summarize(job, now=0.0).as_dict())))
    return out


def _keyed(items: list) -> list:
    """The items with each rows' losses a column of one key's values (a data rule's: llm.c's
    ``{"loss": ...}``), each map's value kept."""
    for item in items:
        losses = item.fields.get("losses") if type(item) is IterationRows else None
        if losses is not None:
            item.fields["losses"] = KeyMaps("loss", [None if m is None else next(iter(m.values())) for m in losses])
    return items


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_items(), st.sampled_from([0, 0, 3, 7]), st.booleans(), st.booleans())
def test_rows_leave_the_store_their_events_leave(items, slice_size, bounded, keyed):
    if keyed:
        items = _keyed(items)
    with np.errstate(all="ignore"):
        want = _state(expand(items), bounded)
        assert _state(items, bounded, slice_size) == want


def test_rows_fold_in_bulk_where_nothing_orders_them():
    """A block of 2 ranks' iteration lines among reported rates and memory lines (which
    change nothing an iteration reads) is folded at once, not an event a row."""
    rows = [(line, line % 2, 1.7e9 + line, {"iteration": 1 + line // 6, "train_iters": 1000,
                                            "fields": {"elapsed_ms": 1000.0 + line}})
            for line in range(1, 600, 3)]
    events = [_other(kind, "a.log", line, 0, None, 1) for line in range(2, 600, 3)
              for kind in ("throughput", "memory")]
    items: list = []
    _close(items, "a.log", events, rows)
    with events_taken() as taken:
        state = _state(items)
    assert "Iteration" not in taken and len(taken) == len(events)
    assert state == _state(expand(items))
    job = next(iter(state))
    assert job[6] == rows[-1][3]["iteration"]  # the last counter


def test_the_records_after_an_evaluation_fold_in_bulk_and_put_its_timers_aside():
    """An evaluation every 50 steps (llm.c's every 250) among one rank's iteration lines and
    timer lines the core read (a block's timer rows come after its iteration rows): the two
    records after each pass are folded with the others, not taken one by one; the reports
    between a pass and its second record are put aside, the others are not, as the events in
    line order leave them."""
    rows, events, timer_lines = [], [], []
    for step in range(1, 301):
        line = 3 * step
        rows.append((line, None, None, {"iteration": step, "train_iters": 1000,
                                        "fields": {"elapsed_ms": 1000.0 + step, "losses": frozen_map({"loss": 2.5})}}))
        timer_lines.append(line + 1)
        if step % 50 == 0:
            events.append(_other("eval", "a.log", line + 2, None, None, step))
    items: list = []
    _close(items, "a.log", events, rows)
    n = len(timer_lines)
    items.append(TimerRows("a.log", timer_lines, [None] * n, [None] * n, [None] * n, [2] * n, [0] * n,
                           ("forward-compute", "backward-compute"), [0, 1] * n,
                           [v for k in range(n) for v in (100.0 + k, 250.5)]))
    with events_taken() as taken, np.errstate(all="ignore"):
        state = _state(items)
    assert "Iteration" not in taken
    assert state == _state(expand(items))
    job = next(iter(stored(items).jobs.values()))
    # each pass's first record is timed over it; the report after that record is aside (five passes
    # with records after them)
    assert sorted(job.after_eval) == [("a.log", 3 * (step + 1)) for step in range(50, 300, 50)]
    assert job.timers["forward-compute"].aside_count == 5 and job.timers["forward-compute"].count == 300 - 5


def test_evaluations_repeated_records_and_timer_rows_in_any_order_leave_the_events_store():
    """Drawn runs of one file: records (some printed again by a rank without a label), evaluations
    (one before any record too) and the core's timer rows between them, in any order: the timer
    state marked at each row while it moves (no progress yet, or records awaited after a pass) and
    the after-evaluation records are those of the events in line order."""
    rng = random.Random(5)
    for _ in range(150):
        rows, events, timer_lines = [], [], []
        line, step = rng.randint(1, 5), 0
        if rng.random() < 0.5:
            events.append(_other("eval", "a.log", line, None, None, 0))
        for _ in range(rng.randint(5, 40)):
            line += 1
            draw = rng.random()
            if draw < 0.6 or draw < 0.75 and step:
                step += draw < 0.6  # (else the same record again)
                rows.append((line, None, None, {"iteration": step, "train_iters": 1000,
                                                "fields": {"elapsed_ms": 1000.0 + step}}))
            elif draw < 0.9:
                timer_lines.append(line)
            else:
                events.append(_other("eval", "a.log", line, None, None, step))
        items: list = []
        _close(items, "a.log", events, rows)
        n = len(timer_lines)
        if n:
            items.append(TimerRows("a.log", timer_lines, [None] * n, [None] * n, [None] * n, [2] * n, [0] * n,
                                   ("forward-compute", "backward-compute"), [0, 1] * n,
                                   [v for k in range(n) for v in (100.0 + k, 250.5)]))
        with np.errstate(all="ignore"):
            assert _state(items) == _state(expand(items)), items


class _Run:
    def __init__(self, last: dict, total) -> None:
        self.last, self.shape = last, {"train_iters": total}


@settings(max_examples=3000, deadline=None)
@given(its=st.lists(st.integers(0, 12), min_size=1, max_size=8),
       ranks=st.lists(st.sampled_from([None, 0, 1]), min_size=8, max_size=8),
       nodes=st.lists(st.sampled_from([None, "n1"]), min_size=8, max_size=8),
       totals=st.lists(st.sampled_from([None, 100, 200]), min_size=8, max_size=8),
       before=st.dictionaries(st.sampled_from([0, 1, "n1", "-", 7]), st.tuples(st.integers(0, 12), st.integers(0, 5)),
                              max_size=3),
       file_rank=st.sampled_from([None, 7]), known=st.sampled_from([None, 100]), max_ranks=st.integers(0, 4),
       a=st.integers(0, 2))
def test_a_scan_at_once_reads_rows_as_one_at_a_time_does(its, ranks, nodes, totals, before, file_rank, known,
                                                         max_ranks, a):
    """Where the scan reads rows at once (one rank's, its counter going up), it finds what reading
    them one at a time finds; rows it cannot read so are read one at a time."""
    from tuimon.store.iteration_fold import Scan

    n = len(its)
    rows = IterationRows("f.log", list(range(n)), ranks[:n], nodes[:n], [None] * n, its, totals[:n], {})
    a = min(a, n - 1)
    store = type("Store", (), {"runs_of": lambda self, file: [1]})()
    fast, each = Scan.__new__(Scan), Scan.__new__(Scan)
    each._each(store, rows, a, n, dict(before), known, file_rank, 4, max_ranks)
    if fast._at_once(rows, a, n, dict(before), known, file_rank, max_ranks):
        assert (fast.end, fast.keys, fast.points, fast.last, fast.known, fast.resets) == \
            (each.end, each.keys, each.points, each.last, each.known, each.resets)


def test_the_common_rows_are_scanned_at_once():
    """Each rank's counters going up from the run's last (one rank, or several that each print every
    record): read at once (the test above then holds them to the reading one at a time); a rank's
    counter repeated or going back: one at a time."""
    from tuimon.store.iteration_fold import Scan

    def at_once(its: list, ranks: list, before: dict) -> bool:
        n = len(its)
        rows = IterationRows("f.log", list(range(n)), ranks, [None] * n, [None] * n, its, [None] * n, {})
        return Scan.__new__(Scan)._at_once(rows, 0, n, before, None, None, 64)

    assert at_once([10, 20, 30], [3, 3, 3], {3: (5, 5)}) and at_once([1], [None], {})
    assert at_once([1, 1, 2, 2], [0, 1, 0, 1], {}) and at_once([5, 6], [0, None], {0: (4, 1)})
    assert not at_once([10, 20, 20], [3, 3, 3], {}) and not at_once([10, 20, 10], [3, 4, 3], {})
    assert not at_once([10, 20], [3, 3], {3: (10, 5)}) and not at_once([11, 10], [3, 4], {4: (10, 1)})


_MAYBE = st.one_of(st.none(), st.floats(allow_nan=True), st.integers(min_value=-3, max_value=3))


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=6), st.data())
def test_rows_make_the_events_each_row_makes(n, data):
    """IterationRows.events (every row at once, from the columns) gives what event(k) gives row
    by row: a field a row has no value for takes the field's default (losses: the empty map)."""
    names = data.draw(st.lists(st.sampled_from(["elapsed_ms", "lr", "losses", "grad_norm", "skipped", "mfu",
                                                "tflops_reported", "consumed_samples"]), unique=True))
    fields = {name: data.draw(st.lists(st.one_of(_MAYBE, st.just(frozen_map({"lm loss": 2.0})))
                                       if name == "losses" else _MAYBE, min_size=n, max_size=n)) for name in names}
    rows = IterationRows("f.log", list(range(1, n + 1)), data.draw(st.lists(_MAYBE, min_size=n, max_size=n)),
                         [None] * n, data.draw(st.lists(_MAYBE, min_size=n, max_size=n)), list(range(n)),
                         [None] * n, fields)
    assert [repr(e) for e in rows.events()] == [repr(rows.event(k)) for k in range(n)]


def test_rows_of_a_field_no_iteration_has_are_refused_as_one_row_is():
    rows = IterationRows("f.log", [1], [0], [None], [None], [1], [None], {"no_such_field": [1.0]})
    try:
        rows.event(0)
    except TypeError as exc:
        expected = str(exc)
    try:
        rows.events()
    except TypeError as exc:
        assert str(exc) == expected
    else:
        raise AssertionError("a field Iteration has not was taken")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.none(), st.integers(min_value=0, max_value=5)), max_size=8),
       st.lists(st.one_of(st.none(), st.integers(min_value=0, max_value=5)), max_size=8))
def test_rows_merge_among_their_block_s_events_as_heapq_merges_them(first, then):
    """columns._merged: heapq.merge by line (a tie: the block's event first), whether the runs are in
    line order (a sort of the two) or not (heapq's own merge)."""
    import heapq

    from tuimon.parsers.columns import _line, _merged

    a = [Milestone(file="f", line=line, name=f"a{k}") for k, line in enumerate(first)]
    b = [Milestone(file="f", line=line, name=f"b{k}") for k, line in enumerate(then)]
    assert _merged(a, b) == list(heapq.merge(a, b, key=_line))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_items(), st.sampled_from([1, 2, 3, 32]))
def test_runs_of_iteration_events_leave_the_store_their_events_leave(items, run):
    """columns.iteration_runs: a run of Iteration events (a declared format's step lines) as rows in
    its place gives back the same events and leaves the store as the events do, one by one."""
    from unittest import mock

    from tuimon.parsers import columns

    events = expand(items)
    # (and with the second file's lines after the first's: a run stops where the file changes)
    later = [e._replace(line=e.line + 10_000) if e.file == "b.log" and e.line is not None else e for e in events]
    for events in (events, later):
        with mock.patch.object(columns, "RUN_ROWS", run):
            converted = columns.iteration_runs(events)
        assert [repr(e) for e in expand(converted)] == [repr(e) for e in events]
        with np.errstate(all="ignore"):
            assert _state(converted) == _state(events)
            assert _state(converted, slice_size=3) == _state(events)


def test_a_block_with_the_core_s_iteration_rows_keeps_its_events():
    """Rows of the core stand after their block's events: a run of events before them stays events
    (a file's rows must reach the store in line order)."""
    from tuimon.parsers.columns import RUN_ROWS, iteration_runs

    events = [Iteration(file="a.log", line=k, iteration=k, elapsed_ms=100.0) for k in range(1, RUN_ROWS + 2)]
    core = iteration_rows("a.log", [1000], [None], [None], [None], [1000], [None], [{"elapsed_ms": 90.0}])
    assert iteration_runs(events + [core]) == events + [core]
    made = iteration_runs(events)
    assert len(made) == 1 and type(made[0]) is IterationRows and made[0].events() == events


_LOSS_NAMES = st.sampled_from(["lm loss", "loss", "reduced train loss", "aux", "z"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.dictionaries(_LOSS_NAMES, st.floats(allow_nan=False), max_size=2), max_size=12),
       st.sampled_from([(), ("loss",), ("lm loss",), ("reduced train loss", "loss")]), st.booleans())
def test_primary_losses_of_a_column_are_each_rows_primary_loss(column, everywhere, hole):
    """The column at once (in C where every row names one name of the list and none an earlier one)
    is the primary loss row by row, whichever names the rows hold."""
    from tuimon.store.fields import primary_loss, primary_losses

    column = [{**{name: 1.5 for name in everywhere}, **row} for row in column] + ([None] if hole else [])
    assert primary_losses(column) == [primary_loss(row) for row in column]


def test_has_none_says_what_none_in_says():
    """has_none (a sum in C, not `None in`) gives `None in`'s answer on numbers, Nones anywhere,
    values that are no number (a sum that fails is looked through), and what sums without error."""
    cases = [[], [None], [1.5], [1, 2.5, 3], [None, 1.0], [1.0, None], [1.0, None, 2.0], [2**80, 1.5],
             [float("nan"), float("inf"), float("-inf")], [True, 2], ["x", 1.0], ["x", None], [1.0, "x"],
             [FrozenDict({"loss": 1.0}), None], [None] * 5]
    for values in cases:
        assert has_none(values) is (None in values), values
    maps = KeyMaps("loss", [1.0, None, 2.0])
    assert None in maps and None not in KeyMaps("loss", [1.0, 2.0])
