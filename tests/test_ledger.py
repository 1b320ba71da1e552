"""The time ledger (figures.ledger): where a job's wall-clock time went, across its runs.

Logs are written here line by line from the frameworks' own print statements (Megatron's iteration
record, its save timer and ``successfully saved``, its ``validation loss at iteration``, Slurm's
cancellation, Megatron's ``loading checkpoint from ... at iteration N``), so every bound is known
by hand; corpus jobs are checked against figures read off their lines."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from conftest import shared_or_skip
from tuimon.figures.ledger import PARTS

T0 = datetime(2024, 1, 1, 10, 0, 0, tzinfo=timezone.utc)


def _stamp(s: float) -> str:
    return (T0 + timedelta(seconds=s)).strftime("%Y-%m-%d %H:%M:%S")


def _start(s: float) -> str:  # a job script's `echo "START TIME: $(date)"`
    return f"START TIME: {(T0 + timedelta(seconds=s)).strftime('%a %b %d %H:%M:%S UTC %Y')}"


def _iteration(i: int, s: float, total: int = 100) -> str:
    # Megatron-LM's training_log, with the date its newer versions put first
    return (f" [{_stamp(s)}] iteration {i:8d}/{total:8d} | consumed samples: {i * 8:12d} | elapsed time per "
            f"iteration (ms): 1000.0 | learning rate: 1.0E-04 | global batch size:     8 | lm loss: 2.0E+00 | "
            f"number of skipped iterations:   0 | number of nan iterations:   0 |")


def _first_run(lines: list[str], reason: str = "PREEMPTION") -> float:
    """Run 1: starts at 0, first step at 60 s, 1 s steps logged every 10; a 5 s save after 20 (stated by
    its timer), an 8 s evaluation after 30, 300 s without progress between 40 and 50, cancelled 5 s after
    iteration 60.  Returns when it ends."""
    lines += [_start(0), _iteration(10, 60), _iteration(20, 70),
              "saving checkpoint at iteration      20 to /ckpt/gpt",
              "  successfully saved checkpoint at iteration      20 to /ckpt/gpt",
              "(min, max) time across ranks (ms):",
              "    save-checkpoint ................................: (5000.00, 5000.00)",
              _iteration(30, 85),
              "-" * 60, " validation loss at iteration 30 | lm loss value: 1.900000E+00 | lm loss PPL: 6.685894E+00 |",
              "-" * 60,
              _iteration(40, 103), _iteration(50, 413), _iteration(60, 423),
              f"slurmstepd: error: *** JOB 4242 ON nid001 CANCELLED AT {(T0 + timedelta(seconds=428)).strftime('%Y-%m-%dT%H:%M:%S')} "
              f"DUE TO {reason} ***"]
    return 428.0


def _resumed_run(lines: list[str], start: float, total: int = 100) -> float:
    """A run that goes on from the checkpoint of iteration 20: first step (30) 40 s after its start,
    then 10 s a logged interval to 100."""
    lines += [_start(start), " loading checkpoint from /ckpt/gpt at iteration 20",
              "  successfully loaded checkpoint from /ckpt/gpt [ t 0/1, p 0/1 ] at iteration 20"]
    t = start + 40
    lines.append(_iteration(30, t, total))
    for i in range(40, 101, 10):
        t += 10
        lines.append(_iteration(i, t, total))
    return t


def _summary(*dirs: Path) -> list[dict]:
    out = subprocess.run([sys.executable, "-m", "tuimon", "summary", "--no-cache", "--format", "json", *map(str, dirs)],
                         capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _the_ledger(rows: list[dict]) -> dict:
    ledgers = {json.dumps(r["ledger"], sort_keys=True) for r in rows}
    assert len(ledgers) == 1, "every run of one job carries that job's one ledger"
    return json.loads(ledgers.pop())


# slurmstepd's own words as it ends an attempt (src/slurmd/slurmstepd/req.c): a requeue, a preemption
@pytest.mark.parametrize("reason", ["JOB REQUEUE", "PREEMPTION"])
def test_a_requeued_job_in_one_file(tmp_path, reason):
    lines: list[str] = []
    end = _first_run(lines, reason)
    last = _resumed_run(lines, end + 600)  # requeued into the same output, 600 s in the queue
    (tmp_path / "train-4242.out").write_text("\n".join(lines) + "\n")
    rows = _summary(tmp_path)
    assert [r["job"] for r in rows] == ["train-4242", "train-4242#2"]
    assert [r["status"] for r in rows] == ["failed", "finished"]
    ledger = _the_ledger(rows)
    assert ledger["runs"] == ["train-4242", "train-4242#2"]
    # by hand: run 1 startup 60, training 5 intervals x 10 s, the save 5, the evaluation 8 (18 - 10), the stall
    # 300 (310 - 10), teardown 5 (iteration 60 to the cancellation); 600 between; run 2 startup 40, its 7
    # intervals of 10 s, of which 30..60 (3) redo what run 1 had reached (it went on from 20)
    assert ledger["seconds"] == {"startup": 100.0, "training": 90.0, "checkpoint": 5.0, "eval": 8.0, "stall": 300.0,
                                 "redone": 30.0, "teardown": 5.0, "gap": 600.0}
    assert ledger["whole_s"] == last - 0 == 1138.0
    assert sum(ledger["seconds"].values()) == pytest.approx(ledger["whole_s"])
    assert ledger["goodput"] == round(90 / 1138, 4)
    assert ledger["redone_iterations"] == 40  # 21..60
    assert rows[1]["run_ledger"]["resumed_from"] == 20
    assert ledger["gpu_hours"]["training"] is None  # no world size in this log: GPU-hours unknown, never guessed
    # the bar: the parts in time order, the second run marked where it starts
    parts = [p for p, _, _ in ledger["segments"]]
    assert parts[:2] == ["startup", "training"] and "gap" in parts and "redone" in parts
    assert ledger["run_starts"] == [1028.0]


def test_a_finished_run_then_another_redoes_nothing(tmp_path):
    """A benchmark script running the trainer twice: the second run repeats iterations, redoes no work."""
    lines = [_start(0)] + [_iteration(i, 50 + i) for i in range(10, 101, 10)]
    lines += [_start(200)] + [_iteration(i, 250 + i) for i in range(10, 101, 10)]
    (tmp_path / "bench.log").write_text("\n".join(lines) + "\n")
    ledger = _the_ledger(_summary(tmp_path))
    assert ledger["seconds"]["redone"] == 0.0 and ledger["redone_iterations"] == 0
    assert ledger["seconds"]["gap"] == 200 - 150  # run 1's last stamp at 150, run 2 starts at 200
    assert ledger["seconds"]["training"] == 2 * 90.0


def test_a_resubmission_under_a_new_job_id_is_the_same_job(tmp_path):
    first: list[str] = []
    end = _first_run(first)
    second: list[str] = []
    _resumed_run(second, end + 3600)
    (tmp_path / "train-100001.out").write_text("\n".join(first) + "\n")
    (tmp_path / "train-100002.out").write_text("\n".join(second) + "\n")
    (tmp_path / "other-100003.out").write_text("\n".join(_first_run_of_other()) + "\n")
    rows = _summary(tmp_path)
    by_job = {r["job"]: r["ledger"] for r in rows}
    assert by_job["train-100001"] == by_job["train-100002"]
    ledger = by_job["train-100001"]
    assert ledger["runs"] == ["train-100001", "train-100002"] and ledger["seconds"]["gap"] == 3600.0
    assert ledger["seconds"]["redone"] == 30.0
    assert by_job["other-100003"]["runs"] == ["other-100003"]  # another name: never chained by a job id alone


def _first_run_of_other() -> list[str]:
    return [_start(0)] + [_iteration(i, 30 + i) for i in range(10, 51, 10)]


def test_a_sweep_of_one_name_is_not_chained_without_a_resume(tmp_path):
    """Two jobs of one name, the later starting afresh (no checkpoint loaded): two ledgers."""
    for job_id, offset in (("200001", 0), ("200002", 5000)):
        lines = [_start(offset)] + [_iteration(i, offset + 30 + i) for i in range(10, 51, 10)]
        (tmp_path / f"sweep-{job_id}.out").write_text("\n".join(lines) + "\n")
    rows = _summary(tmp_path)
    assert [r["ledger"]["runs"] for r in rows] == [["sweep-200001"], ["sweep-200002"]]


def test_without_stamps_the_parts_are_unknown_and_say_why(tmp_path):
    lines = [" iteration {:8d}/     100 | elapsed time per iteration (ms): 1000.0 | lm loss: 2.0E+00 |".format(i)
             for i in range(10, 101, 10)]
    (tmp_path / "plain.log").write_text("\n".join(lines) + "\n")
    (row,) = _summary(tmp_path)
    ledger = row["ledger"]
    assert ledger["goodput"] is None and ledger["whole_s"] is None and ledger["seconds"]["training"] is None
    assert any("no step has a time stamp" in n for n in ledger["notes"])


def test_stamps_carried_from_earlier_lines_time_nothing(tmp_path):
    """Step lines without a stamp of their own after one stamped line: the engine gives them that line's
    stamp; their span (0 s for 90 iterations of 1 s) says so, and the parts are unknown, not 0 s of training
    and a teardown holding the run."""
    lines = [_start(0), _iteration(10, 60)] + [
        " iteration {:8d}/     100 | elapsed time per iteration (ms): 1000.0 | lm loss: 2.0E+00 |".format(i)
        for i in range(20, 101, 10)] + [f"[{_stamp(400)}] done"]
    (tmp_path / "carried.log").write_text("\n".join(lines) + "\n")
    (row,) = _summary(tmp_path)
    ledger = row["ledger"]
    assert ledger["seconds"]["training"] is None and ledger["seconds"]["teardown"] is None
    assert ledger["goodput"] is None


def test_ledger_parts_are_the_documented_ones():
    assert PARTS == ("startup", "training", "checkpoint", "eval", "stall", "redone", "teardown", "gap")


def test_corpus_resumed_torchtitan_run():
    """qiu-kimi-436m-resume-killed: torchtitan going on from step-12500 (line 99), its first step 13000's
    record... its save stated as 11.46 s (line 444), its validation passes, killed mid-run."""
    log = shared_or_skip("corpus/torchtitan/qiu-kimi-436m-resume-killed.log")
    (row,) = _summary(log)
    run = row["run_ledger"]
    assert run["resumed_from"] == 12500
    assert run["seconds"]["checkpoint"] == pytest.approx(11.46, abs=0.01)
    ledger = row["ledger"]
    assert ledger["seconds"]["eval"] > 0 and ledger["goodput"] is not None
    assert sum(ledger["seconds"].values()) == pytest.approx(ledger["whole_s"], abs=0.01)
    # its start: torchrun's first glog line (00:18:33.527) to its last stamp (06:42:44,283 + the lines after)
    assert ledger["start"] == pytest.approx(datetime(2026, 4, 30, 0, 18, 33, 527000, tzinfo=timezone.utc).timestamp(),
                                            abs=0.1)  # (the startup figure is to 0.1 s)


def test_corpus_repeated_benchmark_runs_redo_nothing():
    """thetagpu-cobalt-10142816: a Cobalt job running Megatron-DeepSpeed three times, 5 iterations each,
    each finished: three runs in one ledger, no work redone, their startups summed."""
    log = shared_or_skip("corpus/megatron-deepspeed/thetagpu-cobalt-10142816.log")
    rows = _summary(log)
    ledger = _the_ledger(rows)
    assert len(ledger["runs"]) == 3 and all(r["status"] == "finished" for r in rows)
    assert ledger["seconds"]["redone"] == 0.0
    assert ledger["seconds"]["startup"] == pytest.approx(sum(r["startup_s"] for r in rows), abs=0.01)
    assert sum(ledger["seconds"].values()) == pytest.approx(ledger["whole_s"], abs=0.01)
    assert ledger["gpu_hours"]["startup"] == pytest.approx(ledger["seconds"]["startup"] * 32 / 3600, abs=0.002)


def test_prometheus_serves_the_ledger_once_a_job(tmp_path):
    from tests.test_prometheus import Serve

    lines: list[str] = []
    _resumed_run(lines, _first_run(lines) + 600)
    (tmp_path / "train-4242.out").write_text("\n".join(lines) + "\n")
    serve = Serve(str(tmp_path))
    try:
        fams = serve.families(lambda f: "tuimon_job_goodput_ratio" in f and f["tuimon_job_goodput_ratio"].samples)
        (sample,) = fams["tuimon_job_goodput_ratio"].samples  # one job: on its latest run's row only
        assert sample.labels["job"] == "train-4242#2" and sample.value == pytest.approx(90 / 1138, abs=1e-4)
        parts = {s.labels["part"]: s.value for s in fams["tuimon_job_ledger_seconds"].samples}
        assert parts == {"startup": 100.0, "training": 90.0, "checkpoint": 5.0, "eval": 8.0, "stall": 300.0,
                         "redone": 30.0, "teardown": 5.0, "gap": 600.0}
        assert "tuimon_job_ledger_gpu_seconds" not in fams or not fams["tuimon_job_ledger_gpu_seconds"].samples
    finally:
        serve.close()


def test_alerts_on_goodput_and_work_redone(tmp_path):
    """`tuimon alerts` judges the ledger of a job's runs together: goodput 7.9 % (90 s of 1,138) is under a
    10 % line once the span passes 0.3 h; 30 s redone on 4,000 GPUs (world size stated) is 33.3 GPU-h."""
    lines: list[str] = []
    _resumed_run(lines, _first_run(lines) + 600)
    lines.insert(1, "using world size: 4000, data-parallel size: 4000, tensor-model-parallel size: 1, "
                    "pipeline-model-parallel size: 1 ")
    (tmp_path / "train-4242.out").write_text("\n".join(lines) + "\n")

    def alerts(*options: str) -> list[dict]:
        out = subprocess.run([sys.executable, "-m", "tuimon", "alerts", str(tmp_path), "--format", "json",
                              "--alert", "failed=off", *options], capture_output=True, text=True, timeout=120)
        assert out.returncode in (0, 1), out.stderr
        return json.loads(out.stdout)

    got = {a["kind"]: a for a in alerts("--alert", "goodput.below=0.1", "--alert", "goodput.min_h=0.3",
                                        "--alert", "redone.gpu_h=30")}
    assert got["goodput"]["job"] == "train-4242#2" and "goodput 8% under 10%" in got["goodput"]["message"]
    assert "stalls 0.08 h" in got["goodput"]["message"]
    assert "33.3 GPU-h" in got["redone"]["message"] and "40 iterations" in got["redone"]["message"]
    # the lines not crossed: a span under min_h, goodput above the line, redone under its GPU-hours
    quiet = {a["kind"] for a in alerts("--alert", "goodput.below=0.05", "--alert", "redone.gpu_h=40")}
    assert not {"goodput", "redone"} & quiet
    assert "goodput" not in {a["kind"] for a in alerts("--alert", "goodput.below=0.1", "--alert", "goodput.min_h=1")}


async def test_the_job_screen_draws_the_ledger(tmp_path):
    """Pilot: the job screen's ledger panel: goodput in its border, the bar with run 2's start marked, the
    parts' shares; the same whichever run of the job is opened."""
    from tests.conftest import APP_SIZE, loaded_session, until
    from tuimon.ui.app import TuimonApp
    from tuimon.ui.job import JobScreen
    from tuimon.ui.panels import LedgerPanel

    lines: list[str] = []
    _resumed_run(lines, _first_run(lines) + 600)
    (tmp_path / "train-4242.out").write_text("\n".join(lines) + "\n")
    app = TuimonApp(loaded_session([tmp_path]))
    async with app.run_test(size=APP_SIZE) as pilot:
        await until(pilot, lambda: app.screen.query("#jobs") and app.screen.query_one("#jobs").row_count == 2)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, JobScreen) and app.screen.query_one(LedgerPanel).detail)
        panel = app.screen.query_one(LedgerPanel)
        await until(pilot, lambda: "goodput" in str(panel.border_title))
        assert str(panel.border_title) == "Time ledger: goodput 8% of 19m, 2 runs, 30s redone"
        bar, parts = _panel_text(panel)
        assert bar.count("┃") == 1 and bar.index("┃") == int(1028 / 1138 * len(bar))  # run 2 starts at 1028 s
        assert "·" in bar and "▒" in bar and "░" in bar  # the gap, the save, the evaluation drawn
        assert parts.startswith("· between runs 53%") and "stalls 26%" in parts and "redone 3%" in parts


