"""The app driven through Textual's Pilot: navigation, live updates, untrusted text."""
from __future__ import annotations

import contextlib
import shutil
import time

import numpy as np
import pytest

from tests.conftest import APP_SIZE, FIXED_NOW, FIXTURES, copy_fixture_logs, loaded_session, until
from tuimon.live.session import LiveSession
from tuimon.ui.app import TuimonApp
from tuimon.ui.job import JobScreen
from tuimon.ui.jobs import JobsScreen
from tuimon.ui.rank import RankScreen

SIZE = APP_SIZE


def rows(app) -> dict[str, list[str]]:
    table = app.screen.query_one("#jobs")
    out = {}
    for key in table.rows:
        out[key.value.rsplit("/", 1)[-1]] = [str(c) for c in table.get_row(key)]
    return out


def cell(app, job: str, column: str) -> str:
    """The text of ``job``'s cell in ``column`` (columns come and go with the width)."""
    table = app.screen.query_one("#jobs")
    key = next(k for k in table.rows if k.value.rsplit("/", 1)[-1] == job)
    return str(table.get_cell(key, column))


async def test_jobs_screen_shows_every_fixture_job(app):
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: len(rows(app)) == 6)
        r = rows(app)
        assert set(r) == {"stronghold-run", "megatron-deepspeed-8gpu-1234567", "oom-run", "nccl-timeout-555001",
                          "cancelled-777001", "no-iterations-888001"}
        assert r["oom-run"][2] == "FAILED oom !1" and r["stronghold-run"][2] == "finished"  # !1: its alert
        assert r["megatron-deepspeed-8gpu-1234567"][3] == "20/100"
        assert r["no-iterations-888001"][2] == "STUCK IN STARTUP !1"  # launcher and init lines, then an hour of nothing
        assert cell(app, "stronghold-run", "TFLOPs rep") == "7.2"


async def test_navigation_keys(app):
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: len(rows(app)) == 6)
        assert isinstance(app.screen, JobsScreen)
        await pilot.press("j", "j", "k")
        selected = app.screen.selected_key()
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, JobScreen))
        assert isinstance(app.screen, JobScreen) and app.screen.key == selected
        await pilot.press("escape")
        assert isinstance(app.screen, JobsScreen)
        await pilot.press("question_mark")
        assert type(app.screen).__name__ == "HelpScreen"
        await pilot.press("escape")
        assert isinstance(app.screen, JobsScreen)
        await pilot.press("s")
        assert app.screen.sort == "status"
        await pilot.press("q")
    assert app.return_code == 0


async def test_filter_narrows_rows(app):
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: len(rows(app)) == 6)
        await pilot.press("slash", "o", "o", "m")
        await until(pilot, lambda: set(rows(app)) == {"oom-run"})
        assert set(rows(app)) == {"oom-run"}
        await pilot.press("escape")
        await until(pilot, lambda: len(rows(app)) == 6)
        assert len(rows(app)) == 6


async def test_rank_drill_down_shows_straggler_and_its_lines(tmp_path):
    d = tmp_path / "ranks"
    d.mkdir()
    lines = []
    for i in range(1, 8):
        for r in range(4):
            ms = 1000.0 * (1.4 if r == 2 else 1.0)
            lines.append(f"{r}:  iteration {i:8d}/     100 | elapsed time per iteration (ms): {ms:.1f} | "
                         f"lm loss: 2.0E+00 |")
    (d / "job-9001.out").write_text("\n".join(lines) + "\n")
    app = TuimonApp(loaded_session([d]))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: rows(app))
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, JobScreen) and app.screen.query_one("#ranks").row_count)
        detail = app.session.job_detail(app.screen.key)
        assert [r.straggler for r in detail.ranks] == [False, False, True, False]
        await pilot.press("j", "j", "enter")
        await until(pilot, lambda: isinstance(app.screen, RankScreen) and app.screen._shown)
        assert isinstance(app.screen, RankScreen) and app.screen.rank == "2"
        shown = app.screen._shown
        assert shown and all(line.startswith("2: ") for line in shown)
        # against the median of the other ranks, at the same iterations, with the numbers
        figures = app.screen.query_one("#rank-figures").content.plain
        assert "rank 2 median 1.400 s" in figures and "other ranks 1.000 s" in figures and "+40.0%" in figures
        chart = app.screen.query_one("#rank-chart").content
        assert [label for label, _, _ in chart.series] == ["rank 2", "median of the other ranks"]
        assert list(chart.series[1][2]) == [1.0] * 7 and list(chart.series[0][2]) == [1.4] * 7
        await pilot.press("backspace")
        assert isinstance(app.screen, JobScreen)


async def shows(pilot, app, key: str, iteration: str, tries: int = 40) -> bool:
    """Waits (a tenth of a second a try) until job ``key``'s Iter column reads ``iteration``."""
    for _ in range(tries):
        await pilot.pause(0.1)
        if rows(app).get(key, [None] * 4)[3] == iteration:
            return True
    return False


async def test_live_updates_while_running(tmp_path):
    d = tmp_path / "live"
    d.mkdir()
    log = d / "train-4242.out"
    row = " iteration {i:8d}/     100 | elapsed time per iteration (ms): 500.0 | lm loss: 2.0E+00 |\n"
    log.write_text(row.format(i=1))
    session = LiveSession([str(d)], poll=0.1)
    session.start()
    app = TuimonApp(session, refresh_hz=10)
    try:
        async with app.run_test(size=SIZE) as pilot:
            assert await shows(pilot, app, "train-4242", "1/100", tries=30)
            with open(log, "a") as fh:
                fh.write(row.format(i=2) + row.format(i=3))
            assert await shows(pilot, app, "train-4242", "3/100")
            (d / "second-4243.out").write_text(row.format(i=7))
            assert await shows(pilot, app, "second-4243", "7/100")
    finally:
        session.stop()


