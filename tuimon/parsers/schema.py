"""Line formats as data: the one schema of built-in and user formats.

A format is a name, a description and line entries.  Each entry says which event a
line makes (``event``), a regex whose named groups are the event's fields as
``tuimon events`` prints them, a type per group, optional literal ``anchor``s every
matching line contains, an optional ``pairs`` regex (``name``/``value`` groups)
applied repeatedly to the rest of the line for ``name: value`` lists, optional
constant fields (``set``), and sample lines with the fields they must give.

Users write the same schema in TOML (:func:`format_from_toml`).  Everything here
is pure: text in, :class:`Format` or :class:`FormatError` out.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional

from .events import EVENT_TYPES
from .numbers import to_float, to_int
from .patterns import lazy
from .prefix import split_prefix
from .timestamps import line_stamp, parse_compact, parse_date_text, parse_iso

#: the types a group may be read as; ``si`` reads nanotron's ``human_format`` (``1.23K`` is
#: 1230), ``percent`` a number with an optional ``%`` (``15.38%`` is 15.38), ``time`` a date
#: and time (``2023-11-02 18:33:23``, ``2023-11-02-183323``) as POSIX seconds, read as UTC
TYPES = ("int", "float", "si", "percent", "str", "time")
_COMMON = ("file", "line")  # given by the engine, never by a group
_SI = {"": 1.0, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12, "P": 1e15}
_SI_NUMBER = lazy(r"\s*([-+]?(?:\d[\d,]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*([KMBGTP]?)")
#: map fields a ``pairs`` regex fills, per event, and how group names fold into them
MAP_FIELD = {"iteration": "losses", "timers": "timers", "eval": "metrics"}
EVENTS = tuple(name for name in EVENT_TYPES if name != "truncated")


class FormatError(ValueError):
    """A format that cannot be used: the message names the file and the entry."""


class RegexRefused(ValueError):
    """A regex a compiler will not run (``args[0]`` says why: it can take exponential time)."""


#: what a format's regexes are compiled by: ``compile(source, role)`` -> a pattern with ``re.Pattern``'s
#: ``search``, ``finditer``, ``findall``, ``groupindex`` and ``pattern``; ``role`` is ``line`` (a line
#: regex, multi-line: ``^`` and ``$`` at every line's ends), ``pairs`` (a line's pairs), or a block's
#: ``begin``, ``end`` or ``pair``.  It raises ``re.error`` for a regex that does not compile and
#: :class:`RegexRefused` for one it will not run.  The built-in formats are compiled by ``re``
#: (:func:`compile_builtin`; tests hold them to the engine's safety check); a user's by the engine's
#: one compiler and its one safety check (tuimon.engine.user_regex.compile_user), passed in by whoever
#: loads the file: the answer never depends on what was imported before.
Compile = Callable[[str, str], Any]


def compile_builtin(source: str, role: str) -> "re.Pattern[str]":
    """A built-in format's regex, by ``re``."""
    return re.compile(source, re.MULTILINE if role == "line" else 0)


def _compiled(compile: Compile, source: str, role: str, origin: str, entry: str, what: str) -> Any:
    try:
        return compile(source, role)
    except re.error as exc:
        raise FormatError(f"{_where(origin, entry)}: bad {what}: {exc}") from None
    except RegexRefused as exc:
        raise FormatError(f"{_where(origin, entry)}: {what} refused: {exc}") from None


def _si(text: str) -> Optional[float]:
    m = _SI_NUMBER.match(text)
    if m is None:
        return to_float(text)
    value = to_float(m.group(1))
    return None if value is None else value * _SI[m.group(2)]


def _percent(text: str) -> Optional[float]:
    return to_float(text.strip().rstrip("%"))


def _str(text: str) -> Optional[str]:
    return text


def _time(text: str) -> Optional[float]:
    """ISO, ALCF's compact stamp, or a date written out in words (``date``'s output)."""
    stamp = parse_iso(text)
    if stamp is None:
        stamp = parse_compact(text)
    return stamp if stamp is not None else parse_date_text(text)


