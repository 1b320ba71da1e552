"""The block engine: one file's complete lines, a block at a time, into events.

Every rule is a regex run over the whole block, never line by line:

* a *data* rule is a line format (:mod:`parsers.schema`): each match is an event,
  its groups converted by the format's types;
* a *hook* rule is a route of a stateful parser (argument blocks, tracebacks, the
  startup sequence...): each line holding a match of its trigger is handed to the
  parser's handler, which alone sees those lines.

A rule whose literal anchors are all absent from a block costs one ``str.find``
each.  Matches are taken in line order; the lines they fall on are numbered,
their launcher prefixes read (rank, node) and their stamps taken (a line without
one takes the stamp of the matched line before it), once per line.  A line a user
format matches gives no built-in event of the same type.
"""
from __future__ import annotations

import re
from bisect import bisect_left
from functools import lru_cache
from operator import itemgetter
from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np

from tuimon.parsers.base import LineContext, LineParser
from tuimon.parsers.columns import RUN_ROWS, Item, expand, iteration_runs
from tuimon.parsers.events import EVENT_TYPES, LOG_START, Event, Milestone, RunConfig, Timers, frozen_map
from tuimon.parsers.prefix import split_prefix
from tuimon.parsers.schema import Format, LineFormat, Running
from tuimon.parsers.timers import timer_group
from tuimon.parsers.timestamps import line_stamp

from ..parsers.patterns import lazy
from . import guard, native
from .block_rules import BlockRule, BlockState
from .data_rows import DataReader, data_reader
from .presence import presence_of
from .rows import (
    COLUMN_KINDS,
    EVENT,
    ITERATION,
    ITERATION_LINES,
    NOTHING,
    ROW,
    BlockRows,
    DataPart,
    framing,
    split_rows,
    stamps_of,
)
from .rules import HookRule, anchors_of, hook_rules, lines_holding, starts_with_literal
from .user_regex import USER_REGEX_TIMEOUT_S, CorePattern, RegexTimeout

Handler = Callable[[str, LineContext], list[Event]]
_FIRST = itemgetter(0, 1)
_STEPS = ("iteration", "step")
_STAMP_REACH = 256  # a stamp is within a line's first 40 characters, after a launcher prefix
_DATE = lazy(r"-\d\d-\d\d[ T]\d\d:")  # in every stamp (parsers.timestamps.LEADING); starts with a literal
#: a log with no stamp in its first blocks is taken to have none (each look costs a scan)
LOG_START_BLOCKS = 8
#: the core's lines between two hook lines walked at once from this many (numpy's cost a call
#: is that of walking some twenty lines one at a time)
BULK_WALK = 48

_COLUMN_KINDS = tuple(COLUMN_KINDS.items())


class DataRule:
    """A compiled line format, with the format it belongs to."""

    __slots__ = ("fmt", "entry", "anchors", "user", "cls", "order", "by_line", "key", "_reader")

    def __init__(self, fmt: Format, entry: LineFormat, user: bool, order: int, index: int = 0) -> None:
        self.fmt, self.entry, self.user, self.order = fmt, entry, user, order
        self.key = (order, index)  # whose running state (parsers.schema.Running) the entry keeps
        self.anchors = entry.anchors or tuple(anchors_of(entry.regex) or ())
        self.cls = EVENT_TYPES[entry.event]
        # by line: a regex re cannot find by a literal prefix, and one the core runs (line by line,
        # a line that is not ASCII goes to Python's regex alone, not the whole block with it)
        core_run = isinstance(entry.pattern, CorePattern)
        self.by_line = bool(self.anchors) and (core_run or not starts_with_literal(entry.regex))
        self._reader: Any = _UNKNOWN

    @property
    def reader(self) -> Optional[DataReader]:
        """The core's reader of the rule's lines into rows (:mod:`.data_rows`), or None; made
        when first asked (the rule set is made at start, and most rules are never asked)."""
        if self._reader is _UNKNOWN:
            self._reader = data_reader(self.entry, self.fmt, self.user, native.core) if self.anchors else None
        return self._reader

    def miss(self, text: str, start: int, hits: list) -> None:
        """The rule's matches on the line at ``start`` into ``hits``, by the Python engine (a line
        the core's reader leaves)."""
        _line_hits(text, start, self, hits)


_UNKNOWN = object()


#: rule sets by the identities of their formats and parser classes (each held by its entry, so that
#: no identity is reused while it is a key); a run has a handful (files wake different parsers)
_RULE_SETS: dict[tuple, tuple] = {}


