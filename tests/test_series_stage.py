"""A batch verb's series stages its points and makes them a column at a time
(:meth:`Series.append_event`); each point must be the one made an event at a time
(``_append_now``, the definition), whatever the values: None, NaN, infinities, values
past float32, bad values under a field's floor, ints past a float, bools."""
from __future__ import annotations

import math
import warnings
from unittest import mock

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tuimon.parsers.events import Iteration, Step, Throughput, frozen_map
from tuimon.store.job_store import JobStore
from tuimon.store.series import _ALWAYS, Series, point_plan

PLANS = {Iteration: point_plan("iteration"), Step: point_plan("step"), Throughput: point_plan("throughput")}

numbers = st.one_of(
    st.none(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, -5.0, 3.4e38, 3.41e38, -3.41e38, 1e39, 1e300, -1e300, math.nan, math.inf]),
    st.integers(min_value=-10, max_value=10),
    st.sampled_from([10 ** 400, -(10 ** 400), 2 ** 31 - 1, 2 ** 31, 2 ** 63]),
    st.booleans(),
)
steps = st.one_of(st.none(), st.integers(min_value=-3, max_value=2 ** 33), st.booleans())
walls = st.one_of(st.none(), st.floats(min_value=1.6e9, max_value=1.8e9), st.sampled_from([0.0, 1e300]))
losses = st.one_of(st.none(), st.dictionaries(st.sampled_from(["lm loss", "loss", "mtp loss"]), numbers, max_size=2))


@st.composite
def events(draw):
    kind = draw(st.sampled_from([Iteration, Step, Throughput]))
    common = dict(file="f", line=draw(st.integers(min_value=0, max_value=2 ** 33)), wall_time=draw(walls))
    if kind is Iteration:
        found = draw(losses)
        return Iteration(**common, iteration=draw(steps), elapsed_ms=draw(numbers), grad_norm=draw(numbers),
                         losses=frozen_map(found) if found is not None else None,
                         tflops_reported=draw(numbers), samples_per_sec=draw(numbers),
                         tokens_per_sec=draw(numbers), tokens_per_gpu_per_sec=draw(numbers))
    if kind is Step:
        return Step(**common, step=draw(steps), loss=draw(numbers), elapsed_ms=draw(numbers),
                    samples_per_sec=draw(numbers))
    return Throughput(**common, iteration=draw(steps), tflops_reported=draw(numbers), samples_per_sec=draw(numbers),
                      iteration_time_s=draw(numbers), tokens_per_sec=draw(numbers),
                      tokens_per_gpu_per_sec=draw(numbers), mfu=draw(numbers))


def _same(a: Series, b: Series) -> None:
    assert len(a) == len(b)
    assert a.points.tobytes() == b.points.tobytes()  # NaN and -0.0 included, bit for bit
    assert a.appended == b.appended
    assert (a.wall_base is None) == (b.wall_base is None) and (a.wall_base is None or a.wall_base == b.wall_base)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(events(), st.integers(min_value=0, max_value=3), st.booleans()), max_size=40))
def test_staged_points_are_those_made_one_at_a_time(items):
    staged, made = Series(), Series()
    # a value past float32 is inf, with no overflow warning (_f's promise); only here, and only numpy's
    # warnings: a filter left on for the worker made another test's unclosed file (collected here) fail this one
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        for ev, file_id, read in items:
            staged.append_event(ev, PLANS[type(ev)], file_id)
            made._append_now(ev, PLANS[type(ev)], file_id)
            if read:  # a read in between makes what was staged
                assert len(staged) == len(made)
    _same(staged, made)
    for series in (staged, made):  # (what a flush of None alone relies on: NaN past the points)
        assert all(np.isnan(col[series.n:]).all() for key, col in series._cols.items() if key not in _ALWAYS + ("file",))


fill_ops = st.one_of(
    st.tuples(st.just("event"), events(), st.integers(min_value=0, max_value=3), st.booleans()),
    st.tuples(st.just("fill"), st.sampled_from(["elapsed_ms", "loss", "samples_per_sec", "tflops", "wall"]),
              st.one_of(numbers.filter(lambda v: v is not None), st.just(-math.nan))),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(fill_ops, max_size=40))
def test_a_point_filled_while_staged_is_the_one_filled_when_made(items):
    """fill_last on staged points (a step told twice) leaves what last-then-set_last left
    on points made one at a time, a read in between or not."""
    staged, made = Series(), Series()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        for op in items:
            if op[0] == "event":
                _, ev, file_id, read = op
                staged.append_event(ev, PLANS[type(ev)], file_id)
                made._append_now(ev, PLANS[type(ev)], file_id)
                if read:
                    assert len(staged) == len(made)
            else:
                _, key, value = op
                staged.fill_last(key, value)
                kept = made.last(key)  # the rule fill_last replaces
                if kept is not None and kept != kept:
                    made.set_last(key, value)
    _same(staged, made)


