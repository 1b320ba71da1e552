"""Hook rules: a stateful parser's route, found over a whole block by its trigger."""
from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Callable, Container, Mapping, Optional, Sequence, Union

from tuimon.parsers.base import holds

from . import native
from .anchors import literal_of, required_anchors
from .user_regex import core_line_regex


@lru_cache(maxsize=1024)
def anchors_of(regex: str) -> Optional[tuple[str, ...]]:
    """Texts of which every match of ``regex`` holds one; None: none can be read off."""
    # a short text is still a presence test: a block without it skips a regex that would scan it all
    found = required_anchors(regex) or required_anchors(regex, min_len=1)
    return tuple(found) if found else None


@lru_cache(maxsize=1024)
def _read_off(trigger: str) -> tuple[Optional[str], Optional[tuple[str, ...]]]:
    return literal_of(trigger), anchors_of(trigger)


@lru_cache(maxsize=1024)
def _compiled(trigger: str) -> re.Pattern[str]:
    return re.compile(trigger, re.MULTILINE)  # "$" ends a line


@lru_cache(maxsize=256)
def hook_rules(parsers: tuple[Any, ...], core: Any, column_kinds: tuple[tuple[str, int], ...]) -> tuple["HookRule", ...]:
    """The hook rules of an engine whose active parsers are of the classes ``parsers``, in
    order (``column_kinds``: the core's readers of plain lines by kind; none without the core)."""
    kinds = dict(column_kinds)
    rules = []
    for k, cls in enumerate(parsers):
        for j, (trigger, name) in enumerate(cls.ROUTES):
            kind = cls.COLUMNS.get(name) if core is not None else None
            rules.append(HookRule(trigger, name, (k, j), kinds.get(kind) if kind is not None else None,
                                  cls.LEAVES.get(name)))
    return tuple(rules)


_UNSET = object()  # (a lazily made attribute not made yet)


class HookRule:
    """Lines holding a match of ``trigger`` go to the handler named ``name`` of the engine's
    active parser ``key[0]`` (once a line).  It names its handler rather than holding it, so
    that every file read by the same parsers shares one list of rules (:func:`hook_rules`):
    each file holding its own cost ~25 KB a file, 250 MB at 10,000 followed files."""

    __slots__ = ("trigger", "name", "key", "literal", "anchors", "by_line", "column", "leaves", "_core", "_engine")

    def __init__(self, trigger: str, name: str, key: tuple[int, int], column: Optional[int] = None,
                 leaves: Union[str, re.Pattern[str], None] = None) -> None:
        self.trigger, self.name, self.key = trigger, name, key
        self.leaves = leaves  # a text whose lines its handler gives nothing for (LineParser.LEAVES): not its
        self.column = column  # the compiled core's reader of its plain lines (see BlockEngine._events), if any
        self.literal, self.anchors = _read_off(trigger)
        self.by_line = bool(self.anchors) and not starts_with_literal(trigger)
        self._engine = native.core if self.literal is None and self.anchors else None
        self._core: Any = _UNSET

    @property
    def core(self) -> Any:
        """The trigger compiled by the core, to run over its candidate lines in one call (2 us a line
        in re); None where the core does not read it as ``re`` does.  Compiled when a block first
        holds its anchors: most rules never meet a line of theirs, and compiling the 46 triggers a
        start was a tenth of a summary of a 100-line log."""
        core = self._core
        if core is _UNSET:
            core = self._core = core_line_regex(self.trigger, self._engine) if self._engine is not None else None
        return core

    @property
    def regex(self) -> re.Pattern[str]:
        """The trigger, compiled by ``re`` when a line needs it (a literal's lines are found by
        ``find``, a trigger the core runs by the core: 100 compiles were 3 ms of every start)."""
        return _compiled(self.trigger)

    def handler(self, parsers: Sequence[Any]) -> Callable[..., Any]:
        """Its handler among an engine's active ``parsers``."""
        return getattr(parsers[self.key[0]], self.name)

    def present(self, literals: Container[str]) -> bool:
        """Whether the rule may match in a block that holds ``literals`` (of the rules'
        anchors, :class:`tuimon.engine.presence.Presence`)."""
        if self.literal is not None:
            return self.literal in literals
        return self.anchors is None or any(a in literals for a in self.anchors)

    def lines(self, text: str, order: int, hits: list, held: Optional[Mapping[str, list[int]]] = None) -> None:
        """Append (line start, order, self, None) for each line holding the trigger and not
        what its handler leaves (``held``: the lines holding each literal, when the compiled
        core found them)."""
        if self.leaves is None:
            self._lines(text, order, hits, held)
            return
        found: list = []
        self._lines(text, order, found, held)
        find, leaves, size = text.find, self.leaves, len(text)
        for hit in found:
            end = find("\n", hit[0])
            if not holds(leaves, text, hit[0], size if end < 0 else end):
                hits.append(hit)

    def _lines(self, text: str, order: int, hits: list, held: Optional[Mapping[str, list[int]]] = None) -> None:
        find, rfind = text.find, text.rfind
        literal = self.literal
        if literal is not None and held is not None:
            hits.extend([(start, order, self, None) for start in held.get(literal, ())])
            return
        if literal is None and self.anchors and (self.by_line or held is not None):
            # a regex that starts with a literal finds its own candidates fast, unless they are few and known
            # (or the compiled core runs it over them: one call, in Rust, however many there are)
            starts = lines_holding(text, self.anchors, held, few=not self.by_line and self.core is None)
            if starts is not None:  # few candidates: the regex runs on their lines alone
                kept: list[int] = []
                # in a text that is not ASCII the core walks to each start's byte (8 bytes a step, one walk a call:
                # cheaper than re on the lines, 0.53 -> 0.47 s on the titan-hf shape); it leaves lines not ASCII
                core = self.core
                if core is not None:
                    kept, starts = core.lines(text, starts)  # (and leaves those it cannot read)
                search = self.regex.search if starts else _no_search
                for start in starts:
                    end = find("\n", start)
                    if search(text, start, len(text) if end < 0 else end + 1) is not None:
                        kept.append(start)
                if core is not None and starts:
                    kept.sort()  # in line order
                hits.extend([(start, order, self, None) for start in kept])
                return
        pos = 0
        search = self.regex.search if literal is None else _no_search
        while True:
            if literal is not None:
                at = find(literal, pos)
                if at < 0:
                    return
                end = find("\n", at)
            else:
                m = search(text, pos)
                if m is None:
                    return
                at = m.start()
                end = find("\n", at)
                if end >= 0 and m.end() > end + 1 and search(text, at, end + 1) is None:
                    pos = end + 1  # the match ran past its line (a trigger may end at its newline)
                    continue
            hits.append((rfind("\n", 0, at) + 1, order, self, None))
            if end < 0:
                return
            pos = end + 1