async def test_new_lines_are_drawn_when_they_are_read_not_on_a_fixed_tick(tmp_path):
    """The app's fallback tick is set to 100 s: a line appended (ingest in its own process, as `tuimon
    watch` runs it) still reaches the jobs screen, because new figures are drawn when the session makes
    them. A flood of lines is drawn in a bounded number of frames (debounced), not one a line."""
    from tuimon.ui.app import MIN_FRAME_GAP_S

    d = tmp_path / "live"
    d.mkdir()
    log = d / "train-4242.out"
    row = " iteration {i:8d}/    5000 | elapsed time per iteration (ms): 500.0 | lm loss: 2.0E+00 |\n"
    log.write_text(row.format(i=1))
    session = LiveSession([str(d)], poll=0.1, process=True)
    session.start()
    app = TuimonApp(session, refresh_hz=0.01)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: rows(app).get("train-4242", [""] * 4)[3] == "1/5000", timeout=30)
            for i in (2, 3):
                with open(log, "a") as fh:
                    fh.write(row.format(i=i))
                await until(pilot, lambda: rows(app)["train-4242"][3] == f"{i}/5000", timeout=30)
            frames, started = app.frames, time.monotonic()
            for i in range(4, 2004):  # 2,000 lines, as fast as a loop writes them
                with open(log, "a") as fh:
                    fh.write(row.format(i=i))
            await until(pilot, lambda: rows(app)["train-4242"][3] == "2003/5000", timeout=60)
            took = time.monotonic() - started
            assert app.frames - frames <= took / MIN_FRAME_GAP_S + 2, (app.frames - frames, took)
    finally:
        session.stop()


async def test_an_ingest_process_that_dies_is_said_in_the_header(tmp_path):
    """The app's ingest runs in a process of its own (as ``tuimon watch`` starts it):
    if it is killed, the app keeps running, says so once in a notification, and its
    header says from then on that the figures are no longer updated."""
    d = tmp_path / "live"
    d.mkdir()
    (d / "train-4242.out").write_text(" iteration        1/     100 | elapsed time per iteration (ms): 500.0 |\n")
    session = LiveSession([str(d)], poll=0.1, process=True)
    session.start()
    app = TuimonApp(session, refresh_hz=10)
    try:
        async with app.run_test(size=SIZE) as pilot:
            assert await shows(pilot, app, "train-4242", "1/100", tries=50)
            session._proc.kill()
            header = ""
            for _ in range(50):
                await pilot.pause(0.1)
                header = str(app.screen.query_one("#progress").render())
                if "ingest" in header:
                    break
            assert "ingest STOPPED, no more updates" in header
            assert rows(app)["train-4242"][3] == "1/100"  # what was read stays shown
    finally:
        session.stop()


HOSTILE_NAME = "[@click=app.quit]x[link=evil]y[b]\x1b[2Jz"
HOSTILE_LINES = ["[bold]not bold[/bold] [/ [$accent] [@click=app.quit]click[/]",
                 "\x1b]0;pwned\x07 \x1b[2J \x9b31m red \u202eevil\u202c \x00nul",
                 " iteration        1/      10 | elapsed time per iteration (ms): 100.0 | lm loss: 1.0E+00 |"]


async def test_untrusted_text_is_shown_literally(tmp_path):
    d = tmp_path / "evil"
    d.mkdir()
    (d / f"{HOSTILE_NAME}.log").write_text("\n".join(HOSTILE_LINES) + "\n")
    app = TuimonApp(loaded_session([d]))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: rows(app))
        (name,) = [cells[0] for cells in rows(app).values()]
        # literal: no markup parsed, ESC shown (cut to the job column, where it does not fit whole)
        shown = "[@click=app.quit]x[link=evil]y[b]␛[2Jz"
        assert name == shown or (name.endswith("…") and shown.startswith(name[:-1]) and "␛" in name), name
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, JobScreen) and app.screen.query_one("#tail").lines)
        assert isinstance(app.screen, JobScreen)
        tail = app.screen.query_one("#tail")
        text = "\n".join(str(line) for line in tail.lines)
        assert "[bold]not bold[/bold] [/ [$accent] [@click=app.quit]click[/]" in text
        assert "\x1b" not in text and "\x9b" not in text and "\u202e" not in text and "\x00" not in text
        assert "␛]0;pwned␇" in text
        screen_text = app.export_screenshot()
        assert "\x1b]0;" not in screen_text
        await pilot.click("#tail")
        await pilot.pause(0.2)
    assert app.return_code is None or app.return_code == 0  # nothing quit the app behind our back


async def test_themes_and_palette_commands(tmp_path):
    app = TuimonApp(loaded_session([copy_fixture_logs(tmp_path)]), theme="high-contrast")
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: len(rows(app)) == 6)
        assert app.theme == "tuimon-high-contrast"
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for wanted in ("Theme: light", "Theme: dark", "Sort jobs by tflops", "Filter jobs", "Help"):
            assert wanted in titles
        cmd = next(c for c in app.get_system_commands(app.screen) if c.title == "Theme: light")
        cmd.callback()
        await pilot.pause(0.1)
        assert app.theme == "tuimon-light"
        # status words stay readable without colour
        assert "FAILED oom !1" in rows(app)["oom-run"]


async def test_mouse_opens_a_job(app):
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: len(rows(app)) == 6)
        table = app.screen.query_one("#jobs")
        # row 2 of the body (the header is row 0 of the widget)
        await pilot.click("#jobs", offset=(3, 3))
        await pilot.click("#jobs", offset=(3, 3))
        await until(pilot, lambda: isinstance(app.screen, JobScreen))
        assert isinstance(app.screen, JobScreen)
        assert app.screen.key.endswith(list(rows_keys(table))[2])


