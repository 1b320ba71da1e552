"""User format regexes: one compiler, one safety check.

:func:`compile_user` is the one place a user's regex is compiled (``parsers.schema`` is
handed it by whoever loads a format file: :mod:`.catalog`), once a load.  A line regex
the compiled core reads as ``re`` does is run there, by the Rust ``regex`` crate, in time
linear in the line whatever the regex (:class:`CorePattern`; the ``regex`` package is
compiled for it only if a line the core does not read comes).  Any other regex is run by
the ``regex`` package, whose matching takes a timeout (Python's ``re`` has none and
cannot be interrupted, even by Ctrl-C): a search that runs over :data:`USER_REGEX_TIMEOUT_S`
raises :class:`RegexTimeout` and the engine turns the format off (:mod:`.guard`); and such
a regex with an unbounded repeat inside another is refused first (:mod:`.regex_safety`,
which cannot refuse every regex that backtracks without end: ``(?:a|aa)+$`` has no nested
repeat, so :func:`harden` probes what is left on lines built to be slow, as ``tuimon
formats check`` and every load do).  (Here, not in ``parsers/``: the parsers use the
standard library alone.)
"""
from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Iterator, Optional

from tuimon.parsers.schema import Format, FormatError, RegexRefused

from ..parsers.patterns import lazy
from .anchors import skip_class
from .regex_safety import unbounded_nesting

USER_REGEX_TIMEOUT_S = 1.0


class RegexTimeout(Exception):
    """A user regex ran over its time bound (``args[0]`` is its source)."""


class TimedPattern:
    """A compiled user regex with ``re.Pattern``'s methods the engine uses, each bounded
    in time.  ``finditer`` returns a list: the bound must hold over the whole walk."""

    __slots__ = ("_regex", "pattern", "groupindex", "timeout", "multiline")

    def __init__(self, source: str, multiline: bool = False, timeout: float = USER_REGEX_TIMEOUT_S,
                 groupindex: Optional[dict[str, int]] = None) -> None:
        """``groupindex``: the groups' numbers where another compiler read them already (the core);
        then the ``regex`` package compiles the pattern only when it is first asked to search."""
        self.pattern = source
        self.timeout = timeout
        self.multiline = multiline
        self._regex: Any = None
        self.groupindex = dict(self._compiled.groupindex) if groupindex is None else groupindex

    @property
    def _compiled(self) -> Any:
        if self._regex is None:
            import regex

            self._regex = regex.compile(self.pattern, regex.VERSION0 | (regex.MULTILINE if self.multiline else 0))
        return self._regex

    def search(self, string: str, pos: int = 0, endpos: Optional[int] = None) -> Any:
        try:
            return self._compiled.search(string, pos, len(string) if endpos is None else endpos, timeout=self.timeout)
        except TimeoutError:
            raise RegexTimeout(self.pattern) from None

    def finditer(self, string: str, pos: int = 0, endpos: Optional[int] = None) -> list[Any]:
        try:
            return list(self._compiled.finditer(string, pos, len(string) if endpos is None else endpos,
                                                timeout=self.timeout))
        except TimeoutError:
            raise RegexTimeout(self.pattern) from None

    def findall(self, string: str) -> list[Any]:
        try:
            return self._compiled.findall(string, timeout=self.timeout)
        except TimeoutError:
            raise RegexTimeout(self.pattern) from None

    def __reduce__(self) -> tuple:
        return (TimedPattern, (self.pattern, self.multiline, self.timeout))