def _panel_text(panel) -> tuple[str, str]:
    text = panel.build(panel.detail, panel.content_size.width)
    bar, parts = text.plain.split("\n")[:2]
    return bar, parts


def _titan_step(step: int, s: float) -> str:
    # torchtitan's metrics line (components/metrics.py), colours stripped as a file with NO_COLOR has them
    return (f"[rank0]:[titan] {_stamp(s)},000 - root - INFO - step: {step:2d}  loss:  3.1000  grad_norm:  0.0442  "
            f"memory: 26.01GiB(82.96%)  tps: 3,226  tflops: 20.02  mfu: 6.42%")


def _titan_launch(s: float) -> list[str]:
    glog = (T0 + timedelta(seconds=s)).strftime("W%m%d %H:%M:%S.000000")
    return [f"{glog} 429342 site-packages/torch/distributed/run.py:851] ",
            f"{glog} 429342 site-packages/torch/distributed/run.py:851] *****************************************"]


def test_torchtitan_restart_from_its_checkpoint(tmp_path):
    """A torchtitan job killed after step 60 and requeued into the same file: it loads step-40 (its
    checkpointer's own line) and trains 41..100 again from there: 20 iterations redone, 10 s of them
    timed (50 -> 60: its first logged step, 50, ends its startup)."""
    lines = _titan_launch(0) + [f"[rank0]:[titan] {_stamp(20)},000 - root - INFO - Training starts at step 1"]
    lines += [_titan_step(i, 30 + i) for i in range(10, 61, 10)]
    lines += ["Killed"] + _titan_launch(500)
    lines += [f"[rank0]:[titan] {_stamp(520)},000 - root - INFO - Loading the checkpoint from "
              "./outputs/checkpoint/step-40.",
              f"[rank0]:[titan] {_stamp(522)},000 - root - INFO - Finished loading the checkpoint in 2.00 seconds.",
              f"[rank0]:[titan] {_stamp(522)},000 - root - INFO - Training starts at step 41"]
    lines += [_titan_step(i, 520 + i) for i in range(50, 101, 10)]
    (tmp_path / "titan.log").write_text("\n".join(lines) + "\n")
    rows = _summary(tmp_path)
    assert [r["job"] for r in rows] == ["titan", "titan#2"]
    assert rows[1]["run_ledger"]["resumed_from"] == 40
    ledger = _the_ledger(rows)
    assert ledger["redone_iterations"] == 20
    assert ledger["seconds"]["redone"] == pytest.approx(10.0)
    assert ledger["seconds"]["startup"] == pytest.approx(40.0 + 70.0)  # 0 -> step 10 at 40; 500 -> step 50 at 570
    assert ledger["seconds"]["training"] == pytest.approx(50.0 + 50.0 - 10.0)
    assert ledger["seconds"]["gap"] == pytest.approx(500 - 90)


