"""The rotation model, one for both transports (local files and SFTP): which files are a
followed file's rotated siblings, in which order they were rotated, and whether a file
continues what was read.  Pure rules over names, stamps and bytes: each transport lists,
stats and reads in its own way (``os`` calls, or SFTP requests) and asks these."""
from __future__ import annotations

import bisect
import re
from typing import AbstractSet, Container, Hashable, Iterable, Optional, Protocol, Sequence, TypeVar

#: compressed generations are the logrotate's archive of what was read already: never followed
COMPRESSED = (".gz", ".bz2", ".xz", ".zst", ".lz4", ".lzma", ".Z", ".zip", ".tgz")
_SUFFIX_NUMBER = re.compile(r"(\d{1,4})$")


def is_sibling(base: str, name: str) -> bool:
    """Whether ``name`` is a rotated generation of ``base`` (``x.log.1``, ``x.log-20260101``):
    a name that extends it, uncompressed."""
    return name != base and name.startswith(base) and not name.endswith(COMPRESSED)


def rotation_order(mtime: float, name: str) -> tuple:
    """Sort key, oldest first: by mtime, and at equal mtimes (whole seconds over SFTP, coarse
    clocks) ``x.log.2`` before ``x.log.1``."""
    m = _SUFFIX_NUMBER.search(name)
    return (mtime, -int(m.group(1)) if m else 0, name)


def same_content(head: bytes, last: bytes, head_now: bytes, before_offset_now: bytes) -> bool:
    """Whether a file holds what was read of another up to an offset: the same first bytes
    (``head``), and the same bytes just before the offset (``last``).  The caller reads
    ``head_now`` (``len(head)`` bytes at 0) and ``before_offset_now`` (``len(last)`` bytes
    ending at the offset) its own way."""
    return (not head or head_now == head) and (not last or before_offset_now == last)


def sibling_names(sorted_names: Sequence[str], base: str) -> list[str]:
    """The names in one sorted directory listing that are ``base``'s rotated siblings,
    found by bisection (a directory of 4,096 followed files is not scanned per file)."""
    out = []
    for i in range(bisect.bisect_right(sorted_names, base), len(sorted_names)):
        name = sorted_names[i]
        if not name.startswith(base):  # names extending ``base`` sort together, right after it
            break
        if is_sibling(base, name):
            out.append(name)
    return out


class Generation(Protocol):
    """A rotated sibling as a transport lists it."""

    @property
    def name(self) -> str: ...

    @property
    def mtime(self) -> float: ...

    @property
    def sig(self) -> Hashable:
        """Unchanged by a rename, changed by a write: local files (dev, ino, mtime, size),
        SFTP (size, mtime)."""

    @property
    def key(self) -> Hashable:
        """The file's identity where the transport has one (a local inode), else None."""


G = TypeVar("G", bound=Generation)


def rotated_through(listed: Iterable[G], history: AbstractSet[Hashable], *, known: Container = (),
                    found_again: Container = (), not_after: Optional[float] = None) -> tuple[list[G], set]:
    """The generations rotated through a followed path since it was last read, oldest
    first, and the history once all are handled (not before: a read that fails part-way is
    tried again): the one procedure of both transports.

    ``history`` holds the signatures of the siblings already accounted for (there when the
    path was first seen, or read since).  Left out: files the transport still reads by
    identity (``known``), and history, unless the transport may find it again by content
    (``found_again``: a local file parked half-read).  With ``not_after``, only files last
    written before then (the copies a copytruncate made before the path's last write).

    Each transport then takes each generation in turn: a copy of what was read (its first
    bytes, no longer than what was read) is left alone; a file read before, found again by
    its content (same first bytes, same bytes before the offset), is read on from the
    offset; one whose signature is not in ``history`` was never seen, and is read whole."""
    listed = [g for g in listed if not_after is None or g.mtime <= not_after]
    pending = [g for g in listed
               if g.key not in known and (g.sig not in history or g.key in found_again)]
    pending.sort(key=lambda g: rotation_order(g.mtime, g.name))
    # only what was handled is history: not the files read by identity (the one about to
    # be opened at the path, if it moves first, is a rotated generation like the others)
    return pending, set(history) | {g.sig for g in listed if g.key not in known}
