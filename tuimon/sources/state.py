"""Saved read positions, so a restarted follower resumes without loss or duplicates.

Written as temp file + fsync + rename, with a checksum: a corrupt or half-written
state file is detected and ignored (everything is read again from the start).
An offset is only trusted if the file at the path still has the same identity,
the same first bytes and the same bytes just before the offset.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import asdict, dataclass
from typing import Optional

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
        return {p: Position(**v) for p, v in doc["positions"].items()}, None
    except (ValueError, KeyError, TypeError):
        return {}, f"state file {path} is corrupt or half-written; ignoring it and reading everything again"


def save(path: str, positions: dict[str, Position]) -> None:
    body = {p: asdict(v) for p, v in positions.items()}
    text = json.dumps(body, sort_keys=True)
    doc = {"version": VERSION, "checksum": hashlib.sha256(text.encode()).hexdigest(), "positions": body}
    directory = os.path.dirname(os.path.abspath(path))
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
