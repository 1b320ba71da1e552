"""Random sequences of writes (lines split anywhere), rotations (rename, numbered
shift, rename-away with a late recreate), truncations, copytruncate (with writes
between the copy and the truncate), delete/recreate, a directory taking the
file's name, symlink loops, a directory that cannot be listed for a while, and
kills (with and without the last output saved) followed by a restart from the
state file, checked against a model: every complete line is delivered once, in
order; a line may be missing only if it was never on disk when anyone could read
it (written between copytruncate's copy and its truncate), and doubled only if
it was output after the last save before a kill."""
from __future__ import annotations

import os
import shutil
import stat
import tempfile
import time

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import tuimon.sources.walk as walk
from tuimon.follow.local import LocalFollower
from tuimon.parsers.columns import expand

EXAMPLES = int(os.environ.get("TUIMON_MODEL_EXAMPLES", "1000"))
GRACE = 3.0


LEADS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def text(i: int) -> bytes:
    """Lines start differently, as timestamped lines do.  A file cut back and written
    again with the very bytes we had read so far cannot be told from the same file
    (the known limit of content identity): with lines that all began alike, a
    partial first line would be such a case."""
    return f"{LEADS[i % len(LEADS)]}{i:07d} iteration {i:8d}/ 99999999 | elapsed time per iteration (ms): 1.0 |\n".encode()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Scandir:
    """Runs as root, where ``chmod 000`` refuses nothing: a directory whose mode
    has no read/search bits cannot be listed, as it would be for its owner."""

    real = staticmethod(os.scandir)

    def __call__(self, path="."):
        if not os.stat(path).st_mode & stat.S_IRUSR:
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return self.real(path)


