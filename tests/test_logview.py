"""The log view, like ``less``: the whole file (indexed lazily, read where shown), search
with n/N and a no-match message, g/G, F, marks, a rank filter, Esc clearing first."""
from __future__ import annotations

import re
import time

import numpy as np
import pytest

from tests.conftest import APP_SIZE, loaded_session, until
from tuimon.sources.logfile import KeptLines, LogFile
from tuimon.ui.app import TuimonApp
from tuimon.ui.job import JobScreen
from tuimon.ui.logscreen import LogScreen
from tuimon.ui.logview import LogView

ITERATIONS = 1500  # four ranks: 6000 lines, three times what the session keeps of a tail


def srun_app(tmp_path, name: str, iterations: int) -> TuimonApp:
    """The app on a directory holding one srun log, ``name``, of ``iterations`` (each line four ranks')."""
    d = tmp_path / "logs"
    d.mkdir()
    srun_log(d / name, iterations)
    return TuimonApp(loaded_session([d]))


def srun_log(path, iterations: int = ITERATIONS) -> list[str]:
    lines = []
    for i in range(1, iterations + 1):
        for r in range(4):
            lines.append(f"{r}:  iteration {i:8d}/   10000 | elapsed time per iteration (ms): {1000 + r:.1f} | "
                         f"lm loss: 2.0E+00 |")
        if i == iterations // 2:
            lines.append("0: needle: the checkpoint was saved")
        if i == iterations * 4 // 5:
            lines.append("2: NEEDLE again, another case")
    path.write_text("\n".join(lines) + "\n")
    return lines


def test_a_file_is_indexed_in_blocks_and_read_where_asked(tmp_path):
    path = tmp_path / "x.log"
    lines = srun_log(path, 300)
    log = LogFile(str(path))
    assert not log.index(budget=10_000) and 0 < len(log) < len(lines)  # usable before it is all indexed
    while not log.index(budget=10_000):
        pass
    assert len(log) == len(lines)
    assert log.lines(0, 2) == lines[:2] and log.lines(len(lines) - 1, 5) == lines[-1:]
    first, second = [i for i, ln in enumerate(lines) if "needle" in ln.lower()]
    assert log.find("NEEDLE", 0) == first and log.find("needle", first + 1) == second
    assert log.find("needle", second + 1) is None
    assert log.find("needle", len(lines) - 1, forward=False) == second
    assert log.find("needle", second - 1, forward=False) == first
    assert log.find("iteration      300", 0) == len(lines) - 4
    assert list(log.matching(re.compile(r"^3: "))) == [i for i, ln in enumerate(lines) if ln.startswith("3: ")]


def test_growth_truncation_bad_bytes_and_control_sequences(tmp_path):
    path = tmp_path / "x.log"
    path.write_bytes(b"one\ntwo\n\xff\xfe bad \x1b[31mred\x1b[0m\npartial")
    log = LogFile(str(path))
    log.index()
    assert len(log) == 4  # the partial last line is shown
    third = log.lines(2, 1)[0]
    assert "\x1b" not in third and "bad" in third and "\ufffd" in third
    with open(path, "ab") as fh:
        fh.write(b" line\nfive\n")
    log.index()
    assert log.lines(3, 2) == ["partial line", "five"]
    path.write_bytes(b"new\n")  # truncated: indexed again from the start
    log.index()
    assert len(log) == 1 and log.lines(0, 5) == ["new"]


def test_search_among_a_rank_s_lines_reads_windows_not_the_file_per_line(tmp_path):
    from tuimon.ui.logview import search

    path = tmp_path / "x.log"
    lines = srun_log(path, 2000)
    log = LogFile(str(path))
    while not log.index():
        pass
    reads = []
    real = log.lines
    log.lines = lambda start, count: reads.append(count) or real(start, count)  # type: ignore[method-assign]
    rows = log.matching(re.compile(r"^2: "))
    reads.clear()
    hit = search(log, rows, "needle", 0, True)
    assert hit is not None and lines[hit].startswith("2: NEEDLE") and len(reads) <= 3
    assert search(log, rows, "needle", hit + 1, True) is None
    assert search(log, rows, "needle", len(lines) - 1, False) == hit
    assert search(log, rows, "the checkpoint was saved", 0, True) is None  # rank 0's line