class CoreMatch:
    """A match the compiled core found, with the part of ``re.Match`` the engine reads."""

    __slots__ = ("string", "_spans", "_names")

    def __init__(self, string: str, offset: int, spans: list, names: dict[str, int]) -> None:
        self.string = string
        self._spans = [None if s is None else (s[0] + offset, s[1] + offset) for s in spans]
        self._names = names

    def _index(self, group: Any) -> int:
        return self._names[group] if isinstance(group, str) else group

    def span(self, group: Any = 0) -> tuple[int, int]:
        s = self._spans[self._index(group)]
        return (-1, -1) if s is None else s

    def start(self, group: Any = 0) -> int:
        return self.span(group)[0]

    def end(self, group: Any = 0) -> int:
        return self.span(group)[1]

    def group(self, *groups: Any) -> Any:
        picked = [self._text(g) for g in (groups or (0,))]
        return picked[0] if len(picked) == 1 else tuple(picked)

    def _text(self, group: Any) -> Optional[str]:
        s = self._spans[self._index(group)]
        return None if s is None else self.string[s[0]:s[1]]

    def groups(self) -> tuple:
        return tuple(self._text(g) for g in range(1, len(self._spans)))

    def groupdict(self) -> dict[str, Optional[str]]:
        return {name: self._text(k) for name, k in self._names.items()}


class CorePattern(TimedPattern):
    """A user line regex the compiled core runs, in time linear in the line whatever the
    regex (a pathological one is harmless there).  Python's classes and the core's agree
    on ASCII text without the separators \\x1c-\\x1f; a search over any other text is
    left to the time-bounded ``regex`` (:class:`TimedPattern`), compiled on that first search."""

    __slots__ = ("_core",)

    def __init__(self, source: str, core: Any, multiline: bool = False, timeout: float = USER_REGEX_TIMEOUT_S) -> None:
        """``core``: the core's compiled regex (:func:`core_regex`)."""
        super().__init__(source, multiline, timeout, dict(core.group_index()))
        self._core = core

    def search(self, string: str, pos: int = 0, endpos: Optional[int] = None) -> Any:
        end = len(string) if endpos is None else min(endpos, len(string))
        if string.isascii():  # character offsets are byte offsets: the text as it is
            handled, spans = self._core.search(string, pos, end)
            offset = 0
        else:  # one line of it (the engine searches line by line), its offsets its own
            offset = string.rfind("\n", 0, pos) + 1
            newline = string.find("\n", pos, end)
            if newline >= 0 and newline != end - 1:
                return super().search(string, pos, endpos)
            line = string[offset:end]
            if not line.isascii():  # (the core counts bytes; here they are not the characters)
                return super().search(string, pos, endpos)
            handled, spans = self._core.search(line, pos - offset, end - offset)
        if not handled:
            return super().search(string, pos, endpos)
        return None if spans is None else CoreMatch(string, offset, spans, self.groupindex)

    def finditer(self, string: str, pos: int = 0, endpos: Optional[int] = None) -> list[Any]:
        """The matches of :meth:`search` from ``pos`` on, each after the last (``re``'s walk); where
        one is empty (``re`` then steps on by a rule of its own), the time-bounded regex walks it all."""
        start, end = pos, len(string) if endpos is None else min(endpos, len(string))
        out = []
        while pos <= end:
            m = self.search(string, pos, endpos)
            if m is None:
                break
            if m.end() == m.start():
                return super().finditer(string, start, endpos)
            out.append(m)
            pos = m.end()
        return out

    def __reduce__(self) -> tuple:  # decided again where it is loaded (that process may have no core)
        return (compile_user, (self.pattern, "line" if self.multiline else "pairs"))


_INLINE_FLAGS_LATER = lazy(r"(?<!^)\((?:\?[aiLmsux]+)\)")
_VERBOSE = lazy(r"\(\?[a-zA-Z-]*x")


def core_reason(source: str) -> Optional[str]:
    """None when the compiled core can run ``source`` with Python's meaning; else why not."""
    return core_regex(source)[1]


def core_regex(source: str) -> tuple[Any, Optional[str]]:
    """(the core's compiled ``source``, None) where the compiled core runs it with Python's
    meaning; else (None, why not)."""
    from . import native

    return compiled_in_core(source, native.core)


def core_line_regex(source: str, core: Any) -> Any:
    """``core``'s compiled ``source`` where it reads it as ``re`` does (a hook's trigger, a block's pair
    regex); else None."""
    return compiled_in_core(source, core)[0]


