"""A data rule's step lines read by the compiled core into columns, not an event a line.

A declared format's step lines (llm.c's ``s:1 trl:10.9598 lr:0.000002 norm:15.24``,
modded-nanogpt's ``step:100/1390 train_time:14741ms step_avg:163.79ms``, a user's) were each
searched by Python's regex, made a dict of fields and an event, and walked alone: 9 us a line,
a twentieth of perl's speed on such a log.  Here the core searches a block's candidate lines
with the rule's own regex and reads its groups as the rule's types read them (``FieldLines``'s
``read_lines``); the lines become a :class:`~tuimon.engine.rows.DataPart`, walked with the
block's other lines the core read and closed into :class:`~tuimon.parsers.columns.IterationRows`,
each row the event the Python engine makes of its line (``tests/test_data_rows.py`` and
``tests/test_core.py`` hold them to it).

A line the core does not read as Python would (a value only ``to_float``/``to_int`` reads, text
that is not ASCII, another rule on the line, a second match on it, a line with no step) is read
by the Python engine as before, in its place.  Only a rule whose events the rows can stand for is read so
(:func:`data_reader`).
"""
from __future__ import annotations

import math
from typing import Any, Callable, Optional

import numpy as np

from tuimon.parsers.columns import KeyMaps, has_none
from tuimon.parsers.events import FrozenDict
from tuimon.parsers.numbers import to_float, to_int
from tuimon.parsers.schema import CONVERTERS, MAX_RUNNING, Format, LineFormat, Running, _per_step

from .rows import DataPart, Iterations
from .user_regex import CorePattern, compiled_in_core

#: the fields a rule's groups fill that stand for the line's own (its frame's): Python reads those
_OWN = frozenset(("rank", "node", "wall_time"))
#: the fields IterationRows keeps apart from its ``fields``
_COUNTERS = ("iteration", "train_iters")
#: what the core reads a group as: Python's converter -> the core's kind (FieldLines' declaration)
_READS: dict[Any, str] = {to_int: "ints", to_float: "floats", CONVERTERS["si"]: "si"}
READ = 3  # (FieldLines' verdict on a line it read; 1: Python reads it)


class DataReader:
    """How the core reads one data rule's lines: its ``FieldLines``, and where each value goes
    ((field, None) or (map field, key), as the rule's plan puts it)."""

    __slots__ = ("lines", "places", "constants", "entry", "whole", "single")

    def __init__(self, lines: Any, places: list[tuple[str, Optional[str]]], entry: LineFormat,
                 whole: frozenset[str] = frozenset()) -> None:
        self.lines, self.places, self.entry = lines, places, entry
        self.constants = dict(entry.set)
        self.whole = whole  # int fields read as numbers of another type: rounded, as the type's to_whole rounds
        # map fields one group fills (llm.c's losses: {"loss": ...}): a row's map is made without a dict first
        named = [name for name, key in places if key is not None]
        self.single = frozenset(name for name in named if named.count(name) == 1 and name not in entry.cumulative)

    def read(self, text: str, starts: list[int]) -> tuple[list[int], dict[str, list], list[int]]:
        """Of the lines at ``starts``: those the core read (their starts), their values (a
        column a field: ``iteration``, ``train_iters`` and the event's others, None where a line
        has none), and those Python's regex reads."""
        verdicts, values = self.lines.read_lines(text, starts)
        verdict = np.frombuffer(verdicts, dtype=np.uint8)
        read = np.flatnonzero(verdict == READ)
        slow = [starts[k] for k in np.flatnonzero(verdict == 1).tolist()]
        n = len(read)
        columns: dict[str, Any] = {name: [value] * n for name, value in self.constants.items()}
        maps: dict[str, list[dict]] = {}
        for (name, key), column in zip(self.places, values):
            if name in self.whole:
                column = [None if v is None or not math.isfinite(v) else int(round(v)) for v in column]
            if key is not None and name in self.single:  # the map's one key: its rows' maps, made where asked for
                columns[name] = KeyMaps(key, column)
            elif key is not None:  # (few lines of a map give more than one key: a dict a row, then frozen)
                rows = maps.get(name)
                if rows is None:
                    rows = maps[name] = [{} for _ in range(n)]
                for row, value in zip(rows, column):
                    if value is not None:
                        row[key] = value
            elif name in columns:  # a group over a constant: where it took part
                columns[name] = [c if v is None else v for v, c in zip(column, columns[name])]
            else:
                columns[name] = column
        for name, rows in maps.items():
            columns[name] = [FrozenDict(row) if row else None for row in rows]
        if self.entry.time_from and "elapsed_ms" not in columns:
            columns["elapsed_ms"] = [None] * n
        found = [starts[k] for k in read.tolist()]
        steps = columns["iteration"]
        if has_none(steps):  # a line without a step makes no row: Python's regex reads it
            missing = [k for k, step in enumerate(steps) if step is None]
            slow = sorted(slow + [found[k] for k in missing])
            keep = [k for k, step in enumerate(steps) if step is not None]
            found = [found[k] for k in keep]
            columns = {name: [column[k] for k in keep] for name, column in columns.items()}
        return found, columns, slow

    def part(self, text: str, starts: list[int], miss: Callable[[str, int, list], None], hits: list,
             running: Optional[Running], key: Any, announce: Optional[str]) -> Optional[DataPart]:
        """The lines at ``starts`` as a :class:`DataPart` (None where the core read none), those
        it leaves put into ``hits`` by ``miss``; ``running``: the engine's running totals, for a rule
        with ``cumulative`` or ``time_from`` fields (``key``: the rule's in them)."""
        found, columns, slow = self.read(text, starts)
        for start in slow:
            miss(text, start, hits)
        if not found:
            return None
        counters = columns.pop("iteration")
        totals = columns.pop("train_iters", None) or [None] * len(found)
        walked = None
        entry = self.entry
        if running is not None and (entry.cumulative or entry.time_from):
            walked = _running_walk(running, entry, key)
        return DataPart(found, counters, totals, columns, miss, walked, announce)