CONVERTERS: dict[str, Callable[[str], Any]] = {
    "int": to_int, "float": to_float, "si": _si, "percent": _percent, "str": _str, "time": _time,
}


def field_kinds(event: str) -> dict[str, str]:
    """The fields a group may fill for ``event``: name -> int, float, bool, str or map."""
    cls = EVENT_TYPES[event]
    out: dict[str, str] = {}
    for name, note in cls.__annotations__.items():
        if name in _COMMON:
            continue
        text = str(note)
        if name == "wall_time":  # the line's own time, where the log writes it in its own way
            out[name] = "time"
        elif "Mapping" in text:
            out[name] = "map"
        elif "int" in text:
            out[name] = "int"
        elif "bool" in text:
            out[name] = "bool"
        elif "str" in text:
            out[name] = "str"
        else:
            out[name] = "float"
    return out


def _fold(event: str, name: str) -> Optional[tuple[str, Optional[str]]]:
    """Where group ``name`` lands: (field, None), or (map field, key) for an
    iteration's ``loss``/``loss_NAME``; None if ``event`` has no such field."""
    if event == "iteration" and (name == "loss" or name.startswith("loss_")):
        return "losses", ("loss" if name == "loss" else name[5:])
    if event == "eval" and name.startswith("metric_") and len(name) > 7:
        return "metrics", name[7:]
    kinds = field_kinds(event)
    if name in kinds and kinds[name] != "map":
        return name, None
    return None


@dataclass(frozen=True)
class LineSample:
    line: str
    expect: Mapping[str, Any]
    context: tuple[str, ...] = ()  # lines the entry reads before ``line`` (cumulative fields, time_from)


MAX_RUNNING = 4096  # (entry, rank) pairs whose running totals an engine keeps


class Running:
    """What an entry's ``cumulative`` and ``time_from`` fields need of the records before:
    per (entry, rank), the latest step and each running total and stamp.  Plain data:
    the parse cache saves it with the engine."""

    __slots__ = ("last",)

    def __init__(self) -> None:
        self.last: dict[tuple[Any, Any], dict[str, tuple[float, Optional[int]]]] = {}

    def __getstate__(self) -> dict:
        return {"last": self.last}

    def __setstate__(self, state: dict) -> None:
        self.last = state["last"]

    def apply(self, entry: "LineFormat", key: Any, rank: Any, fields: dict[str, Any],
              stamp: Optional[float]) -> None:
        """Turn ``fields``' running totals into per-step values (in place).  Each total is kept
        with the step it was read at: a record that lacks it leaves the base as it was."""
        step = fields.get("iteration", fields.get("step"))
        last = self.last.get((key, rank))
        if last is None:
            if len(self.last) >= MAX_RUNNING:
                last = {}  # past the bound: no base kept, so no derived value (never a wrong one)
            else:
                last = self.last[(key, rank)] = {}
        for name in entry.cumulative:
            total = fields.pop(name, None)
            if total is None or not math.isfinite(total):
                continue  # the field stays empty; the record before stays the base
            value = _per_step(total, last.get(name), step)
            last[name] = (total, step)
            if value is not None:
                fields[name] = round(value) if isinstance(total, int) else value
        if entry.time_from == "stamp" and stamp is not None:
            value = _per_step(stamp, last.get("stamp"), step)
            last["stamp"] = (stamp, step)
            if value is not None:
                fields["elapsed_ms"] = round(value * 1000.0, 3)


def _per_step(total: float, before: Optional[tuple[float, Optional[int]]], step: Optional[int]) -> Optional[float]:
    """The difference of a running total from the base (its value and step), over the steps
    between them; None for a first record, a total that went down or a step that did not go up
    (a restart: the next record measures again)."""
    if before is None or total < before[0]:
        return None
    previous, previous_step = before
    if step is None or previous_step is None:
        return total - previous
    if step <= previous_step:
        return None
    return (total - previous) / (step - previous_step)


