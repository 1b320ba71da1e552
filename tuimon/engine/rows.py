"""A block's plain lines of a few kinds read by the compiled core, apart from the lines
the hooks read: timer lines into columns (see :mod:`tuimon.parsers.columns`); Megatron's
iteration lines and memory reports, TorchTitan's metrics lines and Hugging Face Trainer's
metrics dicts, Megatron-DeepSpeed's and DeepSpeed's rate and step lines into typed values:
iteration lines into :class:`IterationRows`, the others into rows at their place
(:class:`StepRows`, :class:`RateRows`, :class:`MemoryRows`) by their parser's own code
without the reading (``metrics_into``, ``dict_into``, ``step_into``, ``memory_into``, ...),
which gives a line's events instead where it says something once.
Which lines the core reads, what it read, and the rows they make, closed into the block's
events where the events' order needs it (:class:`tuimon.engine.blocks.BlockEngine` walks
them in line order with its other hit lines, and puts each read line's events in its place)."""
from __future__ import annotations

from functools import lru_cache
from itertools import chain, repeat
from typing import Any, Callable, Optional, Sequence

import numpy as np

from tuimon.parsers import deepspeed, megatron, prefix, timers, timestamps, torchtitan
from tuimon.parsers.columns import IterationRows, MemoryRows, RateRows, StepRows, TimerRows
from tuimon.parsers.events import FrozenDict
from tuimon.parsers.numbers import to_float, to_int

from . import native

#: LineParser.COLUMNS' kinds -> the kind numbers of tuimon._core.TimerLines, Megatron's iteration
#: lines, TorchTitan's metrics lines, Hugging Face Trainer's metrics dicts and Megatron's memory reports
COLUMN_KINDS = {"time-list": 0, "minmax": 1, "iteration": 2, "metrics": 3, "hf-dict": 4, "memory": 5,
                "effective": 6, "numworkers": 7, "ds-step": 8, "ds-samples": 9, "ds-pipe": 10}
ITERATION_LINES, METRICS_LINES, HF_DICTS, MEMORY_LINES, EFFECTIVE_LINES, NUMWORKERS_LINES = 2, 3, 4, 5, 6, 7
DS_STEP_LINES, DS_SAMPLES_LINES, DS_PIPE_LINES = 8, 9, 10
#: a data rule's lines (a declared format's step lines: :class:`DataPart`), read before the hooks' kinds
DATA_LINES = 11
#: the core's verdict on a line: nothing to read, left to its hook, a timer row, values for its
#: parser, an iteration row
NOTHING, HOOK, ROW, EVENT, ITERATION = 0, 1, 2, 3, 4
#: a frame's rank, where it has none (see tuimon._core.Framing.frame_columns)
NO_RANK = np.iinfo(np.int64).min


# The core's readers, each built once a process from its parser's declaration (the core holds no
# format's literal, key or pattern of its own: tests/test_declarations.py greps core/src for them)
@lru_cache(maxsize=4)
def framing(core: Any) -> Any:
    """The core's launcher prefix and leading stamp readers (one a process and core)."""
    return core.Framing(prefix.CORE, timestamps.CORE)


@lru_cache(maxsize=4)
def _timer_lines(core: Any) -> Any:
    return core.TimerLines(timers.CORE)


@lru_cache(maxsize=4)
def _records(core: Any) -> Any:
    # (losses into a FrozenDict, called as a type: ``frozen_map`` of a mapping that is not empty, without its call)
    return core.Records(megatron.spec_of, to_float, to_int, FrozenDict, megatron.CORE_RECORD)


@lru_cache(maxsize=4)
def _memory_lines(core: Any) -> Any:
    return core.MemoryLines(megatron.CORE_MEMORY)


#: the kinds the core reads by a declared regex of float groups (FieldLines), and their declarations
_FIELDS = {EFFECTIVE_LINES: megatron.CORE_EFFECTIVE, NUMWORKERS_LINES: megatron.CORE_NUMWORKERS,
           DS_STEP_LINES: deepspeed.CORE_STEP, DS_SAMPLES_LINES: deepspeed.CORE_SAMPLES,
           DS_PIPE_LINES: deepspeed.CORE_PIPE}


