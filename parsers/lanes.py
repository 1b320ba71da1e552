"""Lanes: the fast path for lines that repeat one shape.

A training log is mostly the same few lines over and over (an iteration line, a
timer line, a memory line) with new numbers.  Parsing them one by one costs tens
of microseconds of Python each.  A *lane* is a parser's second handler for such
lines: it takes all of a block's lines for one route at once, reads them by
column with C-speed ``str`` operations (join, split; numbers a column at a time:
:func:`read_column`, or the application's faster reader) and returns
one :class:`~parsers.events.Batch` instead of a record per line.

The contract, checked by tests on every corpus file: a lane yields exactly the
records the line handler would, and hands back (via ``fallback``) every line it
is not sure of; those take the line-by-line path.  Lanes are an optimisation,
never a second opinion.
"""
from __future__ import annotations

import re
import struct
from array import array
from dataclasses import dataclass
from itertools import compress, repeat
from operator import eq, itemgetter, methodcaller
from typing import Callable, Optional, Sequence

from .base import LineContext
from .events import Event

#: process these lines (indices into the lane's input) one by one, return their events
Fallback = Callable[[Sequence[int]], list[Event]]

SKIP = "skip"  # a column no field comes from


@dataclass(slots=True)
class LaneInput:
    """The lines of one route in one block, with their context by column."""

    bodies: list[str]  # prefix-stripped lines
    lines: list[int]
    ranks: list[Optional[int]]
    nodes: list[Optional[str]]
    walls: list[Optional[float]]

    def __len__(self) -> int:
        return len(self.bodies)

    def context(self, i: int) -> LineContext:
        """The context of line ``i``, as the line path gets it (for events a lane makes itself)."""
        return LineContext("", self.lines[i], self.ranks[i], None, self.nodes[i], self.walls[i])

    def pick(self, idx: Sequence[int]) -> "LaneInput":
        """The rows ``idx`` (ascending, distinct: all of them is this input itself)."""
        if len(idx) == len(self.bodies):
            return self
        return LaneInput(*pick_rows(idx, self.bodies, self.lines, self.ranks, self.nodes, self.walls))


def pick_rows(rows: Sequence[int], *columns: list) -> list[list]:
    """The ``rows`` of each column (``itemgetter`` picks them at C speed)."""
    if len(rows) == 1:
        return [[column[rows[0]]] for column in columns]
    if not rows:
        return [[] for _ in columns]
    pick = itemgetter(*rows)
    return [list(pick(column)) for column in columns]


def matched(pattern: "re.Pattern[str]", bodies: list[str]) -> tuple[list[int], list["re.Match[str]"]]:
    """The rows of ``bodies`` the pattern is found in, and its matches there."""
    matches = list(map(pattern.search, bodies))
    if None not in matches:
        return list(range(len(matches))), matches
    rows = [i for i, m in enumerate(matches) if m is not None]
    return rows, [matches[i] for i in rows]


#: ``m.group(k)`` of a match, for ``map`` (index k)
GROUP = [methodcaller("group", k) for k in range(6)]


def group_by(keys: Sequence) -> dict:
    """Key -> indices having it, keys in order of first appearance."""
    distinct = dict.fromkeys(keys)
    if len(distinct) == 1:  # one shape throughout: the commonest block
        return {keys[0]: list(range(len(keys)))}
    if len(distinct) <= 4:  # the usual case: a pass per key, at C speed
        everyone = range(len(keys))
        return {k: list(compress(everyone, map(eq, keys, repeat(k)))) for k in distinct}
    groups: dict = {}
    for i, k in enumerate(keys):
        g = groups.get(k)
        if g is None:
            groups[k] = [i]
        else:
            g.append(i)
    return groups


_NO_DIGITS = str.maketrans("", "", "0123456789")


def by_names(texts: list[str], idx: list[int]) -> list[list[int]]:
    """``idx`` split by what the texts say around their numbers (each text without
    its digits): lines of several shapes that have as many ``|`` fall apart, one
    list a shape, in the order of their first lines."""
    groups = group_by([texts[i].translate(_NO_DIGITS) for i in idx])
    return [[idx[k] for k in rows] for rows in groups.values()]


def pipe_columns(texts: list[str]) -> Optional[list[list[str]]]:
    """``a | b | c`` texts, all with the same number of ``|``, as columns of segments."""
    width = texts[0].count("|") + 1
    segs = "|".join(texts).split("|")
    if len(segs) != width * len(texts):
        return None
    return [segs[j::width] for j in range(width)]