def rows_keys(table):
    return [k.value.rsplit("/", 1)[-1] for k in table.rows]


@contextlib.asynccontextmanager
async def job_screen(tmp_path, fixture: str, ready: str):
    """The app on one per-format fixture run, its job screen open once the chart
    ``ready`` has values."""
    from tests.conftest import FORMATS
    d = tmp_path / "logs"
    d.mkdir()
    shutil.copy(FORMATS / fixture, d / fixture)
    app = TuimonApp(loaded_session([d]))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: len(rows(app)) == 1)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, JobScreen)
                    and app.screen.query_one(ready).parent.values)
        yield app.screen
        await pilot.press("q")


async def test_a_chart_without_values_draws_no_line(tmp_path):
    """A Hugging Face Trainer run reports no TFLOPs: its chart says there is no data and
    keeps its bare title (a flat line would read as zeros), while the step-time chart
    shows its values."""
    async with job_screen(tmp_path, "hf-trainer-run.log", "#chart-iter") as screen:
        assert screen.query_one("#chart-tflops").parent.values == []
        assert str(screen.query_one("#chart-tflops-label").render()) == "TFLOPs/GPU"
        assert len(screen.query_one("#chart-iter").parent.values) == 100  # a step each time its bar moved on


async def test_tflops_of_a_run_that_logs_steps(tmp_path):
    """A TorchTitan run has no iteration lines; the TFLOPs a GPU its step lines
    report are its chart (it was empty)."""
    async with job_screen(tmp_path, "torchtitan-run.log", "#chart-loss") as screen:
        data = screen.query_one("#chart-tflops").parent.values
        assert len(data) == 9 and 44 < data[-1] < 48


@pytest.mark.parametrize("line_width", [40, 60, 75, 120])
def test_bars_and_timeline_fit_their_panel(line_width):
    """The job screen's bars shrink to the panel's width: a figure never wraps onto
    a line of its own (the startup panel did at 160 columns)."""
    from tuimon.figures.breakdown import build
    from tuimon.ui.render import timeline, tree_bars
    phases = [{"name": "job-start", "offset_s": 0.0}, {"name": "deepspeed-init", "offset_s": 12.0},
              {"name": "first-step", "offset_s": 31.9}]
    means = {"offloading-fwd-2cpu-overhead-with-a-long-name": 402.66, "forward-compute": 852.5,
             "offloading-fwd-overhead": 751.53, "offloading-fwd-2cpu-overhead": 402.66}
    parts = build({n: (4, v) for n, v in means.items()}, 6051.73).as_list()
    for text in (timeline(phases, line_width=line_width), tree_bars(parts, line_width=line_width)):
        lines = text.plain.split("\n")
        assert all(len(line) <= line_width for line in lines), (line_width, lines)
        assert all(line.rstrip().endswith(("s", "%")) for line in lines)  # the figures stay on their line


def test_chart_label_keeps_to_one_line():
    """A chart's label drops its figures from the right to stay on one line (a
    wrapped label pushed the chart down a row at 150 columns)."""
    from rich.console import Console

    from tuimon.ui.job import Chart
    chart = Chart("iteration time (s)", "chart-x")
    shown = {}

    class Label:
        def update(self, renderable):
            shown["r"] = renderable

    chart.query_one = lambda selector, *_: Label()
    from tuimon.live.session import Curve
    chart.show(Curve(np.array([1, 2, 3]), np.full(3, np.nan), np.array([5.82, 6.11, 9.65])), ".2f")
    for width, want in ((80, "iteration time (s)  last 9.65  min 5.82  max 9.65"),
                        (44, "iteration time (s)  last 9.65  min 5.82"), (20, "iteration time (s)")):
        console = Console(width=width, record=True)
        console.print(shown["r"])
        assert console.export_text().rstrip("\n") == want


async def test_alerts_reach_the_header_the_rows_a_toast_and_the_alerts_screen(tmp_path):
    from tuimon.ui.alerts import AlertsScreen

    logs = copy_fixture_logs(tmp_path)
    clock = [FIXED_NOW]
    session = LiveSession([str(logs)], clock=lambda: clock[0], poll=0.1)
    for _ in range(3):
        session.follower.poll()
    session.start_figures()  # the figures thread judges; the test feeds the follower by hand
    app = TuimonApp(session)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: len(rows(app)) == 6)
        await until(pilot, lambda: "alerts (a to list)" in str(app.screen.query_one("#progress").render()))
        header = str(app.screen.query_one("#progress").render())
        assert "4 alerts" in header, header  # the training fixture stopped long ago: ended, not stalled
        r = rows(app)
        assert r["oom-run"][2] == "FAILED oom !1" and r["stronghold-run"][2] == "finished"
        # the logs' history is listed, not announced
        assert not any("alert:" in (n.title or "") for n in app._notifications)
        # a job that fails while the user watches: a toast
        (logs / "late-9999.out").write_text((FIXTURES / "oom-run.log").read_text())

        def toasted() -> bool:  # the follower finds the new file on one of its polls; alerts are judged each second
            session.follower.poll()
            clock[0] += 2
            return any("late-9999" in str(n.message) for n in app._notifications)
        await until(pilot, toasted)
        assert any("alert: failed" in (n.title or "") and "late-9999" in str(n.message) for n in app._notifications)
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, AlertsScreen))
        table = app.screen.query_one("#alerts")
        await until(pilot, lambda: table.row_count == 5)
        kinds = sorted(str(table.get_row_at(i)[2]) for i in range(table.row_count))
        rows_shown = [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]
        assert kinds == ["failed", "failed", "failed", "failed", "startup-hang"], rows_shown
        # the log line of the alert under the cursor, read off the UI thread
        screen = app.screen
        table.move_cursor(row=next(i for i, e in enumerate(screen._rows) if e.newest.line))
        await until(pilot, lambda: "\n" in str(screen.query_one("#alert-line").render()))
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, AlertsScreen))


