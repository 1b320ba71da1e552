"""What the local follower knows of each followed path and file: a followed *path*
(:class:`Followed`) points at a *stream* (:class:`Stream`, one inode, read by a parser);
a stream that left its path and was closed is *parked* (:class:`Parked`: known again by
its first bytes and the bytes before its offset, under any name).  What reads a stream's bytes (its
parser, its parse-cache entry) is the follower's, above the sources (tuimon.follow): held here, not used."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Optional

from . import state as saved

MIN_INTERVAL = 0.05  # a hot file's first poll interval (s)


class Gone(OSError):
    """A followed file can no longer be found by its identity (deleted, moved away)."""


@dataclass(eq=False)
class Stream:
    key: tuple[int, int]
    fd: Optional[int]  # None while closed to stay under the descriptor budget
    path: str  # where the file is now (for reopening)
    label: str  # the followed path its events are attributed to
    parser: Any  # the engine's parser of its bytes (tuimon.engine.ingest.FileParser), the follower's to use
    offset: int = 0
    head: bytes = b""  # the first bytes of the file (up to HEAD_BYTES)
    last: bytes = b""  # the bytes just before ``offset`` (up to MARKER_BYTES)
    skip_nuls: bool = False
    mtime_ns: int = 0
    size_seen: int = 0  # its size at the last stat: what is past ``offset`` is the backlog
    judged: bool = False  # its first bytes were looked at (a file found in a directory must be text)
    binary: bool = False  # ... and were not text: not read (tuimon.sources.scope)
    history: Optional["History"] = None
    detached_at: Optional[float] = None
    #: the parse cache entry being written for this file (only while it is read whole, in order)
    writer: Any = None  # (tuimon.engine.cache.EntryWriter)
    skip_events: int = 0  # events the parser is yet to give again (a cache entry cut short)


@dataclass(eq=False)
class History:
    """The middle of a large file, read after its head and tail (see ``head_tail``)."""

    start: int
    end: int
    parser: Any
    offset: int = 0


@dataclass
class Parked:
    """A file that left its path and was closed, or the file a state file names:
    enough to know it again by its content, under any name (its first bytes and
    the bytes before ``offset``), and to read on from ``offset``."""

    key: tuple[int, int]
    label: str
    head_len: int
    head_digest: str
    offset: int
    last: bytes
    next_line: int

    @classmethod
    def of(cls, s: "Stream") -> "Parked":
        head = s.head[:saved.HEAD_BYTES]
        return cls(s.key, s.label, len(head), saved.head_digest(head), s.offset, s.last, s.parser.framer.next_line)

    @classmethod
    def saved(cls, label: str, p: dict) -> "Parked":
        return cls((p["dev"], p["ino"]), label, p["head_len"], p["head"], p["offset"], bytes.fromhex(p["marker"]),
                   p["line"] + 1)

    def to_saved(self) -> dict:
        return {"dev": self.key[0], "ino": self.key[1], "head_len": self.head_len, "head": self.head_digest,
                "offset": self.offset, "marker": self.last.hex(), "line": self.next_line - 1}

    def resume(self, s: "Stream", fd: int) -> None:
        """Read ``s`` (the file behind ``fd``, found to match) on from where this was left."""
        s.offset, s.last = self.offset, self.last
        s.head = os.pread(fd, min(saved.HEAD_BYTES, self.offset), 0)
        s.parser.framer.next_line = self.next_line

    def matches(self, fd: int) -> bool:
        head = os.pread(fd, self.head_len, 0)
        if len(head) != self.head_len or saved.head_digest(head) != self.head_digest:
            return False
        n = len(self.last)
        return not n or os.pread(fd, n, self.offset - n) == self.last


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