def _rule_set(formats: tuple[Format, ...], builtin: tuple[Format, ...], active: tuple[type, ...],
              dormant: tuple[type, ...]) -> tuple[list[DataRule], tuple[HookRule, ...], Any]:
    """(data rules, hook rules, the Presence of all their literals): what a file's engine runs,
    made once for every file read with the same formats and parsers.  Made per file, it cost
    1 ms and ~30 KB a file (10,000 followed files: 10 s before the first event)."""
    key = (tuple(map(id, formats)), tuple(map(id, builtin)), active, dormant, native.core)
    got = _RULE_SETS.get(key)
    if got is not None:
        return got[1]
    data = [DataRule(f, e, True, k, j) for k, f in enumerate(formats) for j, e in enumerate(f.lines)]
    data += [DataRule(f, e, False, len(formats) + k, j) for k, f in enumerate(builtin) for j, e in enumerate(f.lines)]
    hooks = hook_rules(active, native.core, _COLUMN_KINDS)
    literals = [a for rule in data for a in rule.anchors]
    literals += [a for hook in hooks for a in ((hook.literal,) if hook.literal else hook.anchors or ())]
    literals += [lit for f in (*formats, *builtin) for e in f.blocks for lit in BlockRule.literals_of(e)]
    literals += [n for cls in dormant for n in _sniff_needles(cls) or ()]
    made = (data, hooks, presence_of(literals))
    if len(_RULE_SETS) >= 256:
        _RULE_SETS.clear()
    _RULE_SETS[key] = ((formats, builtin), made)
    return made


_HOOKS_PRESENT: dict[tuple[tuple, frozenset], tuple[int, ...]] = {}


def _hooks_present(hooks: tuple[HookRule, ...], present: frozenset[str]) -> tuple[int, ...]:
    """The indices of ``hooks`` (a shared rule set's) that may match in a block holding the
    literals ``present``.  Blocks hold the same few sets of literals over and over: asked of
    each of 147 rules, it was a tenth of reading a small file."""
    key = (hooks, present)  # (the rules themselves: an id could be reused once they are gone)
    got = _HOOKS_PRESENT.get(key)
    if got is None:
        if len(_HOOKS_PRESENT) >= 4096:
            _HOOKS_PRESENT.clear()
        got = _HOOKS_PRESENT[key] = tuple(n for n, hook in enumerate(hooks) if hook.present(present))
    return got