def test_deepspeed_and_trainer_resume_lines_start_and_mark_a_run(tmp_path):
    """DeepSpeed's checkpoint engine loading global_step20 after the run reached step 30: a new run, going
    on from 20 (10 steps redone); its step lines state no step time, so the time parts are unknown."""
    def step(n: int, s: float) -> str:
        return (f"[{_stamp(s)},000] [INFO] [logging.py:128:log_dist] [Rank 0] step={n}, skipped=0, "
                f"lr=[5e-05, 5e-05], mom=[(0.9, 0.95), (0.9, 0.95)]")
    lines = [step(i, 10 * i) for i in range(10, 31, 10)]
    lines += [f"[{_stamp(900)},000] [INFO] [torch_checkpoint_engine.py:27:load] [Torch] Loading checkpoint from "
              "/ckpt/global_step20/mp_rank_00_model_states.pt...", step(30, 1000), step(40, 1100)]
    (tmp_path / "ds.log").write_text("\n".join(lines) + "\n")
    rows = _summary(tmp_path)
    assert [r["job"] for r in rows] == ["ds", "ds#2"]
    assert rows[1]["run_ledger"]["resumed_from"] == 20
    ledger = _the_ledger(rows)
    assert ledger["redone_iterations"] == 10
    assert ledger["goodput"] is None and ledger["seconds"]["training"] is None