def test_kept_lines_answer_the_same_questions():
    kept = KeptLines("host:run.log", ["a", "b needle", "c", "d NEEDLE"], note="tail")
    assert len(kept) == 4 and kept.lines(1, 2) == ["b needle", "c"]
    assert kept.find("needle", 0) == 1 and kept.find("needle", 2) == 3 and kept.find("needle", 2, forward=False) == 1
    assert list(kept.matching(re.compile("^d"))) == [3]


def shown_rows(view: LogView) -> list[str]:
    return [view.text(view.line_of(r)) for r in range(view.top, min(view.row_count(), view.top + view.size.height))]


async def press(pilot, screen: LogScreen, *keys: str) -> None:
    """Keys that search: the search runs in a worker thread; wait for its answer."""
    await pilot.press(*keys)
    await pilot.pause()
    await until(pilot, lambda: not screen.searching)


async def open_log(pilot, app) -> LogScreen:
    await until(pilot, lambda: app.screen.query_one("#jobs").row_count)
    await pilot.press("enter")
    await until(pilot, lambda: isinstance(app.screen, JobScreen))
    await pilot.press("l")
    await until(pilot, lambda: isinstance(app.screen, LogScreen) and app.screen.view.source.complete)
    assert isinstance(app.screen, LogScreen)
    return app.screen


async def test_the_whole_file_search_n_and_no_match(tmp_path):
    d = tmp_path / "logs"
    d.mkdir()
    lines = srun_log(d / "job-77.out")
    app = TuimonApp(loaded_session([d]))
    async with app.run_test(size=APP_SIZE) as pilot:
        screen = await open_log(pilot, app)
        view = screen.view
        assert view.row_count() == len(lines) > 2000  # the whole file, not the session's tail
        await until(pilot, lambda: view.top > 0)
        assert shown_rows(view)[-1] == lines[-1]  # opened at the end, following
        await pilot.press("g")
        assert view.top == 0 and shown_rows(view)[0] == lines[0]
        first = next(i for i, ln in enumerate(lines) if "needle" in ln.lower())
        second = next(i for i, ln in enumerate(lines) if "needle" in ln.lower() and i > first)
        await press(pilot, screen, "slash", *"needle", "enter")
        assert view.current == first and view.top <= first < view.top + view.size.height
        await press(pilot, screen, "n")
        assert view.current == second
        await press(pilot, screen, "n")  # past the last: wraps, and says so
        assert view.current == first and "went on from the top" in screen.message
        await press(pilot, screen, "N")
        assert view.current == second
        # the match is highlighted in the current style, the other rows are not
        strip = view.render_line(second - view.top)
        styles = {seg.style for seg in strip if "NEEDLE" in seg.text}
        assert styles == {view.get_component_rich_style("logview--current")}
        # a search with no match says so and shows the log unfiltered, unhighlighted
        await press(pilot, screen, "slash", *"no such words", "enter")
        assert "no match for 'no such words'" in screen.message and view.needle == ""
        assert view.row_count() == len(lines)
        # Esc clears the search before it leaves
        await press(pilot, screen, "slash", *"needle", "enter")
        assert view.needle == "needle"
        await pilot.press("escape")
        assert isinstance(app.screen, LogScreen) and view.needle == ""
        await pilot.press("escape")
        assert isinstance(app.screen, JobScreen)


