"""Typed, immutable event records produced by the parsers.

Every event carries the file it came from, its 1-based line number, the rank (or
node label) the line was attributed to and the wall-clock time the line (or the
nearest earlier line) gives.  Fields a line does not give stay None.

Events are named tuples: immutable like frozen dataclasses but about five times
cheaper to build, which matters at millions of lines.  Mappings inside events are
read-only dicts.  ``type`` names the kind; ``to_dict()`` gives the flat JSON form.
Named tuples cannot inherit fields, so each record spells out the five common
ones (file, line, rank, node, wall_time) first; tests check they all agree.
"""
from __future__ import annotations

import math
from itertools import chain
from operator import itemgetter
from typing import Any, Mapping, NamedTuple, Optional, Sequence, Union


class FrozenDict(dict):
    """A read-only dict: mappings inside events cannot be changed after the fact,
    and (unlike a mappingproxy) events stay picklable for the ingest process."""

    __slots__ = ()

    def _readonly(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("event mappings are read-only")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _readonly  # type: ignore[assignment]
    __ior__ = _readonly  # type: ignore[assignment]

    def __reduce__(self):
        return (FrozenDict, (dict(self),))

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(sorted(self.items())))


_EMPTY: Mapping[str, Any] = FrozenDict()


def frozen_map(values: Optional[Mapping[str, Any]]) -> Mapping[str, Any]:
    if not values:
        return _EMPTY
    return FrozenDict(values)


def _to_dict(self) -> dict[str, Any]:
    """Flat JSON-ready dict: ``type``, ``file``, ``line`` and the fields at top level."""
    out: dict[str, Any] = {"type": self.type}
    for name, value in zip(self._fields, self):
        out[name] = _jsonable(value)
    return out


def _jsonable(value: Any) -> Any:
    if isinstance(value, float):
        # JSON has no inf/nan: keep them as strings rather than lose them.
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return value
    if isinstance(value, Mapping):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [_jsonable(v) for v in value]
    return value


class RunConfig(NamedTuple):
    """Partial run configuration: None means this line did not say."""

    type = "run_config"
    to_dict = _to_dict

    file: str = ""
    line: int = 0
    rank: Optional[int] = None
    node: Optional[str] = None
    wall_time: Optional[float] = None  # POSIX seconds; naive log stamps are read as UTC
    framework: Optional[str] = None
    num_layers: Optional[int] = None
    hidden_size: Optional[int] = None
    num_heads: Optional[int] = None
    seq_length: Optional[int] = None
    vocab_size: Optional[int] = None
    padded_vocab_size: Optional[int] = None
    micro_batch: Optional[int] = None
    global_batch: Optional[int] = None
    tp: Optional[int] = None
    pp: Optional[int] = None
    dp: Optional[int] = None
    world_size: Optional[int] = None
    activation_checkpointing: Optional[bool] = None
    train_iters: Optional[int] = None
    total_params_b: Optional[float] = None


class Iteration(NamedTuple):
    type = "iteration"
    to_dict = _to_dict

    file: str = ""
    line: int = 0
    rank: Optional[int] = None
    node: Optional[str] = None
    wall_time: Optional[float] = None  # POSIX seconds; naive log stamps are read as UTC
    iteration: Optional[int] = None
    train_iters: Optional[int] = None
    elapsed_ms: Optional[float] = None
    lr: Optional[float] = None
    global_batch: Optional[int] = None
    consumed_samples: Optional[int] = None
    consumed_tokens: Optional[int] = None
    losses: Mapping[str, float] = _EMPTY
    loss_scale: Optional[float] = None
    grad_norm: Optional[float] = None
    skipped: Optional[int] = None
    nan_count: Optional[int] = None
    tflops_reported: Optional[float] = None
    samples_per_sec: Optional[float] = None
    tokens_per_sec: Optional[float] = None
    tokens_per_gpu_per_sec: Optional[float] = None


class Step(NamedTuple):
    """An optimizer/engine step report that is not a Megatron iteration line
    (DeepSpeed ``step=N, skipped=K``, pipeline-engine ``steps: N loss: ...``)."""

    type = "step"
    to_dict = _to_dict

    file: str = ""
    line: int = 0
    rank: Optional[int] = None
    node: Optional[str] = None
    wall_time: Optional[float] = None  # POSIX seconds; naive log stamps are read as UTC
    step: Optional[int] = None
    skipped: Optional[int] = None
    lr: Optional[float] = None
    loss: Optional[float] = None
    elapsed_ms: Optional[float] = None
    samples_per_sec: Optional[float] = None


class Throughput(NamedTuple):
    """Throughput reported on its own line, attached to the latest iteration."""

    type = "throughput"
    to_dict = _to_dict

    file: str = ""
    line: int = 0
    rank: Optional[int] = None
    node: Optional[str] = None
    wall_time: Optional[float] = None  # POSIX seconds; naive log stamps are read as UTC
    iteration: Optional[int] = None
    tflops_reported: Optional[float] = None
    samples_per_sec: Optional[float] = None
    iteration_time_s: Optional[float] = None


