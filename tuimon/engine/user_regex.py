"""User format regexes, bounded in time.

A static check (:mod:`parsers.regex_safety`) cannot refuse every regex that backtracks
without end (``(?:a|aa)+$`` has no nested repeat).  A user format's regexes are
therefore run by the ``regex`` module, whose matching takes a timeout (Python's ``re``
has none and cannot be interrupted, even by Ctrl-C): a search that runs over
:data:`USER_REGEX_TIMEOUT_S` raises :class:`RegexTimeout` and the engine turns the
format off (:mod:`.guard`).  :func:`harden` gives a parsed user format these patterns
and probes them, as ``tuimon formats check`` and every load do.  (Here, not in
``parsers/``: the parsers use the standard library alone.)
"""
from __future__ import annotations

import dataclasses
import re
from typing import Any, Iterator, Optional

from tuimon.parsers.schema import Format, FormatError

from .anchors import skip_class

USER_REGEX_TIMEOUT_S = 1.0


class RegexTimeout(Exception):
    """A user regex ran over its time bound (``args[0]`` is its source)."""


class TimedPattern:
    """A compiled user regex with ``re.Pattern``'s methods the engine uses, each bounded
    in time.  ``finditer`` returns a list: the bound must hold over the whole walk."""

    __slots__ = ("_compiled", "pattern", "groupindex", "timeout")

    def __init__(self, source: str, multiline: bool = False, timeout: float = USER_REGEX_TIMEOUT_S) -> None:
        import regex

        flags = regex.VERSION0 | (regex.MULTILINE if multiline else 0)
        self._compiled = regex.compile(source, flags)
        self.pattern = source
        self.groupindex = dict(self._compiled.groupindex)
        self.timeout = timeout

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
        return (TimedPattern, (self.pattern, bool(self._compiled.flags & 8), self.timeout))


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
    left to the time-bounded ``regex`` (:class:`TimedPattern`), as is ``finditer``."""

    __slots__ = ("_core",)

    def __init__(self, source: str, multiline: bool = False, timeout: float = USER_REGEX_TIMEOUT_S) -> None:
        super().__init__(source, multiline, timeout)
        from . import native

        self._core = native.core.LineRegex(source)  # type: ignore[union-attr]  # (core_reason said it can)

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

    def __reduce__(self) -> tuple:  # decided again where it is loaded (that process may have no core)
        return (compile_user, (self.pattern, bool(self._compiled.flags & 8)))


_INLINE_FLAGS_LATER = re.compile(r"(?<!^)\((?:\?[aiLmsux]+)\)")
_VERBOSE = re.compile(r"\(\?[a-zA-Z-]*x")


def core_reason(source: str) -> Optional[str]:
    """None when the compiled core can run ``source`` with Python's meaning; else why not."""
    from . import native

    if native.core is None:
        return "the compiled core is not in use"
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
    try:
        native.core.LineRegex(source)
    except ValueError as exc:
        return "the core cannot run it: " + _first_line(str(exc))
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


def runs_in_the_core(source: str) -> bool:
    """Whether the compiled core runs ``source`` (in time linear in the line): then a format's
    nested repeat is harmless (:func:`tuimon.parsers.schema.format_from_toml`'s ``linear``)."""
    return core_reason(source) is None


def compile_user(source: str, multiline: bool = False) -> TimedPattern:
    """A user regex, time-bounded; raises ``re.error`` (as ``re.compile`` would) when it
    does not compile."""
    import regex

    try:
        if multiline and core_reason(source) is None:  # a line regex: the compiled core runs it
            return CorePattern(source, multiline)
        return TimedPattern(source, multiline)
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


def harden(fmt: Format) -> Format:
    """``fmt`` (a user's, parsed with ``re``) with time-bounded patterns, after the probe;
    raises :class:`FormatError` when a regex is too slow on the probe lines or the
    ``regex`` module cannot compile it."""
    import re

    lines, blocks = [], []
    try:
        for entry in fmt.lines:
            pairs = compile_user(entry.pairs_pattern.pattern) if entry.pairs_pattern is not None else None
            lines.append(dataclasses.replace(entry, pattern=compile_user(entry.pattern.pattern, multiline=True),
                                             pairs_pattern=pairs))
        for block in fmt.blocks:  # (its pair regex runs in the core where it can: tuimon.engine.block_rules)
            blocks.append(dataclasses.replace(block, begin_pattern=compile_user(block.begin),
                                              end_pattern=compile_user(block.end), pair_pattern=compile_user(block.pair)))
    except re.error as exc:
        raise FormatError(f"{fmt.origin}: bad regex: {exc}") from None
    # the probe asks what Python's regex does: a line regex the core runs is linear in the line
    patterns = [p for e in lines for p in (e.pattern, e.pairs_pattern) if p is not None and not isinstance(p, CorePattern)]
    patterns += [p for b in blocks for p in (b.begin_pattern, b.end_pattern, b.pair_pattern)]
    samples = [s.line for e in lines for s in e.samples] + [line for b in blocks for s in b.samples for line in s.lines]
    slow = slow_patterns(patterns, samples)
    if slow is not None:
        raise FormatError(f"{fmt.origin}: {slow}")
    return dataclasses.replace(fmt, lines=tuple(lines), blocks=tuple(blocks))