@lru_cache(maxsize=8)
def _field_lines(core: Any, kind: int) -> Any:
    return core.FieldLines(_FIELDS[kind])


@lru_cache(maxsize=4)
def _metric_lines(core: Any) -> Any:
    return core.MetricLines(torchtitan.metric_values, torchtitan.CORE_METRICS)


def split_rows(file: str, text: str, first_line: int, hits: list, columns: list,
               parsers: Sequence[Any]) -> Optional["BlockRows"]:
    """The lines of ``columns`` ((rule, order, its lines' starts) of each hook rule the core
    has a reader for, and of a :class:`DataPart`) that the core reads; every other of their
    lines goes into ``hits`` as a hook's, or a data rule's match (the core leaves it, it is not
    ASCII, or another rule is on it too)."""
    # each line's start and part, merged in numpy (a sort of (start, part) tuples, and sets of the starts to
    # find the lines two readers are on, were 0.05 s of 50 MB of dense)
    counts = [len(part[2]) for part in columns]
    merged = np.fromiter(chain.from_iterable(part[2] for part in columns), dtype=np.int64, count=sum(counts))
    owned = np.repeat(np.arange(len(columns)), counts)
    if len(columns) > 1:
        order = np.argsort(merged, kind="stable")
        merged, owned = merged[order], owned[order]
    # a line another rule is on, or two readers are (each goes to both hooks), is a hook's
    taken = _among(merged, [hit[0] for hit in hits]) if hits else np.zeros(len(merged), dtype=bool)
    if len(columns) > 1:
        twice = merged[1:] == merged[:-1]
        taken[1:] |= twice
        taken[:-1] |= twice
    if taken.any():
        for k in np.flatnonzero(taken).tolist():  # (few)
            _to_hits(text, columns[owned[k]], int(merged[k]), hits)
        merged, owned = merged[~taken], owned[~taken]
    if not len(merged):
        return None
    parts, starts, owners = columns, merged.tolist(), owned
    core = native.core
    assert core is not None  # (a rule has a column reader only with the core)
    frames = Frames(framing(core).frame_columns(text, starts, first_line))
    column_of = np.array([part[0].column for part in parts], dtype=np.int64)
    kinds = column_of[owners]  # each line's kind
    if frames.ascii:  # every line ASCII (the common case)
        kept = None
        bodies, ends = frames.body, frames.end
    else:
        read_here = frames.body >= 0
        for k in np.flatnonzero(~read_here).tolist():  # not ASCII: the hook reads it (few)
            _to_hits(text, parts[owners[k]], starts[k], hits)
        kept = np.flatnonzero(read_here)
        if not len(kept):
            return None
        bodies, ends, kinds = frames.body[kept], frames.end[kept], kinds[kept]
    data_at = None if DATA_LINES not in column_of else np.asarray(starts) if kept is None else np.asarray(starts)[kept]
    verdicts, read, events, iterations = _read(core, text, bodies, ends, kinds, parts, parsers, data_at)
    verdicts = _column(verdicts, np.uint8)
    hook = verdicts == HOOK
    if kept is None and not hook.any():
        return BlockRows(file, starts, frames, verdicts, read, events, iterations)
    for j in np.flatnonzero(hook).tolist():  # (few)
        k = j if kept is None else int(kept[j])
        _to_hits(text, parts[owners[k]], starts[k], hits)
    keep = np.flatnonzero(~hook)
    if not len(keep):
        return None
    at = keep if kept is None else kept[keep]
    return BlockRows(file, np.asarray(starts)[at].tolist(), frames.take(at), verdicts[keep], read, events, iterations)


def _to_hits(text: str, part: tuple, start: int, hits: list) -> None:
    """A line of ``part`` (a reader's (rule, order, starts)) the core does not read, into ``hits``:
    its hook's, or its data rule's matches on it."""
    rule, order, _ = part
    if rule.column == DATA_LINES:
        rule.miss(text, start, hits)
    else:
        hits.append((start, order, rule, None))