class BlockEngine:
    """Incremental, per file: :meth:`feed_block` with complete lines, :meth:`flush` at the end."""

    _log_started = True  # (an engine saved before these were kept has long passed its first stamp)
    _stamp_blocks = 0

    def __init__(self, file: str, parser_classes: Sequence[type[LineParser]], formats: Sequence[Format] = (),
                 builtin_formats: Sequence[Format] = (), *, sniff: bool = True, log_start: bool = False) -> None:
        """With ``sniff=False`` every parser is on from the start (samples' tests); with
        ``log_start``, the file's first stamp is a milestone (a whole file's parse)."""
        self.file = file
        self.formats = tuple(formats)
        self.builtin_formats = tuple(builtin_formats)
        self._dormant = [cls for cls in parser_classes if sniff and cls.SNIFF is not None]
        self.active: list[LineParser] = [cls(file) for cls in parser_classes if cls not in self._dormant]
        self._user_steps = False  # a data format (the user's, or a built-in) gave steps: fallbacks are off
        self._announced: set[str] = set()
        self._running = Running()  # data entries' running totals and stamps (cumulative, time_from)
        self._last_wall: Optional[float] = None
        self._log_started = not log_start  # its first stamped line was found (or is not looked for)
        self._stamp_blocks = 0  # blocks looked through for it
        self.failed = 0  # lines a hook raised on
        self._block_states: dict[tuple[str, int], BlockState] = {}  # (format, entry) -> its open block
        self._drop_fallbacks()
        self._rules_changed()

    # -- saved state (the parse cache) ---------------------------------------------------
    def __getstate__(self) -> dict:
        """What decides what the next lines give, without compiled rules or bound handlers."""
        state = dict(self.__dict__)
        for name in ("formats", "builtin_formats", "_data", "_hooks", "_blocks", "_presence", "_stale"):  # rebuilt
            state.pop(name, None)
        return state

    def deciding(self) -> dict:
        """:meth:`__getstate__` less what only counts (``failed``) and the parsers' caches, a log-start
        search that is over the same however it ended: two engines alike in it give the same events for
        the same lines."""
        state = self.__getstate__()
        del state["failed"]
        if state["_log_started"] or state["_stamp_blocks"] >= LOG_START_BLOCKS:
            state["_log_started"], state["_stamp_blocks"] = True, LOG_START_BLOCKS
        # each parser's state less its caches, by name: the same however it was made
        state["active"] = [(type(p).__name__, sorted(p.snapshot().items())) for p in self.active]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.__dict__.setdefault("_running", Running())
        self.__dict__.setdefault("_block_states", {})
        self.formats, self.builtin_formats = (), ()
        self._rules_changed()

    def attach(self, formats: Sequence[Format], builtin_formats: Sequence[Format]) -> None:
        """The formats of a restored engine (the cache keys entries by the format set)."""
        self.formats, self.builtin_formats = tuple(formats), tuple(builtin_formats)
        self._rules_changed()

    # -- parser activation --------------------------------------------------------------
    def _drop_fallbacks(self) -> None:
        if self._user_steps or any(p.STEPS_WITH_LOSS for p in self.active):
            self._dormant = [cls for cls in self._dormant if not cls.FALLBACK]
            self.active = [p for p in self.active if not p.FALLBACK]

    def _rules_changed(self) -> None:
        """The rules follow the formats and the active parsers: built when next needed (an
        engine restored from the parse cache for a file that did not grow is never fed:
        compiling its rules cost 0.06 s a file, twice, on every reopen)."""
        self._stale = True

    def _ready(self) -> None:
        if self._stale:
            self._build()

    def _build(self) -> None:
        self._stale = False
        formats = [*self.formats, *self.builtin_formats]
        self._blocks = [BlockRule(f, e, k, self._block_states.setdefault((f.name, j), BlockState()), self.file,
                                  k < len(self.formats)) for k, f in enumerate(formats) for j, e in enumerate(f.blocks)]
        # the rest is the same for every file read with the same formats and parsers: shared
        self._data, self._hooks, self._presence = _rule_set(self.formats, self.builtin_formats,
                                                            tuple(type(p) for p in self.active), tuple(self._dormant))

    def sniff(self, text: str, present: Optional[frozenset[str]] = None) -> None:
        """Wake the dormant parsers whose SNIFF shows up in ``text`` (``present``: the
        rules' literals it holds, when known)."""
        self._ready()
        if present is None:
            present = self._presence.of(text)
        woken = [cls for cls in self._dormant if _sniffed(cls, text, present)]
        if woken:
            self._dormant = [cls for cls in self._dormant if cls not in woken]
            self.active.extend(cls(self.file) for cls in woken)
            self._drop_fallbacks()
            self._rules_changed()

    @property
    def active_names(self) -> list[str]:
        return [p.name for p in self.active]

    # -- feeding ------------------------------------------------------------------------
    def feed_block(self, text: str, first_line: int) -> list[Item]:
        """Parse ``text`` (complete lines, each ending in ``\\n``) whose first line is
        number ``first_line``."""
        if not text:
            return []
        self._ready()
        try:
            return self._feed(text, first_line)
        finally:
            for rule in self._blocks:  # (a block open at the text's end takes its pair lines now)
                rule.finish()

    def _feed(self, text: str, first_line: int) -> list[Item]:
        # the rules' literals this block holds, found in one pass (with the core, the lines holding each)
        present, held = self._presence.scan(text)
        if self._dormant:
            self.sniff(text, present)
            if self._stale:  # parsers woke: their rules, and their rules' literals in this block
                self._build()
                present, held = self._presence.scan(text)
        hits: list[tuple[int, int, Any, Any]] = []  # (line start, order, rule, match or None)
        part: Optional[DataPart] = None  # the lines of a data rule the core read, as rows
        for rule in self._data:
            if not rule.anchors or any(a in present for a in rule.anchors):
                if part is None and held is not None and rule.reader is not None and \
                        not (rule.user and guard.is_disabled(rule.fmt.name)):
                    part = self._data_part(text, rule, held, hits)
                elif rule.user:
                    self._user_hits(text, rule, hits, held)
                else:
                    _data_hits(text, rule, hits, held)
        if (hits or part is not None) and not self._user_steps and \
                (part is not None or any(r.entry.event in _STEPS for _, _, r, _ in hits)):
            self._user_steps = True  # a format gives this run's steps: fallbacks are off
            self._drop_fallbacks()
            self._build()
        for block in self._blocks:
            block.prepare(text, present, held, hits)
        hook_base = len(self._data) + 1
        columns: list[tuple[Any, int, list[int]]] = []  # rules whose plain lines the core reads (and a DataPart)
        hooks = self._hooks
        for n in _hooks_present(hooks, present):
            hook = hooks[n]
            if hook.column is not None and held is not None:
                if hook.literal is not None:
                    columns.append((hook, hook_base + n, held.get(hook.literal, [])))
                else:  # the lines its trigger regex is on
                    found: list = []
                    hook.lines(text, hook_base + n, found, held)
                    columns.append((hook, hook_base + n, [h[0] for h in found]))
            else:
                hook.lines(text, hook_base + n, hits, held)
        if part is not None:
            if any(hook.column == ITERATION_LINES for hook, _, _ in columns):
                part.spill(text, hits)  # (a block's iteration rows are of one kind: the rule's lines are events)
            else:
                columns.append((part, 0, part.starts))
        rows = split_rows(self.file, text, first_line, hits, columns, self.active) if columns else None
        if hits:
            hits.sort(key=_FIRST)
        start = self._log_start(text, first_line) if not self._log_started and \
            self._stamp_blocks < LOG_START_BLOCKS else None
        if not hits and rows is None:
            return [start] if start is not None else []
        return self._events(text, first_line, hits, start, rows)

    def _data_part(self, text: str, rule: DataRule, held: Mapping[str, list[int]], hits: list) -> Optional[DataPart]:
        """The lines of ``rule`` (one with a core reader) the core reads, as a DataPart (None for
        none); those it leaves go into ``hits`` as the Python engine reads them."""
        starts = lines_holding(text, rule.anchors, held)
        if starts is None:  # (an anchor across lines)
            _data_hits(text, rule, hits, held)
            return None
        reader = rule.reader
        assert reader is not None
        # a user's format, or a built-in one's steps, names the run before its first event (_announce)
        announce = None if rule.fmt.name in self._announced else rule.fmt.name
        return reader.part(text, starts, rule.miss, hits, self._running, rule.key, announce)

    def _user_hits(self, text: str, rule: DataRule, hits: list, held: Optional[Mapping[str, list[int]]]) -> None:
        """A user rule's hits; a regex that runs over its time bound turns its format off
        (here and in every file of the process), the block's other rules go on."""
        if guard.is_disabled(rule.fmt.name):
            return
        mark = len(hits)
        try:
            _data_hits(text, rule, hits, held)
        except RegexTimeout:
            del hits[mark:]
            guard.disable(rule.fmt.name, f"a regex of {rule.fmt.origin} ran over {USER_REGEX_TIMEOUT_S:g} s on a line "
                                         f"of {self.file} (it backtracks without end on some lines)")

    def _log_start(self, text: str, first_line: int) -> Optional[Milestone]:
        """The log's first stamp, matched or not, as a ``log-start`` milestone, to go before
        the block's first event at or after its line: when a job started, if it says no more
        (no ``Job started at``), is no later than that.  Looked for in the first blocks only."""
        self._stamp_blocks += 1
        for m in _DATE.finditer(text):
            start = text.rfind("\n", 0, m.start()) + 1
            pre = split_prefix(text[start:start + _STAMP_REACH])
            wall = line_stamp(pre.body)
            if wall is None:
                continue
            self._log_started = True
            return Milestone(file=self.file, line=first_line + text.count("\n", 0, start), rank=pre.rank,
                             node=pre.node, wall_time=wall, name=LOG_START)
        return None

    def _events(self, text: str, first_line: int, hits: list, log_start: Optional[Milestone] = None,
                rows: Optional[BlockRows] = None) -> list[Item]:
        """The events of the hit lines, in the order their lines give them, ``log_start``
        (if any) before the first at or after its line; ``rows``: the lines the core read
        (walked in line order with the hit lines: a line without a stamp takes the one
        before it, of either kind)."""
        events: list[Item] = []
        number, at = first_line, 0

        def emit(out: list) -> None:
            """A line's events (``number``'s) after those before them."""
            nonlocal log_start
            if rows is not None:
                rows.close_placed(events)
            if log_start is not None:
                k = next((k for k, e in enumerate(out) if e.line >= log_start.line), None)
                if k is not None:
                    out = [*out[:k], log_start, *out[k:]]
                    log_start = None
            if rows is not None:
                rows.before(out, number, events)
            events.extend(out)

        def walk(limit: int) -> None:
            """The core's lines before ``limit`` (a line start): their stamps, and their rows; a long
            run at once, a few between two hook lines one at a time.  A log start goes before the
            first of them at or after its line that gives something: the lines up to that one are
            walked one at a time (which puts it there), the rest at once (a small file is one block,
            its first)."""
            assert rows is not None
            k0 = rows.at
            k1 = bisect_left(rows.starts, limit, k0)
            while k1 - k0 >= BULK_WALK and log_start is not None:
                # (a line at or after it that gives nothing, or whose maker gave nothing, does not place it)
                gives = np.flatnonzero((rows.frames.number[k0:k1] >= log_start.line) & (rows.verdicts[k0:k1] != NOTHING))
                if not len(gives):
                    break
                k = k0 + int(gives[0])
                walk_lines(k0, k + 1)
                k0 = k + 1
            its = rows.iterations
            if k1 - k0 >= BULK_WALK and its is not None and its.announce is not None:
                first = np.flatnonzero(rows.verdicts[k0:k1] == ITERATION)  # (a data rule's first row names its run)
                if len(first):
                    walk_lines(k0, k0 + int(first[0]) + 1)
                    k0 += int(first[0]) + 1
            if k1 - k0 >= BULK_WALK:  # (a log start still to come is after these lines: they need no order with it)
                walk_at_once(k0, k1)
            elif k1 > k0:
                walk_lines(k0, k1)

        def make(entry: tuple, frame: tuple, own: Optional[float]) -> tuple[list, Optional[list]]:
            """An EVENT line's maker on it: the rows of its kind made at their place, and its events
            (None where its events are a row's, put into those rows)."""
            assert rows is not None
            placed = rows.placed.get(entry[2]) or rows.placed_of(entry[2])
            try:
                return placed, entry[0](placed, entry[1], frame, own)
            except Exception:  # a hook bug must not stop the stream: counted, reported
                self.failed += 1
                return placed, []

        def walk_lines(k: int, k1: int) -> None:
            """The core's lines k..k1, one at a time."""
            nonlocal log_start
            assert rows is not None
            frames, verdicts, tags = rows.frames.tuples(), rows.verdict_list, rows.ranks
            lines, ranks, nodes, walls = rows.line, rows.rank, rows.node, rows.wall
            last = self._last_wall
            its = rows.iterations
            told = len(its.line) if its is not None else 0
            entries, made = rows.events, rows.events_at  # (each EVENT line's maker and values, and how many made)
            while k < k1:
                frame = frames[k]
                own = frame[6]
                if own is None:
                    own = last
                else:
                    last = own
                verdict = verdicts[k]
                if verdict == EVENT:  # a line the core read for its parser: its events, in their place
                    entry = entries[made]
                    made += 1
                    if its is not None and len(its.line) > told:  # (a maker may read the last counter)
                        told = len(its.line)
                        its.told(its.counters[told - 1])
                    placed, out = make(entry, frame, own)
                    if out is None:
                        if log_start is not None and frame[0] >= log_start.line:  # it goes before this row
                            row = placed.pop()
                            rows.close_placed(events)
                            events.append(log_start)
                            rows.placed_of(entry[2]).append(row)
                            log_start = None
                    elif out:
                        rows.close_placed(events)
                        if log_start is not None and frame[0] >= log_start.line:
                            events.append(log_start)
                            log_start = None
                        events.extend(out)
                elif verdict == ROW:
                    if log_start is not None and frame[0] >= log_start.line:
                        rows.close(events)  # (the rows so far are of earlier lines)
                        events.append(log_start)
                        log_start = None
                    tag = tags[len(lines)]  # the rank a line's own tag names (``[Rank 3] rank=3``), if any
                    lines.append(frame[0])
                    ranks.append(frame[3] if tag is None else tag)
                    nodes.append(frame[5])
                    walls.append(own)
                elif verdict == ITERATION:
                    if log_start is not None and frame[0] >= log_start.line:
                        rows.close(events)
                        events.append(log_start)
                        log_start = None
                    assert its is not None
                    if its.announce is not None:  # a data rule's first row: its format names the run first
                        self._announce_rows(its, frame, own, rows, events)
                    its.line.append(frame[0])
                    its.rank.append(frame[3])
                    its.node.append(frame[5])
                    its.wall.append(own)
                    if its.walked is not None:
                        its.walked(its, len(its.line) - 1, [frame[3]], [frame[6]])
                k += 1
            rows.at, rows.events_at = k, made
            self._last_wall = last
            if its is not None and len(its.line) > told:  # (the parser's later hook lines read the counter)
                its.told(its.counters[len(its.line) - 1])

        def rows_at_once(kinds: np.ndarray, entries: list, frames: list, walls: list, iterations: list
                         ) -> Optional[list]:
            """The rows of the EVENT lines of the kinds that make them at once (rows._ROWS_OF), each
            kind's maker of many asked once: a row at each such line's place (None at the others', and
            where a maker could make events: its lines are made one at a time); None for no row."""
            assert rows is not None
            made: Optional[list] = None
            values = [entry[1] for entry in entries]
            for kind in sorted(set(kinds.tolist())):  # (not np.unique: its first call imports numpy.ma)
                if kind not in rows.rows_of:
                    continue
                at = np.flatnonzero(kinds == kind).tolist()
                many = len(at) == len(kinds)

                def of_kind(column: list) -> list:
                    return column if many else [column[j] for j in at]

                try:  # (a maker of many checks before it reads: None, and nothing read)
                    got = rows.rows_of[kind][0](of_kind(values), of_kind(frames), of_kind(walls), of_kind(iterations))
                except Exception:  # (a bug: its lines are made one at a time, which counts the line it is on)
                    got = None
                if got is None:
                    continue
                if many:
                    return got
                if made is None:
                    made = [None] * len(kinds)
                for j, row in zip(at, got):
                    made[j] = row
            return made

        def walk_at_once(k0: int, k1: int) -> None:
            """The core's lines k0..k1 at once: each kind's rows taken from the frames' columns, then
            each EVENT line's maker in turn (told the counter of the iteration lines before it).  Rows
            and EVENT lines' events need no order between them; a log start would (see walk_lines)."""
            assert rows is not None
            frames, verdicts = rows.frames, rows.verdicts[k0:k1]
            stamps = frames.wall[k0:k1]
            missing = np.isnan(stamps)
            if missing.any():  # a line without a stamp takes the one before it
                held = np.where(missing, -1, np.arange(k1 - k0))
                np.maximum.accumulate(held, out=held)
                last = self._last_wall
                own = np.where(held >= 0, stamps[held], np.nan if last is None else last)
            else:
                own = stamps
            final = float(own[-1])
            self._last_wall = None if final != final else final
            row = np.flatnonzero(verdicts == ROW)
            if len(row):
                at = row + k0
                ranks = frames.ranks_at(at)
                tags = rows.ranks[len(rows.line):len(rows.line) + len(row)]
                if tags.count(None) != len(tags):  # the rank a line's own tag names (``[Rank 3] rank=3``)
                    ranks = [rank if tag is None else tag for rank, tag in zip(ranks, tags)]
                rows.line.extend(frames.number[at].tolist())
                rows.rank.extend(ranks)
                rows.node.extend(frames.nodes_at(at))
                rows.wall.extend(stamps_of(own[row]))
            its = rows.iterations
            told = len(its.line) if its is not None else 0
            iteration = np.flatnonzero(verdicts == ITERATION)
            if len(iteration):
                assert its is not None
                at = iteration + k0
                first = len(its.line)
                its.line.extend(frames.number[at].tolist())
                its.rank.extend(frames.ranks_at(at))
                its.node.extend(frames.nodes_at(at))
                its.wall.extend(stamps_of(own[iteration]))
                if its.walked is not None:  # (the lines' own stamps)
                    its.walked(its, first, its.rank[first:], stamps_of(stamps[iteration]))
            made = np.flatnonzero(verdicts == EVENT)
            if len(made):
                n, k = len(made), rows.events_at
                entries, kinds = rows.events[k:k + n], rows.event_kinds[k:k + n]
                lines = frames.tuples_at(made + k0)
                owns = stamps_of(own[made])
                walked = (np.searchsorted(iteration, made) + told).tolist()  # iteration lines before each
                ready = None
                if rows.rows_of:  # (each line after an iteration line is at its counter, as told below)
                    counters = its.counters if its is not None and its.tells else []
                    ready = rows_at_once(kinds, entries, lines, owns,
                                         [counters[w - 1] if w > told and counters else None for w in walked])
                if ready is not None and None not in ready:  # a row a line: put at their places in line order
                    placed = rows.placed
                    for entry, row in zip(entries, ready):
                        (placed.get(entry[2]) or rows.placed_of(entry[2])).append(row)
                else:
                    for j, frame in enumerate(lines):
                        entry = entries[j]
                        if ready is not None and ready[j] is not None:
                            (rows.placed.get(entry[2]) or rows.placed_of(entry[2])).append(ready[j])
                            continue
                        if walked[j] > told:  # (a maker may read the last counter)
                            told = walked[j]
                            assert its is not None
                            its.told(its.counters[told - 1])
                        out = make(entry, frame, owns[j])[1]
                        if out:
                            rows.close_placed(events)
                            events.extend(out)
                rows.events_at = k + n
            rows.at = k1
            if its is not None and len(its.line) > told:  # (the parser's later hook lines read the counter)
                its.told(its.counters[len(its.line) - 1])

        count = text.count
        i, n = 0, len(hits)
        # the compiled core frames every hit line at once: number, end, launcher prefix, stamp
        core = native.core
        frames = framing(core).frame(text, [h[0] for h in hits], first_line) if core is not None and hits else None
        line_no = -1  # the frame of the line at hand
        while i < n:
            start = hits[i][0]
            line_no += 1
            if rows is not None and rows.at < len(rows.starts) and rows.starts[rows.at] < start:
                walk(start)
            if frames is not None:
                number, end, body_at, rank, local_rank, node, own = frames[line_no]
                if body_at is None:  # not ASCII: the Python definitions read it
                    pre = split_prefix(text[start:end])
                    body, rank, local_rank, node = pre.body, pre.rank, pre.local_rank, pre.node
                    own = line_stamp(body)
                else:
                    body = text[body_at:end]
            else:
                number += count("\n", at, start)
                at = start
                end = text.find("\n", start)
                pre = split_prefix(text[start:end if end >= 0 else len(text)])
                body, rank, local_rank, node = pre.body, pre.rank, pre.local_rank, pre.node
                own = line_stamp(body)
            wall = own
            if wall is None:
                wall = self._last_wall
            else:
                self._last_wall = wall
            ctx = LineContext(self.file, number, rank, local_rank, node, wall, own is not None)
            if i + 1 == n or hits[i + 1][0] != start:  # one rule on the line, the common case: nothing to merge
                rule, m = hits[i][2], hits[i][3]
                i += 1
                if m is not None:
                    ev = self._data_event(rule, m, ctx, own)
                    if ev is not None:
                        emit(self._announce(rule, ev, ctx))
                    continue
                try:
                    out = (rule.handler(self.active) if type(rule) is HookRule else rule.handler)(body, ctx)
                except Exception:  # a hook bug must not stop the stream: counted, reported
                    self.failed += 1
                    continue
                if out:
                    emit(out)
                continue
            line_events: list[Event] = []
            user_types: set[str] = set()
            done: list[Handler] = []
            while i < n and hits[i][0] == start:
                _, _, rule, m = hits[i]
                i += 1
                if m is not None:
                    ev = self._data_event(rule, m, ctx, own)
                    if ev is None:
                        continue
                    if rule.user:
                        user_types.add(ev.type)
                    elif ev.type in user_types:
                        continue
                    line_events.extend(self._announce(rule, ev, ctx))
                    continue
                handler = rule.handler(self.active) if type(rule) is HookRule else rule.handler
                if handler in done:
                    continue
                done.append(handler)
                try:
                    out = handler(body, ctx)
                except Exception:  # a hook bug must not stop the stream: counted, reported
                    self.failed += 1
                    continue
                if user_types:
                    out = [e for e in out if e.type not in user_types]
                line_events.extend(out)
            if line_events:
                emit(line_events)
        if rows is not None:
            walk(len(text) + 1)
            rows.close(events)
        if log_start is not None:
            events.append(log_start)
        if native.core is not None and len(events) >= RUN_ROWS:  # (the Python engine, the oracle, gives events)
            return iteration_runs(events)
        return events

    def _announce_rows(self, its: Any, frame: tuple, wall: Optional[float], rows: BlockRows, events: list) -> None:
        """A data rule's first row read by the core (``frame``, stamped ``wall``): its format names
        the run before it, as :meth:`_announce` does before the first of its events, unless it has."""
        name, its.announce = its.announce, None
        if name in self._announced:
            return
        self._announced.add(name)
        rows.close_placed(events)
        events.append(RunConfig(file=self.file, line=frame[0], rank=frame[3], node=frame[5], wall_time=wall,
                                framework=name))

    def _data_event(self, rule: DataRule, m: Any, ctx: LineContext, own_stamp: Optional[float]) -> Optional[Event]:
        entry = rule.entry
        if rule.user and guard.is_disabled(rule.fmt.name):
            return None
        try:
            fields = entry.fields(m)
            if entry.cumulative or entry.time_from:
                stamp = fields.get("wall_time", own_stamp)  # the line's own time, never an earlier line's
                rank = fields.get("rank", ctx.rank)
                self._running.apply(entry, rule.key, rank, fields, stamp if isinstance(stamp, float) else None)
        except RegexTimeout:  # its pairs regex
            guard.disable(rule.fmt.name, f"a pairs regex of {rule.fmt.origin} ran over {USER_REGEX_TIMEOUT_S:g} s "
                                         f"on a line of {self.file}")
            return None
        except Exception:
            self.failed += 1
            return None
        if not fields:
            return None
        for name in ("losses", "timers", "metrics"):
            if name in fields:
                fields[name] = frozen_map(fields[name])
        if rule.cls is Timers and "timers" in fields:
            fields["groups"] = frozen_map({k: timer_group(k) for k in fields["timers"]})
        rank = fields.pop("rank", None)
        node = fields.pop("node", None)
        wall = fields.pop("wall_time", None)  # the line's own, in the format's words
        return rule.cls(file=self.file, line=ctx.line, rank=ctx.rank if rank is None else rank,
                        node=ctx.node if node is None else node,
                        wall_time=ctx.wall_time if wall is None else wall, **fields)

    def _announce(self, rule: DataRule, ev: Event, ctx: LineContext) -> list[Event]:
        """A user format's first event in a file is led by its framework (its name), as a
        built-in parser's is; so is a built-in data format's that reads steps (llm.c)."""
        name = rule.fmt.name
        # a user's format names its run; a built-in one does when it reads the run's steps
        if name in self._announced or not (rule.user or rule.entry.event in _STEPS):
            return [ev]
        self._announced.add(name)
        if type(ev) is RunConfig:
            return [ev._replace(framework=ev.framework or name)]
        return [RunConfig(file=self.file, line=ctx.line, rank=ctx.rank, node=ctx.node, wall_time=ctx.wall_time,
                          framework=name), ev]

    def feed_line(self, line: str, lineno: int) -> list[Event]:
        """One line on its own, as events (tests and samples)."""
        return expand(self.feed_block(line + "\n", lineno))

    def flush(self) -> list[Event]:
        self._ready()
        events: list[Event] = []
        for rule in self._blocks:
            events.extend(rule.flush())
        for parser in self.active:
            try:
                events.extend(parser.flush())
            except Exception:
                self.failed += 1
        return events


