"""What every family's logs say, end to end through the engine, the store and the summary:
evaluations, MLPerf mllog, torchtitan step times, hand-written loops (llm.c, modded-nanogpt),
stderr-only files, jobs that fail before training, root causes; and user formats with
cumulative fields and stamp-derived times.  The logs are variants written here from the
frameworks' own print statements (Megatron's training.py, llm.c's logger.h and train_gpt2.cu,
modded-nanogpt's train_gpt.py, mlperf_logging's keys, torchtitan's metrics line)."""
from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import shared_or_skip
from tuimon.engine.ingest import parse_file
from tuimon.figures.columns import BY_NAME, raw
from tuimon.figures.columns import render_summary
from tuimon.figures.record import from_dict
from tuimon.figures.summary import summarize
from tuimon.store.evals import MAX_POINTS, Evals
from tuimon.store.job_store import JobStore


def summary(tmp_path: Path, name: str, text: str) -> dict:
    path = tmp_path / name
    path.write_text(text)
    store = JobStore()
    parse_file(path, path.name, sink=store.add)
    (job,) = store.jobs.values()
    return summarize(job, now=None, last_write=None).as_dict()


def test_megatron_validation_records_are_evaluations(tmp_path):
    lines = []
    for it in range(10, 110, 10):
        lines.append(f" iteration       {it}/     100 | consumed samples: {it * 8} | elapsed time per iteration (ms): "
                     f"1000.0 | learning rate: 1.000E-04 | global batch size:     8 | lm loss: {9 - it / 50:.6E} |")
        if it % 50 == 0:
            lines += ["-" * 80, f" validation loss at iteration {it} | lm loss value: {8 - it / 100:.6E} | "
                                f"lm loss PPL: {math.exp(8 - it / 100):.6E} | ", "-" * 80]
    lines.append(" validation loss at the end of training for test data | lm loss value: 6.500000E+00 | "
                 "lm loss PPL: 6.651416E+02 | ")
    s = summary(tmp_path, "megatron.log", "\n".join(lines) + "\n")
    assert s["eval_metric"] == "val lm loss" and s["eval_value"] == pytest.approx(7.0)
    assert s["eval_iteration"] == 100
    assert s["eval_last"]["test lm loss"] == 6.5 and s["eval_last"]["val lm loss PPL"] == pytest.approx(1096.633, rel=1e-6)
    assert s["loss_last"] == pytest.approx(7.0)  # the training loss stays the training loss
    assert raw(BY_NAME["eval"], from_dict(s)) == pytest.approx(7.0) and raw(BY_NAME["eval_metric"], from_dict(s)) == "val lm loss"
    header, row = render_summary([from_dict(s)], "csv").splitlines()[:2]
    assert "eval" in header.split(",") and "val lm loss" in row


def test_nemo_repeated_val_loss_is_one_point_per_evaluation(tmp_path):
    line = ("Training epoch 0, iteration {i}/99 | lr: 3e-05 | global_batch_size: 4 | global_step: {i} | "
            "reduced_train_loss: 1.2 | train_step_timing in s: 0.68 | consumed_samples: {c} | val_loss: {v}")
    text = "\n".join(line.format(i=i, c=4 * i, v=1.619 if i < 60 else 1.5) for i in range(50, 70)) + "\n"
    path = tmp_path / "nemo.log"
    path.write_text(text)
    events, _ = parse_file(path)
    evals = [e for e in events if e.type == "eval"]
    assert [(e.iteration, dict(e.metrics)) for e in evals] == [(50, {"val_loss": 1.619}), (60, {"val_loss": 1.5})]


def test_hand_written_loops_llmc_and_modded_nanogpt(tmp_path):
    llmc = "".join(f"s:{s} trl:{11 - s / 10:.4f} lr:0.000600 norm:{1 + s / 100:.2f}\n" +
                   (f"s:{s} tel:{11 - s / 9:.4f}\n" if s % 25 == 0 else "") for s in range(0, 100))
    s = summary(tmp_path, "main.log", llmc)
    assert s["framework"] == "llm.c" and s["last_iteration"] == 99
    assert s["loss_last"] == pytest.approx(1.1) and s["eval_last"] == {"val loss": pytest.approx(11 - 75 / 9, abs=1e-4)}

    lines, total = [], 0
    for step in range(0, 201):
        if step % 50 == 0:
            lines.append(f"step:{step}/200 val_loss:{4 - step / 100:.4f} train_time:{total}ms "
                         f"step_avg:{total / max(step, 1):.2f}ms")
        if step == 200:
            break
        total += 0 if step == 10 else 150  # the timer starts over after the warm-up steps
        if step == 10:
            total = 0
        avg = "nan" if step < 10 else f"{total / (step - 9):.2f}"
        lines.append(f"step:{step + 1}/200 train_time:{total}ms step_avg:{avg}ms")
    s = summary(tmp_path, "nanogpt.txt", "\n".join(lines) + "\n")
    assert s["framework"] == "modded-nanogpt" and s["status"] == "finished" and s["train_iters"] == 200
    assert s["iter_time_ms"]["median"] == pytest.approx(150.0) and s["iter_time_ms"]["max"] == pytest.approx(150.0)
    assert s["eval_value"] == pytest.approx(2.0) and s["eval_iteration"] == 200


def test_torchtitan_step_time_from_stamps_and_world_size_from_torchrun(tmp_path):
    head = "+ torchrun --nproc_per_node=8 --nnodes=4 --rdzv_backend c10d -m torchtitan.train\n"
    body = "".join(f"[rank0]:[titan] 2026-05-19 20:{23 + s // 60:02d}:{s % 60:02d},{(s * 7) % 1000:03d} - root - INFO "
                   f"- step: {s:2d}  loss: {12 - s / 10:.5f}  memory: 30.00GiB(40.0%)  tps: 7,000  tflops: 50.0  "
                   f"mfu: 5.0%\n" for s in range(1, 41))  # one step a second (plus 7 ms)
    s = summary(tmp_path, "titan.log", head + body)
    assert s["world_size"] == 32
    assert s["iter_time_ms"]["median"] == pytest.approx(1007.0)