def test_a_store_leaves_nothing_staged_and_pickles_its_points():
    """Staged points are made by the end of each add (bounded by what one call takes), and
    a series saved (the parse cache, the pool) holds them."""
    import pickle

    store = JobStore()
    evs = [Iteration(file="a.log", line=k + 1, rank=0, wall_time=1.7e9 + k, iteration=k + 1, elapsed_ms=100.0 + k,
                     losses=frozen_map({"lm loss": 2.0})) for k in range(100)]
    store.add(evs)
    series = store.jobs[next(iter(store.jobs))].ranks[0]
    assert not series._staged and series.n == 100
    again = pickle.loads(pickle.dumps(series))
    assert again.points.tobytes() == series.points.tobytes()
    assert list(again.column("iteration")) == list(range(1, 101))


class _RecordSeries:
    """The definition the columnar series keeps: every point a whole record (all columns, NaN
    where not given), thinned as the module's doc says, over plain lists."""

    def __init__(self, bounded: bool, recent: int, history: int) -> None:
        self.points: list[tuple] = []
        self.bounded, self.recent_max, self.history_max = bounded, recent, history
        self.history, self.stride, self.appended, self.wall_base = 0, 1, 0, None

    def _thin(self) -> None:
        n, h = len(self.points), self.history
        recent = n - h
        move = recent // 2
        start = (-(self.appended - recent)) % self.stride
        picked = self.points[h + start:h + move:self.stride]
        self.points = self.points[:h] + picked + self.points[h + move:]
        self.history += len(picked)
        while self.history > self.history_max:
            self.points = self.points[:self.history:2] + self.points[self.history:]
            self.history = (self.history + 1) // 2
            self.stride *= 2

    def append(self, iteration, wall, file_id, line, values) -> None:
        from tuimon.store.series import _FLOAT_KEYS, _f

        if self.bounded and len(self.points) - self.history >= self.recent_max:
            self._thin()
        self.appended += 1
        if wall is not None and self.wall_base is None:
            self.wall_base = wall
        it = iteration if iteration is not None and 0 <= iteration <= 2 ** 31 - 1 else -1
        rel = wall - self.wall_base if wall is not None and self.wall_base is not None else None
        self.points.append((it, *(_f(values.get(k)) for k in _FLOAT_KEYS), _f(rel), file_id, min(line, 2 ** 32 - 1)))

    def set_last(self, key, value) -> None:
        from tuimon.store.series import POINT_DTYPE, _f

        if self.points:
            last = list(self.points[-1])
            last[POINT_DTYPE.names.index(key)] = _f(value)
            self.points[-1] = tuple(last)


keys = st.sampled_from(["elapsed_ms", "loss", "grad_norm", "tflops", "mfu_reported", "energy_j_per_gpu"])
ops = st.one_of(
    st.tuples(st.just("append"), steps, walls, st.integers(0, 3), st.integers(0, 2 ** 33),
              st.dictionaries(keys, st.one_of(numbers, st.just(-math.nan)), max_size=3)),
    st.tuples(st.just("set_last"), keys, st.one_of(numbers, st.just(-math.nan))),
)


@settings(max_examples=300, deadline=None)
@given(st.booleans(), st.lists(ops, max_size=80))
def test_the_columns_hold_the_points_a_record_array_would(bounded, items):
    """Column by column (a float column made only once a value needs it; NaN past the end,
    kept through growth and thinning) the points are bit for bit the whole records the series
    kept before, -NaN and values past float32 included, with or without thinning."""
    import numpy as np

    from tuimon.store import series as module

    s, ref = module.Series(capacity=2, bounded=bounded), _RecordSeries(bounded, 6, 5)
    with mock.patch.multiple(module, RECENT=6, HISTORY=5), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # (a value past float32 in the reference's cast)
        for op in items:
            if op[0] == "append":
                _, it, wall, file_id, line, values = op
                it = it if not isinstance(it, bool) else int(it)
                s.append(it, wall, file_id=file_id, line=line, **values)
                ref.append(it, wall, file_id, line, values)
            else:
                s.set_last(op[1], op[2])
                ref.set_last(op[1], op[2])
        expected = np.array(ref.points, dtype=module.POINT_DTYPE)
    assert len(s) == len(expected) and s.appended == ref.appended and s.history == ref.history
    assert s.points.tobytes() == expected.tobytes()
    for key in module.POINT_DTYPE.names:
        assert s.column(key).tobytes() == expected[key].tobytes()
    assert not any(s.column(k).size and k not in s._cols and not np.isnan(s.column(k)).all() for k in module._FLOAT_KEYS)


