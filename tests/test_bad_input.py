"""Bad input never crashes tuimon nor loses the good lines around it."""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import pytest

from tests.conftest import FIXTURES, ROOT
from tuimon.engine.ingest import parse_file
from tuimon.sources.framing import TOO_LONG_MARKER, Framer

GOOD = (" iteration {i:8d}/     100 | elapsed time per iteration (ms): 1000.0 | lm loss: 2.5E+00 | "
        "grad norm: {g} | number of skipped iterations:   0 | number of nan iterations:   0 |")


def write(tmp_path, name, data: bytes):
    p = tmp_path / name
    p.write_bytes(data)
    return p


def iterations(path):
    events, stats = parse_file(path)
    return [e for e in events if e.type == "iteration"], stats


def test_garbage_between_good_lines(tmp_path):
    rnd = random.Random(7)
    parts = []
    for i in range(1, 6):
        parts.append(GOOD.format(i=i, g="1.0").encode() + b"\n")
        parts.append(bytes(rnd.randrange(256) for _ in range(5000)).replace(b"\n", b"") + b"\n")
    parts.append(b"\xff\xfe\xc3\x28 invalid utf-8 \xe2\x82\n")
    parts.append(b"NUL\x00inside\x00line\n")
    parts.append(b"\x1b]0;title\x07\x1b[2J\x9b31m ansi \xe2\x80\xae bidi\n")
    parts.append(b"line with U+2028 \xe2\x80\xa8 and \x0b and \x1c stays one line\n")
    p = write(tmp_path, "garbage.log", b"".join(parts))
    its, stats = iterations(p)
    assert [e.iteration for e in its] == [1, 2, 3, 4, 5]
    assert [e.line for e in its] == [1, 3, 5, 7, 9]
    assert stats.lines == 14 and stats.invalid_utf8 >= 1


def test_crlf_and_progress_bars(tmp_path):
    data = (GOOD.format(i=1, g="1.0") + "\r\n").encode()
    data += b"  5%|#    | 5/100\r 50%|#####     | 50/100\r" + (GOOD.format(i=2, g="2.0") + "\r\n").encode()
    its, _ = iterations(write(tmp_path, "crlf.log", data))
    assert [e.iteration for e in its] == [1, 2]
    assert its[0].grad_norm == 1.0 and its[1].grad_norm == 2.0 and its[1].line == 2


@pytest.mark.parametrize("value,check", [("inf", lambda v: v == float("inf")), ("nan", lambda v: v != v),
                                         ("1e309", lambda v: v == float("inf")), ("-0.0", lambda v: v == 0.0),
                                         ("9,921", lambda v: v == 9921.0), ("9" * 5000, lambda v: v == float("inf"))])
def test_extreme_numbers(tmp_path, value, check):
    its, _ = iterations(write(tmp_path, "nums.log", (GOOD.format(i=1, g=value) + "\n").encode()))
    assert len(its) == 1 and check(its[0].grad_norm)


def test_huge_iteration_number_is_not_an_exception(tmp_path):
    line = f" iteration {'9' * 5000}/     100 | elapsed time per iteration (ms): 1.0 |\n"
    its, _ = iterations(write(tmp_path, "bigint.log", line.encode()))
    assert len(its) == 1 and its[0].iteration is None


def test_ten_megabyte_line_is_one_marker_and_memory_bounded():
    f = Framer(max_line=1 << 20)
    blocks = [f.feed(b"a" * (1 << 20)) for _ in range(10)]  # 10 MiB, no newline yet
    assert f.pending <= 1 << 20
    blocks.append(f.feed(b"tail\n" + GOOD.format(i=3, g="1").encode() + b"\n"))
    text = "".join(b.text for b in blocks)
    assert text.splitlines() == [TOO_LONG_MARKER, GOOD.format(i=3, g="1")]
    assert f.too_long == 1 and blocks[-1].first_line == 1


def test_long_line_inside_one_read_is_replaced():
    f = Framer(max_line=100)
    block = f.feed(b"short\n" + b"x" * 500 + b"\nafter\n")
    assert block.text.split("\n")[:3] == ["short", TOO_LONG_MARKER, "after"] and f.too_long == 1


def test_summary_of_hostile_directory_completes(tmp_path, run_cli):
    rnd = random.Random(3)
    write(tmp_path, "random.log", bytes(rnd.randrange(256) for _ in range(200_000)))
    write(tmp_path, "long.log", b"x" * (10 << 20) + b"\n" + GOOD.format(i=1, g="nan").encode() + b"\n")
    write(tmp_path, "empty.log", b"")
    code, out, err = run_cli("summary", str(tmp_path))
    assert code == 0
    assert "long" in out
    assert "skipped 1 lines (1 too long)" in err