@dataclass(frozen=True)
class LineFormat:
    """One ``[[lines]]`` entry, compiled."""

    event: str
    regex: str
    types: Mapping[str, str] = field(default_factory=dict)
    anchors: tuple[str, ...] = ()
    pairs: Optional[str] = None
    set: Mapping[str, Any] = field(default_factory=dict)
    samples: tuple[LineSample, ...] = ()
    #: fields whose group holds a running total (modded-nanogpt's ``train_time:14741ms``): the
    #: event gets the difference from the previous record of the same entry and rank, over the
    #: steps between them; the first record, and one whose total went down (a restart), get none
    cumulative: tuple[str, ...] = ()
    #: ``"stamp"``: ``elapsed_ms`` is the time between this line's stamp and the previous
    #: record's, over the steps between them (for logs that print no step time)
    time_from: Optional[str] = None
    #: ``re``; a user's become time-bounded patterns in the engine (tuimon.engine.user_regex)
    pattern: Any = field(default=re.compile(""), compare=False, repr=False)
    pairs_pattern: Optional[Any] = field(default=None, compare=False, repr=False)
    #: (group, field, map key or None, converter) for each named group
    plan: tuple[tuple[str, str, Optional[str], Callable[[str], Any]], ...] = field(default=(), compare=False,
                                                                                   repr=False)

    def fields(self, m: re.Match[str]) -> dict[str, Any]:
        """The event fields one match gives (groups that did not take part stay absent)."""
        out: dict[str, Any] = dict(self.set)
        maps: dict[str, dict[str, Any]] = {}
        for group, name, key, convert in self.plan:
            text = m.group(group)
            if text is None:
                continue
            value = convert(text)
            if value is None:
                continue
            if key is None:
                out[name] = value
            else:
                maps.setdefault(name, {})[key] = value
        if self.pairs_pattern is not None:
            into = maps.setdefault(MAP_FIELD[self.event], {})
            convert = CONVERTERS[self.types.get("value", "float")]
            line_end = m.string.find("\n", m.end())
            rest = m.string[m.end():line_end if line_end >= 0 else len(m.string)]
            for pm in self.pairs_pattern.finditer(rest):
                value = convert(pm.group("value"))
                if value is not None:
                    into[pm.group("name").strip()] = value
        out.update(maps)
        return out

    def parse(self, line: str, running: Optional[Running] = None, stamp: Optional[float] = None
              ) -> list[dict[str, Any]]:
        """Fields of every match in one line (the samples' check; the engine reads blocks);
        ``running``: the entry's state from the lines before (cumulative fields, time_from)."""
        if self.anchors and not any(a in line for a in self.anchors):
            return []
        out = [self.fields(m) for m in self.pattern.finditer(line)]
        if self.cumulative or self.time_from:
            running = running if running is not None else Running()
            for fields in out:
                own = fields.get("wall_time", stamp)
                running.apply(self, 0, None, fields, own if isinstance(own, float) else None)
        return out


#: pairs a block keeps (an unterminated block in a huge log must not grow without end)
MAX_BLOCK_PAIRS = 4096
#: (pairs) -> the fields of each event: what a built-in block makes of its pairs, in Python
BlockHook = Callable[[dict[str, str]], list[dict[str, Any]]]


@dataclass(frozen=True)
class BlockSample:
    lines: tuple[str, ...]
    expect: Mapping[str, Any]  # the fields of the block's first event


