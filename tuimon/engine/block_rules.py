"""Block rules: a format's ``[[blocks]]`` entry (:class:`tuimon.parsers.schema.BlockFormat`)
read over a file, a block of lines at a time.

Only its marker lines (where ``begin`` or ``end`` matches) are hit lines of the block
engine, handed to :meth:`BlockRule.handler` in line order with the other rules' lines.
Its pair lines are read in bulk when the block closes, and when the engine's block of
text ends with the block still open: those between the open marker and the close, of
the lines holding the entry's anchor, by the compiled core's regex where it reads them
as ``re`` does, else by ``re``.  A pair line is not a hit line: it gives no event and
lends no stamp to the lines after it (as a line no rule is on).  Megatron's argument
list is 200-900 such lines a run, which went one by one to a Python hook before.
"""
from __future__ import annotations

from typing import Any, Mapping, Optional

from tuimon.parsers.base import LineContext
from tuimon.parsers.events import EVENT_TYPES, Event
from tuimon.parsers.prefix import split_prefix
from tuimon.parsers.schema import MAX_BLOCK_PAIRS, BlockFormat, Format

from ..parsers.patterns import lazy
from . import guard, native
from .rows import framing
from .rules import anchors_of, lines_holding
from .user_regex import USER_REGEX_TIMEOUT_S, RegexTimeout, core_line_regex

_NEWLINE = lazy("\n")


class BlockState:
    """What a file's block rule carries from one engine block to the next (saved with
    the engine in the parse cache): the context of the line that opened the block, and
    its pairs so far; None when no block is open."""

    __slots__ = ("opened", "pairs")

    def __init__(self) -> None:
        self.opened: Optional[LineContext] = None
        self.pairs: dict[str, str] = {}

    def __getstate__(self) -> tuple:
        return self.opened, self.pairs

    def __setstate__(self, state: tuple) -> None:
        self.opened, self.pairs = state


def _markers_of(begin: str, end: str) -> Optional[tuple[str, ...]]:
    b, e = anchors_of(begin), anchors_of(end)
    return None if b is None or e is None else tuple(dict.fromkeys(b + e))