def _cli(*args):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "tuimon", *args], capture_output=True, text=True, env=env)


def test_missing_path_is_one_line_and_status_2(tmp_path):
    r = _cli("summary", str(tmp_path / "nope"))
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "no such file or directory" in r.stderr
    assert "Traceback" not in r.stderr


def test_unreadable_path_is_one_line_and_status_2():
    from tests.helpers.unprivileged import can_drop, tuimon, world_dir

    if not can_drop():
        pytest.skip("SKIPPED: cannot run tuimon as an unprivileged user here (checkout not readable by nobody)")
    d = world_dir()
    p = d / "secret.log"
    p.write_bytes(b"x\n")
    p.chmod(0)
    proc = tuimon("summary", str(p))
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "permission denied" in err and "Traceback" not in err
    assert err.strip().count("\n") == 0


def test_events_to_closed_pipe_is_quiet(tmp_path):
    p = write(tmp_path, "many.log", "".join(GOOD.format(i=i, g="1") + "\n" for i in range(1, 20000)).encode())
    q = write(tmp_path, "more.log", p.read_bytes())
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run(f"{sys.executable} -m tuimon events {p} {q} | head -1; exit ${{PIPESTATUS[0]}}", shell=True,
                       capture_output=True, text=True, env=env, executable="/bin/bash")
    # the closed pipe is the reader's doing: no file is reported unreadable, the status is 0
    assert r.stderr == "" and r.stdout.count("\n") == 1 and r.returncode == 0


def test_unreadable_path_simulated(tmp_path, run_cli, monkeypatch):
    """As root nothing is unreadable: make the access check refuse, as the kernel would for a user."""
    p = write(tmp_path, "secret.log", b"x\n")
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: False if str(path) == str(p) else real_access(path, mode))
    code, out, err = run_cli("summary", str(p))
    assert code == 2 and err.strip() == f"tuimon: error: permission denied: {p}"


def test_csv_cells_a_spreadsheet_would_run_are_quoted_as_text(tmp_path):
    """A job named like a formula (its file name) stays text in every CSV export."""
    import csv
    import io

    name = '=HYPERLINK("http:evil","x")-run.log'
    (tmp_path / name).write_bytes((FIXTURES / "stronghold-run.log").read_bytes())
    (tmp_path / "+cmd-2.log").write_bytes((FIXTURES / "oom-run.log").read_bytes())
    for args in (("summary", "--format", "csv"), ("summary", "--format", "csv", "--columns", "job,status")):
        r = _cli(*args, "--no-cache", str(tmp_path))
        assert r.returncode == 0, r.stderr
        rows = list(csv.reader(io.StringIO(r.stdout)))
        cells = [c for row in rows[1:] for c in row]
        jobs = [c for c in cells if "HYPERLINK" in c or "cmd" in c]
        assert len(jobs) >= 2 and all(c.startswith("'") for c in jobs), jobs
        assert not any(c and c[0] in "=+@" for c in cells), cells


def test_a_negative_duration_is_a_bad_value_not_a_minimum(tmp_path):
    line = (" iteration {i:8d}/    1000 | consumed samples: {s:12d} | elapsed time per iteration (ms): {ms} | "
            "global batch size:    64 | lm loss: 2.5E+00 | loss scale: 4096.0 |\n")
    text = "".join(line.format(i=i, s=i * 64, ms={50: "-5.0", 60: "0.0"}.get(i, f"{2500 + i % 7}.0"))
                   for i in range(1, 100))
    (tmp_path / "neg.log").write_text(text)
    r = _cli("summary", "--no-cache", "--format", "json", str(tmp_path))
    times = json.loads(r.stdout)[0]["iter_time_ms"]
    assert times["min"] == 2500.0 and times["mean"] > 2500.0, times
    assert json.loads(r.stdout)[0]["iterations_seen"] == 99  # the point stays, its time is missing


@pytest.mark.slow
@pytest.mark.parametrize("verb", [["events", "--follow"], ["alerts", "--follow"], ["serve", "--listen", "127.0.0.1:0"],
                                  ["summary"], ["events"]])
