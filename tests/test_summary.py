"""Golden summaries of the project's own fixture logs, plus the facts each must show."""
from __future__ import annotations

import json
import os
import shutil

import pytest

from tests.conftest import FIXTURE_LOGS, FIXTURES, FORMATS, GOLDEN
from tuimon.engine.ingest import parse_file
from tuimon.figures.summary import summarize
from tuimon.store.job_store import JobStore

FIXTURE_FILES = sorted(FIXTURES.iterdir())


def summary_of(path) -> dict:
    store = JobStore()
    parse_file(path, path.name, sink=store.add)
    (job,) = store.jobs.values()
    return summarize(job, now=None, last_write=None).as_dict()


@pytest.mark.parametrize("path", FIXTURE_LOGS, ids=lambda p: p.name)
def test_golden(path):
    got = summary_of(path)
    golden = GOLDEN / (path.name + ".json")
    if os.environ.get("TUIMON_UPDATE_GOLDEN") or not golden.exists():
        golden.write_text(json.dumps(got, indent=2, sort_keys=True) + "\n")
        if not os.environ.get("TUIMON_UPDATE_GOLDEN"):
            pytest.fail(f"golden file {golden.name} was missing; written now, review and commit it")
    assert got == json.loads(golden.read_text())


def test_stronghold_offload_run():
    s = summary_of(FIXTURES / "stronghold-run.log")
    assert s["framework"] == "stronghold" and s["status"] == "finished"
    assert s["params_billion"] == 1.717 and s["world_size"] == 1
    # the log's TFLOPs count the recomputed forward (seed 004's STRONGHOLD, Megatron's factor 4)
    assert s["tflops_per_gpu"]["hardware"] == pytest.approx(s["tflops_per_gpu"]["reported"], abs=0.05)
    assert s["tflops_per_gpu"]["computed"] == pytest.approx(s["tflops_per_gpu"]["hardware"] * 3 / 4, abs=0.01)
    assert set(s["offload_ms"]) == {"offloading-func-call-overhead", "offloading-fwd-overhead",
                                    "offloading-bwd-overhead"}
    assert s["offload_ms"]["offloading-bwd-overhead"] == 5453.51
    assert s["checkpoints"] == [{"iteration": 50, "save_ms": 66891.4}]
    assert s["memory"]["gpu_max_allocated_mb"] == 10359.8
    # job started 23:59:30, training began 00:00:41, first iteration took ~7.99 s
    assert s["startup_s"] == pytest.approx(79.0, abs=0.1)
    names = [p["name"] for p in s["startup"]]
    assert names[0] == "job-start" and names[-1] == "first-step" and "model-built" in names
    assert s["iter_time_ms"]["n"] == 4 and s["iter_time_ms"]["max"] == 7859.4


def test_megatron_deepspeed_run():
    s = summary_of(FIXTURES / "megatron-deepspeed-8gpu-1234567.log")
    assert s["framework"] == "megatron-deepspeed" and s["status"] == "training"
    assert s["iter_time_ms"]["median"] == 2500.0 and s["world_size"] == 8 and s["global_batch"] == 64
    assert s["samples_per_sec"] == 25.6 and s["tflops_per_gpu"]["reported"] == 98.1
    assert s["memory"]["cpu_used_gb"] == 40.02
    # job started 23:59:23; step=0 logged at 00:00:22 (13 s + 9 s warm-up iteration)
    assert s["startup_s"] == 59.0


