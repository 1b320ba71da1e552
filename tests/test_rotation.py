"""One rotation model, two transports: the local follower's listing and the SFTP one pick
the same siblings in the same order, by the rules of tuimon.sources.rotation."""
from __future__ import annotations

import os
from types import SimpleNamespace

from tuimon.sources.files import Directories
from tuimon.sources.rotation import is_sibling, rotated_through, rotation_order, same_content, sibling_names

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
    import asyncssh

    from tuimon.follow.remote import _Listing  # the SFTP side, fed what readdir would give

    for i, name in enumerate(NAMES):
        (tmp_path / name).write_text(name)
        os.utime(tmp_path / name, ns=(10**9, 10**9 * (100 if name != "train.logger" else 50)))
    local = [os.path.basename(s.path) for s in Directories().siblings(str(tmp_path / "train.log"))]
    entries = [SimpleNamespace(filename=n, attrs=SimpleNamespace(type=asyncssh.FILEXFER_TYPE_REGULAR, size=len(n),
                                                                 mtime=(tmp_path / n).stat().st_mtime))
               for n in NAMES]
    remote, _ = rotated_through(_Listing(entries).generations("train.log"), set())
    assert [g.name for g in remote] == local
    local_pending, _ = rotated_through(Directories().siblings(str(tmp_path / "train.log")), set())
    assert [os.path.basename(g.name) for g in local_pending] == local
    assert local[0] == "train.logger" and "train.log.4.lzma" not in local and "train.log.5.Z" not in local


def test_sibling_names_by_bisection():
    names = sorted(NAMES + ["train.log\U0010ffff", "train.lof", "train.log.1.gz"])
    assert sibling_names(names, "train.log") == sorted(["train.log.1", "train.log.2", "train.log.10",
                                                        "train.log-20260101", "train.logger"]) + ["train.log\U0010ffff"]
    assert sibling_names(names, "nothing.log") == [] and sibling_names([], "train.log") == []


def test_the_procedure_both_transports_follow():
    """Which generations are looked at, in which order, and what is history after: one
    function for the local follower and the SFTP one."""
    g = lambda name, mtime, key=None: SimpleNamespace(name=name, mtime=mtime, sig=(name, mtime), key=key)  # noqa: E731
    old, one, two, open_, parked = g("x.1", 5), g("x.1b", 9), g("x.2", 9), g("x.3", 7, key=1), g("x.4", 1, key=2)
    listed = [one, old, two, open_, parked]
    history = {old.sig, parked.sig}
    pending, after = rotated_through(listed, history, known={1}, found_again={2})
    # history stays out unless it may be found again by content; a file read by identity stays out;
    # oldest first, and at one mtime the higher number first
    assert [p.name for p in pending] == ["x.4", "x.2", "x.1b"]
    assert after == history | {one.sig, two.sig}  # what was read by identity is not history
    pending, after = rotated_through(listed, history, known={1}, found_again={2}, not_after=8)
    assert [p.name for p in pending] == ["x.4"] and after == history  # written after: their turn comes later
    pending, after = rotated_through([], set())
    assert pending == [] and after == set()