def test_ctrl_c_stops_any_verb_within_a_second_during_a_large_backlog(tmp_path, verb):
    import signal
    import time

    line = (" iteration {i:8d}/  100000 | consumed samples: {s:12d} | elapsed time per iteration (ms): 2500.0 | "
            "learning rate: 3.000E-04 | global batch size:    64 | lm loss: 2.500000E+00 | loss scale: 4096.0 |\n")
    block = "".join(line.format(i=i, s=i * 64) for i in range(1, 20001))
    for name in ("a.log", "b.log"):
        with open(tmp_path / name, "w") as fh:
            for _ in range(40):  # 160 MB each: minutes of parsing
                fh.write(block)
    proc = subprocess.Popen([sys.executable, "-m", "tuimon", *verb, "--no-cache", str(tmp_path)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))
    time.sleep(4)
    assert proc.poll() is None, "still reading the backlog"
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    took = time.monotonic() - t0
    assert took < 2.0, f"{verb[0]} took {took:.2f} s to stop after Ctrl-C (measured 0.7 s on an idle machine)"


def test_debug_and_log_file_log_what_tuimon_does_with_log_text_escaped(tmp_path):
    """--debug logs to stderr, --log-file to a file (anywhere on the line); a log line's text
    (an alert's message) is escaped there as everywhere; an unwritable file is one line, exit 2."""
    import subprocess
    import sys

    from tests.conftest import ROOT
    log = tmp_path / "evil-123456.out"
    log.write_text("Traceback (most recent call last):\n"
                   "torch.cuda.OutOfMemoryError: CUDA out of memory \x1b]0;pwned\x07\x1b[2J\n")
    out = subprocess.run([sys.executable, "-m", "tuimon", "--debug", "alerts", str(log)], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert " INFO tuimon.alerts: alert failed: evil-123456" in out.stderr, out.stderr
    assert "\x1b" not in out.stderr and "\x07" not in out.stderr
    target = tmp_path / "logs" / "tuimon.log"
    out = subprocess.run([sys.executable, "-m", "tuimon", "alerts", str(log), f"--log-file={target}"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    text = target.read_text()
    assert "alert failed: evil-123456" in text and "\x1b" not in text and "tuimon.alerts" not in out.stderr
    out = subprocess.run([sys.executable, "-m", "tuimon", "alerts", str(log), "--log-file", "/proc/no/such"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_debug_says_what_a_summary_read(tmp_path):
    """--debug says something on every verb; on summary: the files, the jobs, the time, the cache."""
    import subprocess
    import sys

    from tests.conftest import ROOT
    (tmp_path / "run-1.log").write_text(" iteration 1/ 10 | elapsed time per iteration (ms): 1000 | lm loss: 2.0 |\n")
    out = subprocess.run([sys.executable, "-m", "tuimon", "--debug", "summary", "--no-cache", str(tmp_path)], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert f"INFO tuimon.summary: 1 file(s) under {tmp_path}" in out.stderr
    assert "DEBUG tuimon.summary: file " in out.stderr and "1 job(s) from 1 file(s)" in out.stderr
    assert "parse cache (off)" in out.stderr


@pytest.mark.parametrize("engine", ["core", "python"])
@pytest.mark.parametrize("read_size", [64, 1 << 20])
def test_a_torn_line_s_huge_counter_does_not_finish_a_running_job(tmp_path, engine, read_size):
    """`iteration 1000000000000000/ 500` between iterations 2 and 3 of 500 (a torn line): the run is
    at 3 of 500, training, not finished; its point stays in the series (nothing read is dropped).  A
    restart from a checkpoint still starts a run, and a count past the total still finishes one.
    Both engines, whatever the blocks."""
    from tuimon.engine import native
    from tuimon.engine.ingest import parse_file
    from tuimon.figures.summary import summarize
    from tuimon.store.job_store import JobStore

    row = "[rank{r}]: iteration {i:>8}/     500 | elapsed time per iteration (ms): 1000.0 | lm loss: 2.0E+00 |\n"

    def summaries(counts) -> list:
        log = tmp_path / "torn-1.log"
        log.write_text("".join(row.format(r=r, i=i) for r, i in counts))
        before = native.use(native.core if engine == "core" else None)
        try:
            store = JobStore()
            parse_file(log, sink=store.add, read_size=read_size)
        finally:
            native.use(before)
        return [summarize(job, now=None) for job in store.jobs.values()]

    (s,) = summaries([(0, 1), (0, 2), (0, 1000000000000000), (0, 3), (0, 4)])
    assert s.last_iteration == 4 and s.status == "training" and s.iterations_seen == 5
    (s,) = summaries([(0, 1), (1, 1), (0, 2), (1, 1000000000000000), (0, 3), (1, 3)])  # one rank's torn line
    assert s.last_iteration == 3 and s.status == "training"
    runs = summaries([(0, 840), (0, 850), (0, 800), (0, 810)])  # a restart from a checkpoint: a run of its own
    assert [r.last_iteration for r in runs] == [850, 810]
    (s,) = summaries([(0, 499), (0, 500), (0, 501)])
    assert s.status == "finished"