async def test_marks_rank_filter_and_follow(tmp_path):
    d = tmp_path / "logs"
    d.mkdir()
    path = d / "job-78.out"
    lines = srun_log(path)
    app = TuimonApp(loaded_session([d]))
    async with app.run_test(size=APP_SIZE) as pilot:
        screen = await open_log(pilot, app)
        view = screen.view
        await pilot.press("g", "m", "a", "G")
        assert view.top > 0 and view.marked == {0}
        await pilot.press("apostrophe", "a")
        assert view.top == 0
        await pilot.press("apostrophe", "z")
        assert screen.message == "no mark z"
        # rank 2's lines only: searching finds its NEEDLE, not rank 0's
        await pilot.press("r", "2", "enter")
        mine = [i for i, ln in enumerate(lines) if ln.startswith("2: ")]
        assert view.rows is not None and list(view.rows) == mine
        assert all(row.startswith("2: ") for row in shown_rows(view))
        await press(pilot, screen, "slash", *"needle", "enter")
        assert lines[view.current].startswith("2: NEEDLE")
        await press(pilot, screen, "n")  # rank 0's needle is not among rank 2's lines: wraps to the same
        assert lines[view.current].startswith("2: NEEDLE")
        await pilot.press("escape", "escape")  # the search, then the filter
        assert view.needle == "" and view.rows is None and isinstance(app.screen, LogScreen)
        # F follows the file as it grows
        await pilot.press("F")
        with open(path, "a") as fh:
            fh.write("1: a line written after the view opened\n")
        await until(pilot, lambda: view.row_count() == len(lines) + 1 and shown_rows(view)[-1].startswith("1: a line"))
        assert shown_rows(view)[-1] == "1: a line written after the view opened"
        assert np.all(np.diff(view.source._starts) > 0)


async def test_slash_on_the_job_screen_opens_the_search(app):
    async with app.run_test(size=APP_SIZE) as pilot:
        await until(pilot, lambda: app.screen.query_one("#jobs").row_count)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, JobScreen))
        await pilot.press("slash")
        await until(pilot, lambda: isinstance(app.screen, LogScreen))
        assert app.screen.query_one("#log-input").has_focus


def test_huge_lines_are_cut_and_say_so(tmp_path):
    from tuimon.sources.logfile import LINE_SHOWN

    path = tmp_path / "huge.log"
    path.write_bytes(b"first\n" + b"x" * (10 << 20) + b"\nlast\n")
    log = LogFile(str(path))
    while not log.index():
        pass
    assert len(log) == 3
    first, huge, last = log.lines(0, 3)
    assert (first, last) == ("first", "last")
    assert huge.startswith("x" * LINE_SHOWN) and huge.endswith(f"({(10 << 20) - LINE_SHOWN} more bytes)")
    assert log.find("last", 0) == 2


def test_a_remote_log_is_paged_whole_over_ssh(tmp_path):
    """Against a real sshd on 127.0.0.1: the whole remote file, indexed a megabyte at a time,
    grown, searched; an unreachable host falls back to the kept lines and says why."""
    from tests.helpers import sshd
    from tuimon.sources.remote_log import RemoteLogFile

    srv = sshd.start(tmp_path / "sshd")
    try:
        path = tmp_path / "remote.log"
        lines = srun_log(path, 6000)  # 24,000 lines, 2.6 MB: three round trips to index
        kept = KeptLines("tuimon-test:remote.log", lines[-5:])
        log = RemoteLogFile(("tuimon-test", None, None), str(path), "tuimon-test:remote.log", kept,
                            ssh_config=str(srv.config))
        rounds = 1
        while not log.index():
            rounds += 1
        assert rounds >= 3 and log.failed is None and len(log) == len(lines)
        assert log.lines(0, 2) == lines[:2] and log.lines(len(lines) - 1, 1) == lines[-1:]
        first = next(i for i, ln in enumerate(lines) if "needle" in ln.lower())
        assert log.find("NEEDLE", 0) == first
        with open(path, "a") as fh:
            fh.write("3: appended after the view opened\n")
        for _ in range(40):  # asked again within a second or so (a round trip each time: not every tick)
            if len(log) > len(lines):
                break
            log.index()
            time.sleep(0.05)
        assert log.lines(len(lines), 1) == ["3: appended after the view opened"]
        log.close()
        gone = RemoteLogFile(("no-such-host.invalid", None, None), "/x.log", "no-such-host.invalid:/x.log", kept,
                             ssh_config=str(srv.config))
        assert gone.index() and gone.failed and "cannot read it over SSH" in gone.note
        assert len(gone) == 5 and gone.lines(0, 5) == lines[-5:]
    finally:
        srv.stop()