def test_corpus_saves_are_their_stated_times():
    """elena-1861140: Megatron's `save-checkpoint` timer states each save (17925.59 ms at 50, 1063.41 at
    100, ...): the ledger's checkpoint part is their sum where each fits its interval's time past its steps."""
    log = shared_or_skip("corpus/megatron-lm/elena-1861140.out.log")
    # the (min, max) across ranks: a save takes its slowest rank's time
    saves = [float(m) for m in re.findall(r"save-checkpoint[ .]*:\s*\([\d.]+, ([\d.]+)\)", log.read_text(errors="replace"))]
    (row,) = _summary(log)
    stated = {c["iteration"]: c["save_ms"] for c in row["checkpoints"]}
    assert sorted(stated.values()) == sorted(set(stated.values()))
    assert row["run_ledger"]["seconds"]["checkpoint"] == pytest.approx(sum(stated.values()) / 1000.0, abs=0.05)
    assert sorted(stated.values()) == sorted(saves)


def test_the_bar_of_a_long_run_is_bounded_and_the_same_either_way():
    """A run of thousands of pieces keeps MAX_SEGMENTS even buckets, each its part of most time: the numpy
    bounding (a run's) gives what the plain one (a job's) gives on a random layout."""
    import random

    from tuimon.figures.ledger import MAX_SEGMENTS, add_segment, bounded
    from tuimon.figures.run_ledger import _bounded

    rng = random.Random(3)
    pieces: list[list] = []
    t = 0.0
    for _ in range(5000):
        d = rng.random() * 10
        add_segment(pieces, rng.choice(["training", "training", "stall", "eval", "checkpoint"]), t, t + d)
        t += d
    fast, plain = _bounded(pieces), bounded(pieces)
    assert fast == plain and len(fast) <= MAX_SEGMENTS
    assert fast[0][1] == 0.0 and fast[-1][2] == pytest.approx(t, abs=1e-3)


