"""A follower's saved positions (``--state``): where each followed path was read to, and
what of its rotated files was history or read up to where, so that a restarted follower
neither repeats nor loses a line.  The file format and its safety rules are
:mod:`.state`'s; this is the follower's side: which saved position a file resumes from,
and what is saved of the files being read."""
from __future__ import annotations

import os
import threading
import time
from dataclasses import replace
from typing import Callable, Iterable, Optional

from . import state as saved
from .cursor import Fingerprint
from .files import Sibling
from .parking import Parking
from .streams import Followed, Parked, Stream

FdOf = Callable[[Stream], int]  # a stream's descriptor, reopened by identity if it was closed

SAVE_EVERY_S = 1.0  # a remote file's position is saved at most this long after the output it covers...
SAVE_EVERY_LINES = 10_000  # ...or this many lines


class SavedPositions:
    """The positions a follower started with (each used once, by the first file seen at
    its path) and the saving of new ones.  Without a state path, it holds nothing.

    Local files and remote ones (keyed ``ssh:user@host:port:path``) share one state file: the
    local follower's thread saves its positions, a remote host its own (:meth:`put`), and each
    save writes both."""

    def __init__(self, path: Optional[str], warn: Callable[[str], None]) -> None:
        self.path = path
        self._pending: dict[str, saved.Position] = {}
        self._local: dict[str, saved.Position] = {}
        self._remote: dict[str, saved.Position] = {}
        self._guard = threading.Lock()  # the local follower's thread and the remote hosts' loop both save
        self._remote_lines = 0
        self._remote_saved = time.monotonic()
        self._remote_dirty = False
        self._lock: Optional[saved.StateLock] = None
        if path:
            self._lock = saved.acquire(path)  # raises PathError: misuse, before any write
            self._pending, warning = saved.load(path)
            if warning:
                warn(warning)

    def __contains__(self, path: str) -> bool:
        return path in self._pending

    def forget(self, path: str) -> None:
        self._pending.pop(path, None)

    # -- remote files ----------------------------------------------------------------------------
    def take(self, key: str) -> Optional[saved.Position]:
        """The saved position of a remote file, used once (by the first read of the file)."""
        with self._guard:
            return self._pending.pop(key, None)

    def put(self, key: str, position: saved.Position, lines: int) -> None:
        """A remote file was read and its events handed on up to ``position`` (``lines`` of
        them since its last put): saved within :data:`SAVE_EVERY_S` or :data:`SAVE_EVERY_LINES`."""
        if not self.path:
            return
        with self._guard:
            self._remote[key] = position
            self._remote_lines += lines
            self._remote_dirty = True
            if self._remote_lines >= SAVE_EVERY_LINES or time.monotonic() - self._remote_saved >= SAVE_EVERY_S:
                self._write()

    def flush(self) -> None:
        """Save what remote hosts put since the last save (called at least every second)."""
        if not self.path:
            return
        with self._guard:
            if self._remote_dirty:
                self._write()

    def _write(self) -> None:
        """(holding ``_guard``) Both sides' positions, and those not used yet, to the state file."""
        assert self.path
        saved.save(self.path, {**self._pending, **self._local, **self._remote})
        self._remote_lines, self._remote_saved, self._remote_dirty = 0, time.monotonic(), False

    def resume(self, s: Stream, path: str, fd_of: FdOf, parking: Parking) -> None:
        """Go on from the saved position if the file at the path is the one saved, with
        the same content; else (a reused inode, truncated while we were stopped) read it
        from 0, and let the saved file be found by its content (``parking``)."""
        pos = self._pending.pop(path, None)
        if pos is None or (pos.dev, pos.ino) != s.key:
            return
        fd = fd_of(s)
        was = parked_at(path, pos)
        if not was.matches(fd):
            if was.offset:
                parking.keep(was)  # its rest may be in a copy (copytruncate)
            return
        was.resume(s, fd)

    def restore(self, f: Followed, key: tuple[int, int], parking: Parking,
                siblings_now: Callable[[], list[Sibling]]) -> bool:
        """What the state file says of ``f``'s siblings: which were history, which were
        read up to where (into ``parking``).  True when the saved file is no longer at the
        path (rotated while we were stopped): the siblings must then be looked through."""
        pos = self._pending.get(f.path)
        if pos is None:
            return False
        for p in pos.parked:
            parking.keep(Parked.saved(f.path, p))
        if pos.siblings is not None:
            f.siblings = {tuple(sig) for sig in pos.siblings}
        else:  # a state file from before siblings were saved: what is there now is history
            f.siblings = {sib.sig for sib in siblings_now() if sib.key != (pos.dev, pos.ino)}
        if (pos.dev, pos.ino) == key:
            return False
        self._pending.pop(f.path, None)
        was = parked_at(f.path, pos)
        if was.offset:
            parking.keep(was)
        return True

    def save(self, followed: Iterable[Followed], rotated: Iterable[Parked], fd_of: FdOf) -> None:
        """Save where every followed path's file was read to (its last complete line),
        with its rotated files read up to an offset (``rotated``: parked, or still open
        and counted as read so far).  Positions not yet used are kept."""
        if not self.path:
            return
        positions: dict[str, saved.Position] = {}
        read_to: dict[str, list[Parked]] = {}
        for p in rotated:
            if p.offset:
                read_to.setdefault(p.label, []).append(p)
        for f in followed:
            s = f.stream
            if s is None:
                continue
            complete = s.offset - s.reading.pending
            if complete < 0:
                continue
            n = min(saved.MARKER_BYTES, complete)
            if s.reading.pending == 0 and len(s.last) >= n:
                marker = s.last[len(s.last) - n:] if n else b""
            else:
                try:
                    marker = os.pread(fd_of(s), n, complete - n) if n else b""
                except OSError:
                    continue
            known = s.fingerprint(upto=complete, last=marker)
            positions[f.path] = saved.Position(dev=s.key[0], ino=s.key[1], head=known.head_digest,
                                               head_len=known.head_len, offset=complete, marker=known.last.hex(),
                                               line=s.reading.next_line - 1, mtime_ns=s.mtime_ns,
                                               siblings=sorted(list(sig) for sig in f.siblings or ()),
                                               parked=[p.to_saved() for p in read_to.get(f.path, ())[-16:]])
        with self._guard:
            self._local = positions
            self._write()

    def release(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None


def read_so_far(s: Stream, fd_of: FdOf) -> Parked:
    """Where an open stream was read to, up to its last complete line (a held partial
    line is read again after a restart)."""
    parked = Parked.of(s)
    pending = s.reading.pending
    if not pending:
        return parked
    complete = s.offset - pending
    n = min(saved.MARKER_BYTES, complete)
    try:
        marker = os.pread(fd_of(s), n, complete - n) if n else b""
    except OSError:
        return replace(parked, print=replace(parked.print, offset=0))  # not saved: unknown
    return replace(parked, print=replace(parked.print, offset=complete, last=marker))


def parked_at(label: str, pos: saved.Position) -> Parked:
    """A saved position as a parked file: known again by its content, under any name."""
    return Parked((pos.dev, pos.ino), label, Fingerprint(pos.head_len, pos.head, pos.offset, bytes.fromhex(pos.marker)),
                  pos.line + 1)