@lru_cache(maxsize=2048)
def compiled_in_core(source: str, core: Any) -> tuple[Any, Optional[str]]:
    """(made once a regex a process: checking it is compiling it)"""
    reason = _syntax_reason(source) if core is not None else "the compiled core is not in use"
    if reason is not None:
        return None, reason
    try:
        return core.LineRegex(source), None
    except ValueError as exc:
        return None, "the core cannot run it: " + _first_line(str(exc))


def _syntax_reason(source: str) -> Optional[str]:
    """Why the core would read ``source`` otherwise than ``re`` does, or None."""
    if _VERBOSE.search(source):
        return "verbose mode (?x)"
    if _INLINE_FLAGS_LATER.search(source):
        return "inline flags after the start"
    if _possessive(source):
        return "a possessive quantifier (*+, ++, ?+), which the core reads as a repeated repeat"
    odd = _class_syntax(source)
    if odd is not None:
        return f"a character class holding {odd!r}, which the two read differently"
    if _empty_repeat(source):
        return "a repeat of what may match nothing (re ends such a loop where the core goes on)"
    return None


def _first_line(message: str) -> str:
    lines = [line.strip() for line in message.splitlines() if line.strip() and not set(line.strip()) <= set("^~")]
    return lines[-1].removeprefix("error: ") if lines else message


def _empty_repeat(source: str) -> bool:
    """Whether a loop (``*``, ``+``, ``{2,}``...) repeats what may match the empty text:
    ``re`` ends the loop at an empty round (and a group in it keeps ``''``: ``(a*)*`` on
    ``a``), where the core tries the round's other ways (``(?:a*|[^ab]\\B)*`` on ``a\\n``)."""
    from re import _constants as c  # type: ignore[attr-defined]
    from re import _parser  # type: ignore[attr-defined]

    try:
        tree = _parser.parse(source)
    except Exception:
        return True

    def odd(sub: Any) -> bool:
        for op, av in sub:
            if op in (c.MAX_REPEAT, c.MIN_REPEAT) and av[1] > 1 and av[2].getwidth()[0] == 0:
                return True
            if _nested(av, odd):
                return True
        return False

    return odd(tree)


def _nested(av: Any, test: Any) -> bool:
    """``test`` on every sub-pattern inside a node's argument."""
    from re import _parser  # type: ignore[attr-defined]

    if isinstance(av, _parser.SubPattern):
        return bool(test(av))
    if isinstance(av, (tuple, list)):
        return any(_nested(x, test) for x in av)
    return False


def _pieces(source: str) -> Iterator[tuple[int, str]]:
    """(offset, text) of each top-level piece of a regex: an escape, a character class, a character."""
    i, n = 0, len(source)
    while i < n:
        end = i + 2 if source[i] == "\\" else skip_class(source, i) if source[i] == "[" else i + 1
        yield i, source[i:end]
        i = end


def _possessive(source: str) -> bool:
    """Whether a quantifier of ``source`` is followed by ``+`` (outside classes and escapes)."""
    return any(i > 0 and piece in ("*", "+", "?", "}") and source[i + 1:i + 2] == "+" for i, piece in _pieces(source))


def _class_syntax(source: str) -> Optional[str]:
    """What in a character class the core would read as set syntax (nesting, ``&&``,
    ``--``, ``~~``, ``[:name:]``) and Python as plain characters; None if nothing."""
    for _, piece in _pieces(source):
        if not piece.startswith("["):
            continue
        body = piece[1:-1]
        j = 1 if body.startswith("^") else 0
        j += 1 if body[j:j + 1] == "]" else 0  # a leading "]" is a member
        while j < len(body):
            if body[j] == "\\":
                j += 2
                continue
            if body[j] == "[":
                return "["
            if body[j:j + 2] in ("&&", "--", "~~"):
                return body[j:j + 2]
            j += 1
    return None


#: the roles (:data:`tuimon.parsers.schema.Compile`) whose regex the core runs where it can: a line regex
#: (:class:`CorePattern`), and a block's pair regex (tuimon.engine.block_rules reads pair lines with it)
CORE_ROLES = ("line", "pair")


