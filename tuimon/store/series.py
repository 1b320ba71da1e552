"""Growable numpy series of iteration points, one column a registry field (4 bytes each),
and where each point was logged (an index into its job's files, and a line number).

The points are kept column by column, not as one record array: a float column is made only
once a value in it is not the plain NaN of "no value", so a point costs 14 bytes and 4 for
each column its lines give (a TorchTitan step 22, a Megatron iteration about 38) rather than
all of them (54), and a growth copies one column at a time (a record array's growth held the
old and the new arrays at once: 2.1 times the points, the peak of a big read).
Wall time is stored as float32 seconds after the series' first stamp (about 0.25 s
resolution after a month); growth by 1/8 keeps the allocated slack under an eighth.

A series of a long-running verb (a follower's store) is *bounded*: it keeps its
:data:`RECENT` latest points at full resolution and an evenly thinned history before
them, at most :data:`HISTORY` points, one every ``stride`` points in the order they
came (the stride doubles when the history is full), as TensorBoard's reservoir keeps
a bounded sample.  So memory is at most ``(RECENT + HISTORY)`` points a series
whatever the run's length; ``appended`` counts every point.  Batch verbs keep every
point (a figure over a whole log stays exact).
"""
from __future__ import annotations

from functools import lru_cache
from operator import attrgetter
from typing import Any, Optional, Sequence

import numpy as np

from .fields import FIELDS, Attr, Getter, getters_for

#: one column a registry field (tuimon.store.fields), and the wall time: a point as :attr:`Series.points` gives it
POINT_DTYPE = np.dtype([(f.key, f.dtype) for f in FIELDS] + [("wall", "<f4"), ("file", "<u2"), ("line", "<u4")])
_NAMES: tuple[str, ...] = POINT_DTYPE.names or ()
#: the columns every point has (a float column of the registry, and the wall time, is made when a value
#: needs it: a log without stamps, llm.c's main.log, keeps no column of NaN, 4 of its 26 bytes a point;
#: the file index when a point of another file than the job's first comes: 2 bytes a point more)
_ALWAYS = ("iteration", "line")
#: what a column made late holds at the points before (and past ``n``): NaN, the first file's 0
_BLANK: dict[str, float] = {"file": 0}
#: the bits of the NaN an absent float column reads as (what None and NaN are stored as)
_NAN_BITS = int(np.array([np.nan], dtype="<f4").view("<u4")[0])
_U32_MAX = np.iinfo(np.uint32).max
_FLOAT_KEYS = tuple(f.key for f in FIELDS if f.key != "iteration")
#: a point's value of a column not made: NaN, the first file's 0
_ABSENT = {key: np.array(_BLANK.get(key, np.nan), dtype=POINT_DTYPE[key])[()] for key in _NAMES if key not in _ALWAYS}
_FLOAT_SET = frozenset(_FLOAT_KEYS)
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
_INT_SET = frozenset((int,))
_WALL_TYPES = frozenset((float, type(None)))


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
            return _clamped(column)
    check = Attr("", scale, floor)
    return np.array([_f(check.value(v)) for v in values], dtype=np.float64)


def _relative(walls: Sequence, base: float) -> np.ndarray:
    """Stamps (None: none) as seconds after ``base``, as :func:`_floats` makes each ``w - base``:
    at once where every one is a plain float or None (None is NaN to numpy, and stays NaN)."""
    if _WALL_TYPES.issuperset(map(type, walls)):
        column = np.array(walls, dtype=np.float64)
        column -= base
        return _clamped(column)
    return _floats(tuple(None if w is None else w - base for w in walls), 1.0, None)


def _clamped(column: np.ndarray) -> np.ndarray:
    """``column`` with each magnitude no float32 holds made infinite, as :func:`_f` makes a value."""
    column[column > 3.4e38] = np.inf
    column[column < -3.4e38] = -np.inf
    return column


