from __future__ import annotations

import os
import signal
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

# A suite started in the background of a script (``cmd &``, nohup) inherits SIGINT ignored,
# and so would every tuimon it starts: the tests that press Ctrl-C (SIGINT) would wait on a
# process that cannot hear it.  Handled here, SIGINT is back to its default in the children.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def shared_or_skip(sub: str) -> Path:
    """Path under ../shared, or a loud skip naming what is missing."""
    path = SHARED / sub
    if not path.exists():
        pytest.skip(f"SKIPPED: {path} not found -- tests on the shared seeds/corpus need ../shared beside the "
                    "repository, or TUIMON_SHARED=/path/to/shared")
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


# -- the app, for Pilot tests ---------------------------------------------------------------
FIXED_NOW = 1_700_000_000.0  # the clock of the app's sessions: ages and stalls come out the same on every run
APP_SIZE = (170, 48)


def copy_fixture_logs(tmp_path: Path) -> Path:
    """The fixture runs in ``tmp_path/logs``, last written an hour before FIXED_NOW."""
    import shutil

    d = tmp_path / "logs"
    d.mkdir()
    for f in FIXTURES.iterdir():
        shutil.copy(f, d / f.name)
        os.utime(d / f.name, (FIXED_NOW - 3600, FIXED_NOW - 3600))
    return d


def loaded_session(paths, **kw):
    """A session whose files are already read (no background thread: deterministic)."""
    from tuimon.live.session import LiveSession

    session = LiveSession([str(p) for p in paths], clock=lambda: FIXED_NOW, poll=0.1, **kw)
    for _ in range(3):
        session.follower.poll()
    session.tick()  # the figures thread's work: alerts judged, rows built
    return session


@pytest.fixture
def fixture_logs(tmp_path) -> Path:
    return copy_fixture_logs(tmp_path)


@pytest.fixture
def app(fixture_logs):
    """The app on the fixture runs (not started: ``async with app.run_test(...)``)."""
    from tuimon.ui.app import TuimonApp

    return TuimonApp(loaded_session([fixture_logs]))


async def until(pilot, condition, timeout: float = 10.0) -> None:
    """Let the app run until ``condition()`` holds (a slow machine needs longer than a fixed pause).
    A condition that never holds fails here: a wait that timed out in silence made a test slow, and
    hid a broken key (→ in the log view) behind a wait with no assert after it."""
    for _ in range(int(timeout / 0.05)):
        try:
            if condition():
                return
        except Exception:  # the screen is still being built
            pass
        await pilot.pause(0.05)
    try:
        held = condition()
    except Exception as exc:  # noqa: BLE001 - said in the failure
        held = exc
    assert held, f"waited {timeout:.0f} s for a condition that did not hold ({held!r})"


def pytest_report_header(config):
    return f"tuimon shared material: {SHARED} ({'present' if SHARED.exists() else 'MISSING: corpus/seed tests skip'})"


sys.path.insert(0, str(ROOT))