@dataclass(frozen=True)
class BlockFormat:
    """One ``[[blocks]]`` entry, compiled: a block of ``name .... value`` lines, such as
    Megatron's argument list, read as one event.  A line where ``begin`` matches opens
    it (afresh, if one is open); each line after it where ``pair`` matches gives a
    ``(name, value)`` pair (the later of one name wins; at most :data:`MAX_BLOCK_PAIRS`);
    a line where ``end`` matches closes it, and its pairs make events at the ``begin``
    line: through ``keys`` (pair name -> field), or, for a built-in format, its ``hook``.
    A block the file ends in makes its events then.  Each regex reads a line's text after
    its launcher prefix (``srun -l``'s ``3:``), ``end`` before ``begin``; ``anchor``, if
    given, is a text every pair line holds (else the engine reads it off ``pair``)."""

    event: str
    begin: str
    end: str
    pair: str
    anchor: Optional[str] = None
    keys: Mapping[str, str] = field(default_factory=dict)
    hook: Optional[BlockHook] = field(default=None, compare=False, repr=False)
    samples: tuple[BlockSample, ...] = ()
    begin_pattern: Any = field(default=re.compile(""), compare=False, repr=False)
    end_pattern: Any = field(default=re.compile(""), compare=False, repr=False)
    pair_pattern: Any = field(default=re.compile(""), compare=False, repr=False)
    #: (pair name, field, converter) for each of ``keys``
    plan: tuple[tuple[str, str, Callable[[str], Any]], ...] = field(default=(), compare=False, repr=False)

    def marker(self, body: str) -> Optional[bool]:
        """True where ``body`` opens a block, False where it closes one, else None."""
        if self.end_pattern.search(body) is not None:
            return False
        return True if self.begin_pattern.search(body) is not None else None

    def pair_of(self, body: str) -> Optional[tuple[str, str]]:
        m = self.pair_pattern.search(body)
        return None if m is None else (m.group("name"), m.group("value"))

    def events(self, pairs: dict[str, str]) -> list[dict[str, Any]]:
        """The fields of each event a closed block's pairs make."""
        if self.hook is not None:
            return self.hook(pairs)
        fields: dict[str, Any] = {}
        for name, target, convert in self.plan:
            text = pairs.get(name)
            if text is not None and (value := convert(text)) is not None:
                fields[target] = value
        return [fields] if fields else []

    def read(self, bodies: list[str]) -> list[dict[str, Any]]:
        """The fields of the events of ``bodies`` (lines after their prefixes) read alone:
        the samples' check, and the meaning the engines hold to."""
        out: list[dict[str, Any]] = []
        pairs: Optional[dict[str, str]] = None
        for body in bodies:
            marker = self.marker(body)
            if marker is False:
                if pairs is not None:
                    out.extend(self.events(pairs))
                pairs = None
            elif marker:
                pairs = {}
            elif pairs is not None and (self.anchor is None or self.anchor in body):
                found = self.pair_of(body)
                if found is not None and len(pairs) < MAX_BLOCK_PAIRS:
                    pairs[found[0]] = found[1]
        if pairs is not None:
            out.extend(self.events(pairs))
        return out


@dataclass(frozen=True)
class Format:
    name: str
    description: str
    lines: tuple[LineFormat, ...]
    origin: str = "built-in"
    blocks: tuple[BlockFormat, ...] = ()


def _where(origin: str, entry: str) -> str:
    return f"{origin}: {entry}" if entry else origin


def _need(cond: bool, origin: str, entry: str, message: str) -> None:
    if not cond:
        raise FormatError(f"{_where(origin, entry)}: {message}")