def test_hf_trainer_run_without_its_bar(tmp_path):
    """A Trainer run logged with tqdm off: its header gives the planned steps and batch
    sizes, and its closing dict says it finished (with or without the header)."""
    header = ("***** Running training *****\n  Num examples = 10,000\n  Instantaneous batch size per device = 8\n"
              "  Total train batch size (w. parallel, distributed & accumulation) = 64\n"
              "  Total optimization steps = 471\n")
    dicts = ("{'loss': 3.1234, 'grad_norm': 2.5, 'learning_rate': 4.9e-05, 'epoch': 0.06}\n"
             "{'train_runtime': 300.5, 'train_samples_per_second': 99.8, 'train_steps_per_second': 1.567, "
             "'train_loss': 2.9, 'epoch': 3.0}\n")
    (tmp_path / "with-header.log").write_text(header + dicts)
    (tmp_path / "without.log").write_text(dicts)
    (tmp_path / "unfinished.log").write_text(header + dicts.splitlines(keepends=True)[0])
    s = summary_of(tmp_path / "with-header.log")
    assert (s["status"], s["train_iters"], s["global_batch"], s["samples_per_sec"]) == ("finished", 471, 64, 99.8)
    assert summary_of(tmp_path / "without.log")["status"] == "finished"
    assert summary_of(tmp_path / "unfinished.log")["status"] == "training"


def test_hf_trainer_run():
    """A Hugging Face Trainer run: its steps and their times from the training bar (not the
    evaluation bar: tqdm's smoothed rate, said so), losses from its logged dicts, throughput and
    the end from its closing dict."""
    s = summary_of(FORMATS / "hf-trainer-run.log")
    assert s["framework"] == "hf-trainer" and s["status"] == "finished" and s["failure"] is None
    assert s["steps_seen"] == 100 and s["train_iters"] == 100 and s["loss_last"] == 1.4656
    assert s["iter_time_source"] == "tqdm's smoothed rate (its it/s or s/it)"
    assert 2000 < s["iter_time_ms"]["median"] < 2200  # the bar's s/it, not the evaluation bar's 4.5 it/s
    assert s["samples_per_sec"] == 30.441
    assert s["checkpoints"] == [{"iteration": 100, "save_ms": None}]


def test_torchtitan_run():
    """A TorchTitan run: steps and losses from its coloured metrics lines, the TFLOPs
    a GPU they report (steady: the first step's 5.24 left out), the most memory
    reserved, the run's size from the trainer's first line, its end from the last."""
    s = summary_of(FORMATS / "torchtitan-run.log")
    assert s["framework"] == "torchtitan" and s["status"] == "finished"
    assert s["steps_seen"] == 9 and s["train_iters"] == 40  # the validation line is no step
    assert s["global_batch"] == 16 and s["seq_length"] == 2048
    assert 44 < s["tflops_per_gpu"]["reported"] < 48
    assert s["memory"]["gpu_max_reserved_mb"] == 29.5 * 1024
    assert s["loss_last"] == 4.28883


def test_mlperf_run():
    """An MLPerf mllog run: its startup is MLPerf's own init time, init_start to run_start
    (stamped by time_ms; every rank's init_start counts once), its run time run_start to
    run_stop; the step times, the batch and sequence length, and a run_stop with status success."""
    s = summary_of(FORMATS / "mlperf-run.log")
    assert s["framework"] == "mlperf" and s["status"] == "finished"
    assert s["steps_seen"] == 6 and s["global_batch"] == 512 and s["seq_length"] == 2048
    assert [p["name"] for p in s["startup"]] == ["job-start", "initialized", "run-start"]
    assert s["startup_s"] == pytest.approx(135.0, abs=0.1) and s["run_time_s"] == pytest.approx(26.418)
    assert 4000 < s["iter_time_ms"]["median"] < 4200


@pytest.mark.parametrize("name,kind", [("oom-run.log", "oom"), ("nccl-timeout-555001.out", "nccl"),
                                       ("cancelled-777001.out", "cancelled"),
                                       ("no-iterations-888001.out", "no-iterations")])
def test_failures(name, kind):
    s = summary_of(FIXTURES / name)
    assert s["failure"]["kind"] == kind
    assert s["status"] == ("no-iterations" if kind == "no-iterations" else "failed")
    if kind != "no-iterations":
        assert s["failure"]["line"] >= 1 and s["failure"]["message"]