def _read(core: Any, text: str, bodies: np.ndarray, ends: np.ndarray, kinds: np.ndarray, parts: list,
          parsers: Sequence[Any], data_at: Optional[np.ndarray] = None
          ) -> tuple[Any, Any, "EventLines", Optional["Iterations"]]:
    """The verdict on each line (its body and end offsets, its kind; in line order), the timer
    columns, each EVENT line's (maker, values, the kind of its rows at their place): its
    parser's method that makes its events, and the values of the ITERATION lines (``data_at``: each
    line's start, where a data rule's lines are among them: read already, their values those lines')."""
    readers = _READER_OF[kinds]  # each line's reader
    present = np.flatnonzero(np.bincount(readers, minlength=len(_READER_OF))).tolist()
    if present == [0]:  # timer lines alone, the common case
        spans = list(zip(bodies.tolist(), ends.tolist(), kinds.tolist()))
        verdicts, *read = _timer_lines(core).read(text, spans, _owner(parts, 0, parsers).offload_said())
        return verdicts, read, NO_EVENT_LINES, None
    read = [[], [], [], [], [], []]  # (no timer lines)
    # each reader's lines: where they are among the lines (found and taken in numpy: a pass over the
    # lines a reader in Python was a twentieth of 50 MB of a shape of four kinds)
    body_at, end_at = bodies, ends
    placed: list[tuple[Any, Any]] = []  # each reader's (positions, verdicts)
    events_at: list[tuple[Any, list]] = []  # each kind's (positions, entries) of its EVENT lines
    kinds_at: list[int] = []  # and the kind
    rows_of: dict[int, tuple[Any, Any]] = {}  # the kinds whose lines make a row alone: their parser's maker of many
    iterations = None
    for kind in present:
        at = np.flatnonzero(readers == kind)
        if kind == 0:
            spans = list(zip(body_at[at].tolist(), end_at[at].tolist(), kinds[at].tolist()))
            verdicts, *read = _timer_lines(core).read(text, spans, _owner(parts, 0, parsers).offload_said())
            placed.append((at, verdicts))
            continue
        if kind == DATA_LINES:  # (read before the block's hooks were found: the part holds their values)
            assert data_at is not None
            part = next(part for part, _, _ in parts if part.column == DATA_LINES)
            iterations = part.iterations(data_at[at])
            placed.append((at, np.full(len(at), ITERATION, dtype=np.uint8)))
            continue
        reader, maker_name = _READERS[kind]
        owner = _owner(parts, kind, parsers)
        verdicts, values = reader(core, text, list(zip(body_at[at].tolist(), end_at[at].tolist())), owner)
        placed.append((at, verdicts))
        if kind == ITERATION_LINES:
            iterations = Iterations(values, getattr(owner, maker_name))
        elif values:  # (the maker takes the block's rows of its kind first: it makes a row of the line, or its events)
            maker, into = getattr(owner, maker_name), _INTO[kind]
            made = _column(verdicts, np.uint8) == EVENT
            events_at.append((at[made], list(zip(repeat(maker), values, repeat(into)))))
            kinds_at.append(kind)
            if kind in _ROWS_OF:
                rows_of[kind] = (getattr(owner, _ROWS_OF[kind]), into)
    if len(placed) == 1:
        verdicts = placed[0][1]
    else:  # each reader's verdicts into their lines' places
        merged = np.empty(len(readers), dtype=np.uint8)
        for at, verdicts in placed:
            merged[at] = _column(verdicts, np.uint8)
        verdicts = merged
    if len(events_at) <= 1:
        events = events_at[0][1] if events_at else []
        event_kinds = np.full(len(events), kinds_at[0] if kinds_at else 0, dtype=np.int64)
    else:  # the EVENT lines of several kinds, in line order
        where = np.concatenate([at for at, _ in events_at])
        entries = list(chain.from_iterable(entries for _, entries in events_at))
        order = np.argsort(where, kind="stable")
        events = list(map(entries.__getitem__, order.tolist()))
        event_kinds = np.repeat(kinds_at, [len(e) for _, e in events_at])[order]
    return verdicts, read, EventLines(events, event_kinds, rows_of), iterations