def compile_line(data: Mapping[str, Any], origin: str = "built-in", entry: str = "",
                 compile: Compile = compile_builtin) -> LineFormat:
    """One ``[[lines]]`` table -> :class:`LineFormat`, or :class:`FormatError`."""
    known = {"event", "regex", "types", "anchor", "anchors", "pairs", "set", "samples", "cumulative", "time_from"}
    unknown = sorted(set(data) - known)
    _need(not unknown, origin, entry, f"unknown key {unknown[0] if unknown else ''!r}")
    event: Any = data.get("event")
    _need(isinstance(event, str) and event in EVENTS, origin, entry,
          f"unknown event {event!r} (one of {', '.join(EVENTS)})")
    regex: Any = data.get("regex")
    _need(isinstance(regex, str) and bool(regex), origin, entry, "regex missing")
    pattern = _compiled(compile, regex, "line", origin, entry, "regex")
    anchors = data.get("anchors", data.get("anchor", ()))
    if isinstance(anchors, str):
        anchors = (anchors,)
    _need(isinstance(anchors, (list, tuple)) and all(isinstance(a, str) and a for a in anchors), origin, entry,
          "anchor must be a non-empty string or a list of them")
    types = data.get("types", {})
    _need(isinstance(types, Mapping), origin, entry, "types must be a table")
    for group, kind in types.items():
        _need(kind in TYPES, origin, entry, f"unknown type {kind!r} for {group!r} (one of {', '.join(TYPES)})")
    kinds = field_kinds(event)
    plan = []
    for group in pattern.groupindex:
        folded = _fold(event, group)
        _need(folded is not None, origin, entry,
              f"unknown field {group!r} for event {event!r} (fields: {', '.join(sorted(kinds))})")
        name, key = folded  # type: ignore[misc]
        kind = types.get(group) or _default_type(kinds.get(name, "float"))
        _need(_compatible(kind, kinds.get(name, "float")), origin, entry,
              f"type {kind!r} cannot fill {group!r}, a {kinds.get(name)} field")
        plan.append((group, name, key, _typed(kind, kinds.get(name, "float"))))
    stray = sorted(set(types) - set(pattern.groupindex) - {"value"})
    _need(not stray, origin, entry, f"types names {stray[0] if stray else ''!r}, which is not a group of the regex")
    pairs = data.get("pairs")
    pairs_pattern = None
    if pairs is not None:
        _need(event in MAP_FIELD, origin, entry, f"pairs only fill {' or '.join(MAP_FIELD)} events")
        _need(isinstance(pairs, str) and bool(pairs), origin, entry, "pairs must be a regex")
        pairs_pattern = _compiled(compile, pairs, "pairs", origin, entry, "pairs regex")
        _need({"name", "value"} <= set(pairs_pattern.groupindex), origin, entry,
              "pairs needs groups (?P<name>...) and (?P<value>...)")
    constants = data.get("set", {})
    _need(isinstance(constants, Mapping), origin, entry, "set must be a table")
    for name, value in constants.items():
        _need(name in kinds and kinds[name] != "map", origin, entry, f"set names unknown field {name!r}")
        _need(_value_fits(value, kinds[name]), origin, entry, f"set {name} = {value!r} is not a {kinds[name]}")
    cumulative = data.get("cumulative", ())
    _need(isinstance(cumulative, (list, tuple)) and all(isinstance(c, str) for c in cumulative), origin, entry,
          "cumulative must be a list of group names")
    filled = {name: kinds.get(name) for _, name, key, _ in plan if key is None}
    for name in cumulative:
        _need(filled.get(name) in ("int", "float"), origin, entry,
              f"cumulative names {name!r}, which is not a numeric field a group of the regex fills")
    time_from = data.get("time_from")
    _need(time_from in (None, "stamp"), origin, entry, f"time_from must be \"stamp\", not {time_from!r}")
    _need(time_from is None or "elapsed_ms" in kinds, origin, entry,
          f"time_from gives elapsed_ms, which a {event!r} event does not have")
    _need(time_from is None or "elapsed_ms" not in cumulative, origin, entry,
          "elapsed_ms cannot come from both time_from and cumulative")
    samples = []
    for k, sample in enumerate(data.get("samples", ())):
        where = f"{entry}.samples[{k}]"
        _need(isinstance(sample, Mapping) and isinstance(sample.get("line"), str), origin, where,
              "a sample needs line = \"...\"")
        expect = sample.get("expect", {})
        _need(isinstance(expect, Mapping), origin, where, "expect must be a table")
        context = sample.get("context", ())
        _need(isinstance(context, (list, tuple)) and all(isinstance(c, str) for c in context), origin, where,
              "context must be a list of lines")
        samples.append(LineSample(sample["line"], dict(expect), tuple(context)))
    return LineFormat(event, regex, dict(types), tuple(anchors), pairs, dict(constants), tuple(samples),
                      tuple(cumulative), time_from, pattern, pairs_pattern, tuple(plan))


def _default_type(kind: str) -> str:
    return {"int": "int", "str": "str", "time": "time"}.get(kind, "float")


def _compatible(kind: str, target: str) -> bool:
    if target == "time":
        return kind in ("time", "float", "int")  # a date, or POSIX seconds as the log writes them
    if kind == "time":
        return False
    if target == "str":
        return kind == "str"
    if target == "bool":
        return kind in ("int", "str")
    return kind != "str"