def _no_search(text: str, pos: int = 0, endpos: int = 0) -> Optional[re.Match[str]]:
    """(a literal trigger's stand-in for a regex it never runs)"""
    return None


def starts_with_literal(regex: str) -> bool:
    """Whether every match of ``regex`` starts with one fixed character, so that ``re``
    finds its candidates with its own fast prefix search (then it needs no help)."""
    if not regex or "|" in regex:
        return False
    if regex[0] == "\\":
        first = regex[1:2]
        if not first or first.isalnum():
            return False
        rest = regex[2:3]
    elif regex[0] in ".^$*+?{}[]()":
        return False
    else:
        rest = regex[1:2]
    return rest not in ("*", "?", "{")


def lines_holding(text: str, anchors: tuple[str, ...], held: Optional[Mapping[str, list[int]]] = None,
                  few: bool = False, every: bool = False) -> Optional[list[int]]:
    """The starts of the lines of ``text`` holding one of ``anchors``, in order, when
    they are few; else None.  A regex that cannot start with a literal (``^\\s*"``,
    ``(?<!x)(a|b)``) steps through every character of a block; on a few lines it costs
    a few microseconds each, so where its anchors are rare this is many times faster.
    ``held``: the lines holding each literal, when the compiled core found them; with
    ``few``, those lines only when they are few (else None); with ``every``, however many."""
    if any("\n" in a for a in anchors):
        return None
    most = len(text) if every else 16 + (len(text) >> 11)  # about where scanning the lines costs what the regex does
    if held is not None:  # the compiled core found them
        if len(anchors) == 1:
            known = held.get(anchors[0], [])
        else:
            known = sorted({start for a in anchors for start in held.get(a, ())})
        return None if few and len(known) > most else known
    starts: set[int] = set()
    find, rfind = text.find, text.rfind
    for anchor in anchors:
        at = find(anchor)
        while at >= 0:
            starts.add(rfind("\n", 0, at) + 1)
            if len(starts) > most:
                return None
            end = find("\n", at)
            if end < 0:
                break
            at = find(anchor, end + 1)
    return sorted(starts)
