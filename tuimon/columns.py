"""Number columns read by fastnumbers, for the parsers' lanes (:mod:`parsers.lanes`).

Lanes read a block's numbers a column at a time, thousands a block.  CPython's
``float()`` goes through its own strtod, which some builds make slow: pyenv's
default build (shared libpython, no PGO) took 170-180 ns a value against 41 ns
for the distribution's, about 7 % of a summary.  fastnumbers (fast_float inside)
fills an array from the list in C, 40 ns a value on either build, and gives
exactly ``float()``'s and ``int()``'s values and errors for the texts lanes hand
it (tests compare them; underscores, which it refuses and ``float()`` takes,
never reach it).
"""
from __future__ import annotations

from array import array

from parsers.lanes import use_column_reader

try:  # a wheel on every common platform; without it lanes keep the stdlib reader
    from fastnumbers import try_array
except ImportError:  # pragma: no cover - exercised only where the wheel is missing
    try_array = None


def read_column(values: list[str], code: str) -> array:
    """:func:`parsers.lanes.read_column`, in C."""
    out = array(code, bytes(8 * len(values)))
    try_array(values, out)
    return out


def install() -> bool:
    """Have lanes read number columns with :func:`read_column`; False without fastnumbers."""
    if try_array is None:
        return False
    use_column_reader(read_column)
    return True
