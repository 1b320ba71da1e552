"""Opening files to follow, and finding where a followed file went.

Only regular files are ever opened: a FIFO would block ``open``/``read`` and a
device (``/dev/zero`` behind a ``*.log`` link) would never end.  ``O_NONBLOCK``
makes the open itself safe when a name is swapped for a FIFO between our
``stat`` and our ``open``; the type is then checked on the descriptor.

A rotated file is found among its *siblings* (names that extend the followed
name: ``x.log.1``, ``x.log-20250101``) by identity and content: its (device,
inode), the first bytes read from it and the bytes just before the read offset.
Timestamps are only used to order files already known to be new.
"""
from __future__ import annotations

import os
import resource
import stat
import time
from dataclasses import dataclass
from typing import Optional

from .rotation import rotation_order, sibling_names


class NotRegular(OSError):
    """The name points at a FIFO, device, socket or directory."""


def open_regular(path: str) -> tuple[int, os.stat_result]:
    """A read-only descriptor on ``path`` and its stat; raises :class:`NotRegular`."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
    except OSError:
        os.close(fd)
        raise
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise NotRegular(f"not a regular file: {path}")
    return fd, st


def kind_of(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def fd_budget(reserve: int = 64) -> int:
    """How many followed files may be open at once: half the soft ``RLIMIT_NOFILE``
    (the rest is for sockets, pipes, inotify and the parsers' own files)."""
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):
        soft = 1024
    if soft == resource.RLIM_INFINITY or soft <= 0:
        soft = 1 << 16
    return max(8, min(soft // 2, soft - reserve))


@dataclass(frozen=True)
class Sibling:
    path: str
    key: tuple[int, int]
    mtime_ns: int
    size: int

    @property
    def sig(self) -> tuple[int, int, int, int]:
        """Unchanged by a rename; changed by a write, and by an inode's reuse."""
        return (self.key[0], self.key[1], self.mtime_ns, self.size)

    # the rotation model's view of a generation (tuimon.sources.rotation.Generation)
    @property
    def name(self) -> str:
        return self.path

    @property
    def mtime(self) -> float:
        return self.mtime_ns


RACY_NS = 2_000_000_000


class Directories:
    """Sorted listings of directories, so that finding the siblings of one of 4,096
    files in a directory is a bisection, not a scan.  A listing is reused only
    while the directory's mtime holds and was already 2 s old when it was taken
    (a change within the same mtime tick would not show: git's "racy" rule)."""

    def __init__(self) -> None:
        self._cache: dict[str, tuple[int, list[str]]] = {}

    def sibling_names(self, directory: str, base: str, fresh: bool = False) -> list[str]:
        try:
            mtime = os.stat(directory).st_mtime_ns
        except OSError:
            return []
        cached = None if fresh else self._cache.get(directory)
        if cached is None or cached[0] != mtime:
            try:
                names = sorted(os.listdir(directory))
            except OSError:
                return []
            cached = (mtime, names)
            if time.time_ns() - mtime > RACY_NS:
                self._cache[directory] = cached
                if len(self._cache) > 4096:
                    self._cache.pop(next(iter(self._cache)))
        return sibling_names(cached[1], base)

    def siblings(self, path: str, fresh: bool = True) -> list[Sibling]:
        """Regular, uncompressed files whose names extend ``path``'s, in rotation order."""
        directory, base = os.path.split(path)
        out = []
        for name in self.sibling_names(directory or ".", base, fresh):
            full = os.path.join(directory, name)
            try:
                st = os.stat(full)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                out.append(Sibling(full, (st.st_dev, st.st_ino), st.st_mtime_ns, st.st_size))
        return sorted(out, key=lambda sib: rotation_order(sib.mtime_ns, sib.path))


def display(path: str) -> str:
    """A file name as the user should read it: undecodable bytes as ``\\xNN``."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def next_data(fd: int, offset: int, size: int) -> Optional[int]:
    """Where data resumes after a hole at ``offset`` (sparse files), if the
    filesystem can tell; None when it cannot."""
    seek_data = getattr(os, "SEEK_DATA", None)
    if seek_data is None:
        return None
    try:
        return os.lseek(fd, offset, seek_data)
    except OSError as exc:
        if exc.errno == 6:  # ENXIO: no data past offset, the rest is a hole
            return size
        return None


def last_line(path: str, window: int = 8192) -> Optional[str]:
    """The last non-empty line of a file (what a job printed last), from its final
    ``window`` bytes, undecodable bytes replaced; None if it cannot be read."""
    try:
        fd, st = open_regular(path)
    except OSError:
        return None
    try:
        size = st.st_size
        data = os.pread(fd, min(window, size), max(0, size - window))
    except OSError:
        return None
    finally:
        os.close(fd)
    for raw in reversed(data.replace(b"\r", b"\n").split(b"\n")):
        if raw.strip():
            return raw.decode("utf-8", "replace").strip()
    return None


def line_at(path: str, number: int, limit: int = 1 << 30, chunk: int = 1 << 20) -> Optional[str]:
    """Line ``number`` (1-based) of a file, decoded with replacement; None when it is not
    within the first ``limit`` bytes or the file cannot be read (an alert's log line)."""
    if number < 1:
        return None
    try:
        fd, _ = open_regular(path)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        seen, offset, carry = 1, 0, b""
        while offset < limit:
            data = fh.read(chunk)
            if not data:
                break
            offset += len(data)
            data = carry + data
            count = data.count(b"\n")
            if seen + count < number:
                seen += count
                carry = data[data.rfind(b"\n") + 1:] if count else data
                if len(carry) > 1 << 20:  # one line over a megabyte: its end is enough to skip it
                    carry = b""
                continue
            lines = data.split(b"\n")
            return lines[number - seen].decode("utf-8", "replace")[:4000]
        if carry and seen == number:
            return carry.decode("utf-8", "replace")[:4000]
    return None
