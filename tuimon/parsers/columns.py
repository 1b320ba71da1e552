"""Events in columns: many lines of one kind, without an event object a line.

The compiled core reads plain timer lines (``time (ms) | a: 1 | b: 2``, ``name ....:
(min, max)``) of a block into one :class:`TimerRows`, and Megatron's iteration lines
into one :class:`IterationRows`; the store folds them in bulk (:mod:`tuimon.store.timer_fold`,
:mod:`tuimon.store.iteration_fold`).  Each row is exactly the event the Python hook gives
for its line (``events()``, which the tests hold to the Python engine), so anything that
wants events can have them.

A block's rows come after the block's other events, in the same list (its iteration rows
before its timer rows); they are in line order among themselves.  :func:`expand` gives such
a list as events in line order.
"""
from __future__ import annotations

import heapq
from array import array
from collections.abc import Sequence as SequenceABC
from itertools import accumulate, islice, repeat
from operator import le
from typing import Any, Iterable, Mapping, Optional, Sequence, TypeVar, Union

from .deepspeed import SAMPLES_MEMORY
from .events import Event, FrozenDict, Iteration, Memory, RunConfig, Step, Throughput, Timers, frozen_map
from .timers import COMM_OP, timer_group


class Rows:
    """Lines of one kind of one file, a column a field (``line`` among them, in line order)."""

    __slots__: tuple[str, ...] = ()
    file: str
    line: list[int]

    def __len__(self) -> int:
        return len(self.line)

    def __getstate__(self) -> tuple:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __setstate__(self, state: tuple) -> None:
        for name, value in zip(self.__slots__, state):
            setattr(self, name, value)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.file!r}, {len(self)} rows, lines {self.line[:1]}..{self.line[-1:]})"

    def renumbered(self: "R", lines: list[int]) -> "R":
        """The same rows at ``lines`` (segments of a file line take the line's number)."""
        out = type(self).__new__(type(self))
        out.__setstate__(self.__getstate__())
        out.line = lines
        return out

    def events(self) -> list[Event]:
        """Each row as the event the hook gives for its line."""
        raise NotImplementedError


R = TypeVar("R", bound=Rows)


#: a column of numbers: a sequence, or a numpy array of the column's type (the core's, unconverted)
Column = Any


class KeyMaps(SequenceABC):
    """A column of maps of one key (a data rule's map field one group fills: llm.c's and
    modded-nanogpt's ``losses``, ``{"loss": ...}``): the key and each row's value (None: the row
    has no map).  A row's map is made where it is asked for (an item, a slice's, the
    iteration), as the :class:`FrozenDict` a list of them would hold; the store's fold reads the
    ``values`` (:func:`map_values`).  Made a row at a time, the maps were a twelfth of reading
    llm.c's log, and read three times over by the fold."""

    __slots__ = ("key", "values")

    def __init__(self, key: str, values: list) -> None:
        self.key, self.values = key, values

    def __len__(self) -> int:
        return len(self.values)

    def __getitem__(self, k: Any) -> Any:
        if isinstance(k, slice):
            return KeyMaps(self.key, self.values[k])
        value = self.values[k]
        return None if value is None else FrozenDict({self.key: value})

    def __iter__(self) -> Any:
        key = self.key
        return (None if value is None else FrozenDict({key: value}) for value in self.values)

    def __contains__(self, item: Any) -> bool:
        if item is None:
            return has_none(self.values)
        return any(item == row for row in self)

    def count(self, item: Any) -> int:
        if item is None:
            return self.values.count(None)
        return sum(1 for row in self if row == item)

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, SequenceABC) and not isinstance(other, (str, bytes)) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self) -> tuple:
        return (KeyMaps, (self.key, self.values))

    def __repr__(self) -> str:
        return f"KeyMaps({self.key!r}, {len(self.values)} rows)"


def has_none(values: Sequence[Any]) -> bool:
    """Whether None is among ``values`` (numbers, mostly): ``sum`` reads a list of floats or ints in C
    at 3-4 ns a value, where ``None in`` compared each with None through both types' rich comparisons
    (11-14 ns); a number and None never add, so only a sum that fails (None, or a value that is no
    number) is looked through."""
    try:
        sum(values)
    except TypeError:
        return None in values
    return False


def map_values(column: Any) -> Optional[list]:
    """The values of a :class:`KeyMaps` column, None for one that is not (a list of maps)."""
    return column.values if type(column) is KeyMaps else None


