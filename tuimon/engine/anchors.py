"""Literal anchors of a regex: plain text every match must contain.

The engine skips a rule for a block that holds none of its anchors (one
``str.find`` each, at C speed), so a format that never shows up in a log costs
next to nothing.  A regex whose anchors cannot be read off runs on every block.
"""
from __future__ import annotations

from typing import Optional

from ..parsers.patterns import lazy

_META = set(".^$*+?{}[]|()")
_QUANTIFIERS = set("*+?{")


def literal_of(pattern: str) -> Optional[str]:
    """The plain text a regex matches when it has no metacharacters, else None."""
    out = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            if i + 1 >= len(pattern) or pattern[i + 1].isalnum():
                return None  # \d, \w, \n ...: a class or an escape, not plain text
            out.append(pattern[i + 1])
            i += 2
            continue
        if ch in _META:
            return None
        out.append(ch)
        i += 1
    return "".join(out)


def required_literal(pattern: str, min_len: int = 3) -> Optional[str]:
    """The longest plain text every match of ``pattern`` contains (at least
    ``min_len`` characters), or None when no such text can be read off the
    pattern (alternation at top level, inline flags, too short)."""
    runs = _literal_runs(pattern)
    if not runs:
        return None
    best = max(runs, key=len)
    return best if len(best) >= min_len else None


def required_anchors(pattern: str, min_len: int = 3) -> Optional[list[str]]:
    """Texts of which every match of ``pattern`` contains one: the
    :func:`required_literal`, extended by the small character class right after it
    (``iteration[ =]+`` -> ``iteration `` and ``iteration=``), which makes it rarer."""
    best = required_literal(pattern, min_len)
    if best is None:
        return _alternatives(pattern, min_len)
    ends = _run_ends(pattern, best)
    if len(ends) == 1:  # spelled once in the pattern: what follows it is what follows in a match
        m = _CLASS_AFTER.match(pattern, ends[0])
        if m and m.group(2) in ("", "+"):
            return [best + ch for ch in m.group(1)]
    return [best]


_LEADING_CHOICE = lazy(r"((?:[^\\.^$*+?{}\[\]|()]|\\[^A-Za-z0-9])*)\(\?:([^()\\]*)\)")


def _alternatives(pattern: str, min_len: int) -> Optional[list[str]]:
    """``--(?:num-layers|hidden-size)...`` -> ``--num-layers``, ``--hidden-size``: a
    pattern that starts with plain text and a group of plain choices needs one of them."""
    m = _LEADING_CHOICE.match(pattern)
    if not m or pattern[m.end():m.end() + 1] in _QUANTIFIERS or _literal_runs(pattern) is None:
        return None
    head = literal_of(m.group(1)) if m.group(1) else ""
    choices = [literal_of(c) for c in m.group(2).split("|")]
    if head is None or any(c is None or len(head + c) < min_len for c in choices):
        return None
    return [head + c for c in choices]  # type: ignore[operator]


_CLASS_AFTER = lazy(r"\[([^\]\\^-]{1,4})\]([+*?{]?)")


def _run_ends(pattern: str, run: str) -> list[int]:
    """Pattern offsets right after each top-level spelling of ``run``."""
    out = []
    first = run[0]
    for at in range(len(pattern)):
        # a spelling starts with the run's first character, plain or escaped (145 patterns
        # read whole at every offset were 6 ms of every start)
        if pattern[at] != first and not (pattern[at] == "\\" and pattern[at + 1:at + 2] == first):
            continue
        spelled = _prefix_for(pattern[at:], run)
        if literal_of(spelled) == run:
            out.append(at + len(spelled))
    return out


def leading_literal(pattern: str) -> str:
    """The plain text every match of ``pattern`` starts with ("" if none)."""
    if pattern[:1] in _META:
        return ""
    runs = _literal_runs(pattern)
    if not runs:
        return ""
    head = runs[0]
    return head if _literal_runs(_prefix_for(pattern, head)) == [head] else ""


def _prefix_for(pattern: str, text: str) -> str:
    """The leading part of ``pattern`` that spells ``text`` (escapes included)."""
    i = k = 0
    while k < len(text) and i < len(pattern):
        i += 2 if pattern[i] == "\\" else 1
        k += 1
    return pattern[:i]


def _literal_runs(pattern: str) -> Optional[list[str]]:
    """Top-level runs of literal characters; None when the pattern has a top-level
    ``|`` or starts with inline flags."""
    if pattern.startswith("(?") and len(pattern) > 2 and pattern[2] not in ":=!<P":
        return None
    runs: list[str] = []
    cur: list[str] = []
    i, n = 0, len(pattern)

    def close() -> None:
        if cur:
            runs.append("".join(cur))
            cur.clear()

    while i < n:
        ch = pattern[i]
        if ch == "\\":
            if i + 1 >= n or pattern[i + 1].isalnum():  # \d, \w, \n, \1 ...: not plain text
                close()
                i += 2
                continue
            nxt, step = pattern[i + 1], 2
        elif ch == "|":
            return None
        elif ch == "(":
            close()
            i = _skip_group(pattern, i)
            continue
        elif ch == "[":
            close()
            i = skip_class(pattern, i)
            continue
        elif ch in _META:  # a quantifier after a group or class, an anchor, "."
            close()
            i = _skip_quantifier(pattern, i) if ch == "{" else i + 1
            continue
        else:
            nxt, step = ch, 1
        if i + step < n and pattern[i + step] in _QUANTIFIERS:
            close()  # "ab+": 'a' is required, the quantified 'b' is not part of a run
            i += step
            continue
        cur.append(nxt)
        i += step
    close()
    return runs


def _skip_group(pattern: str, i: int) -> int:
    depth = 0
    n = len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "[":
            i = skip_class(pattern, i)
            continue
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return n


def skip_class(pattern: str, i: int) -> int:
    n = len(pattern)
    j = i + 1
    if j < n and pattern[j] == "^":
        j += 1
    if j < n and pattern[j] == "]":
        j += 1
    while j < n and pattern[j] != "]":
        j += 2 if pattern[j] == "\\" else 1
    return j + 1


def _skip_quantifier(pattern: str, i: int) -> int:
    end = pattern.find("}", i)
    return len(pattern) if end < 0 else end + 1
