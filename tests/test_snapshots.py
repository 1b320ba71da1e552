"""SVG snapshots of each screen at a fixed size (pytest-textual-snapshot).
Update after a deliberate visual change with: pytest tests/test_snapshots.py --snapshot-update"""
from __future__ import annotations

import pytest

from tests.conftest import APP_SIZE as SIZE
from tests.conftest import copy_fixture_logs as fixture_dir
from tests.conftest import loaded_session, until
from tuimon.ui.app import TuimonApp


def keys(*names):
    """Press keys, then let the footer and the refresh timer settle before the shot."""
    async def run_before(pilot) -> None:
        await pilot.press(*names)
        await pilot.pause(0.4)
    return run_before


def make_app(tmp_path, theme="dark"):
    return TuimonApp(loaded_session([fixture_dir(tmp_path)]), theme=theme)


def test_jobs_screen(snap_compare, tmp_path):
    assert snap_compare(make_app(tmp_path), run_before=keys(), terminal_size=SIZE)


def test_jobs_screen_light_theme(snap_compare, tmp_path):
    assert snap_compare(make_app(tmp_path, "light"), run_before=keys(), terminal_size=SIZE)


def test_job_screen(snap_compare, tmp_path):
    # sorted by name: cancelled, megatron-deepspeed, nccl, no-iterations, oom, stronghold
    assert snap_compare(make_app(tmp_path), run_before=keys("j", "j", "j", "j", "j", "enter"), terminal_size=SIZE)


def test_rank_screen(snap_compare, tmp_path):
    assert snap_compare(make_app(tmp_path), run_before=keys("j", "j", "enter", "j", "enter"), terminal_size=SIZE)


def test_help_screen(snap_compare, tmp_path):
    assert snap_compare(make_app(tmp_path), run_before=keys("question_mark"), terminal_size=SIZE)


SIZES = [(100, 30), (180, 50), (240, 70)]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_jobs_screen_sizes(snap_compare, tmp_path, size):
    assert snap_compare(make_app(tmp_path), run_before=keys(), terminal_size=size)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_job_screen_sizes(snap_compare, tmp_path, size):
    assert snap_compare(make_app(tmp_path), run_before=keys("j", "j", "j", "j", "j", "enter"), terminal_size=size)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_alerts_screen_sizes(snap_compare, tmp_path, size):
    """Shot once the alerts are judged and listed (a loaded machine takes longer than a pause)."""
    from textual.widgets import DataTable

    async def run_before(pilot) -> None:
        await keys("a")(pilot)
        # three failed runs and one stuck in startup
        await until(pilot, lambda: pilot.app.screen.query_one("#alerts", DataTable).row_count == 4)
        await pilot.pause(0.2)
    assert snap_compare(make_app(tmp_path), run_before=run_before, terminal_size=size)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_compare_screen_sizes(snap_compare, tmp_path, size):
    """Shot once the two marked jobs (megatron-deepspeed and stronghold, rows 2 and 6) are drawn: a fixed
    pause let a loaded machine (a fresh clone's test run) take the shot before the screen's first draw."""
    from tuimon.ui.compare import CompareScreen

    async def run_before(pilot) -> None:
        await keys("j", "space", "j", "j", "j", "j", "space", "c")(pilot)
        await until(pilot, lambda: isinstance(pilot.app.screen, CompareScreen) and len(pilot.app.screen.details) == 2)
        await pilot.pause(0.2)
    assert snap_compare(make_app(tmp_path), run_before=run_before, terminal_size=size)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_rank_screen_sizes(snap_compare, tmp_path, size):
    assert snap_compare(make_app(tmp_path), run_before=keys("j", "j", "enter", "j", "enter"), terminal_size=size)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_log_screen_sizes(snap_compare, tmp_path, size, monkeypatch):
    """The megatron-deepspeed run's log from its top, its matches of a search highlighted
    (the files are named relative to the current directory: the shot is the same on every run)."""
    fixture_dir(tmp_path)
    monkeypatch.chdir(tmp_path)
    app = TuimonApp(loaded_session(["logs"]))

    async def run_before(pilot) -> None:
        await keys("j", "enter", "l", "g", "slash", *"lm loss", "enter")(pilot)
        await until(pilot, lambda: not pilot.app.screen.searching and pilot.app.screen.view.current is not None)
        await pilot.pause(0.2)

    assert snap_compare(app, run_before=run_before, terminal_size=size)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_help_screen_sizes(snap_compare, tmp_path, size):
    assert snap_compare(make_app(tmp_path), run_before=keys("question_mark"), terminal_size=size)