def copied(column: Any) -> Any:
    """A column's copy, of its kind: a list, or a :class:`KeyMaps` of its own values."""
    return KeyMaps(column.key, list(column.values)) if type(column) is KeyMaps else list(column)


def _made(cls: Any, file: str, rows: Sequence[int], columns: Mapping[str, Sequence[Any]]) -> list:
    """``cls(file=file, **{name: column[k] ...})`` of each of ``rows`` (ascending, each once: all
    of them where there are as many as a column's values), made at once: NamedTuple's
    ``_make`` over the columns in the event's field order (a field not among ``columns`` takes its
    default, as a keyword left out does): ``tuimon events`` makes the events of every row, and
    keyword arguments were most of their cost."""
    assert cls._fields[0] == "file" and set(columns) <= set(cls._fields[1:]), (cls, sorted(columns))
    n = len(rows)
    every = n == len(next(iter(columns.values()), ()))
    fields: list[Iterable[Any]] = [repeat(file, n)]
    for name in cls._fields[1:]:
        column = columns.get(name)
        if column is None:
            fields.append(repeat(cls._field_defaults.get(name), n))
        else:
            fields.append(column if every else [column[k] for k in rows])
    return list(map(cls._make, zip(*fields)))


def _array(code: str, values: Column) -> array:
    """``values`` as an array of ``code``: a numpy column of that type (the core's) copied at once."""
    if hasattr(values, "dtype"):
        assert values.dtype.itemsize == array(code).itemsize, values.dtype
        return array(code, values.tobytes())
    return array(code, values)


#: Iteration's fields (IterationRows.events makes its events from them)
_ITERATION_FIELDS = frozenset(Iteration._fields)
#: the fields IterationRows keeps apart from ``fields`` (and the file)
_ITERATION_OWN = frozenset(("file", "line", "rank", "node", "wall_time", "iteration", "train_iters"))


class TimerRows(Rows):
    """Timer lines of one file: per row its line, rank, node and stamp, and its timers
    (``count`` of them: names by index into ``names``, and their ms); a ``comm`` row is
    one collective's time (DeepSpeed's comms logger), of the group ``COMM_OP``."""

    __slots__ = ("file", "line", "rank", "node", "wall_time", "count", "comm", "names", "name_index", "ms")
    type = "timer_rows"

    def __init__(self, file: str, line: Sequence[int], rank: Sequence[Optional[int]], node: Sequence[Optional[str]],
                 wall_time: Sequence[Optional[float]], count: "Column", comm: Sequence[int],
                 names: Sequence[str], name_index: "Column", ms: "Column") -> None:
        self.file = file
        self.line, self.rank, self.node, self.wall_time = list(line), list(rank), list(node), list(wall_time)
        self.count = _array("I", count)
        self.comm = array("B", comm)
        self.names = tuple(names)
        self.name_index = _array("I", name_index)
        self.ms = _array("d", ms)

    def events(self) -> list[Event]:
        """Each row as the event the hook gives for its line (made from its values in the event's
        field order, as ``Timers(...)`` of them makes it: ``tuimon events`` makes a row an event)."""
        out: list[Event] = []
        groups: dict[tuple[int, tuple[int, ...]], Any] = {}
        keys: dict[tuple[int, ...], list[str]] = {}
        names, index, ms, make, file = self.names, self.name_index, self.ms, Timers._make, self.file
        for k, (end, line, rank, node, wall) in enumerate(zip(accumulate(self.count), self.line, self.rank, self.node,
                                                               self.wall_time)):
            start = end - self.count[k]
            ids, comm = tuple(index[start:end]), self.comm[k]
            group = groups.get((comm, ids))
            if group is None:  # the same timers come back every iteration: one read-only map for them
                group = groups[comm, ids] = frozen_map({names[i]: COMM_OP if comm else timer_group(names[i])
                                                        for i in ids})
            named = keys.get(ids)
            if named is None:
                named = keys[ids] = [names[i] for i in ids]
            timers = FrozenDict(zip(named, ms[start:end])) if named else frozen_map(None)
            out.append(make((file, line, rank, node, wall, timers, group, None)))
        return out


