"""Job identity and state: PBS/Slurm streams as one job, a stalled job without ETA,
sub-10 ms iteration times in ms."""
from __future__ import annotations

import os
import shutil

from tests.conftest import FIXTURES
from tests.test_app import FIXED_NOW, loaded_session
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
    rows = {r.summary["job"]: r for r in session.snapshot().rows}
    assert set(rows) == {"train-4242", "train-4343", "array-4444"}
    assert all(r.summary["status"] == "failed" and r.summary["failure"]["kind"] == "nccl" for r in rows.values())


def test_a_stalled_job_shows_no_eta(tmp_path):
    log = tmp_path / MEGATRON.name
    shutil.copy(MEGATRON, log)
    os.utime(log, (FIXED_NOW - 3600, FIXED_NOW - 3600))  # an hour without a line; iterations take 2.5 s
    (row,) = loaded_session([tmp_path]).snapshot().rows
    assert row.summary["status"] == "training" and row.stalled and row.eta_s is None
    os.utime(log, (FIXED_NOW - 30, FIXED_NOW - 30))  # 30 s: within max(5 x 2.5 s, 60 s)
    (row,) = loaded_session([tmp_path]).snapshot().rows
    assert not row.stalled and row.eta_s == (100 - 20) * 2.5


def test_iteration_times_under_10_ms_read_in_ms():
    assert iter_time(5.234) == "5.23ms"
    assert iter_time(0.5) == "0.50ms"
    assert iter_time(2500.0) == "2.50s"
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
    return summarize(job)


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
