"""A parser's state as plain values, compared by value (:meth:`FileParser.deciding`).

Two states that pickle alike need not pickle to the same bytes: a value held twice is stored once
in one and twice in the other (the pickle's memo follows identity, not value), and an object
restored from a pickle lists its attributes in another order than one made by its class.  Here
identity goes and attribute names are sorted; the order of a dict's, a list's or a set's items
stays as the state iterates them (code that walks them sees that order), so states that iterate
differently are not alike: comparing can only say "not alike" too often, never too seldom.
"""
from __future__ import annotations

import struct
from typing import Any

_ATOMS = (type(None), bool, int, str, bytes)


def plain(value: Any, _path: frozenset[int] = frozenset()) -> Any:
    """``value`` as nested tuples of atoms (floats by their bits: NaN is alike to the same NaN)."""
    kind = type(value)
    if kind in _ATOMS:
        return value
    if kind is float:
        return "f", struct.pack("<d", value)
    if id(value) in _path:  # a cycle: alike to nothing (a new object compares equal only to itself)
        return object()
    path = _path | {id(value)}
    if kind is list or kind is tuple:
        return kind.__name__, tuple(plain(v, path) for v in value)
    if kind is dict:
        return "d", tuple((plain(k, path), plain(v, path)) for k, v in value.items())
    if kind is set or kind is frozenset:
        return "s", tuple(plain(v, path) for v in value)
    if isinstance(value, type):
        return "t", value.__module__, value.__qualname__
    reduced = value.__reduce_ex__(4)
    if isinstance(reduced, str):  # a global, by name
        return "g", kind.__module__, reduced
    _, args, *rest = reduced
    state = rest[0] if rest else None
    if isinstance(state, dict):  # (an object's attributes: their order says nothing)
        state = dict(sorted(state.items()))
    elif isinstance(state, tuple) and len(state) == 2 and all(s is None or isinstance(s, dict) for s in state):
        state = tuple(None if s is None else dict(sorted(s.items())) for s in state)  # (attributes and slots)
    items = [list(it) if it is not None else None for it in rest[2:4]]
    return "o", kind.__module__, kind.__qualname__, plain(args, path), plain(state, path), plain(items, path)
