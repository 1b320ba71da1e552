"""Growable numpy series of iteration points, one column a registry field (4 bytes each),
and where each point was logged (an index into its job's files, and a line number).

Wall time is stored as float32 seconds after the series' first stamp (about 0.25 s
resolution after a month), which is what keeps a point under 32 bytes; growth by
1/8 keeps the allocated slack under 4 bytes a point.

A series of a long-running verb (a follower's store) is *bounded*: it keeps its
:data:`RECENT` latest points at full resolution and an evenly thinned history before
them, at most :data:`HISTORY` points, one every ``stride`` points in the order they
came (the stride doubles when the history is full), as TensorBoard's reservoir keeps
a bounded sample.  So memory is at most ``(RECENT + HISTORY)`` points a series
whatever the run's length; ``appended`` counts every point.  Batch verbs keep every
point (a figure over a whole log stays exact).
"""
from __future__ import annotations

from operator import attrgetter
from typing import Any, Optional, Sequence

import numpy as np

from .fields import FIELDS, Attr, Getter, getters_for

#: one column a registry field (tuimon.store.fields), and the wall time
POINT_DTYPE = np.dtype([(f.key, f.dtype) for f in FIELDS] + [("wall", "<f4"), ("file", "<u2"), ("line", "<u4")])
_U32_MAX = np.iinfo(np.uint32).max
_FLOAT_KEYS = tuple(f.key for f in FIELDS if f.key != "iteration")
_FLOATS = len(_FLOAT_KEYS)
_NAN = float("nan")
_I32_MAX = np.iinfo(np.int32).max
RECENT = 1 << 16  # points kept at full resolution by a bounded series
HISTORY = 1 << 16  # evenly thinned points before them, at most


def _f(value: Optional[float]) -> float:
    """float32-safe value: huge magnitudes become +-inf instead of an overflow warning."""
    if value is None:
        return _NAN
    try:
        v = float(value)
    except (OverflowError, ValueError, TypeError):
        return _NAN
    if v > 3.4e38:
        return float("inf")
    if v < -3.4e38:
        return float("-inf")
    return v


_NUMBERS = frozenset((float, int, type(None)))


def _floats(values: Sequence, scale: float, floor: Optional[float]) -> np.ndarray:
    """A float column of staged values: each what :class:`~tuimon.store.fields.Attr` (of
    ``scale`` and ``floor``) and :func:`_f` make of it, a column at a time when every value is
    a plain number or None (None is NaN to numpy too), else a value at a time."""
    if _NUMBERS.issuperset(map(type, values)):
        try:
            column = np.array(values, dtype=np.float64)
        except OverflowError:  # an int past a float: _f's NaN, a value at a time
            pass
        else:
            if scale != 1.0:
                with np.errstate(over="ignore"):  # past a float: inf, as Python's float product is
                    column *= scale
            if floor is not None:
                column[column <= floor] = _NAN  # (NaN stays NaN)
            column[column > 3.4e38] = np.inf
            column[column < -3.4e38] = -np.inf
            return column
    check = Attr("", scale, floor)
    return np.array([_f(check.value(v)) for v in values], dtype=np.float64)


def _iterations(values: Any) -> list:
    """The iteration column of staged values: -1 for none, or one no int32 holds."""
    return [v if v is not None and 0 <= v <= _I32_MAX else -1 for v in values]


class PointPlan:
    """How an event of one type fills a point (from the field registry): its iteration
    getter (or None) and the (column index, getter) of each float column the type gives;
    and, for :meth:`Series.append_event`'s staging, the attributes read off an event in one
    call (the iteration's, each plain column's, its stamp and line) and the getters that
    are no plain attribute (a job's primary loss), called an event at a time."""

    __slots__ = ("iteration", "columns", "fetch", "names", "iteration_at", "plain", "computed")

    def __init__(self, iteration: Optional[Getter], columns: tuple[tuple[int, Getter], ...]) -> None:
        self.iteration, self.columns = iteration, columns
        names: list[str] = []
        self.iteration_at = -1  # where the iteration is in what fetch reads (-1: computed, or none)
        #: (float column index, place in what fetch reads, scale, floor)
        self.plain: list[tuple[int, int, float, Optional[float]]] = []
        #: (float column index, or -1 for the iteration; getter): read an event at a time
        self.computed: list[tuple[int, Getter]] = []
        if isinstance(iteration, Attr) and iteration.scale == 1.0 and iteration.floor is None:
            self.iteration_at = 0
            names.append(iteration.name)
        elif iteration is not None:
            self.computed.append((-1, iteration))
        for k, get in columns:
            if isinstance(get, Attr):
                self.plain.append((k, len(names), get.scale, get.floor))
                names.append(get.name)
            else:
                self.computed.append((k, get))
        names += ["wall_time", "line"]
        self.names = tuple(names)  # what fetch reads, in order
        self.fetch = attrgetter(*names)



