"""One rotation model, two transports: the local follower's listing and the SFTP one pick
the same siblings in the same order, by the rules of tuimon.sources.rotation."""
from __future__ import annotations

import os
from types import SimpleNamespace

from tuimon.sources.files import Directories
from tuimon.sources.rotation import is_sibling, rotation_order, same_content

NAMES = ["train.log", "train.log.1", "train.log.2", "train.log.10", "train.log.3.gz", "train.log.4.lzma",
         "train.log.5.Z", "train.log-20260101", "train.logger", "other.log", "train.lo"]


def test_the_rules():
    kept = [n for n in NAMES if is_sibling("train.log", n)]
    assert kept == ["train.log.1", "train.log.2", "train.log.10", "train.log-20260101", "train.logger"]
    same_second = sorted(["train.log.1", "train.log.2", "train.log.10"], key=lambda n: rotation_order(100, n))
    assert same_second == ["train.log.10", "train.log.2", "train.log.1"]  # logrotate: the higher number is older
    assert sorted(["a.log.1", "a.log.2"], key=lambda n: rotation_order({"a.log.1": 5, "a.log.2": 9}[n], n)) \
        == ["a.log.1", "a.log.2"]  # the mtime first
    assert same_content(b"head", b"last", b"head", b"last") and same_content(b"", b"", b"", b"")
    assert not same_content(b"head", b"last", b"HEAD", b"last") and not same_content(b"head", b"last", b"head", b"")


def test_local_and_sftp_listings_agree(tmp_path):
    from tuimon.sources.remote import _Listing  # the SFTP side, fed what readdir would give

    import asyncssh

    for i, name in enumerate(NAMES):
        (tmp_path / name).write_text(name)
        os.utime(tmp_path / name, ns=(10**9, 10**9 * (100 if name != "train.logger" else 50)))
    local = [os.path.basename(s.path) for s in Directories().siblings(str(tmp_path / "train.log"))]
    entries = [SimpleNamespace(filename=n, attrs=SimpleNamespace(type=asyncssh.FILEXFER_TYPE_REGULAR, size=len(n),
                                                                 mtime=(tmp_path / n).stat().st_mtime))
               for n in NAMES]
    remote = sorted(_Listing(entries).sibling_entries("train.log"),
                    key=lambda e: rotation_order(e.attrs.mtime or 0, e.filename))
    assert [e.filename for e in remote] == local
    assert local[0] == "train.logger" and "train.log.4.lzma" not in local and "train.log.5.Z" not in local