@lru_cache(maxsize=256)
def _sniff_needles(cls: Any) -> Optional[tuple[str, ...]]:
    """Texts one of which a block must hold for ``cls``'s SNIFF to match in it."""
    needles: list[str] = []
    for pattern in cls.SNIFF.patterns:  # type: ignore[union-attr]
        found = anchors_of(pattern)
        if found is None:
            return None
        needles.extend(found)
    return tuple(needles)


@lru_cache(maxsize=256)
def _sniff_parts(cls: Any) -> tuple[tuple[re.Pattern[str], Optional[tuple[str, ...]]], ...]:
    """Each pattern of ``cls``'s SNIFF on its own, with its literals: one with a literal
    prefix is found by ``re``'s fast scan, which the alternation of them all never is."""
    return tuple((re.compile(p), anchors_of(p)) for p in cls.SNIFF.patterns)


def _sniffed(cls: type[LineParser], text: str, present: frozenset[str]) -> bool:
    """Whether ``cls``'s SNIFF shows up in ``text``: a pattern runs only where one of
    its literals does (a dormant parser's regex over every block cost 13 ms a MB; the
    alternation of Megatron's eight, 57 ms a MB).  ``present``: the literals of the
    block (they hold the needles when the class has them)."""
    needles = _sniff_needles(cls)  # type: ignore[arg-type]  # classes hash by identity
    if needles is not None and not any(n in present for n in needles):
        return False
    for pattern, anchors in _sniff_parts(cls):  # type: ignore[arg-type]  # (an alternative matches: the alternation does)
        if needles is not None and anchors is not None and not any(a in present for a in anchors):
            continue
        if pattern.search(text) is not None:
            return True
    return False