class Timers(NamedTuple):
    type = "timers"
    to_dict = _to_dict
    #: each timer is a series of its own: only the lines of one timer are ordered among
    #: themselves (parsers.dispatch orders batches of a kind that declares this by key)
    KEYED_BY = "timers"

    file: str = ""
    line: int = 0
    rank: Optional[int] = None
    node: Optional[str] = None
    wall_time: Optional[float] = None  # POSIX seconds; naive log stamps are read as UTC
    timers: Mapping[str, float] = _EMPTY  # name -> ms
    groups: Mapping[str, str] = _EMPTY  # name -> forward/backward/optimizer/offload/...
    iteration: Optional[int] = None


class Memory(NamedTuple):
    type = "memory"
    to_dict = _to_dict

    file: str = ""
    line: int = 0
    rank: Optional[int] = None
    node: Optional[str] = None
    wall_time: Optional[float] = None  # POSIX seconds; naive log stamps are read as UTC
    label: Optional[str] = None
    gpu_allocated_mb: Optional[float] = None
    gpu_max_allocated_mb: Optional[float] = None
    gpu_reserved_mb: Optional[float] = None
    gpu_max_reserved_mb: Optional[float] = None
    cpu_used_gb: Optional[float] = None
    cpu_percent: Optional[float] = None


class Milestone(NamedTuple):
    """A startup milestone.  ``duration_s`` is set when the line reports how long
    the phase took (e.g. kernel compilation time) rather than when it happened."""

    type = "milestone"
    to_dict = _to_dict

    file: str = ""
    line: int = 0
    rank: Optional[int] = None
    node: Optional[str] = None
    wall_time: Optional[float] = None  # POSIX seconds; naive log stamps are read as UTC
    name: str = ""
    duration_s: Optional[float] = None
    detail: Optional[str] = None


class Checkpoint(NamedTuple):
    type = "checkpoint"
    to_dict = _to_dict

    file: str = ""
    line: int = 0
    rank: Optional[int] = None
    node: Optional[str] = None
    wall_time: Optional[float] = None  # POSIX seconds; naive log stamps are read as UTC
    iteration: Optional[int] = None
    save_ms: Optional[float] = None
    path: Optional[str] = None


FAILURE_KINDS = ("oom", "nccl", "traceback", "cancelled", "killed", "nan", "no-iterations")


class Failure(NamedTuple):
    type = "failure"
    to_dict = _to_dict

    file: str = ""
    line: int = 0
    rank: Optional[int] = None
    node: Optional[str] = None
    wall_time: Optional[float] = None  # POSIX seconds; naive log stamps are read as UTC
    kind: str = "traceback"
    message: str = ""


class Exit(NamedTuple):
    type = "exit"
    to_dict = _to_dict

    file: str = ""
    line: int = 0
    rank: Optional[int] = None
    node: Optional[str] = None
    wall_time: Optional[float] = None  # POSIX seconds; naive log stamps are read as UTC
    iteration: Optional[int] = None
    status: Optional[int] = None


class Truncated(NamedTuple):
    """The followed file shrank or was replaced; reading restarted at 0."""

    type = "truncated"
    to_dict = _to_dict

    file: str = ""
    line: int = 0
    rank: Optional[int] = None
    node: Optional[str] = None
    wall_time: Optional[float] = None  # POSIX seconds; naive log stamps are read as UTC
    reason: str = ""


class Batch(NamedTuple):
    """Events of one kind from many lines of one file, held by column.

    The fast path for lines that repeat one shape (:mod:`parsers.lanes`) makes
    these instead of one record per line; the job store takes the columns as they
    are, and :meth:`records` gives the very records the line-by-line path makes.
    """

    type = "batch"

    kind: type  # the record class: Iteration, Timers, Memory, Step
    file: str
    lines: Sequence[int]  # ascending (a list, or an array of 64-bit ints)
    columns: Mapping[str, Sequence]  # field -> one value per line (numbers may come as an array.array)
    constants: Mapping[str, Any] = _EMPTY  # field -> the value of every line
    maps: Mapping[str, Mapping[str, list]] = _EMPTY  # mapping field -> key -> value per line (None: absent)
    flush: int = 0  # batches made together share it: only their lines interleave

    @property
    def size(self) -> int:
        return len(self.lines)

    def column(self, name: str) -> list:
        """Values of field ``name`` per line (constants and defaults repeated)."""
        values = self.columns.get(name)
        if values is not None:
            return values
        if name in self.maps:
            return [self._map(name, i) for i in range(len(self.lines))]
        value = self.constants[name] if name in self.constants else self.kind._field_defaults.get(name)
        return [value] * len(self.lines)

    def _map(self, name: str, i: int) -> Mapping[str, Any]:
        return frozen_map({key: values[i] for key, values in self.maps[name].items() if values[i] is not None})

    def slice(self, start: int, stop: int) -> "Batch":
        return self._replace(lines=self.lines[start:stop],
                             columns={k: v[start:stop] for k, v in self.columns.items()},
                             maps={m: {k: v[start:stop] for k, v in cols.items()} for m, cols in self.maps.items()})

    def records(self) -> list:
        kind, file, constants = self.kind, self.file, self.constants
        names = list(self.columns)
        columns = [self.columns[n] for n in names]
        out = []
        for i, line in enumerate(self.lines):
            fields = dict(constants)
            for name, values in zip(names, columns):
                fields[name] = values[i]
            for name in self.maps:
                fields[name] = self._map(name, i)
            out.append(kind(file=file, line=line, **fields))
        return out