def test_a_kept_ledger_is_handed_back_until_a_run_changes(tmp_path):
    """The live view's rows are built every tick: a job's ledger is made again only when one of its runs'
    ledgers or statuses is another (the same object back, else a new one that reads the change)."""
    from dataclasses import replace

    from tuimon.figures.ledger import RunPiece, ledgers
    from tuimon.figures.record import from_dict

    lines: list[str] = []
    _resumed_run(lines, _first_run(lines) + 600)
    (tmp_path / "train-4242.out").write_text("\n".join(lines) + "\n")
    rows = [from_dict(r) for r in _summary(tmp_path)]
    pieces = [RunPiece(r.job, r.files, r.status, r.run_ledger) for r in rows]
    cache: dict = {}
    first = ledgers(pieces, cache)
    assert first[0] is first[1] and first[0].seconds["redone"] == 30.0
    assert ledgers(pieces, cache)[0] is first[0]
    changed = ledgers([replace(pieces[0], status="finished"), pieces[1]], cache)
    assert changed[0] is not first[0] and changed[0].seconds["redone"] == 0.0  # after a finished run: none redone


def test_a_trainer_run_requeued_into_its_output_goes_on_from_its_checkpoint(tmp_path):
    """The real Hugging Face runs of tests/real/hf-trainer-resume (killed after checkpoint-120, its last step
    dict at 116; resumed from checkpoint-120) appended into one output, with the Trainer's own INFO lines as
    it resumes (trainer.py: `Continuing training from global step N`): two runs, the second going on from
    120 though the first logged no step past 116; no stamps on its steps, so no times are claimed."""
    real = Path(__file__).parent / "real" / "hf-trainer-resume"
    info = "".join(f"[INFO|trainer.py:2386] 2026-11-28 04:40:00,000 >>   {words}\n" for words in (
        "Continuing training from checkpoint, will skip to saved global_step", "Continuing training from epoch 0",
        "Continuing training from global step 120"))
    (tmp_path / "hf-requeued.log").write_text((real / "hf-resume-run1.log").read_text(errors="replace") + info
                                              + (real / "hf-resume-run2.log").read_text(errors="replace"))
    rows = _summary(tmp_path)
    assert [(r["job"], r["status"]) for r in rows] == [("hf-requeued", "failed"), ("hf-requeued#2", "finished")]
    assert [r["run_ledger"]["resumed_from"] for r in rows] == [None, 120]
    ledger = _the_ledger(rows)
    assert ledger["redone_iterations"] == 0  # the log shows the first run at 116: nothing it shows is redone
    assert ledger["goodput"] is None and any("no step has a time stamp" in n for n in ledger["notes"])