def _data_hits(text: str, rule: DataRule, hits: list, held: Optional[Mapping[str, list[int]]] = None) -> None:
    """Matches of a data rule, each confined to its line, with the declared anchors
    on that line (so what a line gives never depends on where a block ends)."""
    search = rule.entry.pattern.search
    anchors = rule.entry.anchors
    order = rule.order
    find, rfind = text.find, text.rfind
    if rule.by_line:
        starts = lines_holding(text, rule.anchors, held)
    elif held is not None and rule.anchors:  # starts with a literal: by line only when the lines are few
        starts = lines_holding(text, rule.anchors, held, few=True)
    else:
        starts = None
    if starts is not None:  # few candidate lines: the regex runs on them alone
        for start in starts:
            _line_hits(text, start, rule, hits)
        return
    pos = 0
    while True:
        m = search(text, pos)
        if m is None:
            return
        s = m.start()
        start = rfind("\n", 0, s) + 1
        end = find("\n", s)
        if end < 0:
            end = len(text)
        if m.end() > end:  # the regex ran past its line: try within the line alone
            m = search(text, s, end)
        if m is not None and (not anchors or any(find(a, start, end) >= 0 for a in anchors)):
            hits.append((start, order, rule, m))
            pos = m.end() if m.end() > m.start() else m.end() + 1
        else:
            pos = end + 1
        if pos > len(text):
            return


def _line_hits(text: str, start: int, rule: DataRule, hits: list) -> None:
    """The matches of a data rule on the line at ``start``, as a search over the whole
    block finds them (each may see the line's newline, as a lookahead does, but not
    run past it); the line holds one of the rule's anchors."""
    search = rule.entry.pattern.search
    end = text.find("\n", start)
    if end < 0:
        end = len(text)
    pos = start
    while pos <= end:
        m = search(text, pos, end + 1)
        if m is None:
            return
        if m.end() > end:  # ran past its line: try within the line alone
            m = search(text, m.start(), end)
            if m is None:
                return
        hits.append((start, rule.order, rule, m))
        pos = m.end() if m.end() > m.start() else m.end() + 1