class BlockRule:
    """One block entry, reading one file (its :class:`BlockState` kept by the engine)."""

    __slots__ = ("fmt", "entry", "order", "state", "file", "user", "cls", "markers", "anchor", "core", "framing", "_text",
                 "_starts", "_at", "_from")

    def __init__(self, fmt: Format, entry: BlockFormat, order: int, state: BlockState, file: str,
                 user: bool = False) -> None:
        self.fmt, self.entry, self.order, self.state, self.file = fmt, entry, order, state, file
        self.user = user  # a user's format: its regexes bounded in time (tuimon.engine.user_regex)
        self.cls = EVENT_TYPES[entry.event]
        #: texts of which every marker line holds one (None: the markers are looked for by regex)
        self.markers = _markers_of(entry.begin, entry.end)
        found = anchors_of(entry.pair)
        self.anchor = entry.anchor or (found[0] if found is not None and len(found) == 1 else None)
        self.core = core_line_regex(entry.pair, native.core)
        self.framing = framing(native.core) if self.core is not None else None
        self._text = ""
        self._starts: list[int] = []  # this text's marker lines, in line order ...
        self._at = 0  # ... and how many of them the engine has handed over
        self._from = -1  # pair lines after this offset belong to the open block

    @staticmethod
    def literals_of(entry: BlockFormat) -> tuple[str, ...]:
        """What the engine's literal scan should find for a rule of ``entry``: its markers'
        literals.  Not its pair lines' anchor: those are looked for between a block's markers
        alone, and an anchor such as YAML's ``": "`` is on most lines of a log (in the scan, it
        cost a third more CPU on every shape)."""
        return _markers_of(entry.begin, entry.end) or ()

    def prepare(self, text: str, present: Any, held: Optional[Mapping[str, list[int]]], hits: list) -> None:
        """Take a block of text: its marker lines go into ``hits`` (nothing to do in a text
        without the markers' literals, unless a block is open)."""
        if self.user and guard.is_disabled(self.fmt.name):
            return
        if self.state.opened is None and not self._marked(present):
            return
        self._text, self._at = text, 0
        self._from = -1
        try:
            starts = self._markers(text, present, held)
        except RegexTimeout:
            self._timed_out()
            return
        self._starts = starts
        hits.extend([(start, self.order, self, None) for start in starts])

    def _markers(self, text: str, present: Any, held: Optional[Mapping[str, list[int]]]) -> list[int]:
        starts: list[int] = []
        if self._marked(present):
            marker = self.entry.marker
            for start in _lines_holding(text, self.markers, held):
                stop = text.find("\n", start)
                if marker(split_prefix(text[start:len(text) if stop < 0 else stop]).body) is not None:
                    starts.append(start)
        return starts

    def _marked(self, present: Any) -> bool:
        """Whether the text may hold a marker line (it holds one of their literals)."""
        return self.markers is None or any(a in present for a in self.markers)

    def _timed_out(self) -> None:
        """A user's regex ran over its time bound: its format is off (here and in every file)."""
        self._text, self._starts = "", []
        self.state.opened, self.state.pairs = None, {}
        guard.disable(self.fmt.name, f"a block regex of {self.fmt.origin} ran over {USER_REGEX_TIMEOUT_S:g} s on a "
                                     f"line of {self.file} (it backtracks without end on some lines)")

    def handler(self, body: str, ctx: LineContext) -> list[Event]:
        """A marker line (the engine hands them over in line order)."""
        start = self._starts[self._at]
        self._at += 1
        if not self._text:  # (its format was turned off in this block)
            return []
        state = self.state
        try:
            marker = self.entry.marker(body)
            if marker is False and state.opened is not None:
                self._read(self._from, start)
        except RegexTimeout:
            self._timed_out()
            return []
        if marker is False:
            return self._close() if state.opened is not None else []
        if marker:
            state.opened, state.pairs = ctx, {}
            self._from = start
        return []

    def finish(self) -> None:
        """The end of the block of text: an open block takes the pair lines up to it."""
        if self.state.opened is not None and self._text:
            try:
                self._read(self._from, len(self._text))
            except RegexTimeout:
                self._timed_out()
        self._text, self._starts = "", []

    def flush(self) -> list[Event]:
        """The end of the file: a block still open makes its events."""
        return self._close() if self.state.opened is not None else []

    def _close(self) -> list[Event]:
        state = self.state
        ctx, pairs = state.opened, state.pairs
        state.opened, state.pairs = None, {}
        assert ctx is not None
        return [self.cls(file=self.file, line=ctx.line, rank=ctx.rank, node=ctx.node, wall_time=ctx.wall_time,
                         **fields) for fields in self.entry.events(pairs)]

    def _read(self, after: int, before: int) -> None:
        """The pairs of the pair lines starting after ``after`` (a line start, or -1) and
        before ``before`` (a line start, or the text's end)."""
        text = self._text
        starts = _lines_between(text, self.anchor, after, before)
        if not starts:
            return
        pairs = self.state.pairs
        found: list[tuple[int, Any]] = []
        if self.core is not None:
            read, starts = self.core.bodies(text, starts, self.core_groups, self.framing)
            found.extend(read)
        pair_of = self.entry.pair_of
        for start in starts:
            stop = text.find("\n", start)
            got = pair_of(split_prefix(text[start:len(text) if stop < 0 else stop]).body)
            if got is not None:
                found.append((start, got))
        if self.core is not None and starts:
            found.sort(key=_start)  # in line order: the later of one name wins
        for _, (name, value) in found:
            if len(pairs) < MAX_BLOCK_PAIRS:
                pairs[name] = value

    @property
    def core_groups(self) -> list[int]:
        index = self.entry.pair_pattern.groupindex
        return [index["name"], index["value"]]


def _start(item: tuple[int, Any]) -> int:
    return item[0]


def _lines_holding(text: str, anchors: Optional[tuple[str, ...]], held: Optional[Mapping[str, list[int]]]
                   ) -> list[int]:
    """The starts of the lines of ``text`` holding one of ``anchors`` (every line, for
    None), in order; ``held``: the lines holding each literal, when the core found them."""
    found = lines_holding(text, anchors, held, every=True) if anchors is not None else None
    if found is None:
        return [0] + [m.end() for m in _NEWLINE.finditer(text) if m.end() < len(text)]
    return found


def _lines_between(text: str, anchor: Optional[str], after: int, before: int) -> list[int]:
    """The starts of the lines of ``text`` that start after ``after`` (a line start, or -1)
    and before ``before`` (a line start, or the text's end) and hold ``anchor`` (every such
    line, for None), in order: those of that stretch alone, however many the text holds."""
    lo = 0 if after < 0 else text.find("\n", after) + 1
    if lo <= 0 and after >= 0 or lo >= before:  # (the block's marker line is the text's last)
        return []
    return [lo + start for start in _lines_holding(text[lo:before], (anchor,) if anchor else None, None)]
