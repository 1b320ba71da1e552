"""The rotation model, one for both transports (local files and SFTP): which files are a
followed file's rotated siblings, in which order they were rotated, and whether a file
continues what was read.  Pure rules over names, stamps and bytes: each transport lists,
stats and reads in its own way (``os`` calls, or SFTP requests) and asks these."""
from __future__ import annotations

import re

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