class FollowModel(RuleBasedStateMachine):
    @initialize()
    def setup(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="tuimon-model-")
        self.sub = os.path.join(self.dir, "sub")
        os.mkdir(self.sub)
        self.path = os.path.join(self.sub, "train.log")
        self.state = os.path.join(self.dir, "state.json")
        self.clock = Clock()
        self.got: list[int] = []
        self.fh = open(self.path, "ab", buffering=0)
        self.ftime = time.time_ns()
        self.written: list[int] = []  # complete lines, in order
        self.maybe_lost: set[int] = set()  # on disk only between a copy and its truncate
        self.may_double: set[int] = set()  # output after the last save before a kill
        self.elsewhere: set[int] = set()  # lines of other files: their order against train.log's is free
        self.unsaved: list[int] = []  # output since the last save
        self.pending = b""  # bytes of lines not yet written
        self.next_id = 1
        self.rotations = 0
        self.follower = self._new_follower()
        self._tick()  # the follower knows the file from the start

    def _new_follower(self) -> LocalFollower:
        def sink(evs) -> None:
            its = [e.iteration for e in expand(evs) if e.type == "iteration"]
            self.got.extend(its)
            self.unsaved.extend(its)
        return LocalFollower([self.dir], sink, poll=1.0, grace=GRACE, clock=self.clock, use_inotify=False,
                             state_path=self.state)

    def _poll(self) -> None:
        self.clock.now += 1.01
        self.follower.poll()

    def _save(self) -> None:
        self.follower.save_state()
        self.unsaved = []

    def _tick(self) -> None:
        """A poll and the save that follows it (run() saves within 1 s of output)."""
        self._poll()
        self._save()

    def _stamp(self, target) -> None:
        """Every write gets its own mtime, as it would at a real writer's pace: the
        kernel's file clock ticks every few ms, and files rotated within one tick
        could not be told apart by age (real rotations are seconds apart)."""
        self.ftime += 10_000_000
        os.utime(target, ns=(self.ftime, self.ftime))

    def _write(self, data: bytes) -> None:
        self.fh.write(data)
        self._stamp(self.fh.fileno())

    def _complete_line(self) -> None:
        if self.pending:
            self._write(self.pending)
            self.pending = b""

    def _lines(self, n: int) -> bytes:
        data = b"".join(text(self.next_id + k) for k in range(n))
        self.written.extend(range(self.next_id, self.next_id + n))
        self.next_id += n
        return data

    @rule(n=st.integers(1, 5), cut=st.integers(0, 200))
    def write(self, n: int, cut: int) -> None:
        data = self.pending + self._lines(n)
        cut = min(cut, len(data))
        self._write(data[:len(data) - cut] if cut < len(data) else b"")
        self.pending = data[len(data) - cut:] if cut < len(data) else data

    @rule()
    def pause(self) -> None:
        self._tick()

    @rule()
    def rotate(self) -> None:  # logrotate "create": rename, new file at the name
        self._complete_line()
        self.fh.close()
        os.rename(self.path, f"{self.path}.r{self.rotations}")
        self.rotations += 1
        self.fh = open(self.path, "ab", buffering=0)

    @rule()
    def shift(self) -> None:  # logrotate's numbered rotation: x.1 -> x.2, x -> x.1, new x
        self._complete_line()
        self.fh.close()
        for k in range(30, 0, -1):  # keeps more than a schedule makes: nothing rotates out unread
            if os.path.exists(f"{self.path}.{k}"):
                os.rename(f"{self.path}.{k}", f"{self.path}.{k + 1}")
        os.rename(self.path, f"{self.path}.1")
        self.fh = open(self.path, "ab", buffering=0)

    @rule(n=st.integers(1, 3))
    def rename_away_and_late_recreate(self, n: int) -> None:
        """The writer keeps writing to the renamed file past the grace period."""
        self._complete_line()
        os.rename(self.path, f"{self.path}.away{self.rotations}")
        self.rotations += 1
        self._write(self._lines(n))
        self._tick()
        self.clock.now += GRACE + 1  # the renamed file is closed and parked
        self._tick()
        self._write(self._lines(n))
        self.fh.close()
        self.fh = open(self.path, "ab", buffering=0)

    @rule()
    def truncate(self) -> None:
        self._complete_line()
        self._tick()  # what was written before a truncation must have been read to be kept
        os.truncate(self.path, 0)
        self._stamp(self.path)

    @rule(between=st.integers(0, 2))
    def copytruncate(self, between: int) -> None:
        self._complete_line()
        copy = f"{self.path}.c{self.rotations}"  # logrotate keeps earlier copies
        shutil.copyfile(self.path, copy)
        self._stamp(copy)
        self.rotations += 1
        if between:  # the writer goes on between the copy and the truncate: those lines are nowhere
            start = self.next_id
            self._write(self._lines(between))
            self.maybe_lost.update(range(start, self.next_id))
        os.truncate(self.path, 0)
        self._stamp(self.path)

    @rule()
    def delete_and_recreate(self) -> None:
        self._complete_line()
        self._tick()  # a file deleted before it was ever polled cannot be read by anyone
        self.fh.close()
        os.unlink(self.path)
        self.fh = open(self.path, "ab", buffering=0)

    @rule()
    def replace_by_directory(self) -> None:
        """The file is deleted while its writer still writes, and a directory takes its name."""
        self._complete_line()
        self._tick()  # a file deleted before it was ever polled cannot be read by anyone
        os.unlink(self.path)
        self._write(self._lines(1))  # through the open descriptor, to the deleted file
        os.mkdir(self.path)
        self._tick()
        self._tick()
        os.rmdir(self.path)
        self.fh.close()
        self.fh = open(self.path, "ab", buffering=0)

    @precondition(lambda self: not os.path.lexists(os.path.join(self.dir, "loop")))
    @rule()
    def symlink_loop(self) -> None:
        os.symlink(".", os.path.join(self.dir, "loop"))
        os.symlink("..", os.path.join(self.sub, "up"))

    @rule(n=st.integers(0, 3), new_file=st.booleans())
    def chmod_directory_for_a_while(self, n: int, new_file: bool) -> None:
        """The directory cannot be listed for a few seconds (a file may appear in it
        meanwhile), then it can again: found on the retry timer, nothing lost."""
        os.chmod(self.sub, 0)
        if new_file:
            with open(os.path.join(self.sub, f"late{self.next_id}.log"), "ab") as fh:
                start = self.next_id
                fh.write(self._lines(n))
                self._stamp(fh.fileno())
                self.elsewhere.update(range(start, self.next_id))
        else:
            self._complete_line()
            self._write(self._lines(n))
        self._tick()
        self._tick()
        os.chmod(self.sub, 0o755)
        for _ in range(3):  # the unreadable directory is retried on a timer (2 s)
            self._tick()

    @rule(last_output_saved=st.booleans())
    def kill_and_restart(self, last_output_saved: bool) -> None:
        """SIGKILL (nothing saved on the way out), then a new follower from the state file."""
        self._poll()
        if last_output_saved:
            self._save()
        self.may_double.update(self.unsaved)
        self.unsaved = []
        self.follower.close()  # only what the kernel would do: descriptors and the lock go
        self.follower = self._new_follower()
        self._tick()  # the new follower's first look, while the directory can be listed

    @invariant()
    def nothing_doubled_but_unsaved(self) -> None:
        if hasattr(self, "got"):
            seen: set[int] = set()
            for it in self.got:
                assert it not in seen or it in self.may_double, (it, self.got)
                seen.add(it)

    def teardown(self) -> None:
        if not hasattr(self, "fh"):
            return
        try:
            self._complete_line()
            for _ in range(int(GRACE) + 4):
                self._tick()
            once = list(dict.fromkeys(self.got))
            assert [i for i in once if i not in self.maybe_lost | self.elsewhere] == [
                i for i in self.written if i not in self.maybe_lost | self.elsewhere]
            assert self.elsewhere <= set(once)
        finally:
            self.fh.close()
            self.follower.close()
            os.chmod(self.sub, 0o755)
            shutil.rmtree(self.dir, ignore_errors=True)


FollowModel.TestCase.settings = settings(max_examples=EXAMPLES, stateful_step_count=25, deadline=None,
                                         suppress_health_check=list(HealthCheck))


@pytest.mark.slow
def test_follow_model(monkeypatch) -> None:
    monkeypatch.setattr(walk.os, "scandir", Scandir())
    FollowModel.TestCase("runTest").runTest()