def test_cli_json_has_required_keys(run_cli, tmp_path):
    for f in FIXTURE_FILES:
        shutil.copy(f, tmp_path / f.name)
        os.utime(tmp_path / f.name, (1_000_000_000, 1_000_000_000))  # long finished
    code, out, err = run_cli("summary", str(tmp_path), "--format", "json")
    assert code == 0, err
    rows = json.loads(out)
    assert len(rows) == len(FIXTURE_FILES)
    required = {"job", "files", "framework", "status", "iterations_seen", "last_iteration", "train_iters",
                "iter_time_ms", "samples_per_sec", "tflops_per_gpu", "params_billion", "world_size", "startup_s",
                "startup", "offload_ms", "memory", "checkpoints", "loss_last", "failure"}
    for row in rows:
        assert required <= set(row)
    # the no-iterations fixture started (launcher, init) and printed nothing after: long ago, so stuck
    # and the run that stopped at 20 of 100 iterations long ago, with no hang in its own stamps, ended
    assert {r["status"] for r in rows} == {"finished", "ended", "failed", "stuck-in-startup"}
    assert "parsed 6 files" in err


@pytest.mark.parametrize("fmt", ["table", "markdown", "csv"])
def test_cli_formats(run_cli, fmt):
    code, out, _ = run_cli("summary", str(FIXTURES), "--format", fmt)
    assert code == 0
    assert "stronghold-run" in out and "7.2" in out
    if fmt == "markdown":
        assert out.splitlines()[1].startswith("| ---")


def test_events_command_json_lines(run_cli):
    code, out, _ = run_cli("events", str(FIXTURES / "stronghold-run.log"))
    assert code == 0
    events = [json.loads(line) for line in out.splitlines()]
    iterations = [e for e in events if e["type"] == "iteration"]
    assert [e["iteration"] for e in iterations] == [10, 20, 30, 40, 50]
    assert iterations[0]["file"].endswith("stronghold-run.log") and iterations[0]["line"] > 1
    assert iterations[0]["losses"] == {"lm loss": 10.3}


def test_per_rank_files_are_one_job(tmp_path):
    line = " iteration        1/      10 | elapsed time per iteration (ms): {} | lm loss: 1.0E+00 |\n"
    for rank, ms in ((0, 100.0), (1, 180.0)):
        (tmp_path / f"train-rank{rank}.log").write_text(line.format(ms))
    store = JobStore()
    for rank in (0, 1):
        p = tmp_path / f"train-rank{rank}.log"
        parse_file(p, str(p), sink=store.add)
    (job,) = store.jobs.values()
    assert job.name == "train" and set(job.ranks) == {0, 1}


@pytest.mark.parametrize("verb", ["summary", "events"])
def test_command_output_complete_through_a_file(run_cli, tmp_path, verb):
    """The ``tuimon`` command leaves a batch verb without the interpreter's teardown
    (tuimon.commands.cli.entry): what it wrote to a file, block-buffered, is all there."""
    import subprocess
    import sys

    from tests.conftest import ROOT
    args = [verb, str(FIXTURES)] + (["--format", "json"] if verb == "summary" else [])
    _, expected, _ = run_cli(*args)
    out = tmp_path / "out.txt"
    with open(out, "w") as fh:
        r = subprocess.run([sys.executable, "-m", "tuimon", *args], stdout=fh, stderr=subprocess.PIPE, text=True,
                           env=dict(os.environ, PYTHONPATH=str(ROOT)), cwd=tmp_path)
    assert r.returncode == 0 and r.stderr.startswith("tuimon: parsed 6 files")
    assert len(expected) > 8_000 and out.read_text() == expected
    r = subprocess.run([sys.executable, "-m", "tuimon", "summary", str(tmp_path / "missing")], capture_output=True,
                       text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)), cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.strip().startswith("tuimon: error: no such file")