def test_a_point_costs_only_the_columns_its_lines_give():
    """A TorchTitan step gives its loss (and its time from the second on): the other float
    columns are never made; a column made late reads NaN before its first value."""
    import numpy as np

    from tuimon.store.series import Series

    s = Series()
    plan = PLANS[Step]
    n = 50_000
    for k in range(n):
        s.append_event(Step(file="f", line=k + 1, wall_time=1.7e9 + k, step=k, loss=2.0, elapsed_ms=None), plan)
    s.append_event(Step(file="f", line=n + 1, wall_time=1.7e9 + n, step=n, loss=2.0, elapsed_ms=5.0), plan)
    assert len(s) == n + 1
    assert set(s._cols) == {"iteration", "wall", "line", "loss", "elapsed_ms"}  # (one file: no file column)
    assert s.bytes_allocated <= (n + 1) * 20 * 9 // 8 + 4096
    elapsed = s.column("elapsed_ms")
    assert np.isnan(elapsed[:n]).all() and elapsed[n] == 5.0
    assert np.isnan(s.column("tflops")).all() and len(s.column("tflops")) == n + 1


def test_a_log_without_stamps_keeps_no_wall_column():
    """llm.c's main.log stamps no line: its points keep no column of NaN stamps (4 of 26 bytes a
    point), staged or made one by one, and read NaN; the first stamped point makes the column, NaN
    before it."""
    from tuimon.store.series import Series

    n = 20_000
    for staged in (True, False):
        s = Series(bounded=not staged)
        for k in range(n):
            s.append_event(Step(file="f", line=k + 1, wall_time=None, step=k, loss=2.0), PLANS[Step])
        assert len(s) == n and set(s._cols) == {"iteration", "line", "loss"}, staged
        assert np.isnan(s.column("wall")).all() and np.isnan(s.points["wall"]).all()
        s.append_event(Step(file="f", line=n + 1, wall_time=1.7e9, step=n, loss=2.0), PLANS[Step])
        s.append_event(Step(file="f", line=n + 2, wall_time=1.7e9 + 3, step=n + 1, loss=2.0), PLANS[Step])
        walls = s.column("wall")
        assert "wall" in s._cols and np.isnan(walls[:-2]).all() and walls[-2:].tolist() == [0.0, 3.0], staged
    merged = Series()
    merged.append(1, None, loss=1.0)
    other = Series()
    other.append(2, 1.7e9 + 5, loss=1.0)
    merged.extend_from(other)
    assert np.isnan(merged.column("wall")[0]) and merged.column("wall")[1] == 0.0 and merged.wall_base == 1.7e9 + 5


def test_a_job_of_one_file_keeps_no_file_column():
    """Points of a job's first file (index 0) keep no file column (2 bytes a point); a point of
    another file makes it, 0 before; a merge that gives the first file another index (remap_files)
    makes it too, and extending by a series without one reads its points as the first file's."""
    from tuimon.store.series import Series

    s = Series()
    for k in range(100):
        s.append(k, None, file_id=0, line=k + 1, loss=1.0)
    assert "file" not in s._cols and s.column("file").tolist() == [0] * 100 and s.point(5)["file"] == 0
    s.append(100, None, file_id=2, line=101, loss=1.0)
    assert "file" in s._cols and s.column("file").tolist() == [0] * 100 + [2]
    t = Series()
    for k in range(10):
        t.append(k, None, file_id=0, line=k + 1, loss=1.0)
    t.remap_files(np.array([0], dtype=np.uint16))
    assert "file" not in t._cols
    t.remap_files(np.array([3], dtype=np.uint16), start=4)
    assert t.column("file").tolist() == [0] * 4 + [3] * 6
    u = Series()
    u.append(1, None, file_id=1, line=1, loss=1.0)
    v = Series()
    for k in range(3):
        v.append(k + 2, None, file_id=0, line=k + 2, loss=1.0)
    u.extend_from(v)
    assert u.column("file").tolist() == [1, 0, 0, 0]
    plan = PLANS[Step]
    given = {"step": [1, 2], "loss": [2.0, 2.5], "line": [7, 8]}
    for file_id in (0, 1):
        staged = Series()
        staged.stage(plan, [given.get(name, [None, None]) for name in plan.names], [], file_id=file_id)
        assert len(staged) == 2 and staged.column("file").tolist() == [file_id] * 2
        assert ("file" in staged._cols) == bool(file_id)