def point_plan(event_type: str) -> PointPlan:
    """How an event of ``event_type`` fills a point (from the field registry)."""
    getters = dict(getters_for(event_type))
    return PointPlan(getters.get("iteration"),
                     tuple((k, getters[key]) for k, key in enumerate(_FLOAT_KEYS) if key in getters))


class Series:
    __slots__ = ("_data", "n", "wall_base", "bounded", "stride", "history", "appended",
                 "_staged", "_plan", "_files", "_computed")

    def __init__(self, capacity: int = 64, bounded: bool = False) -> None:
        self._data = np.empty(capacity, dtype=POINT_DTYPE)
        self.n = 0  # points in _data (staged ones are not yet)
        self.wall_base: Optional[float] = None
        self.bounded = bounded
        self.stride = 1  # the history holds points 0, stride, 2 stride... of those appended
        self.history = 0  # points at the front that are the thinned history
        self.appended = 0  # every point ever appended
        self._unstage()

    def _unstage(self) -> None:
        """Points staged by :meth:`append_event` (what the plan read off each event), made
        at once when the series is next read."""
        self._staged: list[tuple] = []
        self._plan: Optional[PointPlan] = None
        self._files: list[int] = []
        self._computed: list[list] = []

    def __len__(self) -> int:
        self.flush()
        return self.n

    def __getstate__(self) -> tuple:
        """The points without the room kept for growth (the parse cache saves series)."""
        self.flush()
        return self._data[:self.n].copy(), self.n, self.wall_base, self.bounded, self.stride, self.history, \
            self.appended

    def __setstate__(self, state: tuple) -> None:
        if len(state) == 3:  # saved before series could be bounded
            state = (*state, False, 1, 0, state[1])
        self._data, self.n, self.wall_base, self.bounded, self.stride, self.history, self.appended = state
        self._unstage()

    @property
    def thinned(self) -> bool:
        """Whether older points were thinned out (figures over all points are then over a sample)."""
        self.flush()
        return self.appended > self.n

    def _thin(self) -> None:
        """Make room in a bounded series: the oldest half of the recent points goes into
        the history, one every ``stride`` of them (by their order of arrival); a full
        history keeps every other of its points and its stride doubles."""
        recent = self.n - self.history
        move = recent // 2
        first = self.appended - recent  # the arrival number of the oldest recent point
        data = self._data
        start = (-first) % self.stride  # the moved points that fall on the history's grid
        picked = np.arange(self.history + start, self.history + move, self.stride)
        kept = len(picked)
        data[self.history:self.history + kept] = data[picked]
        tail = self.n - (self.history + move)
        data[self.history + kept:self.history + kept + tail] = data[self.history + move:self.n]
        self.history += kept
        self.n = self.history + tail
        while self.history > HISTORY:
            half = data[0:self.history:2].copy()
            rest = data[self.history:self.n].copy()
            data[:len(half)] = half
            data[len(half):len(half) + len(rest)] = rest
            self.history = len(half)
            self.n = self.history + len(rest)
            self.stride *= 2

    def append(self, iteration: Optional[int], wall: Optional[float] = None, *, file_id: int = 0, line: int = 0,
               **values: Optional[float]) -> None:
        """One point: its iteration, wall time and registry fields by key (absent: NaN)."""
        self.flush()
        if self.bounded and self.n - self.history >= RECENT:
            self._thin()
        self.appended += 1
        if self.n == len(self._data):
            self._grow(len(self._data) + max(64, len(self._data) // 8))
        if wall is not None and self.wall_base is None:
            self.wall_base = wall
        it = iteration if iteration is not None and 0 <= iteration <= _I32_MAX else -1
        rel = (wall - self.wall_base) if wall is not None and self.wall_base is not None else None
        get = values.get
        self._data[self.n] = (it, *(_f(get(k)) for k in _FLOAT_KEYS), _f(rel), file_id, min(line, _U32_MAX))
        self.n += 1

    def extend_from(self, other: "Series") -> None:
        """``other``'s points after this series' own, as if appended one by one (wall
        times moved onto this series' base)."""
        self.flush()
        other.flush()
        k = other.n
        if not k:
            return
        if self.n + k > len(self._data):
            self._grow(max(self.n + k, len(self._data) + max(64, len(self._data) // 8)))
        out = self._data[self.n:self.n + k]
        out[...] = other._data[:k]
        if other.wall_base is not None:
            if self.wall_base is None:
                self.wall_base = other.wall_base
            elif other.wall_base != self.wall_base:
                walls = other._data["wall"][:k].astype(np.float64) + (other.wall_base - self.wall_base)
                out["wall"] = np.clip(walls, -3.4e38, 3.4e38)
        self.n += k
        self.appended += other.appended
        while self.bounded and self.n - self.history > RECENT:
            self._thin()

    def append_event(self, ev: Any, plan: PointPlan, file_id: int = 0) -> None:
        """A point of the registry fields ``ev`` gives (:func:`point_plan` of its type).  A
        batch verb's series stages it, what the plan reads off the event in one call, and
        makes every staged point at once when next read (a point made at a time cost 7 us
        of a store's 15 us an iteration); a bounded series makes it now.  The store makes
        them by the end of its ``add``."""
        if self.bounded:
            self._append_now(ev, plan, file_id)
            return
        if plan is not self._plan:
            self._stage_with(plan)
        self._staged.append(plan.fetch(ev))
        self._files.append(file_id)
        if plan.computed:
            for out, (_, get) in zip(self._computed, plan.computed):
                out.append(get(ev))
        self.appended += 1

    def stage(self, plan: PointPlan, points: list, computed: list[list], file_id: int = 0) -> None:
        """Points as :meth:`append_event` stages them, made of rows rather than events: each
        point what ``plan.fetch`` would read, ``computed`` the values of each of the plan's
        computed getters (an unbounded series: a bounded one makes its points one by one)."""
        assert not self.bounded
        if plan is not self._plan:
            self._stage_with(plan)
        self._staged.extend(points)
        self._files.extend([file_id] * len(points))
        for out, values in zip(self._computed, computed):
            out.extend(values)
        self.appended += len(points)

    def _stage_with(self, plan: PointPlan) -> None:
        """Points staged from now on follow ``plan`` (those of another are made first)."""
        self.flush()
        self._plan = plan
        self._computed = [[] for _ in plan.computed]

    def flush(self) -> None:
        """Make the staged points: column by column, as :meth:`_append_now` makes each."""
        rows = self._staged
        if not rows:
            return
        plan, files, computed = self._plan, self._files, self._computed
        assert plan is not None
        self._unstage()
        k = len(rows)
        if self.n + k > len(self._data):
            self._grow(max(self.n + k, len(self._data) + max(64, len(self._data) // 8)))
        out = self._data[self.n:self.n + k]
        columns = list(zip(*rows))
        out["iteration"] = _iterations(columns[0]) if plan.iteration_at >= 0 else -1
        for key in _FLOAT_KEYS:
            out[key] = _NAN
        for at, place, scale, floor in plan.plain:
            out[_FLOAT_KEYS[at]] = _floats(columns[place], scale, floor)
        for (at, _), values in zip(plan.computed, computed):
            if at < 0:
                out["iteration"] = _iterations(values)
            else:
                out[_FLOAT_KEYS[at]] = _floats(values, 1.0, None)
        walls = columns[-2]
        if self.wall_base is None:
            self.wall_base = next((w for w in walls if w is not None), None)
        base = self.wall_base
        out["wall"] = _NAN if base is None else _floats(tuple(None if w is None else w - base for w in walls), 1.0, None)
        out["file"] = files
        out["line"] = np.minimum(np.array(columns[-1], dtype=np.int64), _U32_MAX)
        self.n += k

    def _append_now(self, ev: Any, plan: PointPlan, file_id: int) -> None:
        """The point of ``ev``, made now (a bounded series: it may thin first)."""
        if self.bounded and self.n - self.history >= RECENT:
            self._thin()
        self.appended += 1
        if self.n == len(self._data):
            self._grow(len(self._data) + max(64, len(self._data) // 8))
        wall = ev.wall_time
        if wall is not None and self.wall_base is None:
            self.wall_base = wall
        iteration = plan.iteration(ev) if plan.iteration is not None else None
        it = iteration if iteration is not None and 0 <= iteration <= _I32_MAX else -1
        rel = (wall - self.wall_base) if wall is not None and self.wall_base is not None else None
        values = [_NAN] * _FLOATS  # only the columns the event type gives are read: most are not
        for k, get in plan.columns:
            values[k] = _f(get(ev))
        self._data[self.n] = (it, *values, _f(rel), file_id, min(ev.line, _U32_MAX))
        self.n += 1

    def remap_files(self, mapping: np.ndarray, start: int = 0) -> None:
        """Points from ``start`` on came from another job's store: their file indexes,
        through ``mapping`` (other index -> this job's), become this job's."""
        self.flush()
        if start < self.n:
            column = self._data["file"][start:self.n]
            column[...] = mapping[column]

    def _grow(self, capacity: int) -> None:
        # np.resize would fill the new room with copies of the data: only the points are copied
        # copied as bytes: a copy field by field of the structured points runs ten times slower
        data = np.empty(capacity, dtype=POINT_DTYPE)
        data.view(np.uint8)[:self.n * POINT_DTYPE.itemsize] = self._data.view(np.uint8)[:self.n * POINT_DTYPE.itemsize]
        self._data = data

    def set_last(self, column: str, value: Optional[float]) -> None:
        self.flush()
        if self.n:
            self._data[column][self.n - 1] = _f(value)

    @property
    def points(self) -> np.ndarray:
        """Read-only view of the stored points."""
        self.flush()
        view = self._data[: self.n]
        view.flags.writeable = False
        return view

    def column(self, name: str) -> np.ndarray:
        self.flush()
        return self._data[name][: self.n]

    def last(self, name: str) -> Optional[float]:
        self.flush()
        if not self.n:
            return None
        value = self._data[name][self.n - 1]
        return float(value)

    @property
    def bytes_allocated(self) -> int:
        self.flush()
        return int(self._data.nbytes)
