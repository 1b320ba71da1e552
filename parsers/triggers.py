"""What a trigger pattern needs, as plain text, and the stdlib trigger scanner.

A *scanner* finds, in a block of complete lines, which lines contain which
triggers: ``scan(text) -> {line start offset: [trigger index, ...]}``, and
``lines(text)`` gives the same by line in text order, with each line's end and
number (:data:`HitLines`; the dispatcher uses this one): most lines hold one
trigger, so a line's triggers are given by its lowest one, plus a map of the few
lines that hold several.  The default here runs
one ``str.find`` (or regex) pass per trigger; the application
may hand :class:`~parsers.dispatch.ParserSet` a faster multi-pattern scanner as
long as it finds the same lines (tests compare the two).

A line *contains* a trigger when the trigger's regex matches the line with its
newline, the same rule :meth:`LineParser.feed` applies.
"""
from __future__ import annotations

import re
from typing import Callable, NamedTuple, Optional, Sequence

Hits = dict[int, list[int]]


class Heads(NamedTuple):
    """What a scanner may read off the heads of the hit lines for the dispatcher,
    so it need not test every line itself.  Rows are indices into the hit lines."""

    prefixed: list[int]  # rows that may carry a launcher prefix (at least those may_have_prefix passes)
    stamps: list[Optional[float]]  # per row, line_stamp of the line (rows in ``unsure`` excepted)
    unsure: list[int]  # rows whose stamp the dispatcher reads itself (every prefixed row among them)


class HitLines(NamedTuple):
    """The lines with hits, in text order."""

    starts: list[int]
    ends: list[int]  # of their newline, or the end of the text
    firsts: list[int]  # the lowest trigger index of each
    rows: list[int]  # newlines before each
    more: dict[int, list[int]]  # {row: all its trigger indices, ascending} for rows with several
    heads: Optional[Heads] = None
    #: when no row has several triggers, may be given: trigger index -> its rows
    #: (indices into these lines, ascending), triggers in the order of their first row
    groups: Optional[dict[int, list[int]]] = None
ScannerFactory = Callable[[Sequence[str]], "Scanner"]

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


_LEADING_CHOICE = re.compile(r"((?:[^\\.^$*+?{}\[\]|()]|\\[^A-Za-z0-9])*)\(\?:([^()\\]*)\)")


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


_CLASS_AFTER = re.compile(r"\[([^\]\\^-]{1,4})\]([+*?{]?)")


def _run_ends(pattern: str, run: str) -> list[int]:
    """Pattern offsets right after each top-level spelling of ``run``."""
    out = []
    for at in range(len(pattern)):
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
            i = _skip_class(pattern, i)
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
            i = _skip_class(pattern, i)
            continue
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return n


def _skip_class(pattern: str, i: int) -> int:
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


class Scanner:
    """Protocol of a trigger scanner (see the module docstring)."""

    def scan(self, text: str) -> Hits:  # pragma: no cover - interface
        raise NotImplementedError

    def lines(self, text: str, layout: object = None) -> HitLines:
        """The hits by line, in text order (scanners may do this in one go).
        ``layout``: what the application's framing knows of ``text`` (its scanner's
        business; this one does without)."""
        return lines_of(text, self.scan(text))


def lines_of(text: str, hits: Hits) -> HitLines:
    starts = sorted(hits)
    find = text.find
    ends = [find("\n", start) for start in starts]
    if ends and ends[-1] < 0:
        ends[-1] = len(text)
    ids = [sorted(set(hits[start])) for start in starts]
    more = {row: each for row, each in enumerate(ids) if len(each) > 1}
    return HitLines(starts, ends, [each[0] for each in ids], rows_before(text, starts), more)


def rows_before(text: str, starts: list[int]) -> list[int]:
    """How many newlines come before each of ``starts`` (sorted)."""
    count = text.count
    rows: list[int] = []
    row = prev = 0
    for start in starts:
        row += count("\n", prev, start)
        prev = start
        rows.append(row)
    return rows


class FindScanner(Scanner):
    """One pass per trigger: ``str.find`` for plain text, else the trigger's regex."""

    def __init__(self, triggers: Sequence[str]) -> None:
        self.triggers = tuple(triggers)
        self._plan = [(literal_of(t), re.compile(t)) for t in self.triggers]

    def scan(self, text: str) -> Hits:
        hits: Hits = {}
        find = text.find
        rfind = text.rfind
        for idx, (literal, rx) in enumerate(self._plan):
            pos = 0
            while True:
                if literal is not None:
                    at = find(literal, pos)
                    if at < 0:
                        break
                else:
                    m = rx.search(text, pos)
                    if m is None:
                        break
                    at = m.start()
                start = rfind("\n", 0, at) + 1
                ids = hits.get(start)
                if ids is None:
                    hits[start] = [idx]
                else:
                    ids.append(idx)
                pos = find("\n", at)  # one hit per line and trigger is enough
                if pos < 0:
                    break
                pos += 1
        return hits