async def test_with_a_file_per_rank_a_rank_is_its_file(tmp_path):
    """run-77-rank0.log, run-77-rank1.log: `r 1` shows rank 1's file whole (its lines carry
    no prefix), and the rank screen's `l` opens that file."""
    from tuimon.ui.rank import RankScreen

    d = tmp_path / "logs"
    d.mkdir()
    for r in range(2):
        (d / f"run-77-rank{r}.log").write_text("".join(
            f" iteration {i:8d}/     100 | elapsed time per iteration (ms): {1000 + 100 * r:.1f} | rank {r} |\n"
            for i in range(1, 41)))
    app = TuimonApp(loaded_session([d]))
    async with app.run_test(size=APP_SIZE) as pilot:
        screen = await open_log(pilot, app)
        assert [s.rank for s in screen.sources] == [0, 1] and screen.which == 0
        await pilot.press("r", "1", "enter")
        view = screen.view
        assert screen.which == 1 and view.rows is None and view.row_count() == 40
        assert all(row.endswith("| rank 1 |") for row in shown_rows(view))
        await pilot.press("escape", "escape")  # the filter, then back to the job screen
        await until(pilot, lambda: isinstance(app.screen, JobScreen) and app.screen.query_one("#ranks").row_count)
        assert isinstance(app.screen, JobScreen)
        await pilot.press("j", "enter")
        await until(pilot, lambda: isinstance(app.screen, RankScreen))
        assert isinstance(app.screen, RankScreen) and app.screen.rank == "1"
        await pilot.press("l")
        await until(pilot, lambda: isinstance(app.screen, LogScreen) and app.screen.view.source.complete)
        assert app.screen.which == 1 and app.screen.view.row_count() == 40
        await pilot.press("escape", "escape")  # the rank's filter, then back
        await until(pilot, lambda: isinstance(app.screen, RankScreen))
        await pilot.press("slash")  # `/` searches this rank's log, as on the job screen
        await until(pilot, lambda: isinstance(app.screen, LogScreen) and app.screen.view.source.complete)
        assert app.screen.which == 1 and app.screen._asking == "search"
        assert app.screen.query_one("#log-input").has_class("visible")


@pytest.mark.parametrize("theme", ["dark", "light", "high-contrast"])
async def test_matches_stand_out_in_every_theme(tmp_path, theme):
    """The highlight colours are component classes styled from the theme: in each theme a
    match has a background of its own, and the current one another."""
    d = tmp_path / "logs"
    d.mkdir()
    srun_log(d / "job-79.out", 50)
    app = TuimonApp(loaded_session([d]), theme=theme)
    async with app.run_test(size=APP_SIZE) as pilot:
        screen = await open_log(pilot, app)
        view = screen.view
        base = view.rich_style.bgcolor
        match = view.get_component_rich_style("logview--match")
        current = view.get_component_rich_style("logview--current")
        assert match.bgcolor is not None and current.bgcolor is not None
        assert len({base, match.bgcolor, current.bgcolor}) == 3, (theme, base, match.bgcolor, current.bgcolor)


async def test_a_rank_filter_grows_with_the_index_without_reading_the_file_again(tmp_path, monkeypatch):
    """The rank's lines of a file indexed a block a tick: each block's lines are matched
    once (a filter redone over the whole file at each tick froze the screen on big files)."""
    from tuimon.sources import logfile
    from tuimon.ui import logscreen

    d = tmp_path / "logs"
    d.mkdir()
    lines = srun_log(d / "job-80.out", 3000)  # 12,000 lines, 1.3 MB
    monkeypatch.setattr(logfile.LogFile, "read_block", 64 << 10)  # twenty blocks
    monkeypatch.setattr(logscreen, "INDEX_TICK_S", 0.0)  # one a tick
    app = TuimonApp(loaded_session([d]))
    async with app.run_test(size=APP_SIZE) as pilot:
        await until(pilot, lambda: app.screen.query_one("#jobs").row_count)
        key = next(iter(app.session.store.jobs))
        sources = app.session.log_sources(key)
        read = []
        real = sources[0].lines

        def counted(start, count):
            out = real(start, count)
            if count == 100_000:  # the filter's reads (a page drawn is 256 lines)
                read.append(len(out))
            return out

        sources[0].lines = counted
        screen = LogScreen("job-80", sources, rank="1")
        await app.push_screen(screen)
        await until(pilot, lambda: sources[0].complete and screen.view.row_count() == 3000, timeout=20)
        rows = screen.view.rows
        assert rows is not None and list(rows) == [i for i, ln in enumerate(lines) if ln.startswith("1: ")]
        assert len(read) >= 10 and sum(read) <= len(lines) + 2 * len(read), read  # each line about once