def test_command_starts_no_linear_algebra_threads(tmp_path):
    """numpy's OpenBLAS starts a spinning thread a core when numpy is imported; the
    ``tuimon`` command (which does no linear algebra) asks it for none, leaving the
    cores to the parse.  Counted in the command's own process, after the import."""
    import subprocess
    import sys

    from tests.conftest import ROOT
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one core: OpenBLAS starts no threads there anyway, so this cannot tell")
    count = "import os, sys; print(len(os.listdir('/proc/self/task')), file=sys.stderr)"
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    env["PYTHONPATH"] = str(ROOT)
    # the same code path as `python -m tuimon`, with --version (which exits through argparse) as the verb
    code = ("import sys, numpy; sys.argv = ['tuimon', '--version']\n"
            "import tuimon.__main__ as m\n"
            "try:\n    m.main()\nexcept SystemExit:\n    pass\n")
    plain = subprocess.run([sys.executable, "-c", "import numpy; " + count], capture_output=True, text=True,
                           env=env, cwd=tmp_path)
    assert int(plain.stderr) > 1, "numpy alone started no thread here: this test cannot tell"
    r = subprocess.run([sys.executable, "-c", code.replace("import sys, numpy; ", "import sys; ") + count],
                       capture_output=True, text=True, env=env, cwd=tmp_path)
    assert r.stdout.startswith("tuimon ") and int(r.stderr) == 1, r.stderr


def test_last_learning_rate_does_not_depend_on_the_order_of_kinds():
    """The store's latest lr: the latest iteration line's where one gives it, else
    the latest DeepSpeed step line's; the same whichever kind's batch comes first
    (events of several files may reach the store kind by kind)."""
    from tuimon.parsers.events import Iteration, Step
    steps = [Step(file="f", line=i, step=i, lr=0.1 * i) for i in (1, 3, 5)]
    bare = [Iteration(file="f", line=i, iteration=i) for i in (2, 4)]
    with_lr = [Iteration(file="f", line=i, iteration=i, lr=0.01 * i) for i in (2, 4)]
    for iterations, expected in ((bare, 0.5), (with_lr, 0.04)):
        for order in (steps + iterations, iterations + steps, sorted(steps + iterations, key=lambda e: e.line)):
            store = JobStore()
            store.add(order)
            (job,) = store.jobs.values()
            assert job.last_lr == pytest.approx(expected)


def test_last_loss_of_steps_is_the_last_one_logged():
    """DeepSpeed's step lines carry no loss: a run of them shows none, not nan (a
    diverged run's nan, logged, still shows)."""
    from tuimon.parsers.events import Step
    store = JobStore()
    store.add([Step(file="f", line=1, step=1, loss=2.5), Step(file="f", line=2, step=2, lr=0.1)])
    (job,) = store.jobs.values()
    assert summarize(job).as_dict()["loss_last"] == 2.5
    store.add([Step(file="f", line=3, step=3, loss=float("nan")), Step(file="f", line=4, step=4)])
    assert summarize(job).as_dict()["loss_last"] == "nan"
    store = JobStore()
    store.add([Step(file="g", line=1, step=1, lr=0.1)])
    assert summarize(next(iter(store.jobs.values()))).loss_last is None


def _summary_of_text(tmp_path, name: str, text: str) -> dict:
    path = tmp_path / name
    path.write_text(text)
    return summary_of(path)


_ITERATIONS = "".join(
    f" iteration {i:8d}/     100 | consumed samples: {i * 8:10d} | elapsed time per iteration (ms): 1000.{i} | "
    f"learning rate: 1.000E-04 | global batch size:     8 | lm loss: 2.50000{i}E+00 | loss scale: 1.0 | "
    f"number of skipped iterations:   0 | number of nan iterations:   0 |\n" for i in range(1, 6))


