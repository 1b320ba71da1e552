"""What every format parser is: a small stateful object fed one line at a time.

A parser declares, as data:
  * ``SNIFF``: a pattern whose presence in a file switches the parser on for it;
  * ``TRIGGERS``: patterns of which a line must contain one to be worth feeding
    (the dispatcher skips every other line without calling the parser);
  * ``SAMPLES``: real lines with the event and fields they must produce; the test
    suite checks each one field by field, as lnav does for its formats.
``feed`` must never raise: a line it cannot make sense of yields no event.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, ClassVar, Optional, Pattern

from .events import Event


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


class LineParser:
    name: ClassVar[str] = "base"
    framework: ClassVar[Optional[str]] = None
    SNIFF: ClassVar[Optional[Pattern[str]]] = None  # None: always on
    TRIGGERS: ClassVar[tuple[str, ...]] = ()
    SAMPLES: ClassVar[tuple[Sample, ...]] = ()

    def __init__(self, file: str = "") -> None:
        self.file = file

    def feed(self, body: str, ctx: LineContext) -> list[Event]:
        raise NotImplementedError

    def flush(self) -> list[Event]:
        """Events held back waiting for more lines (called at end of input)."""
        return []

    def make(self, cls: type[Event], ctx: LineContext, **fields: Any) -> Event:
        return cls(file=self.file, line=ctx.line, rank=ctx.rank, node=ctx.node,
                   wall_time=ctx.wall_time, **fields)


def compile_sniff(*patterns: str) -> Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in patterns))