async def test_a_job_without_files_gives_an_empty_view_every_key_can_act_on(tmp_path):
    app = srun_app(tmp_path, "job-81.out", 5)
    async with app.run_test(size=APP_SIZE) as pilot:
        await until(pilot, lambda: app.screen.query_one("#jobs").row_count)
        screen = LogScreen("gone", [])
        await app.push_screen(screen)
        await press(pilot, screen, "slash", *"x", "enter")
        await pilot.press("n", "N", "g", "G", "F", "m", "a", "apostrophe", "a", "r", "1", "enter",
                          "right_square_bracket", "escape")
        assert "this job has no file to show" in str(screen.query_one("#log-status").content)
        assert screen.view.row_count() == 0
        await pilot.press("escape", "escape")
        assert not isinstance(app.screen, LogScreen)


async def test_names_and_lines_reach_the_screen_literally(tmp_path):
    """Control sequences and markup in a job's name, a file's name and its lines are shown
    as text: nothing reaches the terminal as a sequence, nothing is read as markup."""
    app = srun_app(tmp_path, "job-82.out", 5)
    hostile = KeptLines("host:[bold]run\x1b]0;pwned\x07.log", ["0: [red]x[/red] \x1b[2J cleared?", "1: fine"])
    async with app.run_test(size=APP_SIZE) as pilot:
        await until(pilot, lambda: app.screen.query_one("#jobs").row_count)
        screen = LogScreen("job\x1b[31m-83", [hostile])
        await app.push_screen(screen)
        await pilot.pause(0.2)
        title = screen.query_one("#log-title").content
        assert "\x1b" not in title.plain and "\x07" not in title.plain and "[bold]run" in title.plain
        row = "".join(seg.text for seg in screen.view.render_line(0))
        assert "\x1b" not in row and "[red]x[/red]" in row


async def test_long_lines_move_sideways_with_the_arrow_keys(tmp_path):
    long = tmp_path / "long.log"
    long.write_text("".join(f"{i:04d} " + "x" * 400 + f" end-of-line-{i}\n" for i in range(50)))
    app = srun_app(tmp_path, "job-82.out", 5)
    async with app.run_test(size=APP_SIZE) as pilot:
        await until(pilot, lambda: app.screen.query_one("#jobs").row_count)
        screen = LogScreen("long", [LogFile(str(long))])
        await app.push_screen(screen)
        await until(pilot, lambda: screen.view.row_count() == 50)
        assert screen.view.scroll_x == 0
        await pilot.press("right", "right")
        await until(pilot, lambda: screen.view.scroll_x == 16)
        assert screen.view.scroll_x == 16  # (a file followed to its end scrolled back to the left at each tick)
        await pilot.pause(0.3)  # a few of the log screen's ticks: it stays where it was put
        assert screen.view.scroll_x == 16
        await pilot.press("left")
        await until(pilot, lambda: screen.view.scroll_x == 8)
        assert screen.view.scroll_x == 8
        shown = [b.binding.description for b in screen.active_bindings.values() if b.binding.show]
        assert "→ ← sideways" in shown, ", ".join(shown)  # in the footer


async def test_a_log_opened_at_an_alert_s_line_shows_that_line(tmp_path):
    """Enter on an alert opens its job's log at the alert's line (3607 of 5000), centred, and
    says so; not at line 1 with the status naming 3607."""
    app = srun_app(tmp_path, "job-84.out", 5000)
    async with app.run_test(size=APP_SIZE) as pilot:
        await until(pilot, lambda: app.screen.query_one("#jobs").row_count)
        key = next(iter(app.session.store.jobs))
        screen = LogScreen("job-84", app.session.log_sources(key), at=(0, 3606))
        await app.push_screen(screen)
        await until(pilot, lambda: screen.view.current == 3606 and screen.view.scroll_offset.y > 0, timeout=20)
        top = screen.view.scroll_offset.y
        assert top <= screen.view.row_of(3606) < top + screen.view.size.height
        assert "the alert's line, 3607" in screen.message