def test_a_task_exit_status_nobody_explains_fails_the_job(tmp_path):
    """srun's report of a task's non-zero exit, with its error in another stream:
    the job failed (killed) at that line.  Training logged after it (a step of the
    script that was retried, say) means it did not end the job; exit code 0 never fails it."""
    s = _summary_of_text(tmp_path, "exit-1.out", _ITERATIONS + "srun: error: nid001: task 3: Exited with exit code 1\n")
    assert s["status"] == "failed"
    assert s["failure"]["kind"] == "killed" and s["failure"]["line"] == 6
    assert "exit code 1" in s["failure"]["message"]
    s = _summary_of_text(tmp_path, "exit-then-more.out",
                         "srun: error: nid001: task 3: Exited with exit code 1\n" + _ITERATIONS)
    assert s["status"] == "training" and s["failure"] is None
    s = _summary_of_text(tmp_path, "exit-0.out", _ITERATIONS + "srun: error: nid001: task 3: Exited with exit code 0\n")
    assert s["status"] == "training"


def test_a_worker_torchrun_lost_to_a_signal_fails_the_job(tmp_path):
    text = _ITERATIONS + ("ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 3 "
                          "(pid: 4242) of binary: /usr/bin/python\n")
    s = _summary_of_text(tmp_path, "sigkill.out", text)
    assert s["status"] == "failed" and s["failure"]["kind"] == "killed"
    assert s["failure"]["message"] == "a task was killed by signal 9" and s["failure"]["line"] == 6


def test_a_traceback_is_named_before_the_exit_status(tmp_path):
    text = (_ITERATIONS + "Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n"
            "ValueError: bad batch\nsrun: error: nid001: task 0: Exited with exit code 1\n")
    s = _summary_of_text(tmp_path, "tb.out", text)
    assert s["failure"]["kind"] == "traceback" and s["failure"]["message"] == "ValueError: bad batch"


def test_oneccl_errors_fail_the_job_as_collective_errors(tmp_path):
    text = _ITERATIONS + "2024:05:01-10:00:00:(12345) |CCL_ERROR| atl_ofi.cpp:1234 atl_ofi_init: fi_getinfo error\n"
    s = _summary_of_text(tmp_path, "ccl.out", text)
    assert s["status"] == "failed" and s["failure"]["kind"] == "nccl" and s["failure"]["line"] == 6


def test_nemo2_runs_of_several_epochs_count_steps_through_the_run(tmp_path):
    """NeMo 2 numbers its lines within the epoch ("Training epoch 1, iteration 5/49 |
    ... | global_step: 55"): the run's progress is its global step, and it is not
    done at the end of its first epoch."""
    lines, step = [], 0
    for epoch in range(2):
        for n in range(50):
            lines.append(f"Training epoch {epoch}, iteration {n}/49 | lr: 1e-05 | global_batch_size: 8 | "
                         f"global_step: {step} | reduced_train_loss: {2 - step / 100:.3f} | "
                         f"train_step_timing in s: 0.5 | consumed_samples: {8 * (step + 1)}\n")
            step += 1
    s = _summary_of_text(tmp_path, "nemo2.log", "".join(lines[:75]))
    assert s["framework"] == "nemo" and s["status"] == "training"
    assert s["last_iteration"] == 74 and s["train_iters"] == 99 and s["iterations_seen"] == 75
    s = _summary_of_text(tmp_path, "nemo2-done.log", "".join(lines))
    assert s["status"] == "finished" and s["last_iteration"] == 99


@pytest.mark.parametrize("frameworks,expected", [
    (["megatron-lm", "deepspeed", "zero-offload"], "zero-offload"),
    (["deepspeed", "zero-infinity"], "zero-infinity"),
    (["megatron-lm", "l2l"], "l2l"),
    (["hf-trainer", "deepspeed", "zero-offload"], "hf-trainer"),
    (["megatron-lm", "deepspeed"], "megatron-deepspeed"),
    (["megatron-lm", "hf-trainer"], "hf-trainer"),
    (["stronghold", "megatron-lm"], "stronghold"),
])
def test_offloading_methods_name_the_run(frameworks, expected):
    """Runs are compared by method (seed 004's table: Megatron-LM, L2L, ZeRO-Offload,
    ZeRO-Infinity, STRONGHOLD): an offloading method names a Megatron or DeepSpeed
    run, while a trainer that drives the run (Hugging Face's) keeps its name."""
    from tuimon.parsers.events import RunConfig
    store = JobStore()
    store.add([RunConfig(file="f.log", line=i + 1, framework=name) for i, name in enumerate(frameworks)])
    assert summarize(next(iter(store.jobs.values()))).framework == expected