def merge(batches: list) -> "Batch":
    """One batch, in line order, of batches of one kind and file (shapes may differ:
    a field a batch lacks is its default there, a map key it lacks is absent)."""
    first = batches[0]
    if len(batches) == 1:
        return first
    batches = sorted(batches, key=lambda b: b.lines[0])
    sizes = [len(b.lines) for b in batches]
    total = sum(sizes)
    lines = list(chain.from_iterable(b.lines for b in batches))
    names = list(dict.fromkeys(n for b in batches for n in (*b.columns, *b.constants)))
    constants = {n: first.constants[n] for n in first.constants
                 if all(n in b.constants and b.constants[n] == first.constants[n] for b in batches)}
    defaults = first.kind._field_defaults
    columns = {n: list(chain.from_iterable(
                   b.columns[n] if n in b.columns else [b.constants[n] if n in b.constants else defaults.get(n)] * size
                   for b, size in zip(batches, sizes)))
               for n in names if n not in constants}
    maps = {}
    for m in dict.fromkeys(m for b in batches for m in b.maps):
        keys = list(dict.fromkeys(k for b in batches for k in b.maps.get(m, ())))  # first appearance
        maps[m] = {k: list(chain.from_iterable(b.maps[m][k] if k in b.maps.get(m, ()) else [None] * size
                                               for b, size in zip(batches, sizes))) for k in keys}
    order = sorted(range(total), key=lines.__getitem__)
    if order != list(range(total)):
        pick = itemgetter(*order)  # total >= 2 (two batches, none empty): pick() gives a tuple
        lines = list(pick(lines))
        columns = {n: list(pick(v)) for n, v in columns.items()}
        maps = {m: {k: list(pick(v)) for k, v in cols.items()} for m, cols in maps.items()}
    return Batch(first.kind, first.file, lines, columns, constants, maps, first.flush)


def shape(batch: "Batch") -> tuple:
    """What batches must share for :func:`concat` to join them: kind, file, fields,
    map keys, constants, and how each column is held (a list, or an array's type).
    Hashable when the constants are."""
    return (batch.kind, batch.file, tuple(batch.constants.items()),
            tuple((name, getattr(values, "typecode", None)) for name, values in batch.columns.items()),
            tuple((m, tuple((k, getattr(v, "typecode", None)) for k, v in cols.items()))
                  for m, cols in batch.maps.items()))


def concat(batches: list) -> "Batch":
    """One batch of batches of one :func:`shape` whose lines follow each other in
    the file: their columns joined end to end (arrays stay arrays).  The first's
    ``flush`` is kept."""
    first = batches[0]
    if len(batches) == 1:
        return first
    return first._replace(lines=_joined([b.lines for b in batches]),
                          columns={n: _joined([b.columns[n] for b in batches]) for n in first.columns},
                          maps={m: {k: _joined([b.maps[m][k] for b in batches]) for k in cols}
                                for m, cols in first.maps.items()})


def _joined(parts: list) -> Sequence:
    out = parts[0][:0]  # an empty list, or an empty array of the same type
    for part in parts:
        out.extend(part)
    return out


def expand(events: list) -> list:
    """Events with every :class:`Batch` replaced by its records.  Batches made
    together (consecutive, same file and ``flush``) interleave by line; everything
    else keeps its place, so records come in the order the lines gave them."""
    if not any(type(e) is Batch for e in events):
        return events
    out: list = []
    run: list = []
    tag = None
    for e in events:
        if type(e) is Batch and (e.file, e.flush) == tag:
            run.extend(e.records())
            continue
        if run:
            run.sort(key=_line_of)
            out.extend(run)
            run = []
        if type(e) is Batch:
            tag = (e.file, e.flush)
            run.extend(e.records())
        else:
            tag = None
            out.append(e)
    run.sort(key=_line_of)
    out.extend(run)
    return out


def _line_of(event: Any) -> int:
    return event.line


Event = Union["RunConfig", "Iteration", "Step", "Throughput", "Timers", "Memory", "Milestone", "Checkpoint",
              "Failure", "Exit", "Truncated"]

EVENT_TYPES: dict[str, type] = {
    cls.type: cls
    for cls in (RunConfig, Iteration, Step, Throughput, Timers, Memory, Milestone,
                Checkpoint, Failure, Exit, Truncated)
}
