"""Where a file was read to, and what proves it is still that file: one model for local
files and SFTP ones (as Vector's file-source keeps one checkpoint per fingerprint).

Neither transport can trust a name (rotation renames, copytruncate empties, an editor
replaces), and SFTP has no inode: a file read up to an offset is known again by its first
bytes and by the bytes just before the offset.  A :class:`Cursor` keeps both while a file
is read; its :class:`Fingerprint` (a digest of the first bytes, the offset, the bytes
before it) is what is saved (``--state``) and what a parked file is found again by.  Each
transport reads the bytes a check needs its own way (``pread``, an SFTP read) and asks the
cursor; nothing here parses."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

from . import state as saved
from .rotation import same_content

HEAD_BYTES = saved.HEAD_BYTES
MARKER_BYTES = saved.MARKER_BYTES


@dataclass(frozen=True)
class Fingerprint:
    """A file read up to ``offset``, as it is known again under any name: the digest of its
    first ``head_len`` bytes, and ``last``, the bytes just before the offset."""

    head_len: int
    head_digest: str
    offset: int
    last: bytes

    def head_holds(self, head_now: bytes) -> bool:
        """Whether ``head_now`` (the first ``head_len`` bytes of a file) are this file's."""
        return len(head_now) == self.head_len and saved.head_digest(head_now) == self.head_digest

    def holds(self, head_now: bytes, before: bytes) -> bool:
        """Whether a file whose first ``head_len`` bytes are ``head_now`` and whose
        ``len(last)`` bytes ending at ``offset`` are ``before`` is this one."""
        return self.head_holds(head_now) and (not self.last or before == self.last)


@dataclass(eq=False, kw_only=True)
class Cursor:
    """A file being read: its offset, its first bytes (up to :data:`HEAD_BYTES`) and the bytes
    just before the offset (up to :data:`MARKER_BYTES`)."""

    offset: int = 0
    head: bytes = b""
    last: bytes = b""
    #: while only a saved position's fingerprint is known of the file read (``head`` is then
    #: empty): the generations rotated since are searched for the file it names
    known_by: Optional[Fingerprint] = None

    def took(self, data: bytes) -> None:
        """``data`` was read at the offset."""
        if len(self.head) < HEAD_BYTES and len(self.head) == self.offset and self.known_by is None:
            self.head += data[:HEAD_BYTES - len(self.head)]
        self.offset += len(data)
        self.last = (self.last + data)[-MARKER_BYTES:]

    def stepped_over(self, hole: int) -> None:
        """A sparse hole of ``hole`` bytes at the offset was stepped over (it reads as NULs)."""
        if len(self.head) < HEAD_BYTES and len(self.head) == self.offset:
            self.head += b"\x00" * min(HEAD_BYTES - len(self.head), hole)
        self.offset += hole
        self.last = b"\x00" * min(MARKER_BYTES, hole)

    def rewind(self) -> None:
        """The file is read again from its start (truncated, or another file at the path)."""
        self.offset, self.head, self.last, self.known_by = 0, b"", b"", None

    def placed(self, offset: int, last: bytes, head: bytes) -> None:
        """Set at ``offset`` of a file found to hold what a fingerprint or an entry says (``head``:
        its first bytes, read by the caller)."""
        self.offset, self.last, self.head, self.known_by = offset, last, head[:HEAD_BYTES], None

    def looking_for(self, known: Fingerprint) -> None:
        """Only ``known`` is known of the file read (a saved position): the cursor stands at its
        offset, and a file holds what was read if its first bytes' digest and its bytes before
        the offset are the fingerprint's (:meth:`placed` once it is found, :meth:`rewind` if not)."""
        self.offset, self.last, self.head, self.known_by = known.offset, known.last, b"", known

    def stop_looking(self) -> None:
        """The search for the fingerprint's file is over (what it found was read)."""
        self.known_by = None

    def fingerprint(self, upto: Optional[int] = None, last: Optional[bytes] = None) -> Fingerprint:
        """This file as it is known again; ``upto`` (with ``last``, the bytes before it): a point
        before the offset (a saved position stops at the last complete line)."""
        offset = self.offset if upto is None else upto
        head = self.head[:min(HEAD_BYTES, offset)]
        marker = (self.last if last is None else last)[-min(MARKER_BYTES, offset):] if offset else b""
        return Fingerprint(len(head), saved.head_digest(head), offset, marker)

    def wanted(self) -> tuple[int, int]:
        """(bytes at the start, bytes before the offset) a check of another file reads."""
        if self.known_by is not None:
            return self.known_by.head_len, len(self.last)
        return len(self.head), len(self.last)

    def head_holds(self, head_now: bytes) -> bool:
        """Whether a file whose first bytes are ``head_now`` (:meth:`wanted` says how many) may be
        the one read (a second read, of the bytes before the offset, tells)."""
        if self.known_by is not None:
            return self.known_by.head_holds(head_now)
        return not self.head or head_now == self.head

    def continues_in(self, head_now: bytes, before: bytes) -> bool:
        """Whether a file whose first bytes are ``head_now`` and whose bytes before the offset
        are ``before`` (:meth:`wanted` says how many of each) holds what was read (the
        rotation model's rule, :func:`.rotation.same_content`)."""
        if self.known_by is not None:
            return self.known_by.head_holds(head_now) and same_content(b"", self.last, b"", before)
        return same_content(self.head, self.last, head_now, before)


def continues(fd: int, cursor: Cursor) -> bool:
    """Whether the local file behind ``fd`` holds what ``cursor`` read (:meth:`Cursor.continues_in`
    over ``pread``; the SFTP follower asks the same over its reads)."""
    n_head, n_last = cursor.wanted()
    head_now = os.pread(fd, n_head, 0) if n_head else b""
    if not cursor.head_holds(head_now):
        return False  # no second read when the first bytes differ already
    before = os.pread(fd, n_last, cursor.offset - n_last) if n_last else b""
    return cursor.continues_in(head_now, before)
