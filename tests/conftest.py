from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("TUIMON_SHARED", ROOT.parent / "shared"))
FIXTURES = Path(__file__).parent / "fixtures"  # the runs the app, CLI and remote tests show (their count is known)
FORMATS = Path(__file__).parent / "formats"  # one more run a format, for the golden, lane and piece tests
GOLDEN = Path(__file__).parent / "golden"
#: every fixture log, each with its golden summary
FIXTURE_LOGS = sorted(FIXTURES.iterdir()) + sorted(FORMATS.iterdir())

# The suite (and every tuimon it starts) keeps its parse cache and reads user formats in
# places of its own: never the user's ~/.cache/tuimon or ~/.config/tuimon/formats.
_HOME = tempfile.mkdtemp(prefix="tuimon-tests-")
os.environ["XDG_CACHE_HOME"] = os.path.join(_HOME, "cache")
os.environ["XDG_CONFIG_HOME"] = os.path.join(_HOME, "config")
os.environ.pop("TUIMON_FORMATS", None)


def shared_or_skip(sub: str) -> Path:
    """Path under ../shared, or a loud skip naming what is missing."""
    path = SHARED / sub
    if not path.exists():
        pytest.skip(f"SKIPPED: {path} not found -- tests on the shared seeds/corpus need ../shared beside the repo")
    return path


@pytest.fixture
def run_cli(capsys):
    """Run ``tuimon`` in-process; returns (exit code, stdout, stderr)."""
    from tuimon.commands.cli import main

    def run(*argv: str):
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return run


def pytest_report_header(config):
    return f"tuimon shared material: {SHARED} ({'present' if SHARED.exists() else 'MISSING: corpus/seed tests skip'})"


sys.path.insert(0, str(ROOT))