async def test_a_screenshot_without_a_downloads_directory_goes_to_the_current_one(tmp_path, monkeypatch, app):
    home = tmp_path / "home"
    home.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_DOWNLOAD_DIR", raising=False)
    monkeypatch.chdir(work)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: len(rows(app)) == 6)
        app.action_screenshot()
        # written by the driver's thread: wait for the whole file, then for the toast that says where
        await until(pilot, lambda: any("</svg>" in p.read_text() for p in work.glob("*.svg")))
        shots = list(work.glob("*.svg"))
        assert len(shots) == 1 and "<svg" in shots[0].read_text()[:400]
        await until(pilot, lambda: any(str(work) in str(n.message) for n in app._notifications))


async def test_status_and_badge_colours_come_from_the_theme(tmp_path):
    from tuimon.themes import THEME_SPECS

    app = TuimonApp(loaded_session([copy_fixture_logs(tmp_path)]))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: len(rows(app)) == 6)
        table = app.screen.query_one("#jobs")

        def oom_status():
            key = next(k for k in table.rows if k.value.endswith("oom-run"))
            return table.get_row(key)[2]

        for theme in ("tuimon-dark", "tuimon-light", "tuimon-high-contrast"):
            app.theme = theme
            error = THEME_SPECS[theme]["error"]
            await until(pilot, lambda: error.lower() in str(oom_status().style).lower())
            cell = oom_status()
            assert error.lower() in str(cell.style).lower(), (theme, cell.style)
            assert cell.plain == "FAILED oom !1"  # the word stays: no colour needed to read it
            badge = [s for s in cell.spans if "!1" in cell.plain[s.start:s.end]]
            assert badge and error.lower() in str(badge[0].style).lower()


async def test_filter_terms_no_match_and_sorting(app):
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: len(rows(app)) == 6)
        screen = app.screen

        async def filtered(text: str) -> set[str]:
            await pilot.press("slash")
            box = screen.query_one("#filter")
            box.value = text
            await pilot.press("enter")
            await pilot.pause(0.2)
            return set(rows(app))

        assert await filtered("status:failed") == {"oom-run", "nccl-timeout-555001", "cancelled-777001"}
        assert await filtered("status:failed nccl") == {"nccl-timeout-555001"}
        assert await filtered("fw:stronghold") == {"stronghold-run"}
        assert await filtered("host:local status:stuck") == {"no-iterations-888001"}
        assert await filtered("status:ended") == {"megatron-deepspeed-8gpu-1234567"}  # stopped long ago
        assert await filtered("status:stalled") == set()  # never seen growing: not stalled
        assert await filtered("nosuchjob") == set()  # no rows: the previous match is not left on screen
        await pilot.press("enter")  # and Enter opens nothing
        await pilot.pause(0.2)
        assert isinstance(app.screen, JobsScreen)
        await pilot.press("escape")
        await until(pilot, lambda: len(rows(app)) == 6)
        # s forward, S back; a click on a header sorts by it
        await pilot.press("s")
        assert screen.sort == "status"
        await pilot.press("S")
        assert screen.sort == "job"
        await pilot.press("s")
        assert screen.sort == "status"
        await pilot.click("#jobs", offset=(3, 0))  # the "Job" header
        await until(pilot, lambda: screen.sort == "job")
        assert screen.sort == "job"


async def test_e_exports_the_job_series_to_csv(tmp_path, monkeypatch):
    import csv as csv_mod

    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    app = TuimonApp(loaded_session([copy_fixture_logs(tmp_path)]))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: len(rows(app)) == 6)
        app.open_job(next(k for k in app.session.store.jobs if k.endswith("stronghold-run")))
        await until(pilot, lambda: isinstance(app.screen, JobScreen))
        await pilot.press("e")
        out = work / "stronghold-run-series.csv"
        await until(pilot, lambda: out.exists())
        points = list(csv_mod.DictReader(out.open()))
        ranks = [p for p in points if p["source"] == "iteration"]
        assert [p["iteration"] for p in ranks] == ["10", "20", "30", "40", "50"]  # logged every 10
        assert all(p["rank"] == "" for p in points if p["source"] != "iteration")  # a rank column holds ranks
        assert all(p["rank"] == "" for p in ranks), ranks[0]  # lines that name no rank: empty, not "'-"
        # float32 points as logged: no 6618.700195
        assert all(len(p["elapsed_ms"].split(".")[-1]) <= 3 for p in ranks), [p["elapsed_ms"] for p in ranks]
        assert all(float(p["elapsed_ms"]) > 0 and p["loss"] for p in ranks)
        assert ranks[0]["file"].endswith("stronghold-run.log") and int(ranks[0]["line"]) > 0
        await until(pilot, lambda: any("series written to" in str(n.message) for n in app._notifications))


def test_line_chart_axes_warmup_and_nan():
    """x is the iteration (labelled at the ends), y has ticks in the unit, a warm-up point
    is kept out of the y range (clipped, dimmed), a NaN is marked on the axis, and no
    data draws no line."""
    from rich.console import Console

    from tuimon.ui.chart import chart_lines
    from tuimon.ui.palette import DEFAULT

    its = np.arange(10, 210, 10, dtype=float)  # 20 points, iterations 10..200
    ys = np.full(20, 2.5)
    ys[0] = 40.0  # the first iteration: compilation, warm-up
    ys[1:] += np.linspace(0, 0.2, 19)
    ys[12] = np.nan
    lines = chart_lines(its, ys, 60, 8, unit="s")
    console = Console(width=60, record=True)
    for line in lines:
        console.print(line)
    text = console.export_text()
    rows = text.splitlines()
    assert len(rows) == 8
    assert rows[0].lstrip().startswith("2.7s") and rows[5].lstrip().startswith("2.51s")  # y ticks: 40 s out of range
    assert "↑" in rows[0]  # the warm-up point, clipped at the top
    assert rows[-1].strip().startswith("10") and rows[-1].strip().endswith("200")  # x: iterations
    assert "×" in rows[-2]  # the NaN, on the axis
    nan_cells = [sp for sp in lines[-2].spans if "×" in lines[-2].plain[sp.start:sp.end]]
    assert nan_cells and nan_cells[0].style == DEFAULT.alert
    assert [t.plain for t in chart_lines([], [], 60, 8)] == ["no data yet"]


