"""One scope rule for every verb (issue 47, point 6): a directory link that leaves the tree is not
entered unless asked, a file found in a directory is read only if its first bytes are text, a
UTF-16 log is said, not read as garbage, and --debug says what was skipped."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tuimon.follow.local import LocalFollower
from tuimon.sources.discover import discover
from tuimon.sources.scope import looks_binary, refused_encoding

LINE = " iteration {:8d}/    1000 | elapsed time per iteration (ms): 100.0 | lm loss: 2.0E+00 |\n"


def _tree(tmp_path: Path) -> tuple[Path, Path]:
    """runs/run1/a.log; runs/latest -> run1 (inside); runs/sys -> ../outside (a tree of text files
    named like logs, as vim's help under /usr is); runs/a.out, a program (matches *.out)."""
    runs, outside = tmp_path / "runs", tmp_path / "outside"
    (runs / "run1").mkdir(parents=True)
    (runs / "run1" / "a.log").write_text("".join(LINE.format(i) for i in range(1, 4)))
    (outside / "doc").mkdir(parents=True)
    for k in range(20):
        (outside / "doc" / f"help{k}.txt").write_text("*help.txt*  For Vim version 9.0\n" * 50)
    (runs / "latest").symlink_to("run1")
    (runs / "sys").symlink_to(outside)
    (runs / "a.out").write_bytes(Path(sys.executable).resolve().read_bytes()[:65536])
    return runs, outside


def _followed(root: Path, **kw) -> set[str]:
    got: list = []
    follower = LocalFollower([str(root)], got.extend, poll=0.05, **kw)
    try:
        follower.poll()
        follower.poll()
        return {p for p, f in follower.followed.items() if f.stream is not None and not f.stream.binary}
    finally:
        follower.close()


def test_batch_and_follow_read_the_same_files(tmp_path):
    runs, outside = _tree(tmp_path)
    batch = {str(p) for p in discover([str(runs)])}
    assert batch == {str(runs / "run1" / "a.log")}, batch
    assert _followed(runs) == batch, "the follower reads what a batch verb reads"
    wide = {str(p) for p in discover([str(runs)], follow_links=True)}
    assert len(wide) == 21 and str(runs / "sys" / "doc" / "help0.txt") in wide
    assert _followed(runs, follow_links=True) == wide


def test_a_program_named_like_a_log_is_read_when_named(tmp_path):
    runs, _ = _tree(tmp_path)
    assert discover([str(runs / "a.out")]) == [runs / "a.out"], "the user named it"


def test_debug_says_what_was_skipped(tmp_path):
    runs, _ = _tree(tmp_path)
    r = subprocess.run([sys.executable, "-m", "tuimon", "summary", "--debug", "--no-cache", "--format", "json",
                        str(runs)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert [job["job"] for job in json.loads(r.stdout)] == ["a"]
    assert f"not entered: {runs / 'sys'}" in r.stderr and "--follow-links" in r.stderr
    assert f"skipped {runs / 'a.out'}: not text" in r.stderr


def test_follow_does_not_enter_a_link_out_of_the_tree(tmp_path):
    """events --follow of the tree: the run's lines, nothing of the tree the link leads to."""
    runs, _ = _tree(tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "tuimon", "events", "--follow", "--no-cache", "--poll", "0.2",
                             str(runs)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        files: set[str] = set()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            ev = json.loads(line)
            files.add(ev["file"])
            if ev["type"] == "iteration" and ev["iteration"] == 3:
                break
        with open(runs / "run1" / "a.log", "a") as fh:
            fh.write(LINE.format(4))
        while True:
            ev = json.loads(proc.stdout.readline())
            files.add(ev["file"])
            if ev["type"] == "iteration" and ev["iteration"] == 4:
                break
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
    assert files == {str(runs / "run1" / "a.log")}, files


@pytest.mark.parametrize("verb", ["summary", "follow"])
def test_a_utf16_log_is_said_not_read_as_garbage(tmp_path, verb):
    d = tmp_path / "runs"
    d.mkdir()
    (d / "a.log").write_text(LINE.format(1))
    (d / "w.log").write_bytes(LINE.format(1).encode("utf-16"))
    if verb == "summary":
        r = subprocess.run([sys.executable, "-m", "tuimon", "summary", "--no-cache", str(d)], cwd=ROOT,
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0 and r.stderr.count("is UTF-16") == 1 and "iconv" in r.stderr, r.stderr
        return
    warned: list = []
    follower = LocalFollower([str(d)], lambda events: None, poll=0.05, on_warning=warned.append)
    try:
        follower.poll()
        follower.poll()
    finally:
        follower.close()
    assert len(warned) == 1 and "w.log is UTF-16" in warned[0], warned


def test_what_looks_like_text():
    log = (LINE.format(1) * 20).encode()
    assert not looks_binary(log)
    assert not looks_binary(b"\x00" * 8192 + log), "copytruncate's leading NULs"
    assert not looks_binary(b"\x1b[32mINFO\x1b[0m step 1\r 10%|##  | 1/10\r" * 40), "colours and progress bars"
    assert not looks_binary("épisode 1: perte 2,5 — ok\n".encode() * 40), "UTF-8"
    assert not looks_binary(b"short\x00\x01\x02"), "too short to tell: read"
    assert looks_binary(b"\x7fELF\x02\x01\x01" + bytes(range(256)) * 8)
    assert looks_binary(bytes(range(256)) * 16)
    assert refused_encoding(LINE.encode("utf-16")) == "UTF-16" and looks_binary(LINE.encode("utf-16"))
    assert refused_encoding(log) is None
