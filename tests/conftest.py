from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("TUIMON_SHARED", ROOT.parent / "shared"))
FIXTURES = Path(__file__).parent / "fixtures"  # the runs the app, CLI and remote tests show (their count is known)
FORMATS = Path(__file__).parent / "formats"  # one more run a format, for the golden, lane and piece tests
GOLDEN = Path(__file__).parent / "golden"
#: every fixture log, each with its golden summary
FIXTURE_LOGS = sorted(FIXTURES.iterdir()) + sorted(FORMATS.iterdir())


def shared_or_skip(sub: str) -> Path:
    """Path under ../shared, or a loud skip naming what is missing."""
    path = SHARED / sub
    if not path.exists():
        pytest.skip(f"SKIPPED: {path} not found -- tests on the shared seeds/corpus need ../shared beside the repo")
    return path


@pytest.fixture
def run_cli(capsys):
    """Run ``tuimon`` in-process; returns (exit code, stdout, stderr)."""
    from tuimon.cli import main

    def run(*argv: str):
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return run


def pytest_report_header(config):
    return f"tuimon shared material: {SHARED} ({'present' if SHARED.exists() else 'MISSING: corpus/seed tests skip'})"


sys.path.insert(0, str(ROOT))

