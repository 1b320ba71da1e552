"""Saved read positions, so a restarted follower resumes without loss or duplicates.

Written as temp file + fsync + rename, with a checksum: a corrupt or half-written
state file is detected and ignored (everything is read again from the start).
An offset is only trusted if the file at the path still has the same identity,
the same first bytes and the same bytes just before the offset.

The state path is checked before anything is written: it must be a regular file
(or not exist yet) in a directory the user owns, and it is never written through
a symlink to anything else (``--state /dev/null`` as root would otherwise replace
the device with a regular file).  One follower at a time holds it, by an
exclusive ``flock`` on ``<state>.lock``.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import stat
import tempfile
from dataclasses import asdict, dataclass, field, fields
from typing import Optional

from .discover import PathError

VERSION = 1


@dataclass
class Position:
    dev: int
    ino: int
    head: str  # sha1 of the first bytes (up to HEAD_BYTES)
    head_len: int
    offset: int  # byte offset just past the last complete line
    marker: str  # hex of the bytes right before ``offset`` (up to MARKER_BYTES)
    line: int  # number of complete lines before ``offset``
    mtime_ns: int = 0  # the file's mtime when saved
    #: (dev, ino, mtime_ns, size) of the siblings that were history or already read; None
    #: in state files written before it was kept
    siblings: Optional[list] = None
    #: rotated files of this path read up to an offset (dev, ino, head_len, head, offset, marker, line)
    parked: list = field(default_factory=list)


HEAD_BYTES = 1024
MARKER_BYTES = 32


def head_digest(data: bytes) -> str:
    return hashlib.sha1(data).hexdigest()


def load(path: str) -> tuple[dict[str, Position], Optional[str]]:
    """Positions by file path, and a one-line warning when the file was unusable."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        return {}, None
    except OSError as exc:
        return {}, f"cannot read state file {path}: {exc.strerror}; starting from the beginning"
    try:
        doc = json.loads(raw)
        body = json.dumps(doc["positions"], sort_keys=True)
        if doc.get("version") != VERSION or doc.get("checksum") != hashlib.sha256(body.encode()).hexdigest():
            raise ValueError("checksum")
        names = {f.name for f in fields(Position)}
        return {p: Position(**{k: x for k, x in v.items() if k in names}) for p, v in doc["positions"].items()}, None
    except (ValueError, KeyError, TypeError):
        return {}, f"state file {path} is corrupt or half-written; ignoring it and reading everything again"


def save(path: str, positions: dict[str, Position]) -> None:
    body = {p: asdict(v) for p, v in positions.items()}
    text = json.dumps(body, sort_keys=True)
    doc = {"version": VERSION, "checksum": hashlib.sha256(text.encode()).hexdigest(), "positions": body}
    path = check_path(path)  # the target of a symlink to a regular file; never a device
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tuimon-state-", dir=directory)
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(doc, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


class StateLock:
    def __init__(self, fd: int) -> None:
        self.fd = fd

    def release(self) -> None:
        try:
            os.close(self.fd)  # closing drops the flock
        except OSError:
            pass


def check_path(path: str) -> str:
    """The real path to write the state to; raises :class:`PathError` (one line) when
    ``path`` is not a regular file in a directory the user owns."""
    path = os.path.abspath(os.path.expanduser(path))
    try:
        st = os.stat(path)  # follows a symlink: what would be written is its target
    except FileNotFoundError:
        if os.path.islink(path):
            raise PathError(f"--state {path}: a dangling symlink; name a regular file") from None
        st = None
    except OSError as exc:
        raise PathError(f"--state {path}: {exc.strerror}") from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise PathError(f"--state {path}: not a regular file; name a file such as ~/.tuimon.state")
    real = os.path.realpath(path)
    directory = os.path.dirname(real)
    try:
        dst = os.stat(directory)
    except OSError as exc:
        raise PathError(f"--state {path}: directory {directory}: {exc.strerror}") from None
    if not stat.S_ISDIR(dst.st_mode):
        raise PathError(f"--state {path}: {directory} is not a directory")
    if dst.st_uid != os.geteuid():
        raise PathError(f"--state {path}: directory {directory} is not yours (owner uid {dst.st_uid}); "
                        f"keep the state in a directory you own")
    return real


def acquire(path: str) -> StateLock:
    """Check ``path`` and lock it for this process; :class:`PathError` when it is
    unusable or another tuimon holds it."""
    parent = os.path.dirname(os.path.abspath(os.path.expanduser(path)))
    if not os.path.lexists(parent):
        try:
            os.makedirs(parent, mode=0o700, exist_ok=True)
        except OSError as exc:
            raise PathError(f"--state {path}: cannot create {parent}: {exc.strerror}") from None
    real = check_path(path)
    lock_path = real + ".lock"
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise PathError(f"--state {path}: cannot create {lock_path}: {exc.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = ""
        try:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
        except OSError:
            pass
        os.close(fd)
        who = f" (pid {holder})" if holder.isdigit() else ""
        raise PathError(f"--state {path} is in use by another tuimon{who}; give each follower its own "
                        f"state file") from None
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    except OSError:
        pass
    return StateLock(fd)
