"""Multi-pattern trigger scanner: one Aho-Corasick pass per block instead of one
``str.find`` pass per trigger.

With ~55 triggers the stdlib scanner reads every block 55 times (about 2.5 s of a
6 s summary of 60 MB).  Here each trigger contributes the plain text it cannot
match without (its *anchor*, :func:`parsers.triggers.required_literal`); one
automaton finds every anchor in one pass, and a trigger that is a regex is then
confirmed on the anchor's line alone.  Triggers without a usable anchor keep a
regex pass of their own.  It finds exactly the lines the stdlib scanner finds
(tests compare them), so parsers see the same input.
"""
from __future__ import annotations

import re
import struct
from functools import lru_cache
from itertools import chain, repeat
from typing import Optional, Sequence

import numpy as np

from parsers.triggers import (
    FindScanner,
    HitLines,
    Hits,
    Scanner,
    leading_literal,
    lines_of,
    literal_of,
    required_anchors,
)

from .heads import read_heads, runs

try:  # a wheel on every common platform; without it the stdlib scanner is used
    import ahocorasick_rs
except ImportError:  # pragma: no cover - exercised only where the wheel is missing
    ahocorasick_rs = None


#: aho-corasick's packed (Teddy) search, which the automaton uses as its prefilter,
#: takes at most 64 patterns: with 65 a 1 MB block took 2.0 ms instead of 0.5 ms.
#: More anchors than this are split between automata of at most this many.
MAX_PACKED = 64