def _running_walk(running: Running, entry: LineFormat, key: Any) -> Callable[[Iterations, int, list, list], None]:
    """What takes the running totals of rows as they are walked (in line order with the rule's
    lines Python reads): ``Running.apply`` on each row's fields, as the Python engine applies it to
    a line's, the results written into the rows' columns (``its.fields``), from row ``first`` on."""
    names = entry.cumulative

    def walk(its: Iterations, first: int, ranks: list, stamps: list) -> None:
        counters, columns = its.counters, its.fields
        totals = [columns[name] for name in names]
        elapsed = columns["elapsed_ms"] if entry.time_from else None
        if len(ranks) >= AT_ONCE and _running_at_once(running, entry, key, counters, columns, first, ranks, stamps):
            return
        for j, rank, stamp in zip(range(first, first + len(ranks)), ranks, stamps):
            fields: dict[str, Any] = {"iteration": counters[j]}
            for name, column in zip(names, totals):
                if column[j] is not None:
                    fields[name] = column[j]
            if elapsed is not None and elapsed[j] is not None:
                fields["elapsed_ms"] = elapsed[j]
            running.apply(entry, key, rank, fields, stamp)
            for name, column in zip(names, totals):
                column[j] = fields.get(name)
            if elapsed is not None:
                elapsed[j] = fields.get("elapsed_ms")

    return walk


#: rows walked together from this many have their running totals taken a rank at a time in numpy
#: (a row at a time, Running.apply on a dict, was two fifths of reading modded-nanogpt's log)
AT_ONCE = 32


def _running_at_once(running: Running, entry: LineFormat, key: Any, counters: list, columns: dict[str, list],
                     first: int, ranks: list, stamps: list) -> bool:
    """What ``Running.apply`` makes of rows ``first``... one after another (``ranks``, their own
    ``stamps``), a rank's rows at once: each finite total's step value is its difference from the
    total before it (the rank's last, for the first) over the steps between, None where there is
    no total before, the total went down or the step did not go up; its base is then the total.
    False, and nothing done, where a column's totals are not all ints or all floats, or an int is
    too large for a float to hold a difference of two exactly (Python's int division rounds once)."""
    n = len(ranks)
    whole: dict[str, bool] = {}
    for name in entry.cumulative:
        totals = columns[name][first:first + n]
        kinds = set(map(type, totals))
        kinds.discard(type(None))
        if len(kinds) > 1 or (kinds == {int} and any(v is not None and abs(v) >= _EXACT for v in totals)):
            return False
        whole[name] = kinds == {int}
    steps = np.array(counters[first:first + n], dtype=np.int64)  # (a row has its step: data_rows.read)
    order: dict[Any, list[int]] = {}  # each rank's rows, the ranks as they first come (their room in Running)
    if ranks.count(ranks[0]) == n:
        order[ranks[0]] = list(range(n))
    else:
        for j, rank in enumerate(ranks):
            order.setdefault(rank, []).append(j)
    for rank, rows in order.items():
        last = running.last.get((key, rank))
        alone = len(rows) == n
        if last is None:
            if len(running.last) >= MAX_RUNNING:  # past the bound: no base kept, so no derived value (never a wrong one)
                for name in entry.cumulative:
                    for j in rows:
                        columns[name][first + j] = None  # (the total itself is no step's value)
                continue
            last = running.last[(key, rank)] = {}
        at = steps if alone else steps[rows]
        for name in entry.cumulative:
            column = columns[name]
            values = column[first:first + n] if alone else [column[first + j] for j in rows]
            derived = _per_steps(values, at, last, name, whole[name])
            if alone:
                column[first:first + n] = derived
            else:
                for j, value in zip(rows, derived):
                    column[first + j] = value
        if entry.time_from == "stamp":
            own = stamps if alone else [stamps[j] for j in rows]
            derived = _per_steps(own, at, last, "stamp", False)
            elapsed = columns["elapsed_ms"]
            for j, value in zip(rows, derived):
                if value is not None:
                    elapsed[first + j] = round(value * 1000.0, 3)
    return True