def _chart_rows(xs, ys, **kw) -> list[str]:
    from rich.console import Console

    from tuimon.ui.chart import chart_lines
    console = Console(width=70, record=True)
    for line in chart_lines(xs, ys, 70, 8, **kw):
        console.print(line)
    return console.export_text().splitlines()


def test_a_rates_far_outliers_do_not_flatten_its_chart():
    """A later run's first step (12.8 s, mid-series, past the warm-up) against a steady 1.59 s: the y
    range fits the steady points, the outlier is drawn clipped with an arrow; a dip below is marked
    too; a loss, which falls for real, keeps its whole range."""
    rng = np.random.default_rng(7)
    its = np.arange(1, 121, dtype=float)
    ys = 1.59 + 0.02 * rng.standard_normal(120)
    ys[0], ys[60] = 12.8, 12.8  # the first step of each of two runs
    rows = _chart_rows(its, ys, unit="s")
    top, bottom = float(rows[0].split("s")[0]), float(rows[5].split("s")[0])
    assert 1.59 < top < 1.7 and 1.45 < bottom < 1.59, rows[:6]  # the steady range, not 1.5..12.8
    assert rows[0].count("↑") == 2, rows[0]  # both first steps, clipped at the top
    ys[90] = 0.05  # a dip (a rate that fell to nothing for one point)
    rows = _chart_rows(its, ys, unit="s")
    assert float(rows[5].split("s")[0]) > 1.4 and "↓" in rows[5], rows
    loss = 3 + 8 * np.exp(-its / 15)  # 11 down to 3: real, not an outlier
    rows = _chart_rows(its, loss, warmup=False)
    assert float(rows[0].split("┤")[0]) > 10.4 and float(rows[5].split("┤")[0]) < 3.1, rows[:6]
    assert "↑" not in "".join(rows) and "↓" not in "".join(rows)
    # the lowest value is drawn (a cell, not a blank that reads as a gap)
    assert rows[5].rstrip()[-1] == "▁", rows[5]


async def test_the_jobs_screen_previews_the_selected_job(app):
    async with app.run_test(size=(180, 50)) as pilot:
        await until(pilot, lambda: len(rows(app)) == 6)
        screen = app.screen
        table = screen.query_one("#jobs")
        target = next(i for i, k in enumerate(table.rows) if k.value.endswith("oom-run"))
        table.move_cursor(row=target)
        await until(pilot, lambda: "oom-run" in str(screen.query_one("#preview-status").render()))
        line = str(screen.query_one("#preview-status").render())
        assert "FAILED oom" in line and "latest alert: failed" in line
        stronghold = next(i for i, k in enumerate(table.rows) if k.value.endswith("stronghold-run"))
        table.move_cursor(row=stronghold)
        await until(pilot, lambda: len(screen.query_one("#preview-iter").parent.values) == 5)
        assert screen.query_one("#preview-tflops").parent.values  # its TFLOPs, charted


async def test_columns_drop_by_priority_as_the_terminal_narrows(app):
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: len(rows(app)) == 6)
        narrow = [str(c.label) for c in app.screen.query_one("#jobs").columns.values()]
        # throughput stays at 100 columns: iteration time and one TFLOPs column (the log's, else computed)
        assert narrow[:3] == ["Job", "Status", "Iter"] and {"TFLOPs", "MFU", "Iter time"} <= set(narrow)
        assert "TFLOPs trend" not in narrow and "Startup" not in narrow
        assert cell(app, "stronghold-run", "TFLOPs") == "7.2r"  # its log's 7.24, marked as the log's
        legend = app.screen.query_one("#legend")  # the r, explained under the table while one is shown
        await until(pilot, lambda: legend.display and "123.4r: the rate the log reports" in str(legend.render()))
        await pilot.resize_terminal(240, 50)
        # the resize settles in steps under load: wait for the wide layout itself, not its first column
        await until(pilot, lambda: {"TFLOPs rep", "Framework"} <= {str(c.label) for c in
                                                               app.screen.query_one("#jobs").columns.values()})
        wide = [str(c.label) for c in app.screen.query_one("#jobs").columns.values()]
        assert wide[:3] == ["Job", "Framework", "Status"], wide  # the usual order when all fit
        assert "TFLOPs" not in wide and "TFLOPs calc" in wide  # both fit: no combined one
        await until(pilot, lambda: not legend.display)  # no r shown: no legend
        assert cell(app, "stronghold-run", "TFLOPs rep") == "7.2"