def one_shape_columns(texts: list[str]) -> Optional[list[list[str]]]:
    """:func:`pipe_columns` of texts that all hold the same number (one or more) of
    ``|``, else None."""
    shapes = list(map(str.count, texts, repeat("|")))
    if shapes[0] == 0 or shapes.count(shapes[0]) != len(texts):
        return None
    return pipe_columns(texts)


def lost_each(before: Sequence[str], after: Sequence[str], width: int) -> bool:
    """Whether each text of ``after`` is its ``before`` less ``width`` characters:
    a ``removeprefix``/``removesuffix`` that found its affix on every one (a text
    without it keeps its length; twice as fast as asking each ``startswith``)."""
    return sum(map(len, after)) == sum(map(len, before)) - len(before) * width


def column_values(column: list[str], sep: str) -> Optional[tuple[str, list[str]]]:
    """(key, values) when every segment is ``key<sep>value`` with the same key
    (the text before its first ``sep``), else None."""
    first = column[0]
    cut = first.find(sep)
    if cut < 0:
        return None
    n = len(column)
    if column.count(first) == n:  # the same text on every line: split it once
        return first[:cut], [first[cut + 1:]] * n
    head = first[:cut + 1]
    values = list(map(str.removeprefix, column, repeat(head)))
    return (first[:cut], values) if lost_each(column, values, len(head)) else None


def floats(values: list[str]) -> Optional["array[float]"]:
    """``float`` of every value, or None if one is not a plain number (the line
    path's lenient reading then decides, line by line).  Underscores are refused
    as the line path refuses them.  An array of doubles: a sequence of the same
    floats, that crosses between processes and into numpy as bytes."""
    first = values[0]
    if values.count(first) == len(values):  # a column that does not change: read it once
        if "_" in first:
            return None
        try:
            return array("d", (float(first),)) * len(values)
        except (ValueError, OverflowError):
            return None
    if "_" in "".join(values):
        return None
    try:
        return _read_column(values, "d")
    except (ValueError, OverflowError):
        return None


_ASCII_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
_NUMBER_WORDS = ("infinity", "inf", "nan")  # the longest first


def floats_with_unit(values: list[str]) -> Optional["array[float]"]:
    """:func:`floats` of values that all carry one unit glued on (GPT-NeoX's
    ``13.3TFLOPS``), read as the line path's lenient ``to_float`` reads them: the
    number before the unit.  None if they do not, or a number is not plain (the
    unit's letters end the number there: ``inf``, ``nan``, ``1e5`` stay whole)."""
    first = values[0].rstrip()
    unit = first[len(first.rstrip(_ASCII_LETTERS)):]
    for word in _NUMBER_WORDS:  # "infTFLOPS": the unit is what follows the number
        if unit[:len(word)].lower() == word:
            unit = unit[len(word):]
            break
    if not unit:
        return None
    stripped = list(map(str.rstrip, values))
    numbers = list(map(str.removesuffix, stripped, repeat(unit)))
    return floats(numbers) if lost_each(stripped, numbers, len(unit)) else None


def ints(values: list[str]) -> Optional["array[int]"]:
    """``int`` of every value when all are plain ASCII digit runs of at most 18
    digits (what the line path's ``to_int`` reads the same way), else None.
    An array of 64-bit ints (18 digits always fit), as :func:`floats` gives."""
    if len(values) > 1 and values.count(values[0]) == len(values):  # a column that does not change
        one = ints(values[:1])
        return None if one is None else one * len(values)
    digits = "".join(values).replace(" ", "")
    if not (digits.isascii() and digits.isdigit()):  # ASCII digits and spaces only, checked at C speed
        return None
    if max(map(len, values)) > 18 and any(len(v.strip()) > 18 for v in values):
        return None
    try:
        return _read_column(values, "q")  # int() itself refuses "" and "1 2"
    except (ValueError, OverflowError):
        return None


ColumnReader = Callable[[list, str], array]


def read_column(values: list[str], code: str) -> array:
    """The values of a column of texts, by ``float`` (typecode ``"d"``) or ``int``
    (``"q"``), as an array of that type; ValueError where one of them would raise it."""
    return packed(code, list(map(float if code == "d" else int, values)))


_read_column: ColumnReader = read_column


def use_column_reader(reader: Optional[ColumnReader]) -> None:
    """Read number columns with ``reader`` (None: :func:`read_column` again).  For
    the application, which may offer a faster one built on a library parsers do not
    import (they are stdlib only); it must give exactly :func:`read_column`'s
    arrays, and raise ValueError or OverflowError where it raises."""
    global _read_column
    _read_column = reader or read_column


def packed(code: str, values: list) -> array:
    """``array(code, values)`` of values all of that type, built from one
    ``struct.pack`` (several times faster)."""
    out = array(code)
    out.frombytes(struct.pack(f"{len(values)}{code}", *values))
    return out