_EXACT = 1 << 52  # ints below it: their differences are floats exactly


def _per_steps(values: list, steps: np.ndarray, last: dict, name: str, whole: bool) -> list:
    """parsers.schema._per_step of each of ``values`` (totals, in order; None, NaN and the infinities
    are none) from the total before it (``last[name]``, the base, for the first), and that base moved
    to the last total: int totals' values rounded, as Running.apply rounds them; None where none."""
    if whole and not has_none(values):  # (the common case, in C: no generator a value)
        totals = np.array(values, dtype=np.int64)  # (ints below _EXACT: _running_at_once checked them)
        missing = np.zeros(len(values), dtype=bool)
    elif whole:
        missing = np.fromiter((v is None for v in values), dtype=bool, count=len(values))
        totals = np.fromiter((0 if v is None else v for v in values), dtype=np.int64, count=len(values))
    else:
        totals = np.array(values, dtype=np.float64)  # (None is NaN)
        missing = ~np.isfinite(totals)
    kept = np.flatnonzero(~missing)
    out: list = [None] * len(values)
    if not len(kept):
        return out
    t, at = totals[kept], steps[kept]
    before = last.get(name)
    k0 = int(kept[0])
    if before is not None:  # (the first from the base: its step may be None, the line's Python read)
        value = _per_step(values[k0], before, int(at[0]))
        out[k0] = None if value is None else round(value) if whole else value
    last[name] = (values[int(kept[-1])], int(at[-1]))
    if len(kept) > 1:
        change, gone = t[1:] - t[:-1], at[1:] - at[:-1]
        good = np.flatnonzero((t[1:] >= t[:-1]) & (gone > 0))
        per = change[good] / gone[good]  # (float64, correctly rounded as Python's int and float divisions are)
        derived = np.round(per).astype(np.int64).tolist() if whole else per.tolist()
        if len(derived) == len(values) - 1:  # every total after the first has its value (in C)
            out[1:] = derived
        else:
            for k, value in zip(kept[good + 1].tolist(), derived):
                out[k] = value
    return out


def data_reader(entry: LineFormat, fmt: Format, user: bool, core: Any) -> Optional[DataReader]:
    """The core's reader of ``entry``'s lines, where its rows stand for its events; else None:

    * an ``iteration`` entry without ``pairs`` (rows are IterationRows; pairs are Python's);
    * each group an int, a float or an ``si`` number as the core reads them (``to_int``,
      ``to_float``, the ``si`` type), none of them, nor a constant, the line's rank, node or
      stamp (its frame's), nor a running total of the step (the rows' counters);
    * its regex read by the core as ``re`` reads it (a line holding a second match, of which
      the Python engine makes a second event, is left to it);
    * a user's format only where none of its regexes can time out while a block is read (each
      line regex the core's, no pairs, no blocks): that turns the format off mid-block."""
    if core is None or entry.event != "iteration" or entry.pairs_pattern is not None:
        return None
    if _OWN & set(entry.set) or set(_COUNTERS) & set(entry.cumulative):
        return None
    if user and (fmt.blocks or any(not isinstance(e.pattern, CorePattern) or e.pairs_pattern is not None
                                   for e in fmt.lines)):
        return None
    regex, _ = compiled_in_core(entry.regex, core)
    if regex is None:
        return None
    number = dict(regex.group_index())
    groups: list[int] = []
    kinds: dict[str, list[int]] = {"ints": [], "floats": [], "si": []}
    places = []
    whole = set()
    for group, name, key, convert in entry.plan:
        rounded = getattr(convert, "whole_of", None)  # (an int field of a float type: read, then rounded)
        if rounded is not None:
            whole.add(name)
        kind = _READS.get(rounded or convert)
        if kind is None or name in _OWN or group not in number or (rounded is not None and kind == "ints"):
            return None
        groups.append(number[group])
        kinds[kind].append(number[group])
        places.append((name, key))
    if [convert for _, name, _, convert in entry.plan if name == "iteration"] != [to_int]:
        return None  # (a row's step: one int group)
    try:
        lines = core.FieldLines({"pattern": entry.regex, "line": True, "once": True, "groups": groups,
                                 "ints": kinds["ints"], "si": kinds["si"]})
    except ValueError:
        return None
    return DataReader(lines, places, entry, frozenset(whole))