def test_mllog_loss_throughput_eval_startup_and_run_time(tmp_path):
    def rec(t, key, value, **meta):
        return ":::MLLOG " + json.dumps({"namespace": "", "time_ms": t, "event_type": "POINT_IN_TIME", "key": key,
                                         "value": value, "metadata": {"file": "x.py", "lineno": 1, **meta}}) + "\n"
    t0 = 1_715_640_000_000
    text = rec(t0, "init_start", None) + rec(t0 + 1000, "global_batch_size", 8) + \
        rec(t0 + 2000, "submission_platform", "8xNVIDIA DGX H100") + rec(t0 + 90_000, "run_start", None)
    for k in range(1, 11):
        text += rec(t0 + 90_000 + k * 10_000, "train_loss", 1.0 - k / 100, samples_count=8 * k)
        text += rec(t0 + 90_000 + k * 10_000, "tracked_stats", {"throughput": 0.8}, step=8 * k)
    text += rec(t0 + 200_000, "eval_accuracy", 0.925, samples_count=80)
    text += rec(t0 + 210_000, "run_stop", None, status="success")
    s = summary(tmp_path, "mllog.log", text)
    assert s["framework"] == "mlperf" and s["status"] == "finished"
    assert s["startup_s"] == 90.0 and s["run_time_s"] == 120.0
    assert s["last_step"] == 10 and s["loss_last"] == pytest.approx(0.9)
    assert s["samples_per_sec"] == pytest.approx(0.8) and s["eval_last"] == {"eval_accuracy": 0.925}
    assert s["world_size"] == 64 and s["gpu"] == "NVIDIA H100" and s["gpu_peak_tflops"] is not None


def test_stderr_only_file_counts_warnings_and_ranks_and_fails_on_abort(tmp_path):
    lines = []
    for rank in range(4):
        lines += [f"{rank}: /usr/lib/python3.12/site-packages/torch/cuda/__init__.py:61: FutureWarning: pynvml is "
                  f"deprecated", f"{rank}: [rank{rank}]:W0818 03:14:47.400000 178186 torch/_inductor/x.py:396] slow",
                  f"{rank}: [rank{rank}]:[W1124 05:00:00.1 ProcessGroupNCCL.cpp:1250] Warning: WARNING: "
                  f"destroy_process_group() was not called before program exit, which can leak resources."]
    lines.append("2: Fatal Python error: Aborted")
    s = summary(tmp_path, "job-42.err", "\n".join(lines) + "\n")
    assert s["ranks_seen"] == 4
    assert s["warnings"] == {"process-group": 4, "python": 4, "torch": 4}
    assert s["status"] == "failed" and s["failure"]["kind"] == "killed"


@pytest.mark.parametrize("verdict", ["Job failed (exit 1) -- see logs/train.err", "0: Step 3 failed",
                                     "nid001: FAILED", "train.py exited with exit code 2"])
def test_job_script_verdict_without_stamps_fails_the_job(tmp_path, verdict):
    text = "Loading modules\n  ------------------------ arguments ------------------------\n" \
           "  num_layers ...................................... 24\n" \
           "  -------------------- end of arguments ---------------------\n" + verdict + "\n"
    s = summary(tmp_path, "run.out", text)
    assert s["status"] == "failed" and s["failure"]["kind"] == "script", s["failure"]


def test_end_line_without_iterations_is_no_iterations_not_starting(tmp_path):
    path = tmp_path / "run.out"
    path.write_text("START TIME: Wed Apr 15 11:16:53 CEST 2026\n> initializing torch distributed ...\n"
                    "END TIME: Wed Apr 15 11:30:02 CEST 2026\n")
    store = JobStore()
    parse_file(path, path.name, sink=store.add)
    (job,) = store.jobs.values()
    s = summarize(job, now=path.stat().st_mtime + 1, last_write=path.stat().st_mtime).as_dict()  # written just now
    assert s["status"] == "no-iterations"


def test_cuda_fault_is_the_root_cause_not_the_nccl_symptom(tmp_path):
    lines = [" iteration        1/     100 | elapsed time per iteration (ms): 1000.0 | lm loss: 9.0 |",
             "[rank3]:[E1124 05:00:00.123 77 ProcessGroupNCCL.cpp:1895] [PG ID 0 Rank 3] Process group watchdog "
             "thread terminated with exception: CUDA error: an illegal memory access was encountered"]
    lines += [f"[rank3]: frame #{k}: c10::Error::Error() + 0x{k:x}" for k in range(16)]
    lines.append("[rank3]: terminate called after throwing an instance of 'c10::DistBackendError'")
    s = summary(tmp_path, "crash.out", "\n".join(lines) + "\n")
    assert s["failure"]["kind"] == "cuda" and s["failure"]["line"] == 2
    assert "illegal memory access" in s["failure"]["message"] and "DistBackendError" in s["failure"]["message"]


def test_user_format_cumulative_time_from_stamp_and_bad_numbers(tmp_path):
    from tuimon.parsers.schema import format_from_toml
    from tuimon.engine.blocks import BlockEngine

    fmt = format_from_toml('''
name = "mine"
[[lines]]
event = "iteration"
anchor = "it="
regex = 'it=(?P<iteration>\\d+) loss=(?P<loss>\\S+) tokens=(?P<consumed_tokens>\\S+)'
cumulative = ["consumed_tokens"]
time_from = "stamp"
''', "mine.toml")
    engine = BlockEngine("x.log", (), [fmt])
    lines = ["2025-01-01 10:00:00 it=10 loss=2.0 tokens=1000", "2025-01-01 10:00:05 it=20 loss=- tokens=3000",
             "2025-01-01 10:00:09 it=30 loss=nan tokens=nan", "2025-01-01 10:00:13 it=40 loss=1.0 tokens=7000",
             "2025-01-01 10:00:14 it=5 loss=1.0 tokens=100"]
    its = [ev for n, line in enumerate(lines, 1) for ev in engine.feed_line(line, n) if ev.type == "iteration"]
    assert [e.iteration for e in its] == [10, 20, 30, 40, 5]  # no record lost to a bad number
    assert [e.elapsed_ms for e in its] == [None, 500.0, 400.0, 400.0, None]
    assert [e.consumed_tokens for e in its] == [None, 200, None, 200, None]  # per step; nan and a restart: none
    assert its[1].losses == {} and math.isnan(its[2].losses["loss"])