class IterationRows(Rows):
    """Iteration lines of one file: per row its line, rank, node and stamp, its counter and
    total; and its other fields as the core read them (the keyword arguments of its
    :class:`~.events.Iteration`), a column a field: ``fields[name][k]`` is row ``k``'s (None
    where it has none)."""

    __slots__ = ("file", "line", "rank", "node", "wall_time", "iteration", "train_iters", "fields")
    type = "iteration_rows"

    def __init__(self, file: str, line: Sequence[int], rank: Sequence[Optional[int]], node: Sequence[Optional[str]],
                 wall_time: Sequence[Optional[float]], iteration: Sequence[int], train_iters: Sequence[Optional[int]],
                 fields: Mapping[str, Sequence[Any]]) -> None:
        self.file = file
        self.line, self.rank, self.node, self.wall_time = list(line), list(rank), list(node), list(wall_time)
        self.iteration, self.train_iters = list(iteration), list(train_iters)
        self.fields = {name: copied(column) for name, column in fields.items()}

    def row(self, k: int) -> dict[str, Any]:
        """Row ``k``'s fields (those it has)."""
        return {name: column[k] for name, column in self.fields.items() if column[k] is not None}

    def event(self, k: int) -> Iteration:
        """Row ``k`` as the event the hook gives for its line."""
        return Iteration(file=self.file, line=self.line[k], rank=self.rank[k], node=self.node[k],
                         wall_time=self.wall_time[k], iteration=self.iteration[k], train_iters=self.train_iters[k],
                         **self.row(k))

    def events(self) -> list[Event]:
        """Each row as :meth:`event` makes it, all at once (:func:`_made`): a value a row lacks (None)
        is its field's default, as a keyword :meth:`row` leaves out is."""
        if not _ITERATION_OWN.isdisjoint(self.fields) or not _ITERATION_FIELDS.issuperset(self.fields):
            return [self.event(k) for k in range(len(self.line))]  # (the event itself says what is wrong)
        defaults = Iteration._field_defaults
        columns: dict[str, Sequence[Any]] = {
            "line": self.line, "rank": self.rank, "node": self.node, "wall_time": self.wall_time,
            "iteration": self.iteration, "train_iters": self.train_iters}
        for name, column in self.fields.items():
            default = defaults.get(name)
            columns[name] = column if default is None or None not in column else \
                [default if value is None else value for value in column]
        return _made(Iteration, self.file, range(len(self.line)), columns)


#: a run of this many Iteration events or more, in a block without the core's iteration rows, goes to
#: the store as rows (iteration_runs)
RUN_ROWS = 32
_AT = {name: k for k, name in enumerate(Iteration._fields)}
_OTHER_FIELDS = tuple((k, name, Iteration._field_defaults.get(name)) for k, name in enumerate(Iteration._fields)
                      if name not in _ITERATION_OWN)


def iteration_runs(items: list) -> list:
    """``items`` (a block's, in line order) with each run of :data:`RUN_ROWS` or more Iteration events
    in a row (of one file, each line after the one before, an int iteration, a losses map) as one
    :class:`IterationRows` in its place: the store folds rows in bulk to what the events leave one
    by one.  The step lines of a declared format's data rule (llm.c's, modded-nanogpt's) were each
    taken by the store an event at a time.  Left as they are in a block with the core's own
    iteration rows, which stand after the block's events: a file's rows go to the store in line
    order."""
    if any(type(item) is IterationRows for item in items):
        return items
    out: list = []
    run: list = []
    for item in items:
        if _steps(item) and (not run or item.file == run[0].file and item.line > run[-1].line):
            run.append(item)
            continue
        _put(out, run)
        run = [item] if _steps(item) else []
        if not run:
            out.append(item)
    _put(out, run)
    return out


def _steps(ev: Any) -> bool:
    """Whether ``ev`` may stand in a run: an Iteration at a line, of an int iteration, with a losses map."""
    return type(ev) is Iteration and type(ev.line) is int and type(ev.iteration) is int and ev.losses is not None


def _put(out: list, run: list) -> None:
    """A run into ``out``: as rows where it is long enough, else its events."""
    if len(run) >= RUN_ROWS:
        out.append(_rows_of(run))
    else:
        out.extend(run)