def _among(values: np.ndarray, others: list[int]) -> np.ndarray:
    """``np.isin(values, others)``, by a sorted search: isin's sorting path imports ``numpy.ma``
    (8 ms of every start)."""
    known = np.sort(np.asarray(others, dtype=values.dtype))
    at = np.minimum(np.searchsorted(known, values), len(known) - 1)
    return known[at] == values


def _column(values: Any, dtype: Any) -> np.ndarray:
    """A column the core handed over as the bytes of an array (or a list: a reader's verdicts, or
    no timer line's columns)."""
    return np.frombuffer(values, dtype=dtype) if isinstance(values, bytes) else np.asarray(values, dtype=dtype)


def _iterations(core: Any, text: str, lines: list, owner: Any) -> tuple[list[int], Any]:
    found, counters, totals, fields = _records(core).columns(text, lines)
    if counters and not owner.reported("_announced"):
        found[found.index(True)] = False  # (the hook names the run's framework, in the line's words, with its first)
        counters, totals = counters[1:], totals[1:]
        fields = {name: column[1:] for name, column in fields.items()}
    return [ITERATION if f else HOOK for f in found], (counters, totals, fields)


def _metrics(core: Any, text: str, lines: list, owner: Any) -> tuple[list[int], list]:
    return _metric_lines(core).rows(text, lines)


def _dicts(core: Any, text: str, lines: list, owner: Any) -> tuple[list[int], list]:
    return core.hf_dicts(text, lines)


def _memories(core: Any, text: str, lines: list, owner: Any) -> tuple[list[int], list]:
    return _memory_lines(core).read(text, lines)


def _fields_of(kind: int) -> Callable[[Any, str, list, Any], tuple[list[int], list]]:
    """The reader of a kind of :data:`_FIELDS`."""
    def read(core: Any, text: str, lines: list, owner: Any) -> tuple[list[int], list]:
        return _field_lines(core, kind).read(text, lines)
    return read


#: a kind of read line -> (its reader: verdicts and each read line's values; its parser's maker of
#: events, or for iteration rows the method told the last counter its walk read)
_READERS = {ITERATION_LINES: (_iterations, "iterations_read"), METRICS_LINES: (_metrics, "metrics_into"),
            HF_DICTS: (_dicts, "dict_into"), MEMORY_LINES: (_memories, "memory_into"),
            EFFECTIVE_LINES: (_fields_of(EFFECTIVE_LINES), "effective_into"),
            NUMWORKERS_LINES: (_fields_of(NUMWORKERS_LINES), "numworkers_into"),
            DS_STEP_LINES: (_fields_of(DS_STEP_LINES), "step_into"),
            DS_SAMPLES_LINES: (_fields_of(DS_SAMPLES_LINES), "samples_into"),
            DS_PIPE_LINES: (_fields_of(DS_PIPE_LINES), "pipe_into")}
#: the kinds whose lines make rows at once, and their parser's maker of many lines' rows (see
#: BlockEngine._events): None, and nothing read, where a line of them could make events (a maker's
#: once-only events not said yet), else a row a line
_ROWS_OF = {EFFECTIVE_LINES: "effective_rows", NUMWORKERS_LINES: "numworkers_rows", METRICS_LINES: "metrics_rows",
            HF_DICTS: "dict_rows", DS_STEP_LINES: "step_rows", DS_SAMPLES_LINES: "samples_rows",
            DS_PIPE_LINES: "pipe_rows"}
#: a kind of read line -> its reader's (the timer kinds share one: 0)
_READER_OF = np.array([0, 0, *range(2, 12)], dtype=np.int64)
#: the kinds whose lines' makers put a line into the block's rows of a kind made at their place (where
#: its events are a row's: the maker returns None), and that kind
_INTO = {METRICS_LINES: StepRows, HF_DICTS: StepRows, MEMORY_LINES: MemoryRows, EFFECTIVE_LINES: RateRows,
         NUMWORKERS_LINES: RateRows,
         DS_STEP_LINES: StepRows, DS_SAMPLES_LINES: RateRows, DS_PIPE_LINES: StepRows}


