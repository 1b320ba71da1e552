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