def _rows_of(run: list) -> IterationRows:
    """A run of Iteration events as rows: a column a field, but those every event leaves at its
    default (the rows' events take it again)."""
    columns = list(zip(*run))
    fields = {}
    for k, name, default in _OTHER_FIELDS:
        column = columns[k]
        if column.count(None) < len(column) if default is None else any(value is not default for value in column):
            fields[name] = column
    return IterationRows(run[0].file, columns[_AT["line"]], columns[_AT["rank"]], columns[_AT["node"]],
                         columns[_AT["wall_time"]], columns[_AT["iteration"]], columns[_AT["train_iters"]], fields)


class PlacedRows(Rows):
    """Rows at the place of their events among a block's others (not after them), gathered as
    one tuple a line (its values in the order of the slots after ``file``: 12 list appends a
    line cost a third of the rows' time) and made columns at once."""

    __slots__ = ()
    rank: list[Optional[int]]
    node: list[Optional[str]]
    wall_time: list[Optional[float]]

    def __init__(self, file: str, rows: Sequence[tuple] = ()) -> None:
        columns = zip(*rows) if rows else ((),) * (len(self.__slots__) - 1)
        self.__setstate__((file, *(list(column) for column in columns)))

    def weight(self) -> int:
        """How many events these rows stand for."""
        raise NotImplementedError

    def part(self, a: int, b: int) -> "PlacedRows":
        """Rows ``a`` to ``b`` (of the same kind)."""
        out = object.__new__(type(self))
        file, *columns = self.__getstate__()
        out.__setstate__((file, *(column[a:b] for column in columns)))
        return out


class StepRows(PlacedRows):
    """Step lines of one file the core read (TorchTitan's metrics lines, Hugging Face
    Trainer's metrics dicts, DeepSpeed's step lines and its pipeline engine's), at the place
    of their events among the block's others (not after them): per row its line, rank, node
    and stamp, its :class:`~.events.Step`'s step, loss, lr, time, skipped steps and samples a
    second, and the :class:`~.events.Throughput` (TFLOPs, tokens a second on a device, MFU)
    and :class:`~.events.Memory` (max reserved) its line gives, if any.  A row whose line says
    something once (the run's framework, where its step time comes from) is not one: its
    parser gives its events."""

    __slots__ = ("file", "line", "rank", "node", "wall_time", "step", "loss", "lr", "elapsed_ms", "tflops", "tps",
                 "mfu", "gib", "skipped", "samples_per_sec")
    type = "step_rows"
    step: list[Optional[int]]
    loss: list[Optional[float]]
    lr: list[Optional[float]]
    elapsed_ms: list[Optional[float]]
    tflops: list[Optional[float]]
    tps: list[Optional[float]]
    mfu: list[Optional[float]]
    gib: list[Optional[float]]
    skipped: list[Optional[int]]
    samples_per_sec: list[Optional[float]]

    def throughputs(self) -> list[int]:
        """The rows whose line gives a Throughput."""
        return [k for k, (a, b, c) in enumerate(zip(self.tflops, self.tps, self.mfu))
                if a is not None or b is not None or c is not None]

    def weight(self) -> int:
        """How many events these rows stand for."""
        return 2 * len(self.line) + len(self.throughputs()) - self.gib.count(None)

    def events(self) -> list[Event]:
        """Each row as the events its parser gives for its line: its Step, then its Throughput
        and its Memory where the line gives them."""
        file, rows = self.file, range(len(self.line))
        where: dict[str, Sequence[Any]] = {"line": self.line, "rank": self.rank, "node": self.node,
                                           "wall_time": self.wall_time}
        steps = _made(Step, file, rows, {**where, "step": self.step, "loss": self.loss, "lr": self.lr,
                                         "elapsed_ms": self.elapsed_ms, "skipped": self.skipped,
                                         "samples_per_sec": self.samples_per_sec})
        told = self.throughputs()
        gib = [k for k, g in enumerate(self.gib) if g is not None]
        if not told and not gib:
            return steps
        rates = dict(zip(told, _made(Throughput, file, told, {
            **where, "iteration": self.step, "tflops_reported": self.tflops, "tokens_per_gpu_per_sec": self.tps,
            "mfu": self.mfu})))
        memories = dict(zip(gib, _made(Memory, file, gib, {
            **where, "gpu_max_reserved_mb": [None if g is None else g * 1024.0 for g in self.gib]})))
        out: list[Event] = []
        for k, step in enumerate(steps):
            out.append(step)
            if k in rates:
                out.append(rates[k])
            if k in memories:
                out.append(memories[k])
        return out