async def test_marked_jobs_are_compared_side_by_side(tmp_path):
    from tuimon.ui.compare import CompareScreen

    app = TuimonApp(loaded_session([copy_fixture_logs(tmp_path)]))
    async with app.run_test(size=(180, 50)) as pilot:
        await until(pilot, lambda: len(rows(app)) == 6)
        table = app.screen.query_one("#jobs")
        for job in ("stronghold-run", "megatron-deepspeed-8gpu-1234567"):
            table.move_cursor(row=next(i for i, k in enumerate(table.rows) if k.value.endswith(job)))
            await pilot.press("space")
        await until(pilot, lambda: cell(app, "stronghold-run", "Job").startswith("● "))
        await pilot.press("c")
        await until(pilot, lambda: isinstance(app.screen, CompareScreen) and app.screen.details)
        compare = app.screen.query_one("#compare-table")
        await until(pilot, lambda: compare.row_count == 2)
        jobs = sorted(str(compare.get_row_at(i)[0]) for i in range(2))
        assert jobs == ["megatron-deepspeed-8gpu-1234567", "stronghold-run"]
        header = [str(c.label) for c in compare.columns.values()]
        assert header == ["Job", "GPUs", "Params (B)", "DP", "PP", "MBS", "GBS", "Speed (s/it)", "TFLOPs"]  # seed 001's
        # `o` chooses the columns as --columns does; an unknown name is said, and changes nothing
        await pilot.press("o", "ctrl+u", *"job,method,bogus", "enter")
        await until(pilot, lambda: app._notifications)
        assert "unknown column 'bogus'" in list(app._notifications)[-1].message
        assert len(compare.columns) == 9
        await pilot.press("ctrl+u", *"job,method,layers", "enter")
        await until(pilot, lambda: len(compare.columns) == 3)
        assert [str(c.label) for c in compare.columns.values()] == ["Job", "Method", "Layers"]
        methods = sorted(str(compare.get_row_at(i)[1]) for i in range(2))
        assert methods == ["megatron-deepspeed", "stronghold"]
        # `/` narrows the table as it is typed (a column's value, or a word in any column); Esc clears
        await pilot.press("slash", *"method:strong")
        await until(pilot, lambda: compare.row_count == 1)
        assert str(compare.get_row_at(0)[0]) == "stronghold-run"
        await pilot.press("enter", "escape")
        await until(pilot, lambda: compare.row_count == 2)
        assert isinstance(app.screen, CompareScreen)
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, JobsScreen))


def test_overlay_chart_names_every_series():
    from rich.console import Console

    from tuimon.ui.chart import overlay_lines

    its = np.arange(1, 41, dtype=float)
    lines = overlay_lines([("run-a", its, 100 + its), ("run-b-with-a-long-name", its, 50 + its)], ["red", "blue"],
                          60, 10, unit="")
    console = Console(width=60, record=True)
    for line in lines:
        console.print(line)
    text = console.export_text()
    assert "● run-a" in text and "◆ run-b" in text and "140" in text.splitlines()[0]


async def test_zoom_pan_reset_and_wall_time_axis(tmp_path):
    """+ zooms the charts to the latest half, < pans back, 0 resets, x switches the axis to
    the wall time since the first point; the mouse wheel zooms at the pointer."""
    from tuimon.ui.chart import chart_lines
    from tuimon.ui.job import Chart, ZoomChart

    d = tmp_path / "zoom"
    d.mkdir()
    lines = [f"[2026-11-24 10:{i // 60:02d}:{i % 60:02d}.000000] iteration {i:8d}/     100 | "
             f"elapsed time per iteration (ms): {1000.0 + i:.1f} | lm loss: {5.0 - i / 100:.3E} |" for i in range(1, 101)]
    (d / "zoom-5001.out").write_text("\n".join(lines) + "\n")
    app = TuimonApp(loaded_session([d]))

    def x_labels() -> list[str]:
        chart = app.screen.query_one("#chart-iter").parent
        assert isinstance(chart, Chart)
        return chart_lines(chart.xs, chart.values, 60, 8, view=app.screen.view)[-1].plain.split()

    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: rows(app))
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, JobScreen) and app.screen.query_one("#chart-iter").parent.xs)
        assert x_labels() == ["1", "50", "100"]
        await pilot.press("plus")
        label = app.screen.query_one("#chart-iter-label").content
        assert x_labels() == ["50", "75", "100"] and label.build(80).plain.startswith("iteration time (s) (zoomed)")
        await pilot.press("less_than_sign")
        assert x_labels() == ["26", "50", "75"]
        await pilot.press("0")
        assert x_labels() == ["1", "50", "100"]
        await pilot.press("x")  # 99 s from the first point to the last
        assert x_labels() == ["0s", "50s", "1m39s"]
        app.screen.query_one("#chart-iter").parent.post_message(ZoomChart(0.5, 0.0))  # the wheel, at the left edge
        await pilot.pause()
        assert x_labels() == ["0s", "25s", "50s"]
    from tuimon.ui.chart import x_label
    assert [x_label(v, True) for v in (59.4, 3599, 3600 * 3 + 300, 86400 * 3)] == ["59s", "59m59s", "3h05m", "3.0d"]


def test_median_of_the_other_ranks_at_each_iteration():
    from tuimon.live.session import median_at

    series = [(np.array([1, 2]), np.array([1.0, 3.0])), (np.array([1, 3]), np.array([2.0, np.nan])),
              (np.array([1, 2]), np.array([5.0, 4.0])), (np.array([-1]), np.array([9.0]))]
    got = median_at(np.array([1, 2, 3, 4]), series)
    assert got[0] == 2.0 and got[1] == 3.5 and np.isnan(got[2]) and np.isnan(got[3])
    assert np.isnan(median_at(np.array([1]), [])).all()



async def test_v_charts_the_evaluation_metric_and_its_name_is_shown_literally(tmp_path):
    """``v`` switches the loss chart to the job's evaluation metric and back; the metric's
    name (a user format's pairs may give any text) reaches the screen without escapes."""
    from tuimon.store.evals import Evals

    async with job_screen(tmp_path, "torchtitan-run.log", "#chart-loss") as screen:
        app = screen.app
        chart = screen.query_one("#chart-loss").parent
        assert chart.title == "loss (v: validation loss)" and len(chart.values) == 9
        screen.action_evals()
        assert chart.title == "validation loss (v: loss)" and chart.values == [5.1234]
        screen.action_evals()
        assert chart.title == "loss (v: validation loss)" and len(chart.values) == 9
        (job,) = app.session.store.jobs.values()
        job.evals = Evals()
        job.evals.add(20, {"\x1b[31mval\x07 loss": 4.0}, None)
        app.session._details.clear()  # the detail is cached by the job's version
        app.refresh_now()
        assert "\x1b" not in chart.title and "\x07" not in chart.title and "val" in chart.title