def _iterations(values: Any) -> Any:
    """The iteration column of staged values: -1 for none, or one no int32 holds (in numpy where
    every value is a plain int, else a value at a time)."""
    if values and _INT_SET.issuperset(map(type, values)):
        try:
            column = np.array(values, dtype=np.int64)
        except OverflowError:  # (an int past int64: -1, a value at a time)
            pass
        else:
            column[(column < 0) | (column > _I32_MAX)] = -1
            return column
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



@lru_cache(maxsize=None)
def point_plan(event_type: str) -> PointPlan:
    """How an event of ``event_type`` fills a point (from the field registry): one plan a type, so
    that a series staging the iteration rows' points and an iteration event's (the records after an
    evaluation) stages them together (another plan makes the staged points first: 970 flushes of a
    few hundred points each, a fifth of the store's time on an llm.c log of 10 MB, evaluated every 250)."""
    getters = dict(getters_for(event_type))
    return PointPlan(getters.get("iteration"),
                     tuple((k, getters[key]) for k, key in enumerate(_FLOAT_KEYS) if key in getters))


class Series:
    """One series' points, a numpy column each (see the module's doc): ``_cols`` holds the
    iteration, wall, file and line columns and the float columns made so far, each of
    ``_cap`` places; past ``n`` a float column holds NaN (a point that gives no value for a
    column it has leaves the NaN there)."""

    __slots__ = ("_cols", "_cap", "n", "wall_base", "bounded", "stride", "history", "appended",
                 "_staged", "_count", "_plan", "_files", "_computed", "_fills")

    def __init__(self, capacity: int = 64, bounded: bool = False) -> None:
        self._cap = capacity
        self._cols: dict[str, np.ndarray] = {key: np.empty(capacity, dtype=POINT_DTYPE[key]) for key in _ALWAYS}
        self.n = 0  # points in the columns (staged ones are not yet)
        self.wall_base: Optional[float] = None
        self.bounded = bounded
        self.stride = 1  # the history holds points 0, stride, 2 stride... of those appended
        self.history = 0  # points at the front that are the thinned history
        self.appended = 0  # every point ever appended
        self._unstage()

    def _unstage(self) -> None:
        """Points staged by :meth:`append_event` (what the plan read off each event) or
        :meth:`stage`, a list a value the plan reads, made at once when the series is next read."""
        self._staged: list[list] = []
        self._count = 0
        self._plan: Optional[PointPlan] = None
        self._files: list[int] = []
        self._computed: list[list] = []
        self._fills: list[tuple[int, str, float]] = []  # (staged point, column, value) of fill_last, in order

    def __len__(self) -> int:
        self.flush()
        return self.n

    def __getstate__(self) -> tuple:
        """The points without the room kept for growth (the parse cache saves series)."""
        self.flush()
        n = self.n
        return {key: col[:n].copy() for key, col in self._cols.items()}, n, self.wall_base, self.bounded, \
            self.stride, self.history, self.appended

    def __setstate__(self, state: tuple) -> None:
        self._cols, self.n, self.wall_base, self.bounded, self.stride, self.history, self.appended = state
        self._cap = self.n
        self._unstage()

    @property
    def thinned(self) -> bool:
        """Whether older points were thinned out (figures over all points are then over a sample)."""
        self.flush()
        return self.appended > self.n

    # -- the columns ---------------------------------------------------------------------------
    def _made_column(self, key: str) -> np.ndarray:
        """``key``'s column (a float one, the wall time or the file index), made if it is not yet: NaN
        (the file index: 0) at every place, as the points before it read it."""
        col = self._cols.get(key)
        if col is None:
            col = self._cols[key] = np.full(self._cap, _BLANK.get(key, np.nan), dtype=POINT_DTYPE[key])
        return col

    def _put(self, key: str, at: int, values: np.ndarray) -> None:
        """Float ``values`` at ``at``: into ``key``'s column, made only if one of them is no plain NaN."""
        if key not in self._cols:
            as_stored = np.asarray(values, dtype="<f4")
            if (as_stored.view("<u4") == _NAN_BITS).all():
                return  # what an absent column reads as already
            values = as_stored
        self._made_column(key)[at:at + len(values)] = values

    def _put_column(self, key: str, at: int, values: Sequence, scale: float, floor: Optional[float]) -> None:
        """Staged ``values`` (:func:`_floats` of them) into ``key``'s column from ``at`` (``n``).  Values
        that are all None leave it as it is: NaN past ``n``, or absent, which reads as NaN (most of a
        point plan's columns are absent from most events: half the columns of a flush, each made a
        numpy array for nothing)."""
        if values[0] is None and values.count(None) == len(values):  # (count compares each float with None: 18 ns)
            return
        self._put(key, at, _floats(values, scale, floor))

    def _put_one(self, key: str, at: int, value: float) -> None:
        if key in self._cols:
            self._cols[key][at] = value
        elif value == value or np.array([value], dtype="<f4").view("<u4")[0] != _NAN_BITS:
            self._made_column(key)[at] = value

    def _grow(self, capacity: int) -> None:
        """Room for ``capacity`` points, a column at a time (the new room of a float column is NaN)."""
        n = self.n
        for key, col in self._cols.items():
            grown = np.empty(capacity, dtype=col.dtype) if key in _ALWAYS else \
                np.full(capacity, _BLANK.get(key, np.nan), dtype=col.dtype)
            grown[:n] = col[:n]
            self._cols[key] = grown
        self._cap = capacity

    def _room(self, k: int) -> None:
        if self.n + k > self._cap:
            self._grow(max(self.n + k, self._cap + max(64, self._cap // 8)))

    def _thin(self) -> None:
        """Make room in a bounded series: the oldest half of the recent points goes into
        the history, one every ``stride`` of them (by their order of arrival); a full
        history keeps every other of its points and its stride doubles."""
        old_n = self.n
        recent = self.n - self.history
        move = recent // 2
        first = self.appended - recent  # the arrival number of the oldest recent point
        start = (-first) % self.stride  # the moved points that fall on the history's grid
        picked = np.arange(self.history + start, self.history + move, self.stride)
        kept = len(picked)
        tail = self.n - (self.history + move)
        for col in self._cols.values():
            col[self.history:self.history + kept] = col[picked]
            col[self.history + kept:self.history + kept + tail] = col[self.history + move:self.n]
        self.history += kept
        self.n = self.history + tail
        while self.history > HISTORY:
            for col in self._cols.values():
                half = col[0:self.history:2].copy()
                after = col[self.history:self.n].copy()
                col[:len(half)] = half
                col[len(half):len(half) + len(after)] = after
            rest = self.n - self.history
            self.history = (self.history + 1) // 2  # (the points 0, 2, 4... of the history)
            self.n = self.history + rest
            self.stride *= 2
        for key, col in self._cols.items():  # what the points left: NaN (the file: 0) again past n
            if key not in _ALWAYS:
                col[self.n:old_n] = _BLANK.get(key, np.nan)

    # -- points in -----------------------------------------------------------------------------
    def append(self, iteration: Optional[int], wall: Optional[float] = None, *, file_id: int = 0, line: int = 0,
               **values: Optional[float]) -> None:
        """One point: its iteration, wall time and registry fields by key (absent: NaN)."""
        self.flush()
        if self.bounded and self.n - self.history >= RECENT:
            self._thin()
        self.appended += 1
        self._room(1)
        if wall is not None and self.wall_base is None:
            self.wall_base = wall
        rel = (wall - self.wall_base) if wall is not None and self.wall_base is not None else None
        for key, value in values.items():
            if key in _FLOAT_SET:
                self._put_one(key, self.n, _f(value))
        self._close_point(iteration, rel, file_id, line)

    def _close_point(self, iteration: Optional[int], rel: Optional[float], file_id: int, line: int) -> None:
        cols, n = self._cols, self.n
        cols["iteration"][n] = iteration if iteration is not None and 0 <= iteration <= _I32_MAX else -1
        self._put_one("wall", n, _f(rel))
        if file_id or "file" in cols:
            self._made_column("file")[n] = file_id
        cols["line"][n] = min(line, _U32_MAX)
        self.n = n + 1

    def extend_from(self, other: "Series") -> None:
        """``other``'s points after this series' own, as if appended one by one (wall
        times moved onto this series' base)."""
        self.flush()
        other.flush()
        k = other.n
        if not k:
            return
        self._room(k)
        n = self.n
        for key, col in other._cols.items():
            if key in _ALWAYS:
                self._cols[key][n:n + k] = col[:k]
            else:
                self._made_column(key)[n:n + k] = col[:k]
        if other.wall_base is not None:
            if self.wall_base is None:
                self.wall_base = other.wall_base
            elif other.wall_base != self.wall_base:
                walls = other.column("wall").astype(np.float64) + (other.wall_base - self.wall_base)
                self._made_column("wall")[n:n + k] = np.clip(walls, -3.4e38, 3.4e38)
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
        for column, value in zip(self._staged, plan.fetch(ev)):
            column.append(value)
        self._count += 1
        self._files.append(file_id)
        if plan.computed:
            for out, (_, get) in zip(self._computed, plan.computed):
                out.append(get(ev))
        self.appended += 1

    def stage(self, plan: PointPlan, columns: Sequence[Sequence], computed: list[list], file_id: int = 0,
              fills: Sequence[tuple[int, str, float]] = ()) -> None:
        """Points as :meth:`append_event` stages them, made of rows rather than events, as
        columns: each what ``plan.fetch`` would read of each point (a column a name of
        ``plan.names``, in order), ``computed`` the values of each of the plan's computed
        getters (an unbounded series: a bounded one makes its points one by one); ``fills``:
        (point of the columns', column, value) as :meth:`fill_last` on it, in order."""
        assert not self.bounded
        if plan is not self._plan:
            self._stage_with(plan)
        k = len(columns[0])
        if fills:
            at = self._count
            self._fills.extend((at + j, column, value) for j, column, value in fills)
        for staged, values in zip(self._staged, columns):
            staged.extend(values)
        self._count += k
        self._files.extend([file_id] * k)
        for out, values in zip(self._computed, computed):
            out.extend(values)
        self.appended += k

    def _stage_with(self, plan: PointPlan) -> None:
        """Points staged from now on follow ``plan`` (those of another are made first)."""
        self.flush()
        self._plan = plan
        self._staged = [[] for _ in plan.names]
        self._computed = [[] for _ in plan.computed]

    def flush(self) -> None:
        """Make the staged points: column by column, as :meth:`_append_now` makes each."""
        k = self._count
        if not k:
            return
        columns, plan, files, computed, fills = self._staged, self._plan, self._files, self._computed, self._fills
        assert plan is not None
        self._unstage()
        self._room(k)
        n, cols = self.n, self._cols
        iterations = cols["iteration"]
        iterations[n:n + k] = _iterations(columns[0]) if plan.iteration_at >= 0 else -1
        for at, place, scale, floor in plan.plain:
            self._put_column(_FLOAT_KEYS[at], n, columns[place], scale, floor)
        for (at, _), values in zip(plan.computed, computed):
            if at < 0:
                iterations[n:n + k] = _iterations(values)
            else:
                self._put_column(_FLOAT_KEYS[at], n, values, 1.0, None)
        walls = columns[-2]
        if self.wall_base is None and walls.count(None) != k:  # (a log without stamps: its Nones counted in C)
            self.wall_base = next(w for w in walls if w is not None)
        base = self.wall_base
        if base is not None:  # (else NaN: the column, absent or NaN past n, holds it already)
            self._put("wall", n, _relative(walls, base))
        if "file" in cols or any(files):
            self._made_column("file")[n:n + k] = files
        cols["line"][n:n + k] = np.minimum(np.array(columns[-1], dtype=np.int64), _U32_MAX)
        self.n += k
        for at, column, value in fills:
            self._fill(n + at, column, value)

    def _append_now(self, ev: Any, plan: PointPlan, file_id: int) -> None:
        """The point of ``ev``, made now (a bounded series: it may thin first)."""
        if self.bounded and self.n - self.history >= RECENT:
            self._thin()
        self.appended += 1
        self._room(1)
        wall = ev.wall_time
        if wall is not None and self.wall_base is None:
            self.wall_base = wall
        iteration = plan.iteration(ev) if plan.iteration is not None else None
        rel = (wall - self.wall_base) if wall is not None and self.wall_base is not None else None
        for k, get in plan.columns:  # only the columns the event type gives are read: most are not
            self._put_one(_FLOAT_KEYS[k], self.n, _f(get(ev)))
        self._close_point(iteration, rel, file_id, ev.line)

    def remap_files(self, mapping: np.ndarray, start: int = 0) -> None:
        """Points from ``start`` on came from another job's store: their file indexes,
        through ``mapping`` (other index -> this job's), become this job's."""
        self.flush()
        if start >= self.n:
            return
        if "file" not in self._cols:  # (every point the first file's: made only where that is another's now)
            if not mapping[0]:
                return
            self._made_column("file")
        column = self._cols["file"][start:self.n]
        column[...] = mapping[column]

    def set_last(self, column: str, value: Optional[float]) -> None:
        self.flush()
        if self.n:
            self._assign(self.n - 1, column, value)

    def _assign(self, i: int, column: str, value: Optional[float]) -> None:
        if column in _ALWAYS:
            self._cols[column][i] = _f(value)
        else:
            self._put_one(column, i, _f(value))

    def fill_last(self, column: str, value: float) -> None:
        """The last point's ``column`` becomes ``value`` if it holds NaN there (what
        ``last`` then ``set_last`` do), without making staged points now: a point told
        twice (DeepSpeed's step and samples lines) made every staged point one at a time."""
        if self._count:
            self._fills.append((self._count - 1, column, value))
        elif self.n:
            self._fill(self.n - 1, column, value)

    def _fill(self, i: int, column: str, value: float) -> None:
        col = self._cols.get(column)
        if col is None and column not in _NAMES:
            raise KeyError(column)
        if col is None or col[i] != col[i]:
            self._assign(i, column, value)

    # -- points out ----------------------------------------------------------------------------
    @property
    def points(self) -> np.ndarray:
        """The stored points as one read-only record array (made on each call: an export's)."""
        self.flush()
        out = np.empty(self.n, dtype=POINT_DTYPE)
        for key in _NAMES:
            out[key] = self.column(key)
        out.flags.writeable = False
        return out

    def point(self, i: int) -> dict[str, Any]:
        """Point ``i``'s values by column (numpy scalars)."""
        self.flush()
        return {key: self._cols[key][i] if key in self._cols else _ABSENT[key] for key in _NAMES}

    def column(self, name: str) -> np.ndarray:
        """A column's first ``n`` values (a float column no point gave a value: NaN)."""
        self.flush()
        col = self._cols.get(name)
        if col is None:
            if name not in _NAMES:
                raise KeyError(name)
            return np.full(self.n, _BLANK.get(name, np.nan), dtype=POINT_DTYPE[name])
        return col[: self.n]

    def last(self, name: str) -> Optional[float]:
        self.flush()
        if not self.n:
            return None
        return float(self.column(name)[self.n - 1])

    @property
    def bytes_allocated(self) -> int:
        self.flush()
        return sum(int(col.nbytes) for col in self._cols.values())
