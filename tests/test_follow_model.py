"""Random sequences of writes (lines split anywhere), rotations, truncations,
copytruncate, delete/recreate and pauses, checked against a model: every
complete line is delivered exactly once, in order."""
from __future__ import annotations

import os
import shutil
import tempfile

from hypothesis import HealthCheck, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from parsers.events import expand
from tuimon.sources.local import LocalFollower

EXAMPLES = int(os.environ.get("TUIMON_MODEL_EXAMPLES", "1000"))


def text(i: int) -> bytes:
    return f" iteration {i:8d}/ 99999999 | elapsed time per iteration (ms): 1.0 |\n".encode()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FollowModel(RuleBasedStateMachine):
    @initialize()
    def setup(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="tuimon-model-")
        self.path = os.path.join(self.dir, "train.log")
        self.clock = Clock()
        self.got: list = []
        self.fh = open(self.path, "ab", buffering=0)
        self.follower = LocalFollower([self.dir], lambda evs: self.got.extend(expand(evs)), poll=1.0, grace=3.0, clock=self.clock,
                                      use_inotify=False)
        self.written: list[int] = []  # complete lines, in order
        self.pending = b""  # bytes of lines not yet written
        self.next_id = 1
        self.rotations = 0
        self._tick()  # the follower knows the file from the start

    def _tick(self, seconds: float = 1.01) -> None:
        self.clock.now += seconds
        self.follower.poll()

    def _complete_line(self) -> None:
        if self.pending:
            self.fh.write(self.pending)
            self.pending = b""

    @rule(n=st.integers(1, 5), cut=st.integers(0, 200))
    def write(self, n: int, cut: int) -> None:
        data = self.pending + b"".join(text(self.next_id + k) for k in range(n))
        self.written.extend(range(self.next_id, self.next_id + n))
        self.next_id += n
        cut = min(cut, len(data))
        self.fh.write(data[:len(data) - cut] if cut < len(data) else b"")
        self.pending = data[len(data) - cut:] if cut < len(data) else data

    @rule()
    def pause(self) -> None:
        self._tick()

    @rule()
    def rotate(self) -> None:  # logrotate "create": rename, new file at the name
        self._complete_line()
        self.fh.close()
        os.rename(self.path, f"{self.path}.{self.rotations}")
        self.rotations += 1
        self.fh = open(self.path, "ab", buffering=0)

    @rule()
    def truncate(self) -> None:
        self._complete_line()
        self._tick()  # what was written before a truncation must have been read to be kept
        os.truncate(self.path, 0)

    @rule()
    def copytruncate(self) -> None:
        self._complete_line()
        self._tick()
        shutil.copyfile(self.path, f"{self.path}.copy")
        os.truncate(self.path, 0)

    @rule()
    def delete_and_recreate(self) -> None:
        self._complete_line()
        self._tick()  # a file deleted before it was ever polled cannot be read by anyone
        self.fh.close()
        os.unlink(self.path)
        self.fh = open(self.path, "ab", buffering=0)

    @invariant()
    def no_duplicates_so_far(self) -> None:
        if hasattr(self, "got"):
            seen = [e.iteration for e in self.got if e.type == "iteration"]
            assert len(seen) == len(set(seen)), seen

    def teardown(self) -> None:
        if not hasattr(self, "fh"):
            return
        try:
            self._complete_line()
            for _ in range(6):
                self._tick()
            got = [e.iteration for e in self.got if e.type == "iteration"]
            assert got == self.written
        finally:
            self.fh.close()
            self.follower.close()
            shutil.rmtree(self.dir, ignore_errors=True)


FollowModel.TestCase.settings = settings(max_examples=EXAMPLES, stateful_step_count=25, deadline=None,
                                         suppress_health_check=list(HealthCheck))
TestFollowModel = FollowModel.TestCase