def _typed(kind: str, target: str) -> Callable[[str], Any]:
    convert = CONVERTERS[kind]
    if target == "int" and kind != "int":
        def to_whole(text: str) -> Optional[int]:
            value = convert(text)
            return int(round(value)) if value is not None and math.isfinite(value) else None
        to_whole.whole_of = convert  # type: ignore[attr-defined]  # (what the compiled core reads, then rounds)
        return to_whole
    if target == "bool":
        def to_bool(text: str) -> Optional[bool]:
            word = text.strip().lower()
            return True if word in ("1", "true", "yes", "on") else False if word in ("0", "false", "no", "off") else None
        return to_bool
    return convert


def _value_fits(value: Any, kind: str) -> bool:
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "bool":
        return isinstance(value, bool)
    return isinstance(value, str)


def _pattern(data: Mapping[str, Any], key: str, origin: str, entry: str, compile: Compile) -> Any:
    regex: Any = data.get(key)
    _need(isinstance(regex, str) and bool(regex), origin, entry, f"{key} missing")
    return _compiled(compile, regex, key, origin, entry, f"{key} regex")


def compile_block(data: Mapping[str, Any], origin: str = "built-in", entry: str = "",
                  compile: Compile = compile_builtin) -> BlockFormat:
    """One ``[[blocks]]`` table -> :class:`BlockFormat`, or :class:`FormatError`."""
    known = {"event", "begin", "end", "pair", "anchor", "keys", "hook", "samples"}
    unknown = sorted(set(data) - known)
    _need(not unknown, origin, entry, f"unknown key {unknown[0] if unknown else ''!r}")
    event: Any = data.get("event")
    _need(isinstance(event, str) and event in EVENTS, origin, entry,
          f"unknown event {event!r} (one of {', '.join(EVENTS)})")
    begin, end, pair = (_pattern(data, key, origin, entry, compile) for key in ("begin", "end", "pair"))
    _need({"name", "value"} <= set(pair.groupindex), origin, entry, "pair needs groups (?P<name>...) and (?P<value>...)")
    anchor = data.get("anchor")
    _need(anchor is None or (isinstance(anchor, str) and bool(anchor) and "\n" not in anchor), origin, entry,
          "anchor must be a non-empty text of one line")
    hook = data.get("hook")
    _need(hook is None or callable(hook), origin, entry, "hook is for built-in formats (use keys)")
    keys = data.get("keys", {})
    _need(isinstance(keys, Mapping) and all(isinstance(k, str) and isinstance(v, str) for k, v in keys.items()),
          origin, entry, "keys must be a table of pair name = \"field\"")
    _need(hook is not None or bool(keys), origin, entry, "keys missing: which pair names fill which fields")
    kinds = field_kinds(event)
    plan = []
    for name, target in keys.items():
        _need(kinds.get(target) not in (None, "map"), origin, entry,
              f"keys names unknown field {target!r} for event {event!r} (fields: {', '.join(sorted(kinds))})")
        plan.append((name, target, _typed(_default_type(kinds[target]), kinds[target])))
    samples = []
    for k, sample in enumerate(data.get("samples", ())):
        where = f"{entry}.samples[{k}]"
        _need(isinstance(sample, Mapping) and isinstance(sample.get("lines"), (list, tuple)) and
              all(isinstance(line, str) for line in sample["lines"]), origin, where,
              "a block sample needs lines = [\"...\", ...]")
        expect = sample.get("expect", {})
        _need(isinstance(expect, Mapping), origin, where, "expect must be a table")
        samples.append(BlockSample(tuple(sample["lines"]), dict(expect)))
    return BlockFormat(event, begin.pattern, end.pattern, pair.pattern, anchor, dict(keys), hook, tuple(samples),
                       begin, end, pair, tuple(plan))