def test_a_run_that_only_reports_tflops_shows_them_in_the_combined_column():
    from tests.helpers.records import summary_of_text
    from tuimon.figures.columns import tflops_text
    from tuimon.figures.record import Tflops
    s = summary_of_text(" iteration       10/     100 | elapsed time per iteration (ms): 1000.0 |\n")
    # the log's rate first (its statement wins), marked r; else the GPUs' computed work (recomputation
    # counted where the log says), else the model's
    assert tflops_text(s.with_(tflops_per_gpu=Tflops(68.6, None))) == "68.6r"
    assert tflops_text(s.with_(tflops_per_gpu=Tflops(68.6, 50.1, 66.8))) == "68.6r"
    assert tflops_text(s.with_(tflops_per_gpu=Tflops(None, 50.1, 66.8))) == "66.8"
    assert tflops_text(s.with_(tflops_per_gpu=Tflops(None, 50.1, None))) == "50.1"
    assert tflops_text(s.with_(tflops_per_gpu=Tflops(None, None))) == "-"


async def test_one_theme_system(app):
    """The palette offers tuimon's three themes, not Textual's picker beside them; --theme takes
    the three names."""
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: len(rows(app)) == 6)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert {"Theme: dark", "Theme: light", "Theme: high contrast"} <= set(titles)
        assert not any(t.lower() in ("theme", "change theme") for t in titles), titles
    import subprocess
    import sys

    from tests.conftest import ROOT
    out = subprocess.run([sys.executable, "-m", "tuimon", "watch", "x", "--theme", "tuimon-dark"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr


async def test_keys_remapped_by_the_config_keymap_work_and_help_shows_them(tmp_path):
    """[keymap] filter = "F", alerts = "A": F opens the jobs filter, A the alerts (a no longer does), the
    footer and ? show the keys in use with the names the keymap takes."""
    from textual.widgets import Input

    from tuimon.ui.alerts import AlertsScreen
    from tuimon.ui.help import HelpScreen

    app = TuimonApp(loaded_session([copy_fixture_logs(tmp_path)]), keymap={"filter": "F", "alerts": "A"})
    async with app.run_test(size=(180, 50)) as pilot:
        await until(pilot, lambda: len(rows(app)) == 6)
        await pilot.press("a")
        await pilot.pause()
        assert isinstance(app.screen, JobsScreen)
        await pilot.press("F")
        box = app.screen.query_one("#filter", Input)
        await until(pilot, lambda: box.has_class("visible") and app.screen.focused is box)
        await pilot.press("escape")
        await until(pilot, lambda: not box.has_class("visible"))
        await pilot.press("A")
        await until(pilot, lambda: isinstance(app.screen, AlertsScreen))
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, JobsScreen))
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        text = str(app.screen.query_one("#help").render())
        lines = text.splitlines()
        assert any(line.split()[:1] == ["F"] and line.split()[-1] == "filter" for line in lines), text
        assert any(line.split()[:1] == ["A"] and line.split()[-1] == "alerts" for line in lines), text
        assert not any(line.split()[:1] == ["a"] and line.split()[-1] == "alerts" for line in lines)
        await pilot.press("q")
        await until(pilot, lambda: isinstance(app.screen, JobsScreen))


async def test_rows_hold_their_places_while_jobs_are_marked(tmp_path):
    """Sorted by iteration time, a job whose steps slow down moves up; while a job is marked (the user
    is picking jobs with space) the rows hold their places and the header says so; a sort asked for still
    sorts; unmarked, the order is the sort's again."""
    d = tmp_path / "live"
    d.mkdir()
    row = " iteration {i:8d}/    5000 | elapsed time per iteration (ms): {ms:.1f} | lm loss: 2.0E+00 |\n"
    (d / "fast-1.out").write_text("".join(row.format(i=i, ms=500.0) for i in range(1, 21)))
    (d / "slow-2.out").write_text("".join(row.format(i=i, ms=1000.0) for i in range(1, 21)))
    session = LiveSession([str(d)], poll=0.1)
    session.start()
    app = TuimonApp(session)
    try:
        async with app.run_test(size=(180, 50)) as pilot:
            await until(pilot, lambda: len(rows(app)) == 2 and rows(app)["fast-1"][3] == "20/5000", timeout=30)
            screen = app.screen
            screen.set_sort("iter time")
            table = screen.query_one("#jobs")
            order = lambda: [r.key.value.rsplit("/", 1)[-1] for r in table.ordered_rows]  # noqa: E731
            await until(pilot, lambda: order() == ["slow-2", "fast-1"])
            table.move_cursor(row=1)
            await pilot.press("space")  # fast-1 marked
            await until(pilot, lambda: "held while jobs are marked" in str(screen.query_one("#progress").render()))
            with open(d / "fast-1.out", "a") as fh:  # fast-1 slows to 3 s a step: the sort would put it first
                fh.write("".join(row.format(i=i, ms=3000.0) for i in range(21, 80)))
            await until(pilot, lambda: rows(app)["fast-1"][3] == "79/5000", timeout=30)
            assert order() == ["slow-2", "fast-1"]
            await pilot.press("space")  # unmarked: the sort's order again
            await until(pilot, lambda: order() == ["fast-1", "slow-2"])
    finally:
        session.stop()


