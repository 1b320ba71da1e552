"""Refusing user regexes that can hang on one line.

Python's ``re`` backtracks and has no time limit.  The classic way to make it take
exponential time is an unbounded repeat inside another (``(\\w+\\s?)+``, ``(a*)*``):
a line that almost matches makes it try every split.  Formats are checked for that
when they are loaded, and refused with the reason; a bounded inner repeat
(``\\w{1,64}``) is fine.
"""
from __future__ import annotations

from typing import Any, Optional

try:  # the parser behind re.compile; public as sre_parse before 3.11
    from re import _parser as _sre  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover
    import sre_parse as _sre  # type: ignore[no-redef]

_REPEATS = {"MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"}
_UNBOUNDED = getattr(_sre, "MAXREPEAT", 4294967295)


def _children(op: Any, av: Any) -> list[Any]:
    """The sub-patterns of one parsed node."""
    name = str(op)
    if name in _REPEATS:
        return [av[2]]
    if name == "SUBPATTERN":
        return [av[-1]]
    if name == "BRANCH":
        return list(av[1])
    if name in ("ASSERT", "ASSERT_NOT"):
        return [av[1]]
    if name == "GROUPREF_EXISTS":
        return [x for x in av[1:] if x is not None]
    if name == "ATOMIC_GROUP":
        return [av]
    return []


def _has_unbounded(seq: Any) -> bool:
    for op, av in seq:
        if str(op) in ("MAX_REPEAT", "MIN_REPEAT") and av[1] == _UNBOUNDED:
            return True
        if any(_has_unbounded(child) for child in _children(op, av)):
            return True
    return False


def _walk(seq: Any) -> Optional[str]:
    for op, av in seq:
        name = str(op)
        if name in ("MAX_REPEAT", "MIN_REPEAT") and av[1] == _UNBOUNDED and _has_unbounded(av[2]):
            return "an unbounded repeat inside another"
        for child in _children(op, av):
            found = _walk(child)
            if found:
                return found
    return None


def unbounded_nesting(regex: str) -> Optional[str]:
    """Why ``regex`` can take exponential time, or None.  ``regex`` must compile."""
    try:
        return _walk(_sre.parse(regex))
    except Exception:  # re.compile accepted it; a parser quirk must not refuse it
        return None