def test_formats_check_says_what_an_entry_feeds_and_list_takes_formats(tmp_path):
    (tmp_path / "f.toml").write_text('''
name = "nano"
[[lines]]
event = "iteration"
anchor = "train_time:"
regex = 'mystep:(?P<iteration>\\d+)/(?P<train_iters>\\d+) train_time:(?P<elapsed_ms>\\d+)ms'
cumulative = ["elapsed_ms"]
[[lines.samples]]
line = "mystep:20/100 train_time:3000ms"
context = ["mystep:10/100 train_time:1500ms"]
expect = { iteration = 20, elapsed_ms = 150.0 }
''')
    run = [sys.executable, "-m", "tuimon", "formats"]
    out = subprocess.run(run + ["check", str(tmp_path / "f.toml")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "gives iteration, train_iters, elapsed_ms; feeds Iter" in out.stdout and "Iter time" in out.stdout
    listed = subprocess.run(run + ["list", "--formats", str(tmp_path)], capture_output=True, text=True)
    assert listed.returncode == 0 and "nano" in listed.stdout
    bad = subprocess.run(run + ["list", "--formats", str(tmp_path / "none")], capture_output=True, text=True)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1


def test_eval_series_stay_bounded_and_keep_the_recent_points():
    evals = Evals()
    for step in range(20 * MAX_POINTS):
        evals.add(step, {"val_loss": 1.0 / (step + 1)}, None)
    series = evals.series["val_loss"]
    assert len(series) <= MAX_POINTS
    assert series.iterations[-1] == 20 * MAX_POINTS - 1
    recent = series.iterations[-MAX_POINTS // 4:]
    assert recent == list(range(recent[0], recent[0] + len(recent)))  # full resolution at the end
    for k in range(100):
        evals.add(1, {f"metric{k}": 1.0}, None)
    assert len(evals.series) <= 32


def test_corpus_families_read_their_new_lines():
    corpus = shared_or_skip("corpus")
    store = JobStore()
    for name in ("megatron-deepspeed/thetagpu-cobalt-10142816.log", "mlperf-mllog/mlperf31-nvidia-eos-n64-nemo-gpt3.log",
                 "torchtitan/qiu-llama3-175m-baseline.log", "hf-trainer/ezpz-hf-trainer-aurora-2025-05.log",
                 "nemo/evo2-bionemo-nemo2-finetune-2025-06.log"):
        parse_file(corpus / name, name, sink=store.add)
    rows = {job.name: summarize(job).as_dict() for job in store.jobs.values()}
    nvidia = rows["mlperf31-nvidia-eos-n64-nemo-gpt3"]
    assert nvidia["startup_s"] == 167.7 and nvidia["run_time_s"] == 3494.812  # init_start..run_start..run_stop
    assert nvidia["tokens_per_sec"] == pytest.approx(345645.4, rel=1e-5) and nvidia["world_size"] == 512
    titan = rows["qiu-llama3-175m-baseline"]
    assert titan["iter_time_ms"]["median"] == pytest.approx(462.6, abs=0.5)  # grep: 10 steps in 4.6 s
    assert rows["thetagpu-cobalt-10142816"]["eval_metric"] == "val lm loss"
    assert rows["ezpz-hf-trainer-aurora-2025-05"]["eval_last"]["eval_loss"] == pytest.approx(1.6779, abs=1e-4)
    assert rows["evo2-bionemo-nemo2-finetune-2025-06"]["eval_last"] == {"val_loss": pytest.approx(1.619, abs=0.5)}


def _transformers5_log(steps: int = 400, every: int = 10) -> str:
    """A run of today's Trainer as ProgressCallback writes it: the tqdm bar's updates joined by
    carriage returns, and each logged dict (every number quoted, as transformers 5 prints them)
    written on its own line through the bar."""
    out, bar = ["  Total optimization steps = %d\n" % steps], ""
    for s in range(1, steps + 1):
        bar += "\r%3d%%|#         | %d/%d [00:%02d<00:%02d,  7.89it/s]" % (s * 100 // steps, s, steps, s // 8,
                                                                          (steps - s) // 8)
        if s % every == 0:
            out.append(bar + "\n")
            bar = ""
            out.append("{'loss': '%.4g', 'grad_norm': '0.3923', 'learning_rate': '%.4g', 'epoch': '%.4g'}\n"
                       % (11 - s / 100, 1.35e-4 * (1 - s / steps), s / 800))
    out.append("{'train_runtime': '50.68', 'train_samples_per_second': '126.3', 'train_steps_per_second': "
               "'7.892', 'train_loss': '10.85', 'epoch': '0.5'}\n")
    return "".join(out)


def test_transformers5_quoted_dicts_are_steps_and_the_closing_dict_ends_the_run(tmp_path):
    s = summary(tmp_path, "hf5.log", _transformers5_log())
    assert s["framework"] == "hf-trainer" and s["status"] == "finished"
    assert s["last_step"] == 400 and s["train_iters"] == 400 and s["steps_seen"] == 40
    assert s["loss_last"] == pytest.approx(7.0)
    assert s["samples_per_sec"] == pytest.approx(126.3)
    assert s["iter_time_ms"]["median"] == pytest.approx(1000 / 7.89, abs=0.01)  # tqdm's rate at each dict


def test_a_log_without_stamps_is_never_stuck_from_its_files_age():
    """An evaluation-only job that completed long ago printed no stamp: its file's age says
    nothing of a hang.  One whose own stamps span past the limit is stuck."""
    from tuimon.figures.summary import startup_status

    old = 1_000_000.0
    status, failure = startup_status(True, None, now=old + 7200, last_write=old, timeout_s=600, file="eval.out")
    assert status == "no-iterations" and failure.kind == "no-iterations"
    assert startup_status(True, None, now=old + 60, last_write=old, timeout_s=600, file="eval.out")[0] == "starting"
    assert startup_status(True, 0.0, now=old + 7200, last_write=old, timeout_s=600, file="x")[0] == "stuck-in-startup"
    assert startup_status(True, 900.0, now=None, last_write=None, timeout_s=600, file="x")[0] == "stuck-in-startup"


def test_an_ignored_exception_after_the_last_step_is_no_failure(tmp_path):
    """Python's 'Exception ignored in atexit callback' (a store's socket timing out at exit, after
    the checkpoint was saved) is no failure of the run; a traceback of its own still is."""
    body = "".join(f" iteration {i:8d}/      20 | elapsed time per iteration (ms): 1000.0 | lm loss: 2.0E+00 | "
                   f"number of skipped iterations:   0 | number of nan iterations:   0 |\n" for i in range(1, 21))
    tail = ("  successfully saved checkpoint at iteration      20 to /ckpt\n"
            "Exception ignored in atexit callback: <function _shutdown at 0x7f0>\n"
            "Traceback (most recent call last):\n"
            '  File "/opt/torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py", line 112, in _shutdown\n'
            "TimeoutError: The client socket has timed out after 600000ms while trying to connect to (nid001, 29500).\n")
    s = summary(tmp_path, "run.out", body + tail)
    assert s["status"] == "finished" and s["failure"] is None
    # the same traceback, not ignored and before any checkpoint of the last iteration, is the run's failure
    s = summary(tmp_path, "run2.out", body + tail.replace("Exception ignored in atexit callback: <function _shutdown "
                                                          "at 0x7f0>\n", "").replace(
        "  successfully saved checkpoint at iteration      20 to /ckpt\n", ""))
    assert s["status"] == "failed" and s["failure"]["kind"] == "traceback"


def test_startup_runs_from_the_first_stamp_to_the_first_real_step(tmp_path):
    """DeepSpeed's engine reports 'step=0' when it is built (global_steps counts steps taken): a
    phase of the startup, not its end.  A script's bracketed launch stamp is the job's start.  A run
    whose workers all exit without a step never trained."""
    ds = "[2026-08-18 04:{}] [INFO] [logging.py:96:log_dist] [Rank 0] step={}, skipped=0, lr=[0.0001], mom=[(0.9, 0.95)]\n"
    text = ("[Tue Aug 18 04:05:25 CEST 2026] Launching training...\n"
            "[2026-08-18 04:05:40,000] [INFO] [launch.py:256:main] process 1234 spawned\n"
            + ds.format("07:00,000", 0)  # the engine, built 95 s after the launch stamp
            + "".join(ds.format(f"{9 + i // 60:02d}:{i % 60:02d},000", i) for i in range(1, 6)))
    s = summary(tmp_path, "ds.log", text)
    assert s["startup_s"] == pytest.approx(216.0, abs=0.1)  # 04:05:25 (the launch stamp) to 04:09:01 (step=1)
    assert [p["name"] for p in s["startup"]][-2:] == ["engine-built", "first-step"]
    assert s["steps_seen"] == 5 and s["last_step"] == 5
    never = summary(tmp_path, "never.log", text.split(ds.format("09:01,000", 1))[0]
                    + "[2026-08-18 04:08:00,000] [INFO] [launch.py:346:main] Process 1234 exits successfully.\n")
    assert never["status"] == "no-iterations" and never["steps_seen"] == 0
    assert never["startup_s"] is None and never["startup_note"] == "unknown: the run logged no training step"


def test_a_step_told_twice_is_one_step(tmp_path):
    """GPT-NeoX (a pipeline engine under DeepSpeed) prints each step twice, DeepSpeed's 'step=N' with the
    lr and its engine's 'steps: N loss: ... iter time (s): ...': one step, with the loss and time of both."""
    lines = []
    for i in range(1, 13):
        lines.append(f"[2023-10-19 23:09:{i:02d},498] [INFO] [logging.py:96:log_dist] [Rank 0] step={i}, skipped=0, "
                     f"lr=[0.0009, 0.0009], mom=[[0.9, 0.95], [0.9, 0.95]]")
        lines.append(f"steps: {i} loss: {4 - i / 10:.4f} iter time (s): 0.595 samples/sec: 861.107")
    s = summary(tmp_path, "neox.log", "\n".join(lines) + "\n")
    assert s["steps_seen"] == 12 and s["last_step"] == 12
    assert s["loss_last"] == pytest.approx(2.8) and s["iter_time_ms"]["median"] == pytest.approx(595.0)


def test_a_trainer_run_without_logged_dicts_is_read_from_its_bar(tmp_path):
    """logging_steps past the run's length: no dict, only the header and tqdm's bar (its updates
    joined by carriage returns).  The bar gives the steps, the run's end and the step time, tqdm's
    smoothed rate, and the summary says where that time comes from."""
    bar = "".join("\r%3d%%|#         | %d/300 [00:%02d<00:%02d,  3.20it/s]" % (s * 100 // 300, s, s // 3 % 60,
                                                                             (300 - s) // 3 % 60)
                  + ("\n" if s % 7 == 0 else "") for s in range(1, 301))
    s = summary(tmp_path, "bar.log", "  Total optimization steps = 300\n" + bar + "\n")
    assert s["framework"] == "hf-trainer" and s["status"] == "finished" and s["last_step"] == 300
    assert s["iter_time_ms"]["median"] == pytest.approx(312.5)  # 1 / 3.20 it/s
    assert s["iter_time_source"] == "tqdm's smoothed rate (its it/s or s/it)"


def test_the_first_failure_that_ended_the_run_is_the_root_cause_not_the_watchdog_after_it(tmp_path):
    """Data exhaustion on the tensor-parallel ranks 0 (StopIteration in the batch loader), then, far
    later, the NCCL watchdog of the ranks left waiting: the StopIteration is the cause.  A traceback
    the run went on after is none."""
    body = "".join(f" iteration {i:8d}/     100 | elapsed time per iteration (ms): 1000.0 | lm loss: 2.0E+00 | "
                   f"number of skipped iterations:   0 | number of nan iterations:   0 |\n" for i in range(1, 11))
    stop = ("[rank0]: Traceback (most recent call last):\n"
            '[rank0]:   File "megatron/training/utils.py", line 400, in get_batch_on_this_tp_rank\n'
            "[rank0]:     data = next(data_iterator)\n[rank0]: StopIteration\n")
    noise = "".join(f"[rank3]: waiting {i}\n" for i in range(1100))
    watchdog = ("[rank3]:[E1119 10:00:00.000 ProcessGroupNCCL.cpp:632] [Rank 3] Watchdog caught collective "
                "operation timeout: WorkNCCL(SeqNum=9, OpType=BROADCAST, Timeout(ms)=600000) ran for 600021 ms\n")
    s = summary(tmp_path, "run.out", body + stop + noise + watchdog)
    assert s["status"] == "failed" and s["failure"]["kind"] == "traceback"
    assert s["failure"]["message"].startswith("[rank0]: StopIteration") or "StopIteration" in s["failure"]["message"]
    assert "Watchdog caught" in s["failure"]["message"]  # the symptom, as context
    # a traceback the run went on after (a caught exception printed) is no cause
    s = summary(tmp_path, "run2.out", stop + body + watchdog)
    assert s["failure"]["kind"] == "nccl"


def test_llmc_says_its_size_and_processes_in_its_run_table(tmp_path):
    """train_gpt2.cu prints a table with num_processes, then 'num_parameters: N => bytes: M': the run's
    world size and its size, counted to the parameter; Lightning's 'MEMBER: i/W' says the world too."""
    table = ("+-----------------------+----------------------------------------------------+\n"
             "| num_processes         | 8                                                  |\n"
             "| zero_stage            | 1                                                  |\n"
             "+-----------------------+----------------------------------------------------+\n"
             "num_parameters: 124475904 => bytes: 248951808\n")
    steps = "".join(f"step {s:4d}/74 | train loss {11 - s / 10:.6f} | norm 1.0 | lr 6.00e-04 | (322.82 ms | "
                    f"1624079 tok/s)\n" for s in range(1, 11))
    s = summary(tmp_path, "llmc.out", table + steps)
    assert s["world_size"] == 8 and s["params_billion"] == pytest.approx(0.124, abs=5e-4)
    assert s["params_source"] == "log"
    s = summary(tmp_path, "nemo.out", "Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/16\n" + steps)
    assert s["world_size"] == 16


def test_noise_after_a_completed_run_that_saved_its_checkpoint_is_teardown(tmp_path):
    """A run that took all its iterations and saved its last checkpoint, then failed at exit (a
    process group torn down, its .err holding only that): finished, the failure a note; the same
    failure before the checkpoint was saved fails the run."""
    body = "".join(f" iteration {i:8d}/      20 | elapsed time per iteration (ms): 1000.0 | lm loss: 2.0E+00 | "
                   f"number of skipped iterations:   0 | number of nan iterations:   0 |\n" for i in range(1, 21))
    saved = "  successfully saved checkpoint at iteration      20 to /ckpt\n"
    teardown = ("terminate called after throwing an instance of 'c10::DistBackendError'\n"
                "  what():  [PG ID 0 PG GUID 0 Rank 3] Process group watchdog thread terminated with exception\n")
    (tmp_path / "job.12345.out").write_text(body + saved)
    (tmp_path / "job.12345.err").write_text(teardown)
    from tuimon.engine.ingest import parse_file
    store = JobStore()
    for name in ("job.12345.out", "job.12345.err"):
        parse_file(tmp_path / name, name, sink=store.add)
    (job,) = store.jobs.values()
    s = summarize(job, now=None, last_write=None).as_dict()
    assert s["status"] == "finished" and s["failure"] is None
    assert any(c.startswith("after the run completed and saved its last checkpoint, at teardown") for c in s["checks"])
    # the failure's words reach a table's notes as text, never as control sequences
    from tuimon.figures.columns import render_summary
    from tuimon.figures.record import from_dict
    hostile = summary(tmp_path, "hostile.out", body + saved + teardown.replace("c10::DistBackendError'", "c10::DistBackendError' \x1b]2;pwned\x07"))
    notes = render_summary([from_dict(hostile)], "table")
    assert "at teardown" in notes and "\x1b" not in notes and "\x07" not in notes
    unsaved = summary(tmp_path, "run.out", body + teardown)
    assert unsaved["status"] == "failed" and unsaved["failure"]["kind"] == "nccl"


def test_a_memory_report_srun_wrapped_keeps_its_peak(tmp_path):
    """srun's label before the rest of a long memory report (' ... | max allocated: 45008.92 | res' then
    '0: erved: 42498.00 | max reserved: 42498.00'): the peak reserved of the tail counts."""
    text = ("0: [Rank 0] (after 10 iterations) memory (MB) | allocated: 15382.8 | max allocated: 45008.92 | res\n"
            "0: erved: 42498.00 | max reserved: 42498.00\n"
            "0:  iteration       10/     100 | elapsed time per iteration (ms): 1000.0 | lm loss: 2.0E+00 | "
            "number of skipped iterations:   0 | number of nan iterations:   0 |\n")
    s = summary(tmp_path, "wrapped.out", text)
    assert s["memory"]["gpu_max_allocated_mb"] == 45008.9 and s["memory"]["gpu_max_reserved_mb"] == 42498.0


def test_torchruns_glog_line_is_the_jobs_first_stamp(tmp_path):
    """torchrun warns as it launches, in glog's form without a year ('W0519 20:23:14.721000 ...'):
    the job starts there, in the year of the log's first full stamp (a New Year's Eve launch stays
    in its year)."""
    from tuimon.figures.summary import glog_wall

    head = ("W0519 20:23:14.721000 140234 torch/distributed/run.py:793] Setting OMP_NUM_THREADS environment "
            "variable for each process to be 1 in default\n")
    body = "".join(f"[rank0]:[titan] 2026-05-19 20:{30 + s // 60:02d}:{s % 60:02d},000 - root - INFO - step: {s:2d}  "
                   f"loss: {12 - s / 10:.5f}  memory: 30.00GiB(40.0%)  tps: 7,000  tflops: 50.0  mfu: 5.0%\n"
                   for s in range(1, 21))
    s = summary(tmp_path, "titan.log", head + "[rank0]:[titan] 2026-05-19 20:25:00,000 - root - INFO - Starting job\n"
                + body)
    assert s["startup_s"] == pytest.approx(7 * 60 + 1 - 14.721, abs=0.1)  # 20:23:14.721 to step 1's 20:30:01
    eve = glog_wall("1231 23:59:50.000000", 1798761605.0)  # the first full stamp: 2027-01-01 00:00:05
    assert eve == pytest.approx(1798761605.0 - 15.0)
    assert glog_wall("1331 23:59:50.000000", 1798761605.0) is None


def test_a_nemo1_run_is_laid_out_and_sized_from_its_yaml_configuration(tmp_path):
    """NeMo 1.x dumps OmegaConf.to_yaml(cfg) after '*** Experiment configuration ***': its trainer's
    devices x nodes are the world, its model section the shape (LLaMA-2-7B here: 6.74 B)."""
    yaml = ["[NeMo I 2024-01-21 10:00:00 megatron_gpt_pretraining:37] ", "", "************** Experiment configuration "
            "***********", "[NeMo I 2024-01-21 10:00:00 megatron_gpt_pretraining:38] ", "name: megatron_llama",
            "trainer:", "  devices: 8", "  num_nodes: 2", "  precision: bf16", "exp_manager:",
            "  explicit_log_dir: null", "model:", "  micro_batch_size: 1", "  global_batch_size: 128",
            "  tensor_model_parallel_size: 2", "  pipeline_model_parallel_size: 1", "  encoder_seq_length: 4096",
            "  num_layers: 32", "  hidden_size: 4096", "  ffn_hidden_size: 11008", "  num_attention_heads: 32",
            "  activation: fast-swiglu", "  bias: false", "  normalization: rmsnorm",
            "  share_embeddings_and_output_weights: false", "  activations_checkpoint_granularity: null",
            "[NeMo I 2024-01-21 10:00:05 megatron_init:251] Rank 0 has data parallel group : [0, 2, 4, 6]",
            " > padded vocab (size: 32000) with 0 dummy tokens (new size: 32000)"]
    steps = [f"Epoch 0: :   1%| | {i}/1000 [00:{i:02d}<10:00, reduced_train_loss={9 - i / 10:.3f}, global_step={i}.000, "
             f"consumed_samples={128 * i}.0, train_step_timing in s=2.50]" for i in range(1, 21)]
    s = summary(tmp_path, "nemo.log", "\n".join(yaml + steps) + "\n")
    assert (s["world_size"], s["global_batch"], s["seq_length"]) == (16, 128, 4096)
    assert (s["config"]["tp"], s["config"]["pp"], s["config"]["dp"]) == (2, 1, 8)
    assert s["params_billion"] == pytest.approx(6.738, abs=1e-3) and s["flops_formula"] == "Megatron-Core (architecture)"
    assert s["activation_checkpointing"] is False and s["precision"] == "bf16"


def test_ms_swift_says_its_steps_length_and_rate_in_its_dicts(tmp_path):
    """ms-swift's dicts carry 'global_step/max_steps': '10/94' and 'train_speed(iter/s)': steps over
    the time since the start, beside text values: a step's time is the difference of two dicts'."""
    def d(step: int, speed: float) -> str:
        return (f"{{'loss': 1.5, 'grad_norm': 10.0, 'learning_rate': 1e-05, 'epoch': {step / 94:.2f}, "
                f"'global_step/max_steps': '{step}/94', 'percentage': '{100 * step / 94:.2f}%', 'elapsed_time': '20s', "
                f"'remaining_time': '2m 52s', 'memory(GiB)': 5.64, 'train_speed(iter/s)': {speed}}}\n")
    text = d(10, 0.485796) + d(90, 0.520707) + ("{'train_runtime': 183.4332, 'train_samples_per_second': 8.177, "
                                                "'train_steps_per_second': 0.512, 'train_loss': 1.50650934, "
                                                "'global_step/max_steps': '94/94', 'percentage': '100.00%'}\n")
    s = summary(tmp_path, "swift.log", text)
    assert s["framework"] == "hf-trainer" and s["status"] == "finished" and s["train_iters"] == 94
    assert s["last_step"] == 94  # the closing dict's step, past the last logged one (90)
    assert s["iter_time_ms"]["max"] == pytest.approx((90 / 0.520707 - 10 / 0.485796) / 80 * 1000, abs=0.01)


def _llmc_main_log(steps: int, every: int, upto: Optional[int] = None, hellaswag: bool = False) -> str:
    """llm.c's main.log as its training loop writes it (train_gpt2.cu: at each step, the
    validation loss first where ``step % val_loss_every == 0`` or on the last step, then, unless
    it is the last, the training step; logger.h's formats), cut after step ``upto``'s lines."""
    out = []
    for step in range(0, steps + 1):
        last = step == steps
        if step % every == 0 or last:
            out.append(f"s:{step} tel:{11 - step / 9:.4f}\n")
            if hellaswag:
                out.append(f"s:{step} eval:{0.25 + step / 1000:.4f}\n")
        if last or (upto is not None and step > upto):
            break
        out.append(f"s:{step} trl:{11 - step / 10:.4f} lr:0.000600 norm:{1 + step / 100:.2f}\n")
    return "".join(out)


@pytest.mark.parametrize("hellaswag", [False, True])
def test_llmc_ends_with_its_last_step_s_evaluation(tmp_path, hellaswag):
    """The loop's last word is the validation loss at step N, after training step N-1: the run
    finished, once its file is quiet past a step's time; mid-run the same evaluation is followed
    by its step's training line."""
    from tuimon.figures.summary import CLOSING_QUIET_S

    path = tmp_path / "main.log"
    path.write_text(_llmc_main_log(40, 10, hellaswag=hellaswag))
    store = JobStore()
    parse_file(path, path.name, sink=store.add)
    (job,) = store.jobs.values()
    assert summarize(job).as_dict()["status"] == "finished"  # no clock: the log's word
    written = path.stat().st_mtime
    assert summarize(job, now=written + CLOSING_QUIET_S + 1, last_write=written).status == "finished"
    assert summarize(job, now=written + 5, last_write=written).status == "training"  # its step may yet come
    assert job.last_iteration == 39 and job.evals.last_iteration == 40

    for cut in (20, 25):  # a run still going, its last line a training step's
        mid = summary(tmp_path, "main.log", _llmc_main_log(40, 10, upto=cut, hellaswag=hellaswag))
        assert mid["status"] == "training", cut
    # between a mid-run evaluation and its step's training line the log reads as its end would:
    # the clock tells them apart (the next line comes within a step's time)
    path.write_text(_llmc_main_log(40, 10, upto=19, hellaswag=hellaswag))
    store = JobStore()
    parse_file(path, path.name, sink=store.add)
    (job,) = store.jobs.values()
    assert summarize(job, now=written + 2, last_write=written).status == "training"
    path.write_text(path.read_text() + "s:20 trl:9.0000 lr:0.000600 norm:1.20\n")
    store = JobStore()
    parse_file(path, path.name, sink=store.add)
    (job,) = store.jobs.values()
    assert summarize(job, now=written + 3600, last_write=written).status == "training"


def test_llmc_s_closing_evaluation_reads_finished_live_once_quiet(tmp_path):
    """In the dashboard the same run turns from training to finished as its file stays
    quiet, with no new line (the row's cached summary is judged again at each tick)."""
    from tuimon.figures.summary import CLOSING_QUIET_S
    from tuimon.live.session import LiveSession

    path = tmp_path / "main.log"
    path.write_text(_llmc_main_log(40, 10))
    written = path.stat().st_mtime
    clock = [written + 1.0]
    session = LiveSession([str(path)], clock=lambda: clock[0], poll=0.1, cache=None)
    for _ in range(3):
        session.follower.poll()
    session.tick()
    assert [r.summary.status for r in session.snapshot().rows] == ["training"]
    clock[0] = written + CLOSING_QUIET_S + 1
    session.tick()
    assert [r.summary.status for r in session.snapshot().rows] == ["finished"]


def test_an_evaluation_past_a_run_s_last_logged_step_is_no_end_where_it_logs_every_nth():
    """A run that logs every 200th step reads an evaluation past its last logged step at each
    evaluation (DeepSpeed's step=N lines, then the script's val_acc at iteration 5474): no end."""
    import tempfile

    lines = [f"s:{s} trl:{11 - s / 1000:.4f} lr:0.000600 norm:1.00\n" for s in range(0, 5401, 200)]
    with tempfile.TemporaryDirectory() as tmp:
        s = summary(Path(tmp), "main.log", "".join(lines) + "s:5474 tel:0.9797\n")
    assert s["status"] == "training"


def _megatron_run(day_time: str, n: int = 10) -> list[str]:
    """A Megatron-LM run after its launch (training.py's log line with its own date prefix, as
    --log-timestamp... prints it; the world-size line carries no stamp)."""
    h, m = (int(x) for x in day_time.split(":"))
    out = ["using world size: 8, data-parallel size: 8, context-parallel size: 1, tensor-model-parallel size: 1, "
           "pipeline-model-parallel size: 1"]
    for i in range(1, n + 1):
        out.append(f" [2024-05-19 {h:02d}:{m:02d}:{i:02d}] iteration {i:8d}/{n:8d} | consumed samples: {8 * i:8d} | "
                   "elapsed time per iteration (ms): 1000.0 | learning rate: 1.000E-04 | global batch size:     8 | "
                   "lm loss: 9.000000E+00 | loss scale: 1.0 | number of skipped iterations:   0 | "
                   "number of nan iterations:   0 |")
    return out


def _banner(stamp: str, pid: int) -> list[str]:
    """torchrun's launch banner (torch/distributed/run.py), as glog writes it."""
    return [f"W{stamp} {pid} torch/distributed/run.py:793] " + text for text in
            ("", "*****************************************",
             "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your "
             "system being overloaded, please further tune the variable for optimal performance in your "
             "application as needed.", "*****************************************")]


@pytest.mark.parametrize("engine", ["core", "python"])
@pytest.mark.parametrize("second_launch", ["torchrun", "date"])
def test_a_second_launch_in_one_file_starts_its_run_at_its_own_stamp(tmp_path, engine, second_launch):
    """A job script that runs torchrun twice (or echoes '[$(date)] Launching ...' before its second
    run) writes one file: the second run starts at its own launch, not at the first run's last line
    (whose stamp its first unstamped lines carry), and two nodes' banners a second apart are one
    launch."""
    from tuimon.engine import native

    if engine == "core" and native.core is None:
        pytest.skip("the compiled core is not importable: pip install -e '.[test]' builds it")
    second = _banner("0519 21:00:00.000000", 77) + _banner("0519 21:00:01.250000", 78) \
        if second_launch == "torchrun" else ["[Sun May 19 21:00:00 UTC 2024] Launching training..."]
    lines = _banner("0519 20:23:14.721000", 11) + _megatron_run("20:25") + second + _megatron_run("21:02")
    before = native.use(native.core if engine == "core" else None)
    try:
        path = tmp_path / "train.log"
        path.write_text("\n".join(lines) + "\n")
        store = JobStore()
        parse_file(path, path.name, sink=store.add)
    finally:
        native.use(before)
    first, again = (summarize(job).as_dict() for job in store.jobs.values())
    assert first["startup_s"] == pytest.approx(20 * 60 + 25 * 60 + 1 - 20 * 60 - 23 * 60 - 14.721, abs=0.05)
    assert again["startup_s"] == pytest.approx(121.0, abs=0.05)  # 21:00:00 to its first step's 21:02:01
    assert first["last_iteration"] == again["last_iteration"] == 10 and again["status"] == "finished"
    assert again["wall_span_s"] == pytest.approx(130.0, abs=0.05)  # from its launch, not from 20:25:10


def test_a_glog_line_of_another_module_after_training_is_no_launch(tmp_path):
    """torch's other glog lines (its elastic agent as a run ends) start no run, also where it is the
    file's first glog line (a stamp for the start, no launch)."""
    lines = _megatron_run("20:25") + [
        "W0519 20:30:00.000000 11 torch/distributed/elastic/agent/server/api.py:704] Received Signals.SIGTERM"]
    s = summary(tmp_path, "train.log", "\n".join(lines) + "\n")
    assert s["job"] == "train" and s["last_iteration"] == 10


def test_megatron_s_stated_initialization_time_counts_back_to_the_process_start(tmp_path):
    """training.py takes _TRAIN_START_TIME as it is imported and prints the seconds to
    'after megatron is initialized' before that line's datetime: the job started that much
    earlier than its first stamp (41.8 s of a 48.8 s startup were missing)."""
    text = """using world size: 2, data-parallel-size: 2, tensor-model-parallel size: 1, pipeline-model-parallel size: 1
> initializing torch distributed ...
time to initialize megatron (seconds): 41.829
[after megatron is initialized] datetime: 2024-02-02 15:50:01 
building GPT model ...
[after model, optimizer, and learning rate scheduler are built] datetime: 2024-02-02 15:50:01 
[after dataloaders are built] datetime: 2024-02-02 15:50:06 
[before the start of training step] datetime: 2024-02-02 15:50:06 
 iteration        1/      10 | consumed samples:           16 | elapsed time per iteration (ms): 1996.1 | \
learning rate: 0.000E+00 | global batch size:    16 | lm loss: 9.0E+00 | loss scale: 1.0 |
"""
    s = summary(tmp_path, "megatron.log", text)
    phases = {p["name"]: p["offset_s"] for p in s["startup"]}
    assert phases["megatron-initialized"] == pytest.approx(41.829, abs=1e-3)
    assert s["startup_s"] == pytest.approx(41.829 + 5 + 1.996, abs=0.05)  # to 15:50:06 + the first step's 2.0 s
    assert "init-time" not in phases
    # a job script's earlier stamp stays the start
    s = summary(tmp_path, "megatron.log", "START TIME: Fri Feb  2 15:40:00 UTC 2024\n" + text)
    assert s["startup_s"] == pytest.approx(600 + 6 + 1.996, abs=0.05)


@pytest.mark.parametrize("dtype,precision", [("bfloat16", "bf16"), ("float16", "fp16"), ("float32", "fp32")])
def test_megatron_s_parameter_dtype_is_its_precision(tmp_path, dtype, precision):
    """arguments.py prints the dtype --bf16 / --fp16 chose (an argument block elided from a log,
    the line stays); under srun --label and torchrun's tee prefix too."""
    text = f"0: [default0]:using torch.{dtype} for parameters ...\n" + "\n".join(_megatron_run("20:25")) + "\n"
    assert summary(tmp_path, "megatron.log", text)["precision"] == precision


def test_a_deepspeed_excerpt_reads_its_throughput_timer_and_no_startup(tmp_path):
    """DeepSpeed 0.6-0.9's ThroughputTimer line ('E/N, RunningAvgSamplesPerSec=..., CurrSamplesPerSec=...,
    MemAllocated=...GB, MaxMemAllocated=...GB'): samples a second and the peak memory; a log whose
    first stamp is its first step's own has no startup to tell (unknown, not 0.0 s)."""
    rows = [("06:58:56", 20, 227.48090316379353), ("06:59:18", 30, 227.45044884073528),
            ("06:59:41", 40, 227.7217889790298)]
    text = "".join(
        f"[2022-08-29 {t},121] [INFO] [logging.py:68:log_dist] [Rank 0] step={n}, skipped=17, lr=[5e-05], "
        f"mom=[(0.9, 0.999)]\n[2022-08-29 {t},176] [INFO] [timer.py:198:stop] 0/{n}, RunningAvgSamplesPerSec=230.8, "
        f"CurrSamplesPerSec={cur}, MemAllocated=0.36GB, MaxMemAllocated={15.06 if n < 40 else 15.10}GB\n"
        for t, n, cur in rows)
    s = summary(tmp_path, "deepspeed.log", text)
    assert s["samples_per_sec"] == pytest.approx((227.45044884073528 + 227.7217889790298) / 2, abs=1e-3)
    assert s["memory"]["gpu_max_allocated_mb"] == pytest.approx(15.10 * 1024, abs=0.1)
    assert s["startup_s"] is None and s["startup_note"] == "unknown: no line before the first step has a time stamp"


def test_a_line_that_states_its_step_s_time_wins_over_deepspeed_s_stamps(tmp_path):
    """The pipeline engine's 'steps: N ... iter time (s): x' (NeoX prints it each step) times the
    steps; the stamps of DeepSpeed's step lines, which hold the logging too, are the last resort."""
    text = "".join(
        f"[2023-10-20 00:22:{10 + 2 * n:02d},000] [INFO] [logging.py:96:log_dist] [Rank 0] step={n}, skipped=0, "
        f"lr=[0.001], mom=[[0.9, 0.95]]\nsteps: {n} loss: 3.9605 iter time (s): 0.595 samples/sec: 861.007\n"
        for n in range(1, 21))
    s = summary(tmp_path, "neox.log", text)
    assert s["iter_time_ms"]["median"] == pytest.approx(595.0) and s["iter_time_source"] is None


def test_llmc_s_stdout_names_its_trainer_and_its_hellaswag_accuracy(tmp_path):
    """train_gpt2.cu's step line (its loss and norm with their z-scores) is llm.c's; its
    printf0("HellaSwag: %d/%d = %f") is an evaluation, named as the main.log's 's:N eval:'."""
    text = ("val loss 11.033154\n" + "".join(
        f"step {s:4d}/3 | loss {11 - s / 10:.6f} (+nanz)| norm 22.1414 (+nanz)| lr 8.57e-07 | {2490 + s:.2f} ms | "
        f"40.3% bf16 MFU | 210000 tok/s\n" for s in (1, 2, 3))
        + "val loss 10.609911\nevaluating HellaSwag: 770/837\nHellaSwag: 3151/10042 = 0.313782\n"
        + "total average iteration time: 2492.500000 ms\n")
    s = summary(tmp_path, "llmc.out", text)
    assert s["framework"] == "llm.c" and s["status"] == "finished"
    assert s["eval_last"] == {"val loss": 10.609911, "hellaswag acc": 0.313782}


def test_unsloth_s_banner_and_the_closing_run_time(tmp_path):
    """Unsloth's banner (its own words for the Trainer's header) gives the GPUs, the planned steps
    and the batch, never the LoRA adapters' count as the model's size; the step time is the
    closing dict's run time over its steps (364.4972 s / 60), not 1/train_steps_per_second
    rounded to 3 decimals (6.061 s)."""
    text = ("==((====))==  Unsloth - 2x faster free finetuning | Num GPUs = 1\n"
            "   \\\\   /|    Num examples = 5,000 | Num Epochs = 1\n"
            "O^O/ \\_/ \\    Batch size per device = 2 | Gradient Accumulation steps = 4\n"
            "\\        /    Total batch size = 8 | Total steps = 60\n"
            ' "-____-"     Number of trainable parameters = 83,886,080\n'
            + "".join(f"{{'loss': {3 - s / 60:.4f}, 'grad_norm': 0.8, 'learning_rate': 4e-05, 'epoch': 0.0}}\n"
                      for s in range(60))
            + "{'train_runtime': 364.4972, 'train_samples_per_second': 1.317, 'train_steps_per_second': 0.165, "
              "'train_loss': 2.253616464138031, 'epoch': 0.1}\n")
    s = summary(tmp_path, "sft.log", text)
    assert (s["world_size"], s["global_batch"], s["train_iters"], s["last_step"]) == (1, 8, 60, 60)
    assert s["status"] == "finished" and s["params_billion"] is None
    assert s["iter_time_ms"]["median"] == pytest.approx(364.4972 / 60 * 1000, abs=0.01)


def test_a_trainer_run_that_logged_no_step_ends_at_its_closing_dict_s_step(tmp_path):
    """4 planned steps, logging_steps past them: no loss dict, the closing dict after the 4 (the
    bigscience n16 run read 0/4, finished)."""
    text = ("[INFO|trainer.py:1149] 2021-05-25 06:30:55,250 >>   Total optimization steps = 4\n"
            "{'train_runtime': 871.7888, 'train_samples_per_second': 0.005, 'epoch': 1.0}\n")
    s = summary(tmp_path, "hf.log", text)
    assert s["status"] == "finished" and s["last_step"] == 4 and s["train_iters"] == 4
    assert s["iter_time_ms"]["median"] == pytest.approx(871.7888 / 4 * 1000, abs=0.01)
    # the bar drawn once, at its end: tqdm's smoothed 219.64 s/it is no better than the run time over its steps
    bar = "100%|##########| 4/4 [14:31<00:00, 219.64s/it]\n"
    lines = text.splitlines(keepends=True)
    s = summary(tmp_path, "hf.log", lines[0] + bar + lines[1])
    assert s["iter_time_ms"]["median"] == pytest.approx(871.7888 / 4 * 1000, abs=0.01)
    assert s["iter_time_source"] == "the Trainer's train_runtime over its steps (its closing dict)"


@pytest.mark.parametrize("every,stalled", [(200, False), (1, True)])
def test_the_stall_limit_is_of_the_time_between_logged_steps(tmp_path, every, stalled):
    """A run that logs every 200th iteration (Megatron's --log-interval 200, 1.0 s an iteration):
    120 s of its own stamps after the last record (an evaluation, the launcher's exit) is no stall;
    where it logs every iteration, 120 s after the last is (5 x 1.0 s, at least 60 s)."""
    from tuimon.figures.alerts import DEFAULTS, quiet_verdict

    t0 = 1_669_110_000
    lines = [f" [{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(t0 + k * every))}] iteration {k * every:8d}/"
             f"{30 * every:8d} | consumed samples: {8 * k * every:8d} | elapsed time per iteration (ms): 1000.0 | "
             "learning rate: 1.000E-04 | global batch size:     8 | lm loss: 9.000000E+00 |"
             for k in range(1, 28)]
    end = t0 + 27 * every + 120
    lines.append(f"[{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(end))},000] [INFO] [launch.py:350:main] "
                 "Process 29248 exits successfully.")
    path = tmp_path / "megatron.log"
    path.write_text("\n".join(lines) + "\n")
    store = JobStore()
    parse_file(path, path.name, sink=store.add)
    (job,) = store.jobs.values()
    s = summarize(job)
    assert s.iter_time_ms.median == pytest.approx(1000.0)
    assert (quiet_verdict(job, s, DEFAULTS["stalled"], end + 5.0, end, grew=True) == "stalled") is stalled


_CODE_PIECES = ["def", "class", "return", "if", "elif", "for", "assert", "with", "self.", "os.environ", "os.environ_",
                " ", "    ", "\t", "x", "_", ".", "=", " = ", "(", "é", "a1", "world_size", "mself.", ":", "\x0b", "\u2003"]


@settings(max_examples=3000, deadline=None)
@given(pieces=st.lists(st.sampled_from(_CODE_PIECES), max_size=10))
def test_a_line_reads_as_source_as_its_regex_says(pieces):
    """The launcher leaves a world size a script's source prints (modded-nanogpt's) to the code: is_code
    answers what searching CODE answers, without trying its unanchored branches at every character."""
    from tuimon.parsers.launcher import CODE, is_code

    body = "".join(pieces)
    assert is_code(body) == bool(re.search(CODE, body)), body