class RateRows(PlacedRows):
    """Rate lines of one file the core read, at the place of their events (as
    :class:`StepRows`): per row its line, rank, node and stamp, its iteration, and its
    ``kind``: 0 Megatron-DeepSpeed's ``Effective Tera Flops`` line (a Throughput of its
    TFLOPs at the iteration before it, then a RunConfig of its parameters, in billions), 1 its
    ``NumWorkers`` line (a Throughput of its samples a second and iteration time, the same),
    2 DeepSpeed's throughput timer line (a Throughput of its samples a second at its own step,
    then a Memory of its allocated and peak allocated MB, if it gives them)."""

    __slots__ = ("file", "line", "rank", "node", "wall_time", "iteration", "tflops", "params_b", "samples_per_sec",
                 "iteration_time_s", "kind", "allocated_mb", "max_allocated_mb")
    type = "rate_rows"
    iteration: list[Optional[int]]
    tflops: list[Optional[float]]
    params_b: list[Optional[float]]
    samples_per_sec: list[Optional[float]]
    iteration_time_s: list[Optional[float]]
    kind: list[int]
    allocated_mb: list[Optional[float]]
    max_allocated_mb: list[Optional[float]]

    def weight(self) -> int:
        """How many events these rows stand for."""
        return len(self.line) + self.kind.count(0) + len(self.line) - self.allocated_mb.count(None)

    def events(self) -> list[Event]:
        """Each row as the events its parser's hook gives for its line: its Throughput (of its
        TFLOPs, or of its samples a second and iteration time), then its RunConfig (kind 0) or
        its Memory (the others, where it gives one)."""
        file, kinds, rows = self.file, self.kind, range(len(self.line))
        where: dict[str, Sequence[Any]] = {"line": self.line, "rank": self.rank, "node": self.node,
                                           "wall_time": self.wall_time}

        def of(column: list, megatron: bool) -> list:
            """The column where the row's kind gives it (None elsewhere)."""
            return [v if (kind == 0) == megatron else None for v, kind in zip(column, kinds)]

        rates = _made(Throughput, file, rows, {
            **where, "iteration": self.iteration, "tflops_reported": of(self.tflops, True),
            "samples_per_sec": of(self.samples_per_sec, False), "iteration_time_s": of(self.iteration_time_s, False)})
        told = [k for k, kind in enumerate(kinds) if kind == 0]
        configs = dict(zip(told, _made(RunConfig, file, told, {**where, "total_params_b": self.params_b})))
        held = [k for k, kind in enumerate(kinds) if kind != 0 and self.allocated_mb[k] is not None]
        memories = dict(zip(held, _made(Memory, file, held, {
            **where, "label": [SAMPLES_MEMORY] * len(kinds), "gpu_allocated_mb": self.allocated_mb,
            "gpu_max_allocated_mb": self.max_allocated_mb})))
        out: list[Event] = []
        for k, rate in enumerate(rates):
            out.append(rate)
            then = configs.get(k) or memories.get(k)
            if then is not None:
                out.append(then)
        return out


class MemoryRows(PlacedRows):
    """Megatron's memory reports of one file the core read, at the place of their events (as
    :class:`StepRows`): per row its line, rank (its ``[Rank N]`` tag's, else the line's), node
    and stamp, its moment (``after N iterations``) and its four figures (MB)."""

    __slots__ = ("file", "line", "rank", "node", "wall_time", "label", "allocated_mb", "max_allocated_mb",
                 "reserved_mb", "max_reserved_mb")
    type = "memory_rows"
    label: list[Optional[str]]
    allocated_mb: list[Optional[float]]
    max_allocated_mb: list[Optional[float]]
    reserved_mb: list[Optional[float]]
    max_reserved_mb: list[Optional[float]]

    def weight(self) -> int:
        """How many events these rows stand for."""
        return len(self.line)

    def events(self) -> list[Event]:
        """Each row as the Memory its parser's hook gives for its line."""
        return _made(Memory, self.file, range(len(self.line)), {
            "line": self.line, "rank": self.rank, "node": self.node, "wall_time": self.wall_time, "label": self.label,
            "gpu_allocated_mb": self.allocated_mb, "gpu_max_allocated_mb": self.max_allocated_mb,
            "gpu_reserved_mb": self.reserved_mb, "gpu_max_reserved_mb": self.max_reserved_mb})