def format_from_dict(data: Mapping[str, Any], origin: str = "built-in", compile: Compile = compile_builtin) -> Format:
    known = {"name", "description", "lines", "blocks"}
    unknown = sorted(set(data) - known)
    _need(not unknown, origin, "", f"unknown key {unknown[0] if unknown else ''!r}")
    name: Any = data.get("name")
    _need(isinstance(name, str) and bool(re.fullmatch(r"[\w.-]+", name or "")), origin, "",
          "name must be a word (letters, digits, _ . -)")
    lines: Any = data.get("lines", [])
    blocks: Any = data.get("blocks", [])
    _need(isinstance(lines, list) and isinstance(blocks, list) and bool(lines or blocks), origin, "",
          "no [[lines]] or [[blocks]] entries")
    compiled = tuple(compile_line(entry, origin, f"lines[{k}]", compile) if isinstance(entry, Mapping)
                     else _bad_entry(origin, "lines", k) for k, entry in enumerate(lines))
    read = tuple(compile_block(entry, origin, f"blocks[{k}]", compile) if isinstance(entry, Mapping)
                 else _bad_entry(origin, "blocks", k) for k, entry in enumerate(blocks))
    return Format(name, str(data.get("description", "")), compiled, origin, read)


def _bad_entry(origin: str, kind: str, k: int) -> Any:
    raise FormatError(f"{_where(origin, f'{kind}[{k}]')}: must be a table")


def format_from_toml(text: str, origin: str, compile: Compile = compile_builtin) -> Format:
    """A format file; a user's is compiled by the engine's ``compile`` (tuimon.engine.user_regex.compile_user,
    which runs each regex in the core or bounds it in time, and refuses the unsafe)."""
    import tomllib  # (here: a run without format files never needs it, and every start paid its import)

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise FormatError(f"{origin}: bad TOML: {exc}") from None
    except RecursionError:
        raise FormatError(f"{origin}: nested too deeply") from None
    return format_from_dict(data, origin, compile)


def _close(got: Any, want: Any) -> bool:
    if isinstance(want, Mapping):
        return isinstance(got, Mapping) and set(got) == set(want) and all(_close(got[k], want[k]) for k in want)
    if isinstance(want, float) or isinstance(got, float):
        if not isinstance(got, (int, float)) or not isinstance(want, (int, float)):
            return False
        return math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12) or (math.isnan(got) and math.isnan(want))
    return bool(got == want)


def sample_errors(fmt: Format) -> list[str]:
    """One line per sample that its entry does not read as it says."""
    errors = []
    for k, entry in enumerate(fmt.lines):
        for j, sample in enumerate(entry.samples):
            where = _where(fmt.origin, f"lines[{k}].samples[{j}]")
            running = Running()
            for before in sample.context:
                entry.parse(before, running, line_stamp(before))
            got = entry.parse(sample.line, running, line_stamp(sample.line))
            if not got:
                errors.append(f"{where}: the line does not match")
                continue
            fields = _expected_view(entry.event, got[0])
            for name, want in sample.expect.items():
                if name not in fields:
                    errors.append(f"{where}: {name} missing (expected {want!r})")
                elif not _close(fields[name], want):
                    errors.append(f"{where}: {name} = {fields[name]!r}, expected {want!r}")
    return errors + _block_sample_errors(fmt)


def _block_sample_errors(fmt: Format) -> list[str]:
    """One line per block sample that its entry does not read as it says."""
    errors = []
    for k, entry in enumerate(fmt.blocks):
        for j, sample in enumerate(entry.samples):
            where = _where(fmt.origin, f"blocks[{k}].samples[{j}]")
            got = entry.read([split_prefix(line).body for line in sample.lines])
            if not got:
                errors.append(f"{where}: the lines make no event")
                continue
            for name, want in sample.expect.items():
                if name not in got[0]:
                    errors.append(f"{where}: {name} missing (expected {want!r})")
                elif not _close(got[0][name], want):
                    errors.append(f"{where}: {name} = {got[0][name]!r}, expected {want!r}")
    return errors


def _expected_view(event: str, fields: dict[str, Any]) -> dict[str, Any]:
    """``fields`` with an iteration's losses spelt as the groups were (``loss``, ``loss_NAME``)."""
    out = dict(fields)
    if event == "iteration":
        for key, value in fields.get("losses", {}).items():
            out["loss" if key == "loss" else f"loss_{key}"] = value
    if event == "eval":
        for key, value in fields.get("metrics", {}).items():
            out[f"metric_{key}"] = value
    return out