def _owner(parts: list, kind: int, parsers: Sequence[Any]) -> Any:
    """The parser (of ``parsers``, the engine's active ones) whose route reads the lines of
    ``kind`` (0: either timer kind)."""
    return next(parsers[rule.key[0]] for rule, _, _ in parts if (rule.column <= 1 if kind == 0 else rule.column == kind))



class EventLines:
    """A block's EVENT lines (in line order): each one's (maker, values, the PlacedRows kind it may add
    the line to), its kind, and for the kinds whose lines each make a row alone, their parser's maker of
    many lines' rows and that PlacedRows kind."""

    __slots__ = ("entries", "kinds", "rows_of")

    def __init__(self, entries: list, kinds: np.ndarray, rows_of: dict[int, tuple[Any, Any]]) -> None:
        self.entries, self.kinds, self.rows_of = entries, kinds, rows_of


NO_EVENT_LINES = EventLines([], np.zeros(0, dtype=np.int64), {})


def _told_nobody(last: int) -> None:
    """A data rule's rows: no parser reads their counters."""


class DataPart:
    """One data rule's lines of a block read by the core before the block's hooks were found
    (:mod:`tuimon.engine.data_rows`), taken by :func:`split_rows` as a reader's lines: their starts
    (ascending) and the values of each (``fields``: a column a field), the rows' running totals and
    announcement (see :class:`Iterations`), and ``miss(text, start, hits)``, which puts a line the
    core does not read among the block's hits as the data rule's matches on it."""

    column = DATA_LINES
    __slots__ = ("starts", "counters", "totals", "fields", "miss", "walked", "announce")

    def __init__(self, starts: list[int], counters: list, totals: list, fields: dict[str, list],
                 miss: Callable[[str, int, list], None], walked: Optional[Callable] = None,
                 announce: Optional[str] = None) -> None:
        self.starts, self.counters, self.totals, self.fields = starts, counters, totals, fields
        self.miss, self.walked, self.announce = miss, walked, announce

    def spill(self, text: str, hits: list) -> None:
        """Every line of the part into ``hits`` (the block has rows the part's cannot stand beside)."""
        for start in self.starts:
            self.miss(text, start, hits)

    def iterations(self, kept: np.ndarray) -> Iterations:
        """The rows of the lines starting at ``kept`` (of the part's, ascending: others went to the hits)."""
        counters, totals, fields = self.counters, self.totals, self.fields
        if len(kept) != len(self.starts):
            at = np.searchsorted(np.asarray(self.starts), kept).tolist()
            counters, totals = [counters[k] for k in at], [totals[k] for k in at]
            fields = {name: [column[k] for k in at] for name, column in fields.items()}
        return Iterations((counters, totals, fields), _told_nobody, self.walked, self.announce)


class Iterations:
    """A block's iteration lines the core read: their counters, totals and fields (a column a
    field, :meth:`tuimon._core.Records.columns`), and the rows walked so far (line, rank, node,
    stamp), closed into :class:`IterationRows`.  A data rule's (:class:`DataPart`) tell no parser
    their counters (``tells``), may have running totals to take as they are walked (``walked``) and
    its format's name to say before the first (``announce``)."""

    __slots__ = ("counters", "totals", "fields", "told", "closed", "line", "rank", "node", "wall", "tells", "walked",
                 "announce")

    def __init__(self, values: tuple[list, list, dict], told: Any, walked: Optional[Callable] = None,
                 announce: Optional[str] = None) -> None:
        self.counters, self.totals, self.fields = values
        self.told = told  # the parser's method told the last counter walked (its later lines read it)
        self.tells = told is not _told_nobody
        # (these rows, the first, their ranks and own stamps) of rows just walked: a data rule's running totals
        self.walked = walked
        self.announce = announce
        self.closed = 0  # rows closed already
        self.line: list[int] = []
        self.rank: list[Optional[int]] = []
        self.node: list[Optional[str]] = []
        self.wall: list[Optional[float]] = []

    def close(self, file: str, events: list) -> None:
        a, b = self.closed, len(self.line)
        if a == b:
            return
        events.append(IterationRows(file, self.line[a:b], self.rank[a:b], self.node[a:b], self.wall[a:b],
                                    self.counters[a:b], self.totals[a:b],
                                    {name: column[a:b] for name, column in self.fields.items()}))
        self.closed = b


