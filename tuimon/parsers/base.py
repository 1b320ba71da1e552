"""What every format parser is: a small stateful object fed one line at a time.

A parser declares, as data:
  * ``SNIFF``: a pattern whose presence in a file switches the parser on for it;
  * ``ROUTES``: (trigger, handler) pairs: a line holding a trigger goes to its handler
    (the engine finds a block's lines by the triggers and skips every other line);
  * ``SAMPLES``: real lines with the event and fields they must produce; the test
    suite checks each one field by field, as lnav does for its formats.
``feed`` must never raise: a line it cannot make sense of yields no event.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Optional, Pattern, Union

from .events import Event, RunConfig
from .patterns import lazy


class _Flag:
    """A once-only flag's value in a parser started mid-file (truthy: no report)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __bool__(self) -> bool:
        return True

    def __repr__(self) -> str:
        return self.name

    def __reduce__(self) -> str:
        return self.name  # pickled as the module attribute: identity survives


WARM = _Flag("WARM")  # nothing seen yet: the event may or may not have been reported before
SUPPRESSED = _Flag("SUPPRESSED")  # the event came up and was not reported: it may have been


@dataclass(frozen=True)
class Sample:
    line: str
    type: Optional[str]  # expected event type; None: the line must yield nothing
    fields: dict[str, Any] = field(default_factory=dict)
    context: tuple[str, ...] = ()  # lines fed before ``line``


@dataclass(slots=True)
class LineContext:
    file: str
    line: int
    rank: Optional[int]
    local_rank: Optional[int]
    node: Optional[str]
    wall_time: Optional[float]  # the line's own stamp, else the nearest earlier one
    own_stamp: bool = False  # whether ``wall_time`` is the line's own (a step time from stamps needs it)