def test_the_first_step_completes_after_training_starts_plus_its_time(tmp_path):
    """Startup runs to the end of the first training step.  A stamp before training
    starts (DeepSpeed's step=0 at engine set-up, a launcher line) is no step's end: the
    first step ends no earlier than Megatron's training start plus its step time."""
    path = tmp_path / "thetagpu-1.log"
    path.write_text(
        "Job started at: 2023-07-16-165910 on thetagpu07\n"
        "[2023-07-16 17:00:00,000] [INFO] [launch.py:151:main] nnodes=1, num_local_procs=8, node_rank=0\n"
        "[2023-07-16 17:18:34,142] [INFO] [logging.py:96:log_dist] [Rank 0] step=0, skipped=0, lr=[0.0, 0.0], "
        "mom=[(0.9, 0.999), (0.9, 0.999)]\n"
        "[before the start of training step] datetime: 2023-07-16 17:19:23 \n"
        " iteration        1/       5 | consumed samples:            1 | elapsed time per iteration (ms): 620176.1 | "
        "learning rate: 4.687E-08 | global batch size:     1 | lm loss: 1.100000E+01 | loss scale: 1.0 | "
        "number of skipped iterations:   0 | number of nan iterations:   0 |\n")
    s = summary_of(path)
    # 16:59:10 -> 17:19:23 + 620.2 s
    assert s["startup_s"] == pytest.approx(20 * 60 + 13 + 620.2, abs=0.1)
    assert [p["name"] for p in s["startup"]][-2:] == ["training-start", "first-step"]


@pytest.mark.parametrize("chunk", [1 << 20, 7])
def test_the_records_after_an_evaluation_are_found_by_file_and_line(chunk, monkeypatch):
    """The points a job puts aside (the first record after each evaluation pass) are those of its
    (file, line) pairs, whether the series' points come from one file or several whose line
    numbers meet, whether a pair's file holds no point of the series, and for lines past 2^31;
    looked up a chunk of points at a time (a chunk of 7: the lookups cross chunks)."""
    import random
    from types import SimpleNamespace

    import numpy as np

    from tuimon.figures import summary
    from tuimon.figures.summary import _aside
    from tuimon.store.series import Series

    monkeypatch.setattr(summary, "_ASIDE_CHUNK", chunk)
    rng = random.Random(7)
    for case in range(60):
        files = rng.choice([["a"], ["a", "b"], ["b", "a", "c"]])
        series = Series()
        points = []
        for k in range(rng.randint(1, 300)):
            file_id = rng.randrange(len(files))
            line = rng.choice([rng.randint(1, 400), rng.randint(1, 400), 4_000_000_000 + rng.randint(0, 3)])
            series.append(k, None, file_id=file_id, line=line)
            points.append((files[file_id], line))
        after = {rng.choice(points) for _ in range(rng.randint(0, 6))}
        after |= {(rng.choice(["a", "b", "zz"]), rng.randint(1, 400)) for _ in range(rng.randint(0, 4))}
        job = SimpleNamespace(after_eval=after, file_index={name: k for k, name in enumerate(files)})
        got = _aside(job, series)
        assert got.dtype == bool and got.tolist() == [point in after for point in points], case
    one_file = Series()
    for k in range(1, 6):
        one_file.append(k, None, file_id=1, line=10 * k)
    job = SimpleNamespace(after_eval={("a", 20), ("b", 30)}, file_index={"a": 0, "b": 1})
    assert _aside(job, one_file).tolist() == [False, False, True, False, False]  # (a's line 20 is not b's)
    assert not _aside(SimpleNamespace(after_eval=set(), file_index={}), Series()).size
    assert np.array_equal(_aside(SimpleNamespace(after_eval={("a", 5)}, file_index={"a": 0}), Series()), [])