async def test_the_header_says_how_far_behind_the_reading_is(tmp_path, monkeypatch):
    """A writer faster than the reading (here: the reading slowed to 512 bytes a poll): the header
    says for how long and by how much it is behind, and says nothing once it has caught up; /metrics
    gives the same figures (tuimon_parse_lag_seconds, tuimon_backlog_bytes)."""
    from tuimon.follow import local

    d = tmp_path / "live"
    d.mkdir()
    log = d / "train-4343.out"
    line = " iteration {:8d}/  100000 | elapsed time per iteration (ms): 500.0 | lm loss: 2.0E+00 |\n"
    log.write_text(line.format(1))
    session = LiveSession([str(d)], poll=0.1)
    session.start()
    app = TuimonApp(session, refresh_hz=10)
    try:
        async with app.run_test(size=SIZE) as pilot:
            assert await shows(pilot, app, "train-4343", "1/100000", tries=50)
            monkeypatch.setattr(local, "MAX_READ_PER_POLL", 512)
            with open(log, "a") as fh:
                fh.write("".join(line.format(i) for i in range(2, 3000)))

            def header() -> str:
                return str(app.screen.query_one("#progress").render())
            await until(pilot, lambda: "behind" in header() and "MB unread" in header(), timeout=20)
            snap = session.snapshot()
            assert snap.lag_s >= 2.0 and 0 < snap.backlog_bytes < log.stat().st_size
            monkeypatch.setattr(local, "MAX_READ_PER_POLL", 16 << 20)
            await until(pilot, lambda: "behind" not in header() and rows(app)["train-4343"][3] == "2999/100000",
                        timeout=20)
            assert session.snapshot().lag_s == 0.0 and session.snapshot().backlog_bytes == 0
    finally:
        session.stop()


def test_a_snapshot_handed_out_never_changes_while_the_figures_tick_on(tmp_path):
    """A screen may draw a snapshot while the figures thread ticks: the rows it holds are its own (the
    session mutated its cached rows in place: an age, an ETA, a status changed under the screen)."""
    import dataclasses

    logs = copy_fixture_logs(tmp_path)
    clock = [FIXED_NOW]
    session = LiveSession([str(logs)], clock=lambda: clock[0], poll=0.1)
    for _ in range(3):
        session.follower.poll()
    session.tick()
    first = session.snapshot()
    seen = [(r.key, r.age_s, r.eta_s, r.stalled, r.summary.status, r.alerts) for r in first.rows]
    assert len(seen) == 6 and any(age is not None for _, age, *_ in seen)
    clock[0] += 3600.0  # an hour later: ages and statuses move on
    session.tick()
    later = session.snapshot()
    assert [(r.key, r.age_s, r.eta_s, r.stalled, r.summary.status, r.alerts) for r in first.rows] == seen
    assert any(a.age_s != b.age_s for a, b in zip(first.rows, later.rows) if a.age_s is not None)
    detail = session.job_detail(later.rows[0].key)
    assert detail is not None and detail.row == later.rows[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        later.rows[0].age_s = 0.0  # type: ignore[misc]
    session.stop()


def test_the_ui_reads_the_session_and_writes_nothing_back():
    """Screens pull what they draw through a read-only view (no isinstance chain in the app pushing into
    them); what is said once (error, warnings, new alerts) is handed over by the session."""
    import ast

    from tests.conftest import ROOT
    from tuimon.ui.alerts import AlertsScreen
    from tuimon.ui.compare import CompareScreen
    from tuimon.ui.view import ShowsSession

    from tuimon.ui.view import WatchesSnapshot

    for screen in (JobsScreen, JobScreen, RankScreen, CompareScreen, AlertsScreen):
        assert issubclass(screen, ShowsSession) and issubclass(screen, WatchesSnapshot), screen
    assert "show_from" not in (ROOT / "tuimon" / "ui" / "app.py").read_text()  # the app draws no screen itself
    writes = []
    for path in (ROOT / "tuimon" / "ui").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
                node, (ast.AugAssign, ast.AnnAssign)) else []
            for t in targets:
                if isinstance(t, ast.Attribute) and "session" in ast.unparse(t.value):
                    writes.append(f"{path.name}:{node.lineno} {ast.unparse(t)}")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr in ("popleft", "pop", "clear", "append") and "session" in ast.unparse(node.func):
                writes.append(f"{path.name}:{node.lineno} {ast.unparse(node.func)}")
    assert not writes, writes


async def test_screens_are_bound_to_the_apps_snapshot_and_only_the_one_on_top_draws(app, monkeypatch):
    """The app sets its ``snapshot`` reactive; the jobs screen, bound to it (Textual's data_bind),
    draws each one while it is on top, none while a job's screen covers it (its own reactive still
    follows), and the latest at once when uncovered."""
    drawn: list[object] = []
    real = JobsScreen.show_from

    def counted(self, view, snap):
        drawn.append(snap)
        return real(self, view, snap)

    monkeypatch.setattr(JobsScreen, "show_from", counted)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: len(rows(app)) == 6)
        before = len(drawn)
        app.refresh_now()
        assert len(drawn) == before + 1 and drawn[-1] is app.snapshot  # drawn at once, the very snapshot set
        jobs = app.screen
        assert jobs.snapshot is app.snapshot
        app.open_job(app.snapshot.rows[0].key)
        await until(pilot, lambda: isinstance(app.screen, JobScreen) and app.screen.snapshot is not None)
        covered = len(drawn)
        app.refresh_now()
        app.refresh_now()
        assert len(drawn) == covered  # covered: not drawn
        latest = app.snapshot
        assert jobs.snapshot is latest and app.screen.snapshot is latest  # both bound
        app.pop_screen()
        await until(pilot, lambda: len(drawn) > covered)
        assert drawn[covered] is latest  # uncovered: the latest at once, not at the next tick
