"""What the local follower knows of each followed path and file: a followed *path*
(:class:`Followed`) points at a *stream* (:class:`Stream`, one inode, a :class:`.cursor.Cursor`);
a stream that left its path and was closed is *parked* (:class:`Parked`: its cursor's
fingerprint, known again under any name).  What reads a stream's bytes (its parser, its
parse-cache entry: tuimon.engine.ingest.Reading) is the follower's, above the sources: a
stream holds it, and asks it only how many lines were read and how many bytes of a line it holds."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Optional

from . import state as saved
from .cursor import Cursor, Fingerprint

MIN_INTERVAL = 0.05  # a hot file's first poll interval (s)


class Gone(OSError):
    """A followed file can no longer be found by its identity (deleted, moved away)."""


@dataclass(eq=False)
class Stream(Cursor):
    key: tuple[int, int]
    fd: Optional[int]  # None while closed to stay under the descriptor budget
    path: str  # where the file is now (for reopening)
    label: str  # the followed path its events are attributed to
    #: its bytes' ingest (tuimon.engine.ingest.Reading), the follower's to use; the sources ask it
    #: only ``next_line`` (a saved position's line) and ``pending`` (bytes of a line not ended yet)
    reading: Any
    skip_nuls: bool = False
    mtime_ns: int = 0
    size_seen: int = 0  # its size at the last stat: what is past ``offset`` is the backlog
    judged: bool = False  # its first bytes were looked at (a file found in a directory must be text)
    binary: bool = False  # ... and were not text: not read (tuimon.sources.scope)
    history: Optional["History"] = None
    detached_at: Optional[float] = None


@dataclass(eq=False)
class History:
    """The middle of a large file, read after its head and tail (see ``head_tail``)."""

    start: int
    end: int
    reading: Any  # (tuimon.engine.ingest.Reading)
    offset: int = 0


@dataclass
class Parked:
    """A file that left its path and was closed, or the file a state file names:
    its fingerprint (:class:`.cursor.Fingerprint`, to know it again by its content under
    any name), and the line to read on from."""

    key: tuple[int, int]
    label: str
    print: Fingerprint
    next_line: int

    @property
    def offset(self) -> int:
        return self.print.offset

    @classmethod
    def of(cls, s: "Stream") -> "Parked":
        return cls(s.key, s.label, s.fingerprint(), s.reading.next_line)

    @classmethod
    def saved(cls, label: str, p: dict) -> "Parked":
        return cls((p["dev"], p["ino"]), label, Fingerprint(p["head_len"], p["head"], p["offset"],
                                                            bytes.fromhex(p["marker"])), p["line"] + 1)

    def to_saved(self) -> dict:
        f = self.print
        return {"dev": self.key[0], "ino": self.key[1], "head_len": f.head_len, "head": f.head_digest,
                "offset": f.offset, "marker": f.last.hex(), "line": self.next_line - 1}

    def resume(self, s: "Stream", fd: int) -> None:
        """Read ``s`` (the file behind ``fd``, found to match) on from where this was left."""
        s.placed(self.print.offset, self.print.last, os.pread(fd, min(saved.HEAD_BYTES, self.print.offset), 0))
        s.reading.next_line = self.next_line

    def matches(self, fd: int) -> bool:
        f = self.print
        if not f.head_holds(os.pread(fd, f.head_len, 0)):
            return False
        n = len(f.last)
        return not n or os.pread(fd, n, f.offset - n) == f.last


@dataclass(eq=False)
class Followed:
    path: str
    explicit: bool
    stream: Optional[Stream] = None
    status: str = "waiting"
    interval: float = MIN_INTERVAL
    due: float = 0.0
    dead: bool = False
    missing_since: Optional[float] = None
    previous: Optional[Stream] = None  # the stream that was at the path before it went missing
    hot: bool = True  # recently changed: polled on its own backoff schedule
    siblings: Optional[set] = None  # signatures of the siblings that were history when we started
    watched: Optional[bool] = None  # under a live inotify watch on a local filesystem (None: not known yet)
    slot: int = 0  # which of the sweeps looks at it while it is watched and quiet


@dataclass
class Progress:
    bytes_done: int = 0
    bytes_total: int = 0