class Frames:
    """The frames of a block's lines the core read, as columns (``Framing.frame_columns``: where a
    frame has None, -1 for ``body``, :data:`NO_RANK` for ``rank`` and ``local``, NaN for ``wall``).
    :meth:`BlockEngine._events <tuimon.engine.blocks.BlockEngine._events>` walks a long run of them
    in bulk, and a few between two hook lines one at a time, as tuples (:meth:`tuples`)."""

    __slots__ = ("number", "end", "body", "rank", "local", "node", "wall", "_tuples", "_nodes")

    def __init__(self, columns: tuple) -> None:
        number, end, body, rank, local, node, wall = columns
        self.number, self.end, self.body = (np.frombuffer(c, dtype=np.int64) for c in (number, end, body))
        self.rank, self.local = np.frombuffer(rank, dtype=np.int64), np.frombuffer(local, dtype=np.int64)
        self.node: list[Optional[str]] = node
        self.wall = np.frombuffer(wall, dtype=np.float64)
        self._tuples: Optional[list[tuple]] = None
        self._nodes: Optional[bool] = None

    @property
    def ascii(self) -> bool:
        """Whether the core read every line (each ASCII)."""
        return not len(self.body) or int(self.body.min()) >= 0

    def take(self, at: np.ndarray) -> "Frames":
        """The frames at ``at`` (positions, ascending)."""
        out = Frames.__new__(Frames)
        out.number, out.end, out.body = self.number[at], self.end[at], self.body[at]
        out.rank, out.local, out.wall = self.rank[at], self.local[at], self.wall[at]
        out.node = self.nodes_at(at)
        out._tuples, out._nodes = None, self._nodes
        return out

    def ranks_at(self, at: np.ndarray) -> list[Optional[int]]:
        """The ranks of the frames at ``at`` (None where a line's prefix names none)."""
        rank = self.rank[at]
        return with_none(rank, rank == NO_RANK)

    def nodes_at(self, at: np.ndarray) -> list[Optional[str]]:
        """The nodes of the frames at ``at``."""
        if self._nodes is None:
            self._nodes = self.node.count(None) != len(self.node)  # (most logs name no node)
        return [self.node[k] for k in at.tolist()] if self._nodes else [None] * len(at)

    def tuples(self) -> list[tuple]:
        """Each frame as ``Framing.frame`` gives it (made once, when a line is walked alone)."""
        if self._tuples is None:
            self._tuples = self.tuples_at(None)
        return self._tuples

    def tuples_at(self, at: Optional[np.ndarray]) -> list[tuple]:
        """The frames at ``at`` (every frame, for None), each as ``Framing.frame`` gives it."""
        def of(column: np.ndarray) -> np.ndarray:
            return column if at is None else column[at]

        body, rank, local, wall = of(self.body), of(self.rank), of(self.local), of(self.wall)
        node = self.node if at is None else self.nodes_at(at)
        return list(zip(of(self.number).tolist(), of(self.end).tolist(), with_none(body, body < 0),
                        with_none(rank, rank == NO_RANK), with_none(local, local == NO_RANK), node,
                        stamps_of(wall)))


def stamps_of(stamps: np.ndarray) -> list[Optional[float]]:
    """Stamps as a list, None where NaN (none)."""
    return with_none(stamps, np.isnan(stamps))


def with_none(values: np.ndarray, missing: np.ndarray) -> list:
    """``values`` as a list, None where ``missing``."""
    holes = np.flatnonzero(missing)
    if not len(holes):
        return values.tolist()
    if len(holes) == len(values):
        return [None] * len(values)
    out = values.astype(object)
    out[holes] = None
    return out.tolist()


