"""What a person sees: `tuimon demo` in a real terminal (tmux), driven with
send-keys and read with capture-pane."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None,
                                reason="SKIPPED: tmux is not installed; the terminal test needs it")


def tmux(session: str) -> list[str]:
    """A server of each session's own: tests running at once (pytest-xdist) must not share one,
    whose window size follows its latest session, nor touch the user's; nor may one test start
    its session on a server that the previous test's kill-session is shutting down (tmux then
    answers 'server exited unexpectedly')."""
    return ["tmux", "-L", f"tuimon-tests-{os.getpid()}-{session}"]


def app_env() -> dict:
    """The app's environment: without COLUMNS and LINES, which pytest-xdist's workers set
    to 80 and 24 and which Textual takes over the size of the pane."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    return dict(env, TERM="xterm-256color")


def capture(session: str) -> str:
    return subprocess.run([*tmux(session), "capture-pane", "-t", session, "-p"], capture_output=True, text=True).stdout


def wait_for(session: str, text: str, timeout: float = 20.0) -> str:
    deadline = time.monotonic() + timeout
    screen = ""
    while time.monotonic() < deadline:
        screen = capture(session)
        if text in screen:
            return screen
        time.sleep(0.2)
    raise AssertionError(f"{text!r} never appeared; screen was:\n{screen}")


def test_demo_in_tmux(tmp_path):
    session = f"tuimon-{uuid.uuid4().hex[:8]}"
    marker = tmp_path / "exit-code"
    cmd = (f"cd {ROOT} && PYTHONPATH={ROOT} {sys.executable} -m tuimon demo; echo $? > {marker}; sleep 30")
    subprocess.run([*tmux(session), "new-session", "-d", "-s", session, "-x", "180", "-y", "50", cmd], check=True,
                   env=app_env())
    try:
        screen = wait_for(session, "llama-7b-ranks-straggler-4005")
        wait_for(session, "FAILED oom")
        screen = capture(session)
        for job in ("megatron-deepspeed-gpt-13b-4001", "stronghold-5b-offload-4002", "gpt-175b-startup-4003",
                    "gpt-52b-oom-4004"):
            assert job in screen
        assert "starting" in screen and "training" in screen
        # the straggler's job, found with the filter (rows may still be arriving: no counting them)
        subprocess.run([*tmux(session), "send-keys", "-t", session, "/"], check=True)
        time.sleep(0.3)
        subprocess.run([*tmux(session), "send-keys", "-t", session, "-l", "straggler"], check=True)
        subprocess.run([*tmux(session), "send-keys", "-t", session, "Enter"], check=True)
        time.sleep(0.3)
        subprocess.run([*tmux(session), "send-keys", "-t", session, "Enter"], check=True)
        screen = wait_for(session, "Startup timeline")
        assert "llama-7b-ranks-straggler-4005  training" in screen, screen
        assert "STRAGGLER" in wait_for(session, "STRAGGLER")
        subprocess.run([*tmux(session), "send-keys", "-t", session, "Escape"], check=True)
        wait_for(session, "sort: job")
        subprocess.run([*tmux(session), "send-keys", "-t", session, "?"], check=True)
        wait_for(session, "tuimon keys")
        subprocess.run([*tmux(session), "send-keys", "-t", session, "Escape"], check=True)
        time.sleep(0.5)
        subprocess.run([*tmux(session), "send-keys", "-t", session, "q"], check=True)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not marker.exists():
            time.sleep(0.2)
        assert marker.read_text().strip() == "0"
        assert "temporary logs removed" in capture(session)
    finally:
        subprocess.run([*tmux(session), "kill-server"], capture_output=True)


def test_demo_at_100x30_shows_mfu_no_share_over_100_and_an_empty_filter(tmp_path):
    """Issue 19's walk-through at 100x30: MFU shown, every job screen's shares under 100%,
    a filter matching nothing shows no row, and q exits 0."""
    import re

    session = f"tuimon-{uuid.uuid4().hex[:8]}"
    marker = tmp_path / "exit-code"
    cmd = (f"cd {ROOT} && PYTHONPATH={ROOT} {sys.executable} -m tuimon demo; echo $? > {marker}; sleep 30")
    subprocess.run([*tmux(session), "new-session", "-d", "-s", session, "-x", "100", "-y", "30", cmd], check=True,
                   env=app_env())

    def keys(*names: str) -> None:
        subprocess.run([*tmux(session), "send-keys", "-t", session, *names], check=True)

    try:
        screen = wait_for(session, "llama-7b-ranks-straggler-4005")
        screen = wait_for(session, "%")  # the MFU column, at 100 columns
        assert re.search(r"\d+\.\d%", screen), screen
        for row in range(5):  # every job screen: no share of 100% or more
            keys(*(["j"] * row), "Enter")
            job_screen = wait_for(session, "Timers")
            shares = [float(s) for s in re.findall(r"(\d+\.\d)%", job_screen)]
            assert all(s < 100.0 for s in shares), job_screen
            if row == 4:  # the STRONGHOLD job: its offload rows and share in view at 100x30
                assert "offload " in job_screen and "offloading-" in job_screen, job_screen
            keys("Escape")
            wait_for(session, "sort: job")
        keys("/")
        time.sleep(0.3)
        keys("n", "o", "s", "u", "c", "h", "j", "o", "b", "Enter")
        time.sleep(1.0)
        screen = capture(session)
        assert "0 shown of 0 matching" in screen and "no job selected" in screen, screen  # no row, no preview
        rows = [line for line in screen.splitlines() if line.startswith((" llama", " gpt", " megatron", " stronghold"))]
        assert rows == [], screen
        keys("Escape")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not any(line.startswith(" gpt-175b")
                                                      for line in capture(session).splitlines()):
            time.sleep(0.2)  # the rows are back (a toast may name a job meanwhile)
        keys("q")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not marker.exists():
            time.sleep(0.2)
        assert marker.read_text().strip() == "0"
    finally:
        subprocess.run([*tmux(session), "kill-server"], capture_output=True)


def test_keys_typed_right_after_slash_are_the_filter_s(tmp_path):
    """"/stro" sent at once (a paste, a fast typist): the letters land in the filter, none runs as
    a command ("s" would re-sort); after Enter, "s" is a command again."""
    from tests.conftest import FIXTURES
    session = f"tuimon-{uuid.uuid4().hex[:8]}"
    cmd = f"cd {ROOT} && PYTHONPATH={ROOT} {sys.executable} -m tuimon watch --no-cache {FIXTURES}; sleep 30"
    subprocess.run([*tmux(session), "new-session", "-d", "-s", session, "-x", "120", "-y", "30", cmd], check=True,
                   env=app_env())
    try:
        wait_for(session, "stronghold-run")
        subprocess.run([*tmux(session), "send-keys", "-t", session, "/stro"], check=True)
        screen = wait_for(session, "filter: stro")
        assert "sort: job" in screen and "1 shown of 1 matching" in screen, screen
        subprocess.run([*tmux(session), "send-keys", "-t", session, "Enter"], check=True)
        time.sleep(0.5)
        subprocess.run([*tmux(session), "send-keys", "-t", session, "s"], check=True)
        wait_for(session, "sort: status")
    finally:
        subprocess.run([*tmux(session), "kill-server"], capture_output=True)