class LineParser:
    """Subclasses declare ``ROUTES``: (trigger pattern, handler method name).  A line
    is handed to each handler whose trigger it contains, in ``ROUTES`` order, once
    per handler.  Handlers take ``(body, ctx)`` and return a list of events."""

    name: ClassVar[str] = "base"
    READS: ClassVar[str] = ""  # what logs it reads, in a line (`tuimon formats list`)
    framework: ClassVar[Optional[str]] = None
    SNIFF: ClassVar[Optional["Sniff"]] = None  # None: always on
    #: its own lines give the run's steps with their loss (Megatron's iteration lines, say)
    STEPS_WITH_LOSS: ClassVar[bool] = False
    #: reads steps only in files no ``STEPS_WITH_LOSS`` parser reads: it is switched off
    #: (or never on) once one is on, and they never both read a line
    FALLBACK: ClassVar[bool] = False
    ROUTES: ClassVar[tuple[tuple[str, str], ...]] = ()
    #: handler -> the kind of line the compiled core reads for it into columns
    #: (``tuimon._core.TimerLines``): a line it reads gives the event the handler would
    #: give, and any other line of the route still goes to the handler
    COLUMNS: ClassVar[dict[str, str]] = {}
    #: handler -> a text (or a regex) whose lines its trigger is on and it gives nothing for: they
    #: are not handed to it (a whole memory report holds the tail's trigger: as a hook's line too,
    #: the compiled core's reader left it to the hooks)
    LEAVES: ClassVar[dict[str, Union[str, re.Pattern[str]]]] = {}
    SAMPLES: ClassVar[tuple[Sample, ...]] = ()
    _ROUTE_RES: ClassVar[Optional[tuple[tuple[Pattern[str], str], ...]]] = None

    @classmethod
    def _route_res(cls) -> tuple[tuple[Pattern[str], str], ...]:
        """The routes compiled, each class its own, by the first line fed one at a time (:meth:`feed`):
        the engine finds a block's lines by the triggers itself, and 160 compiles were 5 ms of every start."""
        routes = cls.__dict__.get("_ROUTE_RES")
        if routes is None:
            routes = tuple((re.compile(p), h) for p, h in cls.ROUTES)
            cls._ROUTE_RES = routes
        return routes

    #: flags that only stop an event from being reported twice (see :meth:`warm`)
    ONCE_FLAGS: ClassVar[tuple[str, ...]] = ()
    #: attributes that are caches, not state: left out of :meth:`snapshot`
    CACHES: ClassVar[tuple[str, ...]] = ()

    def __init__(self, file: str = "") -> None:
        self.file = file

    def snapshot(self) -> dict[str, Any]:
        """Everything that decides what this parser does with the next line."""
        return {k: v for k, v in vars(self).items() if k != "file" and k not in self.CACHES}

    def warm(self) -> None:
        """Start in the middle of a file: whether once-only events were reported
        before is unknown (see tuimon.parallel)."""
        for flag in self.ONCE_FLAGS:
            setattr(self, flag, WARM)

    def first_time(self, flag: str) -> bool:
        """Whether the once-only event guarded by ``flag`` is to be reported now
        (then it counts as reported)."""
        value = getattr(self, flag)
        if value is False:
            setattr(self, flag, True)
            return True
        if value is WARM:  # reported before the cut, or due now: not ours to say
            setattr(self, flag, SUPPRESSED)
        return False

    def reported(self, flag: str) -> bool:
        """Whether the once-only event guarded by ``flag`` is known to be out."""
        value = getattr(self, flag)
        return value is True or value is SUPPRESSED

    def routes(self) -> list[tuple[str, Callable[[str, LineContext], list[Event]]]]:
        """(trigger, handler), handlers bound once so they can be compared."""
        bound = {h: getattr(self, h) for _, h in self.ROUTES}
        return [(p, bound[h]) for p, h in self.ROUTES]

    def feed(self, body: str, ctx: LineContext) -> list[Event]:
        """Feed one line (without its newline) to every handler it triggers."""
        probe = body + "\n"  # triggers may anchor on the line end
        events: list[Event] = []
        done: list[str] = []
        leaves = self.LEAVES
        for rx, handler in self._route_res():
            if handler not in done and rx.search(probe) and not (handler in leaves and holds(leaves[handler], body)):
                done.append(handler)
                events.extend(getattr(self, handler)(body, ctx))
        return events

    def flush(self) -> list[Event]:
        """Events held back waiting for more lines (called at end of input)."""
        return []

    def announce(self, events: list[Event], ctx: LineContext) -> list[Event]:
        """A line's events, led by the run's framework the first time a line gives any
        (into a RunConfig that already leads them); ``_announced`` is a once-only flag."""
        if events and self.first_time("_announced"):
            if type(events[0]) is RunConfig and events[0].framework is None:
                events[0] = events[0]._replace(framework=self.framework)
            else:
                events.insert(0, self.make(RunConfig, ctx, framework=self.framework))
        return events

    def context_of(self, frame: tuple, wall: Optional[float]) -> LineContext:
        """The context of a line the compiled core read (tuimon.engine.rows): ``frame`` is its
        (number, end, body, rank, local rank, node, own stamp), ``wall`` its stamp or the one before."""
        return LineContext(self.file, frame[0], frame[3], frame[4], frame[5], wall, frame[6] is not None)

    def make(self, cls: type[Event], ctx: LineContext, **fields: Any) -> Event:
        return cls(file=self.file, line=ctx.line, rank=ctx.rank, node=ctx.node,
                   wall_time=ctx.wall_time, **fields)


def holds(leaves: Union[str, re.Pattern[str]], text: str, start: int = 0, end: Optional[int] = None) -> bool:
    """Whether ``text[start:end]`` holds ``leaves`` (a :attr:`LineParser.LEAVES` value)."""
    stop = len(text) if end is None else end
    if isinstance(leaves, str):
        return text.find(leaves, start, stop) >= 0
    return leaves.search(text, start, stop) is not None


class Sniff:
    """A ``SNIFF``: patterns, any of which switches a parser on."""

    def __init__(self, patterns: tuple[str, ...]) -> None:
        self.patterns = patterns
        self.regex = lazy("|".join(f"(?:{p})" for p in patterns))

    def search(self, text: str) -> Optional[re.Match[str]]:
        return self.regex.search(text)


def compile_sniff(*patterns: str) -> Sniff:
    return Sniff(patterns)
