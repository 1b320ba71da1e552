"""Which filesystem a path lives on, from /proc/self/mountinfo.

inotify only sees writes made through the local kernel: on NFS, Lustre, GPFS and
other network or FUSE filesystems a compute node's appends are invisible to it,
so such paths are polled.  Unknown filesystems are treated as remote.
"""
from __future__ import annotations

import os
from typing import Optional

LOCAL_TYPES = frozenset({
    "ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "zfs", "f2fs", "jfs", "reiserfs", "ramfs", "devtmpfs",
    "vfat", "exfat", "ntfs", "ntfs3", "hfsplus", "apfs",
})
REMOTE_HINTS = ("nfs", "lustre", "gpfs", "cifs", "smb", "ceph", "beegfs", "9p", "panfs", "afs", "gluster",
                "wekafs", "fuse", "overlay", "sshfs")


def _unescape(field: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as \040 \011 \012 \134
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and i + 3 < len(field) + 0 and field[i + 1:i + 4].isdigit():
            out.append(chr(int(field[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def parse_mountinfo(text: str) -> list[tuple[str, str]]:
    """[(mount point, fstype)] from mountinfo text."""
    mounts = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        fields = left.split()
        rest = right.split()
        if len(fields) >= 5 and rest:
            mounts.append((_unescape(fields[4]), rest[0]))
    return mounts


def fstype_of(path: str, mountinfo: Optional[str] = None) -> Optional[str]:
    """Filesystem type of the longest mount point containing ``path``'s real path."""
    if mountinfo is None:
        try:
            with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as fh:
                mountinfo = fh.read()
        except OSError:
            return None
    real = os.path.realpath(path)
    best, best_len = None, -1
    for point, fstype in parse_mountinfo(mountinfo):
        if (real == point or real.startswith(point.rstrip("/") + "/") or point == "/") and len(point) > best_len:
            best, best_len = fstype, len(point)
    return best


def needs_polling(path: str, mountinfo: Optional[str] = None) -> bool:
    fstype = fstype_of(path, mountinfo)
    if fstype is None:
        return True
    if fstype in LOCAL_TYPES:
        return False
    return True  # known remote (nfs, lustre, gpfs, fuse.*, ...) or unknown: poll