def test_loading_another_runs_weights_is_no_resume(tmp_path):
    """A fine-tune that loads a pretraining checkpoint (torchtitan's step-12500) and trains from step 1, twice
    in one file: two runs (the counter goes back), neither going on from 12500, nothing redone but what the
    second redoes of the first (which did not finish)."""
    lines = []
    for start in (0, 300):
        lines += _titan_launch(start)
        lines += [f"[rank0]:[titan] {_stamp(start + 5)},000 - root - INFO - Loading the checkpoint from "
                  "/runs/pretrain/checkpoint/step-12500.",
                  f"[rank0]:[titan] {_stamp(start + 7)},000 - root - INFO - Training starts at step 1"]
        lines += [_titan_step(i, start + 20 + i) for i in range(10, 41, 10)]
    (tmp_path / "sft.log").write_text("\n".join(lines) + "\n")
    rows = _summary(tmp_path)
    assert [r["job"] for r in rows] == ["sft", "sft#2"]
    assert [r["run_ledger"]["resumed_from"] for r in rows] == [None, None]
    assert all(any("another run's weights" in n for n in r["run_ledger"]["notes"]) for r in rows)
    assert _the_ledger(rows)["redone_iterations"] == 40  # the second run trained 1..40 again


def test_megatron_records_that_leave_out_their_saves_and_evaluations(tmp_path):
    """Megatron-LM stops its interval timer for a save and an evaluation: the record after them states its
    steps alone (1,069.8 ms after the save at 100, against a median near 850). Stamps, means and timers of a
    public GPT-2 124M run on one GPU (2025-04), 1 s stamps: the save is its timer's 3.41 s, each evaluation
    what its interval held past its steps' stated time, within the stamps' second of its `evaluate` timer."""
    rows = [(40, "23:41:37", 849.8), (50, "23:41:46", 904.5), (60, "23:41:57", 837.6), (70, "23:42:06", 840.3),
            (80, "23:42:14", 849.5), (90, "23:42:23", 832.5), (100, "23:42:31", 869.1), (110, "23:42:47", 1069.8),
            (120, "23:42:55", 774.3)]

    def record(i: int, hms: str, ms: float) -> str:
        return (f" [2025-04-13 {hms}] iteration {i:8d}/    1000 | consumed samples: {16 * i:12d} | elapsed time per "
                f"iteration (ms): {ms:.1f} | learning rate: 9.0E-05 | global batch size:    16 | lm loss: 7.0E+00 | "
                "loss scale: 4096.0 | number of skipped iterations:   0 | number of nan iterations:   0 |")

    def evaluation(i: int, ms: float) -> list[str]:
        return ["(min, max) time across ranks (ms):", f"    evaluate .......................................: "
                f"({ms:.2f}, {ms:.2f})", "-" * 60,
                f" validation loss at iteration {i} | lm loss value: 7.398865E+00 | lm loss PPL: 1.634128E+03 | ",
                "-" * 60]

    lines = ["[before the start of training step] datetime: 2025-04-13 23:41:00 "]
    for i, hms, ms in rows:
        lines.append(record(i, hms, ms))
        if i == 50:
            lines += evaluation(50, 3274.73)
        if i == 100:
            lines += evaluation(100, 2052.52) + [
                "saving checkpoint at iteration     100 to /root/workspace/checkpoint/GPT2 in torch_dist format",
                "  successfully saved checkpoint from iteration     100 to /root/workspace/checkpoint/GPT2 [ t 1/1, p 1/1 ]",
                "(min, max) time across ranks (ms):",
                "    save-checkpoint ................................: (3413.14, 3413.14)"]
    (tmp_path / "gpt2.log").write_text("\n".join(lines) + "\n")
    (row,) = _summary(tmp_path)
    seconds = row["run_ledger"]["seconds"]
    assert seconds["checkpoint"] == pytest.approx(3.41314)
    # by hand: 50 -> 60 holds 11 s, its steps state 10 x 837.6 ms: 2.624 s; 100 -> 110 holds 16 s, its steps
    # 10 x 1,069.8 ms and the save 3.413 s: 1.889 s
    assert seconds["eval"] == pytest.approx(2.624 + 1.88886, abs=1e-3)
    assert abs(2.624 - 3.27473) <= 1.0 and abs(1.88886 - 2.05252) <= 1.0
    assert seconds["stall"] == 0.0