def compile_user(source: str, role: str = "pairs") -> TimedPattern:
    """A user regex (``role`` as :data:`tuimon.parsers.schema.Compile` names them), run in the core
    where it can be (time linear in the line), else bounded in time; raises ``re.error`` (as
    ``re.compile`` would) when it does not compile, and :class:`RegexRefused` for an unbounded repeat
    inside another in a regex the core does not run (it can take exponential time on a long line)."""
    import regex

    multiline = role == "line"
    core, _ = core_regex(source) if role in CORE_ROLES else (None, None)
    try:
        if core is not None and multiline:
            return CorePattern(source, core, multiline)
        if core is None:
            nested = unbounded_nesting(source)
            if nested is not None:
                raise RegexRefused(f"{nested} can take exponential time on a long line; bound the inner repeat")
        pattern = TimedPattern(source, multiline)
        pattern._compiled  # (compiled now: a regex the regex package refuses is refused at load)
        return pattern
    except regex.error as exc:
        raise re.error(str(exc)) from None


# -- the probe: the same check at load as at ``formats check`` ------------------------------

PROBE_LINE = 4096  # characters: longer than almost every log line, short enough for sane regexes
PROBE_LIMIT_S = 2.0  # for all of a format's regexes over all probe lines


def probe_lines(samples: list[str]) -> list[str]:
    """Lines built to make backtracking regexes slow: the sample lines grown long, each
    cut short by a late mismatch, and runs of one character class."""
    out = []
    for line in samples:
        out.append((line * (PROBE_LINE // max(1, len(line)) + 1))[:PROBE_LINE])  # the sample, over and over
        out.append(line[: len(line) // 2] + "x" * PROBE_LINE)  # a match that fails late
    for run in ("a", "0", " ", "a ", "1.", "ab", ":", "|", "-", "\t"):
        out.append((run * PROBE_LINE)[:PROBE_LINE] + "!")
    return out


def slow_patterns(patterns: list[TimedPattern], samples: list[str], limit_s: float = PROBE_LIMIT_S) -> Optional[str]:
    """None, or why the patterns are refused: one of them did not get through the probe
    lines within ``limit_s`` seconds in all (each search bounded by what is left)."""
    import time

    import regex

    deadline = time.monotonic() + limit_s
    for text in probe_lines(samples):
        for p in patterns:
            left = deadline - time.monotonic()
            try:
                if left <= 0:
                    raise TimeoutError
                p._compiled.search(text, timeout=left)
                p._compiled.findall(text, timeout=max(1e-3, deadline - time.monotonic()))
            except TimeoutError:
                return (f"a regex took over {limit_s:.0f} s on lines of {PROBE_LINE} characters (it backtracks "
                        f"without end on some input and would stall tuimon): simplify it, bound its repeats")
            except regex.error:
                continue
    return None


def load_user_format(text: str, origin: str) -> Format:
    """A user's format file, its regexes compiled by :func:`compile_user` and probed
    (:func:`harden`); raises :class:`FormatError`."""
    from tuimon.parsers.schema import format_from_toml

    return harden(format_from_toml(text, origin, compile_user))


def harden(fmt: Format) -> Format:
    """``fmt`` (a user's, compiled by :func:`compile_user`), after the probe; raises
    :class:`FormatError` when a regex is too slow on the probe lines."""
    # the probe asks what Python's regex does: a line regex the core runs is linear in the line
    patterns = [p for e in fmt.lines for p in (e.pattern, e.pairs_pattern)
                if p is not None and not isinstance(p, CorePattern)]
    patterns += [p for b in fmt.blocks for p in (b.begin_pattern, b.end_pattern, b.pair_pattern)]
    samples = [s.line for e in fmt.lines for s in e.samples]
    samples += [line for b in fmt.blocks for s in b.samples for line in s.lines]
    slow = slow_patterns(patterns, samples)
    if slow is not None:
        raise FormatError(f"{fmt.origin}: {slow}")
    return fmt
