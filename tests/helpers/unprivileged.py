"""Run tuimon as an unprivileged user when the tests run as root (as CI does):
root ignores file permissions, so permission cases need another uid."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.conftest import ROOT

NOBODY = 65534


def world_dir() -> Path:
    """A temporary directory every user can enter (pytest's tmp_path is root-only)."""
    d = Path(tempfile.mkdtemp(prefix="tuimon-perm-", dir="/tmp"))
    d.chmod(0o755)
    return d


def _drop() -> None:
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)


def tuimon(*args: str, **kw) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT), HOME="/tmp")
    preexec = _drop if os.geteuid() == 0 else None
    return subprocess.Popen([sys.executable, "-m", "tuimon", *args], env=env, preexec_fn=preexec,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def can_drop() -> bool:
    if os.geteuid() != 0:
        return True
    # the interpreter and the checkout must be readable by nobody
    try:
        probe = subprocess.run([sys.executable, "-c", "import tuimon, parsers"], preexec_fn=_drop,
                               env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return False  # e.g. the interpreter lives under root's home
    return probe.returncode == 0


def require_drop(covered_by: str) -> None:
    """Skip, saying so, where tuimon cannot run as another user (``covered_by``: the
    simulated test that covers the logic meanwhile)."""
    import pytest

    if not can_drop():
        pytest.skip(f"SKIPPED: cannot run tuimon as an unprivileged user here (interpreter not reachable by "
                    f"nobody); {covered_by} covers the logic")


def follow_until_fixed(d: Path, fix, how: str, poll: float = 0.2) -> tuple[bool, str]:
    """``tuimon events --follow d`` as nobody; ``fix()`` after 1.5 s; then whether
    iteration 1 came out within 8 s, and what was said on stderr."""
    import time

    proc = tuimon("events", "--follow", str(d), *(["--poll", str(poll)] if how == "polling" else []))
    got: list[str] = []
    try:
        time.sleep(1.5)
        fix()
        deadline = time.monotonic() + 8
        os.set_blocking(proc.stdout.fileno(), False)
        while time.monotonic() < deadline and not any('"iteration": 1,' in g for g in got):
            chunk = proc.stdout.readline()
            got.append(chunk) if chunk else time.sleep(0.05)
    finally:
        proc.send_signal(2)
        _, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    return any('"type": "iteration"' in g and '"iteration": 1,' in g for g in got), err