class BlockRows:
    """A block's lines the core read (their starts, frames and verdicts, in line order)
    and their rows (the core's ranks, counts and pairs; the line, rank, node and stamp of
    each as :meth:`BlockEngine._events` walks them with its hook lines), closed into one
    :class:`TimerRows` (after an :class:`IterationRows` of its iteration lines) where the
    events' order needs it."""

    __slots__ = ("file", "starts", "frames", "verdicts", "names", "name_index", "ms", "counts", "comm", "ranks",
                 "at", "closed", "pairs_at", "line", "rank", "node", "wall", "events", "events_at", "iterations",
                 "placed", "_verdict_list", "event_kinds", "rows_of")

    def __init__(self, file: str, starts: list[int], frames: Frames, verdicts: np.ndarray, read: Any,
                 events: EventLines = NO_EVENT_LINES, iterations: Optional[Iterations] = None) -> None:
        self.file = file
        self.starts, self.frames, self.verdicts = starts, frames, verdicts
        self._verdict_list: Optional[list[int]] = None
        self.ranks, counts, self.comm, self.names, name_index, ms = read
        # (the core's uint32 and float64 columns, as bytes: none where the block has no timer line)
        self.counts, self.name_index = _column(counts, np.uint32), _column(name_index, np.uint32)
        self.ms = _column(ms, np.float64)
        # each EVENT line's (maker, values, the PlacedRows kind it may add the line to), and its kind
        self.events, self.event_kinds, self.rows_of = events.entries, events.kinds, events.rows_of
        # the rows made at their place walked since the last event put in the block's, by kind (a PlacedRows:
        # their lines may interleave, as DeepSpeed's step and samples lines do)
        self.placed: dict[Any, list[tuple]] = {}
        self.events_at = 0
        self.iterations = iterations
        self.at = 0  # the next line to walk
        self.closed = 0  # rows closed already
        self.pairs_at = 0  # and their pairs
        # each row walked so far: its line, rank, node and stamp
        self.line: list[int] = []
        self.rank: list[Optional[int]] = []
        self.node: list[Optional[str]] = []
        self.wall: list[Optional[float]] = []

    @property
    def verdict_list(self) -> list[int]:
        """The verdicts as a list (made once, when a line is walked alone)."""
        if self._verdict_list is None:
            self._verdict_list = self.verdicts.tolist()
        return self._verdict_list

    def before(self, out: list, number: int, events: list) -> None:
        """``out``, a line's events, go after ``events``: the rows so far go first when one
        of them is of an earlier line (a held-back event: rows and events stay in line order)."""
        its = self.iterations
        if len(self.line) > self.closed or (its is not None and len(its.line) > its.closed):
            for e in out:
                if e.line != number:
                    self.close(events)
                    return

    def close_placed(self, events: list) -> None:
        """The rows made at their place walked since the last event, into ``events`` there (one
        PlacedRows a kind: their lines may interleave, see :func:`tuimon.parsers.columns.expand`)."""
        if self.placed:
            events.extend(kind(self.file, rows) for kind, rows in self.placed.items() if rows)
            self.placed = {}

    def placed_of(self, kind: Any) -> list[tuple]:
        """Where a line's row of ``kind`` goes."""
        rows = self.placed.get(kind)
        if rows is None:
            rows = self.placed[kind] = []
        return rows

    def close(self, events: list) -> None:
        """The rows walked since the last close, as one :class:`IterationRows` and one
        :class:`TimerRows` after ``events`` (the step rows walked before them first)."""
        self.close_placed(events)
        if self.iterations is not None:
            self.iterations.close(self.file, events)
        a, b = self.closed, len(self.line)
        if a == b:
            return
        counts = self.counts[a:b]
        lo = self.pairs_at
        hi = lo + int(counts.sum())
        events.append(TimerRows(self.file, self.line[a:b], self.rank[a:b], self.node[a:b], self.wall[a:b], counts,
                                self.comm[a:b], self.names, self.name_index[lo:hi], self.ms[lo:hi]))
        self.closed, self.pairs_at = b, hi
