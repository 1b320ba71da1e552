"""What the ingest (a thread, or the ingest process) tells a live session: typed
messages, the same in both modes.  In process mode they are pickled across a bounded
queue; in thread mode the follower's callbacks hand them to the session directly.  The
session applies each with one method (:meth:`LiveSession.apply`)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Union

from tuimon.parsers.columns import Item


@dataclass(frozen=True)
class Batch:
    """Parsed events (and timer rows), and the last lines of the files they came from (label -> lines)."""
    events: list[Item]
    tails: dict[str, list[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Progress:
    """How far the reading is, and the states of files and hosts (None: as before)."""
    bytes_done: int
    bytes_total: int
    files: int
    states: Optional[dict[str, str]] = None
    backlog: int = 0  # bytes written and not read yet


@dataclass(frozen=True)
class IngestError:
    """The ingest cannot go on (or a host is lost): said in the app's header."""
    text: str


@dataclass(frozen=True)
class IngestWarning:
    """Something the user should hear of once (a file skipped, a format refused)."""
    text: str


Message = Union[Batch, Progress, IngestError, IngestWarning]
