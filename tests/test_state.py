"""Job identity and state: PBS/Slurm streams as one job, a stalled job without ETA,
sub-10 ms iteration times in ms."""
from __future__ import annotations

import os
import shutil
import time

from tests.conftest import FIXED_NOW, FIXTURES, loaded_session
from tuimon.live.session import LiveSession
from tuimon.sources.discover import discover
from tuimon.store.identity import identify
from tuimon.ui.render import iter_time

MEGATRON = FIXTURES / "megatron-deepspeed-8gpu-1234567.log"
NCCL = "Traceback (most recent call last):\nRuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1275, unhandled system error\n"


def test_pbs_and_slurm_streams_of_one_job_are_one_row(tmp_path):
    for out, err in (("train.o4242", "train.e4242"), ("train-4343.out", "train-4343.err"),
                     ("array.o4444.3", "array.e4444.3")):
        shutil.copy(MEGATRON, tmp_path / out)
        (tmp_path / err).write_text(NCCL)
        assert identify(str(tmp_path / out)).job_key == identify(str(tmp_path / err)).job_key
    found = {p.name for p in discover([str(tmp_path)])}
    assert {"train.o4242", "train.e4242", "array.o4444.3", "array.e4444.3"} <= found
    assert identify(str(tmp_path / "train.o4242")).job_key != identify(str(tmp_path / "other.o4242")).job_key
    session = loaded_session([tmp_path])
    rows = {r.summary.job: r for r in session.snapshot().rows}
    assert set(rows) == {"train-4242", "train-4343", "array-4444"}
    assert all(r.summary.status == "failed" and r.summary.failure.kind == "nccl" for r in rows.values())


def test_a_log_that_stopped_long_ago_has_ended_and_one_seen_growing_then_quiet_has_stalled(tmp_path):
    """Judged on what was seen: a log never seen growing (a copy, a run that ended long ago)
    reads "ended", not stalled; one written while watched, then quiet past its limit, stalled."""
    log = tmp_path / MEGATRON.name
    lines = MEGATRON.read_text().splitlines(keepends=True)
    log.write_text("".join(lines))
    os.utime(log, (FIXED_NOW - 3600, FIXED_NOW - 3600))  # an hour without a line; iterations take 2.5 s
    (row,) = loaded_session([tmp_path]).snapshot().rows
    assert row.summary.status == "ended" and not row.stalled and row.eta_s is None
    os.utime(log, (FIXED_NOW - 30, FIXED_NOW - 30))  # 30 s: within max(5 x 2.5 s, 60 s)
    (row,) = loaded_session([tmp_path]).snapshot().rows
    assert row.summary.status == "training" and not row.stalled and row.eta_s == (100 - 20) * 2.5

    last_iteration = next(ln for ln in reversed(lines) if " iteration " in ln)
    log.write_text("".join(lines[:lines.index(last_iteration)]))
    clock = [FIXED_NOW]
    session = LiveSession([str(tmp_path)], clock=lambda: clock[0], poll=0.1)
    os.utime(log, (FIXED_NOW - 5, FIXED_NOW - 5))
    session.follower.poll()
    with open(log, "a") as f:  # the run writes its next iteration while watched
        f.write(last_iteration)
    os.utime(log, (FIXED_NOW, FIXED_NOW))
    for _ in range(100):  # the follower reads the file when it is due (on its own, monotonic, clock)
        clock[0] += 0.1
        session.follower.poll()
        if max(session.last_update.values()) >= FIXED_NOW:
            break
        time.sleep(0.05)
    session.tick()
    (row,) = session.snapshot().rows
    assert row.summary.status == "training" and not row.stalled
    clock[0] += 3600  # then nothing for an hour
    session.tick()
    (row,) = session.snapshot().rows
    assert row.stalled and row.eta_s is None


def test_iteration_times_read_to_three_figures():
    assert iter_time(5.234) == "5.23ms"
    assert iter_time(0.5) == "0.50ms"
    assert iter_time(2500.0) == "2.50s"
    # three figures below a second: the corpus' 16.8 ms Megatron steps were "0.02s"
    assert iter_time(16.8) == "16.8ms" and iter_time(850.4) == "850ms" and iter_time(999.4) == "999ms"
    assert iter_time(1000.0) == "1.00s" and iter_time(9.996) == "10.00ms"
    assert iter_time(None) == "-" and iter_time(float("nan")) == "-"


def _iteration(i: int, loss: str, grad: str = "1.5", skipped: int = 0, nans: int = 0) -> str:
    return (f" iteration {i:8d}/     100 | elapsed time per iteration (ms): 1000.0 | learning rate: 1.000E-04 | "
            f"global batch size:     8 | lm loss: {loss} | loss scale: 1024.0 | grad norm: {grad} | "
            f"number of skipped iterations: {skipped:3d} | number of nan iterations: {nans:3d} |\n")