class AnchorScanner(Scanner):
    def __init__(self, triggers: Sequence[str]) -> None:
        self.triggers = tuple(triggers)
        anchors: list[str] = []
        anchor_index: dict[str, int] = {}
        # anchor -> [(trigger index, regex to confirm, or None when the anchor is the trigger,
        #            whether the regex starts with the anchor: then it is tried at the anchor only;
        #            None: it is searched for within the line's bounds, else in a copy of the line)]
        self._confirm: list[list[tuple[int, Optional[re.Pattern[str]], Optional[bool]]]] = []
        self._regex_only: list[tuple[int, re.Pattern[str]]] = []
        wanted: list[tuple[int, Optional[str], list[str]]] = []  # (trigger, its literal, its anchors)
        for idx, trigger in enumerate(self.triggers):
            literal = literal_of(trigger)
            found = [literal] if literal else _anchors_for(trigger)
            if not found or any("\n" in a for a in found):
                self._regex_only.append((idx, re.compile(trigger)))
                continue
            wanted.append((idx, literal, found))
        # an anchor holding another is found through it (a line with "Error:" has "Error"):
        # fewer anchors, and the automaton stays within MAX_PACKED
        within = _shortest_within({a for _, _, found in wanted for a in found})
        for idx, literal, found in wanted:
            for anchor in dict.fromkeys(within[a] for a in found):
                k = anchor_index.get(anchor)
                if k is None:
                    k = anchor_index[anchor] = len(anchors)
                    anchors.append(anchor)
                    self._confirm.append([])
                if literal == anchor:
                    self._confirm[k].append((idx, None, False))
                    continue
                trigger = self.triggers[idx]
                at_anchor = _starts_with(trigger, anchor)
                if not at_anchor and _reads_only_its_line(trigger):
                    at_anchor = None  # searched in place: no copy of the line
                self._confirm[k].append((idx, re.compile(trigger), at_anchor))
        self._anchors = tuple(anchors)
        self._plain = [group[0][0] if len(group) == 1 and group[0][1] is None else -1 for group in self._confirm]
        self._plain_array = np.array(self._plain, dtype=np.int64)
        # leftmost-first runs three times faster than reporting every overlapping match
        # (it skips ahead); the matches it passes over are found from _overlaps, which
        # are looked for among the anchors of the same automaton
        leftmost = ahocorasick_rs.MatchKind.LeftmostFirst
        self._parts = [range(at, min(at + MAX_PACKED, len(anchors))) for at in range(0, len(anchors), MAX_PACKED)]
        # per anchor: (other anchor, offset, its code points) that may start inside a match of it
        self._overlaps: list[tuple] = [()] * len(anchors)
        for part in self._parts:
            for k, found_in in zip(part, _overlaps([anchors[i] for i in part])):
                self._overlaps[k] = tuple((part[j], off, np.array([ord(c) for c in anchors[part[j]]], dtype=np.int64))
                                          for j, off in found_in)
        self._overlapping = np.array([bool(found) for found in self._overlaps] or [False], dtype=bool)
        self._ac_str = [ahocorasick_rs.AhoCorasick([anchors[i] for i in part], matchkind=leftmost)
                        for part in self._parts]
        self._ac_bytes = [ahocorasick_rs.BytesAhoCorasick([anchors[i].encode() for i in part], matchkind=leftmost)
                          for part in self._parts]
        self._rest = FindScanner([self.triggers[i] for i, _ in self._regex_only]) if self._regex_only else None

    def scan(self, text: str) -> Hits:
        starts, _, firsts, _, more, _, _ = self.lines(text)
        return {start: more.get(row, [first]) for row, (start, first) in enumerate(zip(starts, firsts))}

    def lines(self, text: str, layout: Optional[tuple[bytes, np.ndarray]] = None) -> HitLines:
        """``layout``: the text's ASCII bytes and newline offsets, when the framing
        has them (:class:`tuimon.sources.framing.Block`)."""
        if not self._ac_str:
            return Scanner.lines(self, text)
        newlines = None
        if layout is not None:
            data, newlines = layout
        elif text.isascii():  # byte offsets are character offsets: scan the cheaper bytes
            data = text.encode("ascii")
        else:
            data = None
        if data is not None:
            codes = np.frombuffer(data, dtype=np.uint8)
        else:  # character offsets; one 32-bit code a character locates the newlines
            codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
        found_parts = []
        for part, ac in zip(self._parts, self._ac_bytes if data is not None else self._ac_str):
            matches = ac.find_matches_as_indexes(data if data is not None else text)
            if matches:
                table = np.frombuffer(struct.pack(f"{3 * len(matches)}q", *chain.from_iterable(matches)),
                                      dtype=np.int64)
                found_parts.append(self._with_overlapped(codes, table[0::3] + part.start, table[1::3]))
        if len(found_parts) > 1:  # matches of several automata: in text order
            kind, at = np.concatenate([k for k, _ in found_parts]), np.concatenate([a for _, a in found_parts])
            order = np.argsort(at, kind="stable")
            kind, at = kind[order], at[order]
        elif found_parts:
            kind, at = found_parts[0]
        if found_parts:
            if newlines is None:
                newlines = np.flatnonzero(codes == 10)
            found, line_starts = self._collect(text, newlines, kind, at)
        else:
            found, line_starts = HitLines([], [], [], [], {}), None
        if self._rest is None:
            if codes.dtype == np.uint8 and line_starts is not None and len(line_starts):
                return found._replace(heads=read_heads(codes, line_starts))
            return found
        hits = {start: found[4].get(row, [first]) for row, (start, first) in enumerate(zip(found[0], found[2]))}
        for start, ids in self._rest.scan(text).items():
            mapped = [self._regex_only[i][0] for i in ids]
            have = hits.get(start)
            if have is None:
                hits[start] = mapped
            else:
                have.extend(mapped)
        return lines_of(text, hits)

    def _collect(self, text: str, newlines: np.ndarray, kind: np.ndarray,
                 at: np.ndarray) -> tuple[HitLines, Optional[np.ndarray]]:
        """The lines of the anchor matches ``kind`` at ``at`` (in text order) and
        their confirmed triggers, and the lines' starts as an array.  By column: each
        match's line bounds come from the ``newlines`` offsets, and each regex
        trigger is confirmed for all its matches in one ``map``; Python runs per
        line only on lines with more than one trigger."""
        row = np.searchsorted(newlines, at)  # newlines before each match: its line
        bounds = np.append(newlines, len(text))
        end = bounds[row]
        start = np.where(row > 0, bounds[row - 1] + 1, 0)
        trigger = self._plain_array[kind]
        pick = [np.flatnonzero(trigger >= 0)]  # matches confirmed as they are
        ids = [trigger[pick[0]]]
        for k in _distinct(kind[trigger < 0]):  # anchors whose triggers need a regex
            of_k = np.flatnonzero(kind == k)
            # a line holding the anchor twice ("iteration 5/ 10 | ... per iteration (ms)")
            # is confirmed at its first one; the next ones are tried only where that failed
            first_k = np.diff(row[of_k], prepend=-1) != 0
            once = of_k if first_k.all() else of_k[first_k]
            for idx, rx, at_anchor in self._confirm[k]:
                if rx is None:
                    ok = once
                else:
                    ok = once[self._confirmed(rx, at_anchor, text, at[once], start[once], end[once])]
                    if at_anchor and len(once) < len(of_k):  # a miss at the first is no miss at the next
                        confirmed = np.zeros(len(bounds), dtype=bool)
                        confirmed[row[ok]] = True
                        again = of_k[~first_k & ~confirmed[row[of_k]]]
                        if len(again):
                            ok = np.sort(np.concatenate((ok, again[self._confirmed(
                                rx, at_anchor, text, at[again], start[again], end[again])])))
                pick.append(ok)
                ids.append(np.full(len(ok), idx, dtype=np.int64))
        order = np.concatenate(pick)
        idx_of = np.concatenate(ids)
        if len(pick) > 1:
            by_position = np.argsort(order, kind="stable")
            order, idx_of = order[by_position], idx_of[by_position]
        if not len(order):
            return HitLines([], [], [], [], {}), None
        rows = row[order]
        first = np.flatnonzero(np.diff(rows, prepend=-1))  # first entry of each line
        line_of = order[first]
        line_starts = start[line_of]
        starts, ends, rows_out = line_starts.tolist(), end[line_of].tolist(), rows[first].tolist()
        if len(first) == len(order):  # one trigger a line: the usual case
            return HitLines(starts, ends, idx_of.tolist(), rows_out, {}, groups=_groups(idx_of)), line_starts
        lowest = np.minimum.reduceat(idx_of, first).tolist()
        more = {}
        for i in np.flatnonzero(np.diff(np.append(first, len(order))) > 1).tolist():  # lines with several
            each = sorted(set(idx_of[first[i]:first[i + 1] if i + 1 < len(first) else len(order)].tolist()))
            if len(each) > 1:
                more[i] = each
        return HitLines(starts, ends, lowest, rows_out, more), line_starts

    @staticmethod
    def _confirmed(rx: "re.Pattern[str]", at_anchor: Optional[bool], text: str, at: np.ndarray,
                   start: np.ndarray, end: np.ndarray) -> np.ndarray:
        """Per match, whether ``rx`` matches at it (``at_anchor``), or in its line
        (searched within the line's bounds, or in a copy when the regex looks
        beyond them)."""
        if at_anchor:
            found = map(rx.match, repeat(text), at.tolist(), (end + 1).tolist())
        elif at_anchor is None:
            found = map(rx.search, repeat(text), start.tolist(), (end + 1).tolist())
        else:
            found = (rx.search(text[a:b]) for a, b in zip(start.tolist(), (end + 1).tolist()))
        return np.fromiter(map(bool, found), dtype=bool, count=len(at))

    def _with_overlapped(self, codes: np.ndarray, kind: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The anchor matches (``kind`` at ``at``) and the anchors starting inside
        them, in text order.  ``codes`` are the text's characters: each possible
        overlap is compared for all matches of an anchor at once."""
        if not self._overlapping[kind].any():
            return kind, at
        kinds, ats = [kind], [at]
        for k in _distinct(kind[self._overlapping[kind]]):
            at_k = at[kind == k]
            for j, off, anchor in self._overlaps[k]:
                if anchor.max() > np.iinfo(codes.dtype).max or len(anchor) > len(codes):
                    continue  # a character the bytes of an ASCII text cannot hold, or no room
                begin = at_k + off
                begin = begin[begin + len(anchor) <= len(codes)]
                items = runs(codes, len(anchor))
                found = begin[items[begin] == anchor.astype(codes.dtype).view(items.dtype)[0]]
                if len(found):
                    kinds.append(np.full(len(found), j, dtype=np.int64))
                    ats.append(found)
        if len(ats) == 1:
            return kind, at
        at = np.concatenate(ats)
        order = np.argsort(at, kind="stable")
        return np.concatenate(kinds)[order], at[order]


def _distinct(values: np.ndarray) -> list[int]:
    """The distinct values, ascending.  Not ``np.unique``: its first call imports
    ``numpy.ma`` (45 ms, in every worker process too)."""
    return sorted(set(values.tolist()))


def _groups(keys: np.ndarray) -> dict[int, list[int]]:
    """Key -> the indices having it, ascending, keys in the order of their first
    index (what ``parsers.lanes.group_by`` gives, by sorting instead of a pass a key)."""
    order = np.argsort(keys, kind="stable")
    cuts = np.flatnonzero(np.diff(keys[order])) + 1
    found = [(int(keys[part[0]]), part.tolist()) for part in np.split(order, cuts)]
    found.sort(key=_first_index)
    return dict(found)


def _first_index(group: tuple[int, list[int]]) -> int:
    return group[1][0]


def _shortest_within(anchors: set[str]) -> dict[str, str]:
    """Anchor -> the anchor to look for instead: the longest other anchor it holds
    that holds none itself (every line with the first has it), else itself."""
    minimal = [a for a in anchors if not any(b != a and b in a for b in anchors)]
    return {a: max((b for b in minimal if b in a), key=len) for a in anchors}


def _overlaps(anchors: Sequence[str]) -> list[tuple[tuple[int, int], ...]]:
    """Per anchor, the (other anchor, offset) pairs that may start inside one of its
    matches: their text agrees with it where they overlap.  A leftmost scan reports
    the leftmost match and resumes after its end, so every occurrence it skips
    starts inside a reported match, at one of these offsets.  Anchors hold no
    newline, so whatever is found there is on the match's line."""
    out = []
    for k, a in enumerate(anchors):
        found = []
        for j, b in enumerate(anchors):
            off = a.find(b[0])  # b can only start where its first character is
            while off >= 0:
                if (j, off) != (k, 0) and b.startswith(a[off:off + len(b)]):
                    found.append((j, off))
                off = a.find(b[0], off + 1)
        out.append(tuple(found))
    return out


def _anchors_for(trigger: str) -> Optional[list[str]]:
    """The anchors of a regex trigger: its required texts, unless none starts the
    pattern and a long enough text does (``step=\\d+, skipped=``: ``step=``).  A
    match is then confirmed by one ``match`` at the anchor, instead of a search
    through the line from its start."""
    found = required_anchors(trigger)
    if found and not any(_starts_with(trigger, a) for a in found):
        lead = leading_literal(trigger)
        if len(lead) >= _MIN_LEAD:
            return [lead]
    return found


_MIN_LEAD = 5  # shorter ones would match too much text that is no trigger


def _reads_only_its_line(trigger: str) -> bool:
    """Whether searching ``text`` between a line's bounds finds what searching the
    line alone finds: not so for ``^`` (which would not match there) or lookbehinds
    (which would see the line before)."""
    return "^" not in trigger and "(?<" not in trigger and "\\A" not in trigger and "\\b" not in trigger


def _starts_with(trigger: str, anchor: str) -> bool:
    """Whether every match of ``trigger`` found at ``anchor`` begins there."""
    lead = leading_literal(trigger)
    return bool(lead) and anchor.startswith(lead) or lead.startswith(anchor)


@lru_cache(maxsize=64)
def trigger_scanner(triggers: tuple[str, ...]) -> Scanner:
    """The fastest scanner available for these triggers (cached: files share trigger sets)."""
    if ahocorasick_rs is None:
        return FindScanner(triggers)
    return AnchorScanner(triggers)
