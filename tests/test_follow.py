"""Following live files written by a real writer process, in inotify and in
forced-polling mode: every line once, none lost, none doubled (RELIABILITY.md cases)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tuimon.follow.local import LocalFollower
from tuimon.parsers.columns import expand

HELPER = Path(__file__).parent / "helpers" / "writer.py"
POLL = 0.2  # the forced-polling interval


def line(i: int, extra: str = "") -> bytes:
    return f" iteration {i:8d}/   1000 | elapsed time per iteration (ms): 100.0 |{extra}\n".encode()


class Writer:
    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, str(HELPER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)

    def do(self, op: str, path, **kw) -> None:
        msg = {"op": op, "path": str(path), **{k: str(v) if isinstance(v, Path) else v for k, v in kw.items()}}
        self.proc.stdin.write(json.dumps(msg) + "\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "ok"

    def write(self, path, data: bytes, **kw) -> None:
        self.do("write", path, hex=data.hex(), **kw)

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=10)
        self.proc.stdout.close()


class Follow:
    """A follower running in its own thread, as the app will run it."""

    def __init__(self, paths, mode: str, **kw) -> None:
        self.events: list = []
        self.lock = threading.Lock()
        kwargs = dict(grace=0.5)
        kwargs.update(kw)
        if mode == "polling":
            kwargs["poll"] = POLL
        self.follower = LocalFollower([str(p) for p in paths], self._sink, **kwargs)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.follower.run, args=(self.stop,), daemon=True)
        self.thread.start()

    def _sink(self, events) -> None:
        with self.lock:
            self.events.extend(expand(events))  # (the core's rows as their events)

    def iterations(self, file: str | None = None) -> list[int]:
        with self.lock:
            return [e.iteration for e in self.events if e.type == "iteration" and (file is None or e.file == file)]

    def of_type(self, kind: str) -> list:
        with self.lock:
            return [e for e in self.events if e.type == kind]

    def wait_for(self, predicate, timeout: float = 8.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(0.02)
        its = self.iterations()
        shown = its if len(its) <= 40 else f"{len(its)} of them, first {its[:10]}, last {its[-10:]}"
        raise AssertionError(f"timed out; iterations so far: {shown}")

    def settle(self, seconds: float = 1.2) -> None:
        """Let several poll intervals pass so that late duplicates would show."""
        time.sleep(seconds)

    def close(self) -> None:
        self.stop.set()
        self.follower.wake()
        self.thread.join(timeout=10)
        self.follower.close()


@pytest.fixture(params=["inotify", "polling"])
def mode(request):
    return request.param


@pytest.fixture
def writer():
    w = Writer()
    yield w
    w.close()


def test_existing_content_then_appends(tmp_path, mode, writer):
    log = tmp_path / "run.log"
    writer.write(log, line(1) + line(2))
    f = Follow([tmp_path], mode)
    try:
        f.wait_for(lambda: f.iterations() == [1, 2])
        writer.write(log, line(3))
        f.wait_for(lambda: f.iterations() == [1, 2, 3])
        f.settle()
        assert f.iterations() == [1, 2, 3]
    finally:
        f.close()


def test_partial_line_completed_later(tmp_path, mode, writer):
    log = tmp_path / "run.log"
    data = line(1)
    writer.write(log, data[:25])
    f = Follow([tmp_path], mode)
    try:
        f.settle(0.6)
        assert f.iterations() == []
        writer.write(log, data[25:])
        f.wait_for(lambda: f.iterations() == [1])
        f.settle()
        assert f.iterations() == [1]
    finally:
        f.close()


def test_partial_line_across_restart(tmp_path, mode, writer):
    log, state = tmp_path / "logs" / "run.log", tmp_path / "state.json"
    writer.do("mkdir", log.parent)
    writer.write(log, line(1) + line(2)[:30])
    f = Follow([log.parent], mode, state_path=str(state))
    f.wait_for(lambda: f.iterations() == [1])
    f.close()  # saves the position of the last complete line
    writer.write(log, line(2)[30:] + line(3))
    g = Follow([log.parent], mode, state_path=str(state))
    try:
        g.wait_for(lambda: g.iterations() == [2, 3])
        g.settle()
        assert g.iterations() == [2, 3]
        it2 = [e for e in g.of_type("iteration") if e.iteration == 2][0]
        assert it2.line == 2  # line numbers continue across the restart
    finally:
        g.close()


def test_truncate_and_rewrite_shorter(tmp_path, mode, writer):
    log = tmp_path / "run.log"
    writer.write(log, line(1) + line(2) + line(3))
    f = Follow([tmp_path], mode)
    try:
        f.wait_for(lambda: f.iterations() == [1, 2, 3])
        writer.do("close", log)
        writer.do("truncate", log)
        writer.write(log, line(10))
        f.wait_for(lambda: f.iterations() == [1, 2, 3, 10])
        assert len(f.of_type("truncated")) == 1
        f.settle()
        assert f.iterations() == [1, 2, 3, 10]
    finally:
        f.close()


def slow(mode: str) -> dict:
    """A follower idling at a 1 s interval: polling forced, or inotify with 1 s safety polls."""
    return {"poll": 1.0} if mode == "polling" else {"max_interval": 1.0}


def test_truncate_and_rewrite_longer_before_next_poll(tmp_path, mode, writer):
    log = tmp_path / "run.log"
    writer.write(log, line(1))
    f = Follow([tmp_path], mode, **slow(mode))
    try:
        f.wait_for(lambda: f.iterations() == [1])
        time.sleep(1.1)  # the follower is now idle at its slowest interval
        writer.do("close", log)
        writer.do("truncate", log)
        writer.write(log, line(20) + line(21) + line(22))
        f.wait_for(lambda: f.iterations() == [1, 20, 21, 22])
        f.settle(1.5)
        assert f.iterations() == [1, 20, 21, 22]
    finally:
        f.close()


def test_rename_and_create_rotation(tmp_path, mode, writer):
    log = tmp_path / "run.log"
    writer.write(log, line(1))
    f = Follow([tmp_path], mode)
    try:
        f.wait_for(lambda: f.iterations() == [1])
        writer.write(log, line(2))
        writer.do("rename", log, to=tmp_path / "run.log.1")
        writer.write(log, line(3))  # still the old descriptor: lands in run.log.1
        writer.do("close", log)
        writer.write(log, line(4))  # logrotate "create": a new file at the name
        f.wait_for(lambda: sorted(f.iterations()) == [1, 2, 3, 4])
        f.settle()
        assert f.iterations() == [1, 2, 3, 4]
    finally:
        f.close()


def test_files_rotated_past_the_one_at_the_path_come_in_their_order(tmp_path):
    """The file at the path rotates away between the follower's stat of the path and its
    listing of the siblings, and two more after it: each is read in its turn (it was seen
    at the path, but it is older than the newer ones)."""
    log = tmp_path / "run.log"
    log.write_bytes(line(1))
    got: list[int] = []
    fol = LocalFollower([str(tmp_path)], lambda evs: got.extend(e.iteration for e in expand(evs)
                                                               if e.type == "iteration"),
                        poll=0.05, use_inotify=False)
    try:
        fol.poll()
        assert got == [1]
        os.rename(log, tmp_path / "run.log.0")
        log.write_bytes(line(2))  # the file the next poll stats at the path
        listing = fol._dirs.siblings
        raced = []

        def siblings(path, *args, **kw):
            if not raced and path == str(log):  # after the stat: it rotates, twice more
                raced.append(path)
                os.rename(log, tmp_path / "run.log.1")
                log.write_bytes(line(3))
                os.rename(log, tmp_path / "run.log.2")
                log.write_bytes(line(4))
            return listing(path, *args, **kw)

        fol._dirs.siblings = siblings
        for _ in range(6):
            time.sleep(0.1)
            fol.poll()
        assert raced and got == [1, 2, 3, 4]
    finally:
        fol.close()


def test_three_rotations_within_one_poll_interval(tmp_path, mode, writer):
    log = tmp_path / "run.log"
    writer.write(log, line(1))
    f = Follow([tmp_path], mode, **slow(mode))
    try:
        f.wait_for(lambda: f.iterations() == [1])
        time.sleep(1.1)
        for k, i in enumerate((2, 3, 4)):
            writer.write(log, line(i))
            writer.do("close", log)
            writer.do("rename", log, to=tmp_path / f"run.log.{k}")
        writer.write(log, line(5))
        f.wait_for(lambda: len(f.iterations()) >= 5, timeout=6)
        f.settle(1.5)
        assert f.iterations() == [1, 2, 3, 4, 5]
    finally:
        f.close()


def test_copytruncate_with_writer_keeping_its_offset(tmp_path, mode, writer):
    log = tmp_path / "run.log"
    writer.write(log, line(1) + line(2), append=False)  # no O_APPEND: the offset survives truncation
    f = Follow([tmp_path], mode)
    try:
        f.wait_for(lambda: f.iterations() == [1, 2])
        writer.do("copytruncate", log, to=tmp_path / "run.log.1")
        writer.write(log, line(3))
        f.wait_for(lambda: 3 in f.iterations())
        f.settle()
        assert f.iterations() == [1, 2, 3]
        with f.lock:
            assert not any("\u2400" in str(e.to_dict()) for e in f.events)
    finally:
        f.close()


def test_delete_while_open_drains_then_closes(tmp_path, mode, writer):
    log = tmp_path / "run.log"
    writer.write(log, line(1))
    f = Follow([tmp_path], mode, **slow(mode))
    try:
        f.wait_for(lambda: f.iterations() == [1])
        time.sleep(1.1)
        writer.write(log, line(2))  # written, then deleted before the next poll
        writer.do("unlink", log)
        writer.write(log, line(3))  # the writer's descriptor still works on the deleted file
        f.wait_for(lambda: f.iterations() == [1, 2, 3])
        f.wait_for(lambda: not f.follower.detached, timeout=4)
        assert f.iterations() == [1, 2, 3]
    finally:
        f.close()


def test_delete_and_recreate(tmp_path, mode, writer):
    log = tmp_path / "run.log"
    writer.write(log, line(1) + line(2))
    f = Follow([tmp_path], mode)
    try:
        f.wait_for(lambda: f.iterations() == [1, 2])
        writer.do("close", log)
        writer.do("unlink", log)
        writer.write(log, line(7))
        f.wait_for(lambda: f.iterations() == [1, 2, 7])
        f.settle()
        assert f.iterations() == [1, 2, 7]
    finally:
        f.close()


def test_new_file_is_picked_up(tmp_path, mode, writer):
    f = Follow([tmp_path], mode)
    try:
        writer.write(tmp_path / "late.out", line(5))
        writer.write(tmp_path / "ignored.bin", line(6))
        f.wait_for(lambda: f.iterations() == [5], timeout=3)
        f.settle()
        assert f.iterations() == [5]
    finally:
        f.close()


def test_symlink_repointed(tmp_path, mode, writer):
    a, b, link = tmp_path / "a.data", tmp_path / "b.data", tmp_path / "current.log"
    writer.write(a, line(1))
    writer.write(b, line(100))
    writer.do("symlink", link, target=str(a))
    f = Follow([link], mode)
    try:
        f.wait_for(lambda: f.iterations() == [1])
        writer.write(a, line(2))
        f.wait_for(lambda: f.iterations() == [1, 2])
        writer.do("symlink", link, target=str(b))
        writer.write(b, line(101))
        f.wait_for(lambda: f.iterations() == [1, 2, 100, 101])
        f.settle()
        assert f.iterations() == [1, 2, 100, 101]
    finally:
        f.close()


def test_framing_cases_live(tmp_path, mode, writer):
    log = tmp_path / "run.log"
    f = Follow([tmp_path], mode)
    try:
        euro = "€".encode()
        writer.write(log, line(1, " note: caf")[:-1] + euro[:1])  # split inside a multibyte character
        writer.write(log, euro[1:] + b"\n")
        writer.write(log, line(2).replace(b"\n", b"\r\n"))
        writer.write(log, b" 10%|#\r 50%|#####\r" + line(3))
        writer.write(log, b"x" * (3 << 20))  # a 3 MB line without newline yet
        writer.write(log, b"\n" + line(4, " NUL\x00here \xe2\x80\xa8 \x0b \x1c"))
        writer.write(log, b"\xff\xfe bad utf-8\n" + line(5))
        f.wait_for(lambda: f.iterations() == [1, 2, 3, 4, 5])
        events = f.of_type("iteration")
        assert [e.line for e in events] == [1, 2, 3, 5, 7]
        stream = next(iter(f.follower.streams.values()))
        assert stream.reading.parser.framer.too_long == 1 and stream.reading.parser.framer.invalid_utf8 == 1
    finally:
        f.close()


def test_huge_line_is_bounded_marker(tmp_path, mode):
    log = tmp_path / "run.log"
    log.write_bytes(b"y" * (10 << 20) + b"\n" + line(1))
    got = []
    fol = LocalFollower([str(tmp_path)], lambda evs: got.extend(evs), **({"poll": 0.1} if mode == "polling" else {}))
    for _ in range(5):
        fol.poll()
    fol.close()
    assert [e.iteration for e in got if e.type == "iteration"] == [1]
    stream = next(iter(fol.streams.values()))
    assert stream.reading.parser.framer.too_long == 1 and stream.reading.parser.framer.pending == 0


def test_two_files_with_identical_first_kb(tmp_path, mode, writer):
    header = b"#" * 2048 + b"\n"
    writer.write(tmp_path / "a.log", header + line(1))
    writer.write(tmp_path / "b.log", header + line(2))
    f = Follow([tmp_path], mode)
    try:
        f.wait_for(lambda: sorted(f.iterations()) == [1, 2])
        writer.write(tmp_path / "b.log", line(3))
        f.wait_for(lambda: sorted(f.iterations()) == [1, 2, 3])
        assert f.iterations(str(tmp_path / "b.log")) == [2, 3]
    finally:
        f.close()


def test_inode_reuse_is_not_resumed_at_stale_offset(tmp_path, mode, writer):
    log, state = tmp_path / "d" / "run.log", tmp_path / "state.json"
    writer.do("mkdir", log.parent)
    writer.write(log, line(1) + line(2) + line(3))
    f = Follow([log.parent], mode, state_path=str(state))
    f.wait_for(lambda: f.iterations() == [1, 2, 3])
    f.close()
    writer.do("close", log)
    writer.do("unlink", log)
    writer.write(log, line(40) + line(41) + line(42) + line(43))  # may well get the same inode
    g = Follow([log.parent], mode, state_path=str(state))
    try:
        g.wait_for(lambda: g.iterations() == [40, 41, 42, 43])
        g.settle()
        assert g.iterations() == [40, 41, 42, 43]
    finally:
        g.close()


def test_corrupt_state_file_means_full_rescan(tmp_path, mode, writer):
    log, state = tmp_path / "d" / "run.log", tmp_path / "state.json"
    writer.do("mkdir", log.parent)
    writer.write(log, line(1) + line(2))
    state.write_text('{"version": 1, "checksum": "00", "positions": {')
    g = Follow([log.parent], mode, state_path=str(state))
    try:
        g.wait_for(lambda: g.iterations() == [1, 2])
        assert any("corrupt" in w for w in g.follower.warnings)
    finally:
        g.close()


@pytest.mark.parametrize("how", ["inotify", "polling"])
def test_permission_denied_then_fixed(how):
    from tests.helpers.unprivileged import follow_until_fixed, require_drop, world_dir

    require_drop("test_permission_denied_then_fixed_simulated")
    d = world_dir()
    log = d / "run.log"
    log.write_bytes(line(1))
    log.chmod(0)
    seen, err = follow_until_fixed(d, lambda: log.chmod(0o644), how, poll=POLL)
    assert seen, err


def test_permission_denied_then_fixed_simulated(tmp_path, monkeypatch):
    """As root the kernel never refuses: make ``open`` refuse the file until 'fixed'."""
    log = tmp_path / "run.log"
    log.write_bytes(line(1))
    denied = {"on": True}
    real_open = os.open

    def guarded(file, *a, **kw):
        if denied["on"] and str(file) == str(log):
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *a, **kw)

    monkeypatch.setattr(os, "open", guarded)
    got = []
    fol = LocalFollower([str(tmp_path)], lambda evs: got.extend(evs), poll=0.05)
    for _ in range(3):
        fol.poll()
        time.sleep(0.06)
    assert fol.status()[str(log)] == "permission denied" and not got
    denied["on"] = False
    for _ in range(5):
        fol.poll()
        time.sleep(0.06)
    fol.close()
    assert [e.iteration for e in got if e.type == "iteration"] == [1]
    assert fol.status()[str(log)] == "following"


def test_directory_removed_and_recreated(tmp_path, mode, writer):
    d = tmp_path / "runs"
    writer.do("mkdir", d)
    writer.write(d / "a.log", line(1))
    f = Follow([d], mode)
    try:
        f.wait_for(lambda: f.iterations() == [1])
        writer.do("rmtree", d)
        f.wait_for(lambda: f.follower.root_status.get(str(d)) == "missing")
        writer.do("mkdir", d)
        writer.write(d / "a.log", line(2))
        f.wait_for(lambda: f.iterations() == [1, 2])
        f.settle()
        assert f.iterations() == [1, 2]
    finally:
        f.close()


def test_large_file_head_and_tail_first_then_history(tmp_path):
    log = tmp_path / "big.log"
    n = 60_000  # about 4.5 MB
    log.write_bytes(b"".join(line(i) for i in range(1, n + 1)))
    batches = []
    fol = LocalFollower([str(tmp_path)], lambda evs: batches.append([e for e in expand(evs) if e.type == "iteration"]),
                        poll=0.1, head_tail=2 << 20)
    fol.backfill.HEAD, fol.backfill.TAIL = 64 << 10, 512 << 10
    for _ in range(20):
        fol.poll()
    fol.close()
    got = [e for b in batches for e in b]
    its = [e.iteration for e in got]
    first = its[:its.index(n) + 1]  # up to the tail's end (handed on in pieces: a poll sinks 2,048 at a time)
    assert first[0] == 1 and n // 2 not in first, "head and tail come first, the history after"
    assert sorted(e.iteration for e in got) == list(range(1, n + 1))
    assert all(e.line == e.iteration for e in got)  # line numbers right for head, tail and history
    assert fol.progress.bytes_done == fol.progress.bytes_total == log.stat().st_size


def test_events_follow_command_streams_and_exits_0_on_ctrl_c(tmp_path):
    import signal

    from tests.conftest import ROOT

    log = tmp_path / "run.log"
    log.write_bytes(line(1))
    proc = subprocess.Popen([sys.executable, "-m", "tuimon", "events", "--follow", str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))
    try:
        first = [proc.stdout.readline() for _ in range(2)]  # run_config, iteration 1
        assert '"iteration": 1,' in first[1]
        with open(log, "ab") as fh:
            fh.write(line(2))
        nxt = proc.stdout.readline()
        assert '"type": "iteration"' in nxt and '"iteration": 2,' in nxt and '"line": 2,' in nxt
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=10)
    assert proc.returncode == 0 and "Traceback" not in err