def test_the_ledger_heading_shows_a_file_name_literally():
    """A run's note names its file; the panel's border title is read as markup when given a string: the
    heading is a Text of the name as it is (markup and control sequences shown, not run)."""
    from tuimon.figures.ledger import Ledger
    from tuimon.ui.render import ledger_heading

    name = "x: [bold red]boom[/] \x1b[2J"
    ledger = Ledger(name, [name], None, None, None, {}, {}, {}, None, None, [], [], [f"{name}: startup unknown"])
    heading = ledger_heading(ledger)
    assert "[bold red]boom[/]" in heading.plain and "\x1b" not in heading.plain and not heading.spans


def test_a_series_points_keep_each_logged_iteration_once_copied_only_where_some_go():
    """_points drops points without an iteration and an iteration's second line; where none goes, the
    columns themselves are handed on (no copy at the summary's peak), with the same values."""
    import numpy as np

    from tuimon.figures import run_ledger

    class Columns:
        wall_base = 1000.0

        def __init__(self, its, walls, elapsed):
            self.cols = {"iteration": np.array(its, dtype=np.int32), "wall": np.array(walls, dtype=np.float32),
                         "elapsed_ms": np.array(elapsed, dtype=np.float32)}

        def __len__(self):
            return len(self.cols["iteration"])

        def column(self, name):
            return self.cols[name]

    odd = Columns([1, -1, 2, 2, 3], [0.0, 0.5, 1.0, 1.5, 2.0], [10.0, 11.0, 12.0, 13.0, 14.0])
    its, walls, elapsed = run_ledger._points(odd)
    assert its.tolist() == [1, 2, 3] and walls.tolist() == [1000.0, 1001.0, 1002.0]
    assert elapsed.tolist() == [10.0, 12.0, 14.0]
    plain = Columns([1, 2, 3], [0.0, 1.0, 2.0], [10.0, 12.0, 14.0])
    its, walls, elapsed = run_ledger._points(plain)
    assert its is plain.cols["iteration"] and elapsed is plain.cols["elapsed_ms"]
    assert walls.tolist() == [1000.0, 1001.0, 1002.0]