def _status(tmp_path, text: str) -> dict:
    from tuimon.engine.ingest import parse_file
    from tuimon.figures.summary import summarize
    from tuimon.store.job_store import JobStore

    path = tmp_path / "nan-run.log"
    path.write_text(text)
    store = JobStore()
    parse_file(path, path.name, sink=store.add)
    (job,) = store.jobs.values()
    return summarize(job).as_dict()


def test_a_nan_loss_or_grad_norm_reads_nan_but_a_loss_scale_skip_does_not(tmp_path):
    good = "".join(_iteration(i, "2.500000E+00") for i in range(1, 5))
    s = _status(tmp_path, good + _iteration(5, "nan"))
    assert s["status"] == "nan" and s["failure"]["kind"] == "nan" and "iteration 5" in s["failure"]["message"]
    assert _status(tmp_path, good + _iteration(5, "2.4E+00", grad="inf"))["status"] == "nan"
    assert _status(tmp_path, good + _iteration(5, "2.4E+00", nans=1))["status"] == "nan"
    # fp16: an overflow skips the step (its grad norm inf, the scale halves); training goes on
    assert _status(tmp_path, good + _iteration(5, "2.4E+00", grad="inf", skipped=1))["status"] == "training"
    # a finite step after the NaN: the run recovered
    assert _status(tmp_path, good + _iteration(5, "nan") + _iteration(6, "2.3E+00"))["status"] == "training"


STARTUP = ("Job started at: 2023-11-02-183000 on nid001234\n"
           "> initializing torch distributed ...\n"
           "[2023-11-02 18:30:40,000] [INFO] [logging.py:96:log_dist] [Rank 0] DeepSpeed info: version=0.14.0, "
           "git-hash=unknown, git-branch=unknown\n"
           "NCCL INFO Bootstrap : Using ib0:10.0.0.1<0>\n")


def _summary_json(path, *extra: str) -> dict:
    import json
    import subprocess
    import sys

    from tests.conftest import ROOT
    out = subprocess.run([sys.executable, "-m", "tuimon", "summary", "--format", "json", "--no-cache", *extra, str(path)],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    (row,) = json.loads(out.stdout)
    return row


def test_a_job_with_no_first_step_after_the_timeout_is_stuck_in_startup(tmp_path):
    import subprocess
    import sys
    import time

    from tests.conftest import ROOT
    log = tmp_path / "gpt-startup-5005.out"
    log.write_text(STARTUP)
    now = time.time()
    os.utime(log, (now - 30, now - 30))  # written 30 s ago; its stamps span 40 s
    assert _summary_json(log)["status"] == "starting"
    row = _summary_json(log, "--startup-timeout", "60")
    assert row["status"] == "stuck-in-startup"
    assert row["failure"]["last_line"] == "NCCL INFO Bootstrap : Using ib0:10.0.0.1<0>"
    assert "no first step 60 s after the job started" in row["failure"]["message"]
    os.utime(log, (now - 3600, now - 3600))
    assert _summary_json(log)["status"] == "stuck-in-startup"  # the default: 10 minutes
    table = subprocess.run([sys.executable, "-m", "tuimon", "summary", "--no-cache", str(log)], cwd=ROOT,
                           capture_output=True, text=True, timeout=120).stdout
    assert "stuck-in-startup" in table and "last line: NCCL INFO Bootstrap" in table
    # no launcher or init line: a log with no iterations, not a job stuck starting
    other = tmp_path / "preprocess.log"
    other.write_text("tokenizing shard 1\ntokenizing shard 2\n")
    os.utime(other, (now - 3600, now - 3600))
    assert _summary_json(other)["status"] == "no-iterations"


def test_the_live_view_turns_starting_into_stuck_as_time_passes(tmp_path):
    from tuimon.live.session import LiveSession

    log = tmp_path / "gpt-startup-5006.out"
    log.write_text(STARTUP)
    os.utime(log, (FIXED_NOW - 10, FIXED_NOW - 10))
    clock = [FIXED_NOW]
    session = LiveSession([str(tmp_path)], clock=lambda: clock[0], poll=0.1, startup_timeout=120.0)
    for _ in range(3):
        session.follower.poll()
    session.tick()
    (row,) = session.snapshot().rows
    assert row.summary.status == "starting"
    clock[0] += 300  # five minutes and not a step
    session.tick()
    (row,) = session.snapshot().rows
    assert row.summary.status == "stuck-in-startup"
    assert row.summary.failure.last_line.startswith("NCCL INFO Bootstrap")