#: the kinds of rows (in line order among themselves; timer and iteration rows after their block's
#: other events, step, rate and memory rows at their place)
ROWS = (TimerRows, IterationRows, StepRows, RateRows, MemoryRows)
Item = Union[Event, TimerRows, IterationRows, StepRows, RateRows, MemoryRows]


def expand(items: Sequence[Item]) -> list[Event]:
    """Events and rows (a block's rows after its events) as events alone, in line order
    within each file's run of items (the order the Python engine gives them)."""
    if not any(type(item) in ROWS for item in items):
        return list(items)  # type: ignore[arg-type]
    out: list[Event] = []
    placed_at = -1  # where the run of placed rows at hand starts in ``out``, if one is
    for item in items:
        if isinstance(item, PlacedRows):
            # (at their place; rows of another kind closed with them, their lines interleaved, merged in)
            if placed_at >= 0 and out[placed_at].file == item.file:
                tail = out[placed_at:]
                del out[placed_at:]
                out.extend(_merged(tail, item.events()))
            else:
                placed_at = len(out)
                out.extend(item.events())
            continue
        placed_at = -1
        if type(item) in ROWS:
            _merge(out, item.events())  # type: ignore[union-attr]
        else:
            out.append(item)  # type: ignore[arg-type]
    return out


def _merge(out: list[Event], evs: list[Event]) -> None:
    """Merge rows' events (of one file, in line order) into the tail of ``out`` holding their block."""
    if not evs:
        return
    first = evs[0].line
    # the block's events: the tail of ``out`` of the same file at lines from just before the rows
    k = len(out)
    while k > 0 and out[k - 1].file == evs[0].file and (out[k - 1].line or 0) > first:
        k -= 1
    tail = out[k:]
    del out[k:]
    out.extend(_merged(tail, evs))  # (on a tie the block's event first, as the hook gave it)


def _merged(first: list[Event], then: list[Event]) -> list[Event]:
    """heapq.merge of ``first`` and ``then`` by line (``first``'s before ``then``'s on a tie): where
    each is in line order, a stable sort of the two runs, which Python's sort merges at C speed
    (heapq's merge, a generator, cost a third of expanding a dense log's rows)."""
    if _ascending(first) and _ascending(then):
        return sorted(first + then, key=_line)
    return list(heapq.merge(first, then, key=_line))


def _ascending(events: list[Event]) -> bool:
    lines = list(map(_line, events))
    return all(map(le, lines, islice(lines, 1, None)))


def _line(ev: Event) -> int:
    return ev.line or 0


def weight(items: Sequence[Item]) -> int:
    """How many events ``items`` stand for."""
    total = len(items)
    for item in items:
        if isinstance(item, PlacedRows):
            total += item.weight() - 1
        elif isinstance(item, (TimerRows, IterationRows)):
            total += len(item) - 1
    return total


def slices(items: Sequence[Item], size: int) -> list[Sequence[Item]]:
    """``items`` in slices of about ``size`` events (a row is the events it stands for),
    each one a store can take on its own: a cut never falls between a block's events and
    the rows that follow them (their rows take the state those events leave), nor between
    its iteration rows and timer rows, nor between rows at their place of one file (their
    kinds' lines interleave).  A cut is moved past the first rows of its file that come
    before the file changes: at worst a slice holds one more block."""
    out: list[Sequence[Item]] = []
    start, n = 0, len(items)
    while start < n:
        end, taken = start, 0
        while end < n and (taken < size or end == start):
            item = items[end]
            taken += item.weight() if isinstance(item, PlacedRows) else len(item) if type(item) in ROWS else 1
            end += 1
        while end < n and isinstance(items[end], PlacedRows) and isinstance(items[end - 1], PlacedRows) and \
                items[end].file == items[end - 1].file:
            end += 1
        if end < n and not _closes(items, end - 1):
            file = items[end - 1].file
            j = end
            while j < n and items[j].file == file:
                if _closes(items, j):
                    end = j + 1
                    break
                j += 1
        out.append(items[start:end])
        start = end
    return out



def _closes(items: Sequence[Item], k: int) -> bool:
    """Whether ``items[k]`` is the last rows of a block's close (its iteration rows go
    before its timer rows)."""
    kind = type(items[k])
    if kind is not IterationRows:
        return kind is TimerRows
    return k + 1 == len(items) or type(items[k + 1]) is not TimerRows or items[k + 1].file != items[k].file
