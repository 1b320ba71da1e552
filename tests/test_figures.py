"""The figures a researcher pastes (issue 27): startup from the job's own start, tokens/s,
runs within a file, ranks within a run, names, MFU's unit.  Logs are written from the
frameworks' own print statements (Megatron's print_datetime and training_log, DeepSpeed's
log_dist, job scripts' `date`), in the locales clusters run in."""
from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT, shared_or_skip
from tuimon.engine.ingest import parse_file
from tuimon.figures.summary import summarize
from tuimon.store.job_store import JobStore


def summaries(tmp_path, name: str, text: str) -> list[dict]:
    path = tmp_path / name
    path.write_text(text)
    store = JobStore()
    parse_file(path, path.name, sink=store.add)
    return [summarize(job).as_dict() for job in store.jobs.values()]


def one(tmp_path, name: str, text: str) -> dict:
    (row,) = summaries(tmp_path, name, text)
    return row


def megatron_iteration(i: int, total: int, ms: float, stamp: str = "", gbs: int = 8) -> str:
    head = f" [{stamp}]" if stamp else ""
    return (f"{head} iteration {i:8d}/{total:8d} | consumed samples: {i * gbs:12d} | elapsed time per iteration (ms): "
            f"{ms:.1f} | learning rate: 1.000000E-04 | global batch size: {gbs:5d} | lm loss: 2.500000E+00 | "
            f"loss scale: 1.0 | number of skipped iterations:   0 | number of nan iterations:   0 |\n")


MEGATRON_STARTUP = (
    "[after megatron is initialized] datetime: 2026-04-15 11:18:13.447169 \n"
    "[after model, optimizer, and learning rate scheduler are built] datetime: 2026-04-15 11:18:40.1 \n"
    "[after dataloaders are built] datetime: 2026-04-15 11:18:50.2 \n"
    "[before the start of training step] datetime: 2026-04-15 11:18:52.0 \n"
)


@pytest.mark.parametrize("start_line", [
    "START TIME: Wed Apr 15 11:16:53 CEST 2026",       # C locale, the elena job scripts
    "START TIME: mer. 15 avril 2026 11:16:53 CEST",    # fr_FR (Jean Zay)
    "Wed 15 Apr 11:16:53 CEST 2026",                   # en_GB `date` alone
    "Wed Apr 15 11:16:53 AM CEST 2026",                # en_US, 12-hour clock
    "START TIME: Mi 15. Apr 11:16:53 CEST 2026",       # de_DE
    "Job started at: 2026-04-15-111653 on nid001234",  # the ALCF scripts
    "Job start time: 2026-04-15 11:16:53",
])
def test_startup_runs_from_the_job_script_s_own_start_stamp(tmp_path, start_line):
    text = (start_line + "\nsome module load output\n" + MEGATRON_STARTUP
            + megatron_iteration(1, 100, 10000.0, "2026-04-15 11:19:02") + megatron_iteration(2, 100, 1000.0))
    row = one(tmp_path, "run-42.out", text)
    # 11:16:53 to the first step's end at 11:19:02: 129 s, however its locale writes the start
    assert row["startup_s"] == pytest.approx(129.0, abs=0.6), row["startup"]
    assert row["startup_note"] is None
    assert row["startup"][0] == {"name": "job-start", "offset_s": 0.0}
    assert row["startup"][-1]["name"] == "first-step"
    assert all(p["offset_s"] <= row["startup_s"] for p in row["startup"])  # no phase past the total


def test_a_12_hour_clock_afternoon_start(tmp_path):
    text = ("Tue Aug 18 11:53:33 PM CEST 2026\n" + "[after megatron is initialized] datetime: 2026-08-18 23:54:00 \n"
            + megatron_iteration(1, 10, 9000.0, "2026-08-19 00:00:33") + megatron_iteration(2, 10, 900.0))
    assert one(tmp_path, "pm.out", text)["startup_s"] == pytest.approx(420.0, abs=0.6)  # across midnight


@pytest.mark.parametrize("text,why", [
    # DeepSpeed's own step line is the first line: the log was cut from a running job
    ("[2024-03-07 15:27:02,646] [INFO] [timer.py:260:stop] epoch=0/micro_step=199/global_step=199, "
     "RunningAvgSamplesPerSec=58.73, CurrSamplesPerSec=61.35, MemAllocated=6.01GB, MaxMemAllocated=19.52GB\n"
     + "".join(megatron_iteration(i, 317892, 14287.5, f"2024-03-07 15:27:{2 + (i - 199) * 14:02d}")
               for i in range(199, 203)), "mid-run (at iteration 199)"),
    ("".join(megatron_iteration(i, 90000, 2000.0, f"2025-11-10 12:{i - 5000:02d}:00") for i in range(5010, 5050, 10)),
     "mid-run (at iteration 5010)"),
])
def test_a_log_that_begins_mid_run_has_startup_unknown_with_why(tmp_path, text, why):
    row = one(tmp_path, "tail.log", text)
    assert row["startup_s"] is None and row["startup"] == []
    assert why in row["startup_note"]


def test_a_restarted_job_that_logs_its_startup_has_a_startup(tmp_path):
    """Resumed from a checkpoint, but the log holds the restart: startup is the restart's."""
    text = ("[2025-11-10 09:40:00,000] [INFO] [config.py:684:__init__] Config mesh_device None world_size = 8\n"
            + "[after megatron is initialized] datetime: 2025-11-10 09:41:00 \n"
            + "".join(megatron_iteration(i, 90000, 2000.0, f"2025-11-10 09:{i - 5000 + 40:02d}:30")
                      for i in range(5010, 5050, 10)))
    row = one(tmp_path, "resume.log", text)
    assert row["startup_note"] is None and row["startup_s"] == pytest.approx(630.0, abs=0.1)  # 09:40:00 to 09:50:30


def test_a_date_line_with_more_after_it_is_no_job_start():
    """Cobalt's own log stamps its lines in UTC (``... +0000 (UTC) Command:``), the job's are local:
    such a line is another program's, not the job script's ``date``."""
    from tuimon.parsers.formats.launcher import FORMAT
    from tuimon.parsers.schema import format_from_dict
    fmt = format_from_dict(FORMAT)
    for line in ("Wed Jul 12 00:46:13 2023 +0000 (UTC) Command: '/usr/bin/ssh'", "Wed Jul 12 00:46:13 2023 +0000 (UTC) ",
                 "Mon at 12:00:00 the cluster reboots", "START TIME: unknown"):
        got = [f for entry in fmt.lines for f in entry.parse(line)]
        assert not any(f.get("name") == "job-start" and f.get("wall_time") for f in got), (line, got)
    assert any(f.get("wall_time") for entry in fmt.lines for f in entry.parse("Wed Apr 15 11:16:53 CEST 2026"))


def test_elena_startup_from_start_time():
    log = shared_or_skip("corpus/megatron-lm/elena-1861140.out.log")
    out = subprocess.run([sys.executable, "-m", "tuimon", "summary", "--format", "json", "--no-cache", str(log)],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    row = json.loads(out.stdout)[0]
    # START TIME: Wed Apr 15 11:16:53 ... the first iteration's line at 11:19:02 (grep), 129 s
    assert 128.0 <= row["startup_s"] <= 131.0
    longest = max(t["ms"] for t in row["startup_timers"] if t["name"].startswith("startup-"))
    assert longest / 1000.0 <= row["startup_s"]  # no listed phase longer than the total


MEGATRON_ARGS = """------------------------ arguments ------------------------
  bf16 ............................................ True
  fp16 ............................................ False
  global_batch_size ............................... 64
  hidden_size ..................................... 2048
  micro_batch_size ................................ 4
  num_attention_heads ............................. 16
  num_layers ...................................... 24
  padded_vocab_size ............................... 50304
  pipeline_model_parallel_size .................... 1
  recompute_granularity ........................... None
  seq_length ...................................... 2048
  tensor_model_parallel_size ...................... 2
  train_iters ..................................... 100
  world_size ...................................... 16
-------------------- end of arguments ---------------------
"""


def test_tokens_per_second_computed_where_the_log_prints_none(tmp_path):
    text = MEGATRON_ARGS + "".join(megatron_iteration(i, 100, 800.0 + (i % 3), gbs=64) for i in range(1, 12))
    row = one(tmp_path, "megatron.out", text)
    median_s = row["iter_time_ms"]["median"] / 1000.0
    assert row["tokens_per_sec"] == pytest.approx(64 * 2048 / median_s, rel=1e-6)
    assert row["tokens_per_gpu_per_sec"] == pytest.approx(64 * 2048 / median_s / 16, rel=1e-6)
    assert row["tokens_per_sec_source"] == "computed"
    assert row["precision"] == "bf16"  # "fp16 False" beside "bf16 True" is no fp32 run


def test_tokens_per_second_printed_is_kept_and_checked_against_computed(tmp_path):
    # Megatron-DeepSpeed prints tokens per GPU per second (tgs); here 40% above what batch x length gives
    lines = "".join(
        f" iteration {i:8d}/     100 | consumed samples: {i * 64:10d} | consumed tokens: {i * 64 * 2048:12d} | "
        f"elapsed time per iteration (ms): 800.0 | learning rate: 1.000E-04 | global batch size:    64 | "
        f"lm loss: 2.500000E+00 | loss scale: 1.0 | actual seqlen:  2048 | number of skipped iterations:   0 | "
        f"number of nan iterations:   0 | samples per second: 80.000 | tokens per gpu per second (tgs): "
        f"{1.4 * 64 * 2048 / 0.8 / 16:.3f} | TFLOPs: 50.00 |\n" for i in range(1, 12))
    row = one(tmp_path, "meg-ds.out", MEGATRON_ARGS + lines)
    computed = 64 * 2048 / 0.8
    assert row["tokens_per_gpu_per_sec"] == pytest.approx(1.4 * computed / 16, rel=1e-4)
    assert row["tokens_per_sec"] == pytest.approx(1.4 * computed, rel=1e-4)
    assert row["tokens_per_sec_computed"] == pytest.approx(computed, rel=1e-6)
    assert any("tokens/s differ by 40%" in c for c in row["checks"])


ZERO_OFFLOAD = """deepspeed --num_nodes 1 --num_gpus 1 pretrain_gpt2.py --model-parallel-size 1 --num-layers 32 --hidden-size 2048 --num-attention-heads 16 --seq-length 1024 --max-position-embeddings 1024 --batch-size 4 --train-iters 50 --checkpoint-activations
------------------------ arguments ------------------------
  batch_size ...................... 4
  checkpoint_activations .......... True
  fp16 ............................ False
  hidden_size ..................... 2048
  model_parallel_size ............. 1
  num_attention_heads ............. 16
  num_layers ...................... 32
  seq_length ...................... 1024
  world_size ...................... 1
---------------- end of arguments ----------------
[2022-07-02 05:00:42,820] [INFO] [config.py:1048:print]   fp16_enabled ................. False
"""


@pytest.mark.parametrize("batch", ["", "[2022-07-02 05:00:42,822] [INFO] [config.py:1048:print]   "
                                       "train_batch_size ............. 4\n"])
def test_megatron_1x_batch_size_and_fp16_off(tmp_path, batch):
    """sc22's ZeRO-Offload runs: Megatron 1.x's per-GPU ``batch_size`` (or DeepSpeed's
    train_batch_size) is the global batch on one GPU; fp16 off is an fp32 run; the log's own
    'Effective Tera Flops' disagreeing with the formula raises the check."""
    body = "".join(
        f" iteration {i:8d}/      50 | elapsed time per iteration (ms): {10740.0 + i:.1f} | learning rate: 1.0E-04 | "
        f"lm loss: 1.0E+01 | loss scale: 1.0 | number of skipped iterations:   0 | number of nan iterations:   0 |\n"
        f"Effective Tera Flops per GPU: 0.52 and total parameters 1.717 B\n" for i in range(10, 60, 10))
    row = one(tmp_path, "zero-offload.log", ZERO_OFFLOAD + batch + body)
    assert row["global_batch"] == 4 and row["precision"] == "fp32"
    size = row["params_billion"]
    median_s = row["iter_time_ms"]["median"] / 1000.0
    # the model's work (MFU's) is 6 x params x tokens; the GPUs', with the forward recomputed, 8 x
    assert row["tflops_per_gpu"]["computed"] == pytest.approx(size * 3 * 2 * 1024 * 4 / (median_s * 1e3), abs=0.01)
    assert row["tflops_per_gpu"]["hardware"] == pytest.approx(size * 4 * 2 * 1024 * 4 / (median_s * 1e3), abs=0.01)
    assert 5.1 < row["tflops_per_gpu"]["hardware"] < 5.4
    assert any("TFLOPs/GPU differ by" in c for c in row["checks"])
    mfu = summaries(tmp_path, "zero-offload.log", ZERO_OFFLOAD + batch + body)[0]
    assert mfu["precision"] == "fp32"


def test_zero_offload_corpus_figures():
    log = shared_or_skip("corpus/stronghold/sc22-zero-offload_l-32_hs-2048_bs-4_ws-4_2022-07-02.1656738007.log")
    out = subprocess.run([sys.executable, "-m", "tuimon", "summary", "--format", "json", "--no-cache", "--gpu",
                          "v100", str(log)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    row = json.loads(out.stdout)[0]
    assert row["tflops_per_gpu"]["hardware"] == pytest.approx(5.24, abs=0.01)  # recomputation counted
    assert row["tflops_per_gpu"]["computed"] == pytest.approx(5.24 * 3 / 4, abs=0.01)  # the model's work
    assert row["precision"] == "fp32" and "fp32" in row["gpu_peak_source"]
    assert row["mfu"] == pytest.approx(5.24 * 3 / 4 / row["gpu_peak_tflops"], abs=1e-3)
    assert row["hfu"] == pytest.approx(5.24 / row["gpu_peak_tflops"], abs=1e-3)


def _iters(first: int, last: int, total: int, ms: float = 1000.0, prefix: str = "") -> str:
    return "".join(prefix + megatron_iteration(i, total, ms) for i in range(first, last + 1))


def test_a_file_that_restarts_its_counter_gives_one_row_per_run(tmp_path):
    """A Slurm .out whose script runs a 2-iteration smoke test, then the real run."""
    text = MEGATRON_ARGS + _iters(1, 2, 2, 500.0) + MEGATRON_ARGS + _iters(1, 30, 18141, 900.0)
    rows = {r["job"]: r for r in summaries(tmp_path, "train-4242.out", text)}
    assert set(rows) == {"train-4242", "train-4242#2"}
    assert rows["train-4242"]["iterations_seen"] == 2 and rows["train-4242"]["train_iters"] == 2
    assert rows["train-4242#2"]["iterations_seen"] == 30 and rows["train-4242#2"]["train_iters"] == 18141
    assert rows["train-4242#2"]["iter_time_ms"]["median"] == pytest.approx(900.0)
    assert not any("differ" in c for r in rows.values() for c in r["checks"])


def test_a_requeued_job_resuming_from_a_checkpoint_is_a_second_run(tmp_path):
    text = _iters(1, 50, 100, 800.0) + "srun: error: task 0: Exited with exit code 1\n" + _iters(41, 100, 100, 820.0)
    rows = {r["job"]: r for r in summaries(tmp_path, "job-77777.out", text)}
    assert rows["job-77777"]["last_iteration"] == 50 and rows["job-77777#2"]["last_iteration"] == 100
    assert rows["job-77777#2"]["iterations_seen"] == 60


def test_a_new_sequence_length_after_training_is_a_new_run_but_a_repeated_block_is_not(tmp_path):
    longer = MEGATRON_ARGS.replace("2048\n", "4096\n", 1).replace("seq_length ...................................... 2048",
                                                                  "seq_length ...................................... 4096")
    text = MEGATRON_ARGS + MEGATRON_ARGS + _iters(1, 5, 100) + longer + _iters(6, 10, 100, 1500.0)
    rows = {r["job"]: r for r in summaries(tmp_path, "sweep.log", text)}
    assert set(rows) == {"sweep", "sweep#2"}
    assert rows["sweep"]["seq_length"] == 2048 and rows["sweep#2"]["seq_length"] == 4096


@pytest.mark.parametrize("prefix", ["{node}: ", "{rank}: ", ""])
def test_an_iteration_printed_by_several_ranks_counts_once(tmp_path, prefix):
    """pdsh-prefixed Megatron-DeepSpeed where three ranks each print the iteration line."""
    lines = []
    for i in range(1, 21):
        for rank, node in ((0, "192.168.0.1"), (4, "192.168.0.2"), (8, "192.168.0.3")):
            lines.append(prefix.format(node=node, rank=rank) + megatron_iteration(i, 20, 1000.0 + rank))
    row = one(tmp_path, "pdsh-123456.log", "".join(lines))
    assert row["iterations_seen"] == 20 and row["last_iteration"] == 20


def test_runs_survive_the_parse_cache(tmp_path):
    """A file's runs read again from the cache are the same rows."""
    text = MEGATRON_ARGS + _iters(1, 2, 2, 500.0) + MEGATRON_ARGS + _iters(1, 30, 18141, 900.0)
    log = tmp_path / "cached-5555.out"
    log.write_text(text)
    env_runs = []
    for _ in range(2):
        out = subprocess.run([sys.executable, "-m", "tuimon", "summary", "--format", "json", str(log)],
                             cwd=ROOT, capture_output=True, text=True, timeout=120)
        env_runs.append([(r["job"], r["iterations_seen"], r["train_iters"]) for r in json.loads(out.stdout)])
    assert env_runs[0] == env_runs[1] == [("cached-5555", 2, 2), ("cached-5555#2", 30, 18141)]


def test_thetagpu_runs_of_one_cobalt_job():
    log = shared_or_skip("corpus/megatron-deepspeed/thetagpu-cobalt-10143818.log")
    out = subprocess.run([sys.executable, "-m", "tuimon", "summary", "--format", "json", "--no-cache", str(log)],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    rows = json.loads(out.stdout)
    # grep "seq_length \." gives 131072, 262144 and 278528, one argument block each
    assert [(r["job"], r["seq_length"]) for r in rows] == [
        ("thetagpu-cobalt-10143818", 131072), ("thetagpu-cobalt-10143818#2", 262144),
        ("thetagpu-cobalt-10143818#3", 278528)]
    assert all(r["iterations_seen"] <= 5 for r in rows)


def test_cobalt_streams_join_their_job_from_another_directory(tmp_path):
    """Cobalt writes <id>.output, <id>.error and <id>.cobaltlog; kept apart in two folders, the
    scheduler's streams still join the job that has the same id."""
    from tuimon.engine.ingest import parse_file as parse
    (tmp_path / "runs").mkdir()
    (tmp_path / "scheduler").mkdir()
    out = tmp_path / "runs" / "thetagpu-cobalt-10143687.log"
    out.write_text(MEGATRON_ARGS + _iters(1, 3, 10))
    err = tmp_path / "scheduler" / "thetagpu-cobalt-10143687.error.log"
    err.write_text("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    log = tmp_path / "scheduler" / "thetagpu-cobalt-10143687.cobaltlog.log"
    log.write_text("Wed Jul 12 01:23:54 2023 +0000 (UTC) Info: task completed normally with an exit code of 1\n")
    other = tmp_path / "scheduler" / "unrelated-99999999.error.log"
    other.write_text("warning\n")
    store = JobStore()
    for path in (out, err, log, other):
        store.add_file(str(path))  # as the pool merges each file's store
        parse(path, str(path), sink=store.add)
    jobs = {j.name: sorted(p.rsplit("/", 1)[-1] for p in j.files) for j in store.jobs.values()}
    assert jobs == {"thetagpu-cobalt-10143687": ["thetagpu-cobalt-10143687.cobaltlog.log",
                                                 "thetagpu-cobalt-10143687.error.log", "thetagpu-cobalt-10143687.log"],
                    "unrelated-99999999": ["unrelated-99999999.error.log"]}
    assert summarize(store.jobs[next(k for k in store.jobs if "10143687" in k)]).status == "failed"


def test_the_rank_table_median_is_the_list_s(tmp_path):
    from tests.conftest import loaded_session
    (tmp_path / "warm-123456.out").write_text(_iters(1, 1, 30, 60000.0) + _iters(2, 30, 30, 1000.0))
    session = loaded_session([tmp_path])
    (row,) = session.snapshot().rows
    detail = session.job_detail(row.key)
    (rank,) = detail.ranks
    assert rank.median_ms == row.summary.iter_time_ms.median == pytest.approx(1000.0)


def test_the_failures_panel_lists_a_job_s_alerts():
    """A job with a stall alert and no failure: the panel says so, never "none"."""
    from tuimon.figures.alerts import Alert
    from tuimon.ui.render import failures_text

    alert = Alert("j", "stalled", None, 120, 0.0, "no line since 2026-11-26 10:00:00 after iteration 120", "f", 9)
    text = failures_text([], [alert], [], 10).plain
    assert "none" not in text and "stalled" in text and "after iteration 120" in text
    assert failures_text([], [], [], 10).plain == "none"
    failed = Alert("j", "failed", None, 3, 0.0, "oom: CUDA out of memory", "f", 9)
    text = failures_text([], [failed], [{"kind": "oom", "line": 9, "message": "CUDA out of memory"}], 10).plain
    assert text.count("CUDA out of memory") == 1  # a failure is said once


def test_runs_in_a_file_are_bounded(tmp_path):
    """A counter that only goes down (garbage, or a program counting down) would start a run
    every other line; past MAX_RUNS the last run takes the rest, and no line is lost."""
    from tuimon.store.job_store import MAX_RUNS
    lines = [megatron_iteration(i, 5000, 900.0) for i in range(1000, 0, -1)]
    rows = summaries(tmp_path, "countdown.log", "".join(lines))
    assert len(rows) == MAX_RUNS
    assert sum(r["iterations_seen"] for r in rows) == 1000


def test_an_eta_waits_until_it_means_something():
    from tuimon.figures.record import IterTime
    from tuimon.live.session import eta
    steady = IterTime(14287.5, 14287.5, 14287.5, 14287.5, 14287.5, 14287.5, 5)
    assert eta(317892, 1, steady) is None  # 1 of 317,892 at the pace of five points: not weeks of ETA
    assert eta(317892, 200, IterTime(14287.5, 14287.5, 14287.5, 14287.5, 14287.5, 14287.5, 3)) is None
    assert eta(1000, 20, steady) == pytest.approx(980 * 14.2875)


async def test_the_breakdown_panel_expands_and_scrolls(tmp_path):
    """An offloading run's job screen at 100x30: its offload rows and share in view; b fills the
    screen with the panel, the arrow keys and the wheel scroll the whole list, b and escape go back."""
    from tests.conftest import copy_fixture_logs, loaded_session, until
    from tuimon.ui.app import TuimonApp
    from tuimon.ui.job import JobScreen
    from tuimon.ui.panels import BreakdownPanel

    app = TuimonApp(loaded_session([copy_fixture_logs(tmp_path)]))
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: app.session.store.jobs)
        app.open_job(next(k for k in app.session.store.jobs if k.endswith("stronghold-run")))
        await until(pilot, lambda: isinstance(app.screen, JobScreen) and app.screen.query("#breakdown"))
        panel = app.screen.query_one("#breakdown", BreakdownPanel)
        await until(pilot, lambda: panel.detail is not None)
        await pilot.pause(0.2)
        shown = panel.build(panel.detail, panel.content_size.width).plain
        assert "offload" in shown and "offloading-" in shown, shown
        panel.focus()  # scrolled in place, by keys and by the wheel: the whole list, row by row
        await pilot.press("down", "down")
        assert panel.first_row == 2
        await pilot.press("up")
        assert panel.first_row == 1
        await pilot.pause(0.1)
        assert "…" not in panel.build(panel.detail, 60).plain.split("\n", 1)[0]  # no "rows hidden" note
        from textual import events
        panel.post_message(events.MouseScrollDown(panel, 2, 2, 0, 1, 0, False, False, False))  # the wheel
        await until(pilot, lambda: panel.first_row == 2)
        await pilot.press("b")  # the screen filled with it: every row
        await until(pilot, lambda: app.screen.maximized is panel)
        await pilot.pause(0.2)
        whole = panel.build(panel.detail, panel.content_size.width).plain
        assert all(p["name"] in whole for p in panel.detail.row.summary.breakdown), whole
        await pilot.press("b")
        await until(pilot, lambda: app.screen.maximized is None)
        await pilot.press("b")
        await until(pilot, lambda: app.screen.maximized is panel)
        await pilot.press("escape")  # back from the panel, not from the job
        await until(pilot, lambda: app.screen.maximized is None)
        assert isinstance(app.screen, JobScreen)


def test_fast_iterations_keep_three_figures_in_the_table(tmp_path, run_cli):
    """A 16.8 ms Megatron step (the corpus' elena-2561509) is 0.0168 s/it in the table a
    paper takes, not 0.017; machines get the full value."""
    log = tmp_path / "fast-1.log"
    log.write_text("".join(f" iteration {i:8d}/     200 | elapsed time per iteration (ms): {16.8 if i > 2 else 900.0} |"
                           f" lm loss: 1.0E+01 |\n" for i in range(1, 40)))
    code, out, _ = run_cli("summary", "--columns", "job,speed", str(log))
    assert code == 0 and out.splitlines()[-1].split() == ["fast-1", "0.0168"], out
    code, out, _ = run_cli("summary", "--columns", "job,speed", "--format", "csv", str(log))
    assert out.splitlines()[-1] == "fast-1,0.0168", out


_REPORT_MAX = re.compile(r"memory \(MB\) \|.*?\| max reserved: ([\d.]+)")


@pytest.mark.parametrize("name", ["elena-1861140.out.log", "elena-2561509-no-throughput.out.log"])
def test_memory_peak_counts_the_reports_around_checkpoint_saves(name):
    """Megatron-LM reports memory before and after each checkpoint's save (since 2026-01); the peak
    is the largest any report gives, as grep finds it (these logs hold no other memory line)."""
    log = shared_or_skip(f"corpus/megatron-lm/{name}")
    text = log.read_text(errors="replace")
    assert "save_checkpoint for iteration" in text
    want = max(float(m.group(1)) for m in _REPORT_MAX.finditer(text))
    store = JobStore()
    parse_file(log, log.name, sink=store.add)
    got = max(summarize(job).as_dict()["memory"]["gpu_max_reserved_mb"] or 0.0 for job in store.jobs.values())
    assert got == pytest.approx(want, abs=0.05)


def _timer_log(option: str) -> str:
    """Megatron's timer block after each iteration, as ``--timing-log-option`` prints it."""
    out = []
    for i in range(1, 13):
        out.append(megatron_iteration(i, 100, 4000.0 + i))
        out.append("(min, max) time across ranks (ms):\n" if option == "minmax" else "max time across ranks (ms):\n")
        for name, ms in (("forward-backward", 3900.0 + i), ("forward-compute", 1200.5 + i), ("optimizer", 80.25)):
            value = f"({ms - 50:.2f}, {ms:.2f})" if option == "minmax" else f"{ms:.2f}"
            out.append(f"    {(name + ' ').ljust(48, '.')}: {value}\n")
    return "".join(out)


def test_max_only_timers_read_as_the_max_of_min_max_ones(tmp_path):
    """``--timing-log-option max`` prints the slowest rank's time alone, which is what tuimon
    takes of a ``(min, max)`` line: the same timers, the same breakdown."""
    by_max = one(tmp_path, "max.log", _timer_log("max"))
    by_minmax = one(tmp_path, "minmax.log", _timer_log("minmax"))
    assert set(by_max["timers_ms"]) == {"forward-backward", "forward-compute", "optimizer"}
    assert by_max["timers_ms"] == by_minmax["timers_ms"] and by_max["breakdown"] == by_minmax["breakdown"]
    assert by_max["timers_ms"]["optimizer"]["mean_ms"] == 80.25


def test_megatron_bridge_task_configuration_sizes_the_run():
    """Megatron-Bridge dumps its configuration as YAML (no argument list): the run trains at its
    dataset's sequence_length (1024), not the model's seq_length (131072, the positions' limit).
    Its model is Llama-3.2-1B's shape (grouped attention, a gated MLP, TransformerConfig's names):
    its size is what the run counted on its one rank, its FLOPs Megatron-Core's, from the numbers
    grep finds in the log."""
    log = shared_or_skip("corpus/megatron-lm/verdimrc-megatron-bridge-eos-2025-10.log")
    text = log.read_text(errors="replace")
    assert "  sequence_length: 1024\n" in text and "  seq_length: 131072\n" in text
    assert "  gated_linear_unit: true\n" in text and "  num_query_groups: 8\n" in text
    assert "model parallel rank (0, 0): 1235814400\n" in text
    store = JobStore()
    parse_file(log, log.name, sink=store.add)
    (row,) = [summarize(job).as_dict() for job in store.jobs.values()]
    layers, hidden, heads, groups, kv, ffn = 16, 2048, 32, 8, 64, 8192  # model:
    seq, vocab, gbs, gpus = 1024, 128256, 512, 8  # dataset:, model:, train:, world size
    assert (row["seq_length"], row["global_batch"], row["world_size"]) == (seq, gbs, gpus)
    assert row["params_billion"] == pytest.approx(1.235814400, abs=5e-4)
    assert row["activation_checkpointing"] is False  # recompute_granularity: null (selective core_attn only)
    seconds = 4647.8 / 1000  # the one iteration's "elapsed time per iteration (ms): 4647.8"
    # Megatron-Core's num_floating_point_operations: 3 (fwd, 2 bwd) x 2 (multiply-add) per GEMM
    q, kvp, tokens = heads * kv, groups * kv, gbs * seq
    flops = (tokens * 6 * (hidden * ffn * 3 * layers + layers * (hidden * (q + 2 * kvp) + q * hidden)
                           + hidden * vocab)
             + gbs * seq * seq * layers * 6 * q)  # causal attention: QK^T and AV over half the matrix
    assert row["tflops_per_gpu"]["computed"] == pytest.approx(flops / (seconds * gpus * 1e12), rel=1e-3)
    assert row["flops_formula"] == "Megatron-Core (architecture)"


def test_gpt_neox_flops_are_read_with_their_unit_and_its_mfu_is_the_runs_own(tmp_path):
    """NeoX prints its rate through human_readable_flops (GFLOPS on a slow run) and, since 2025,
    its own MFU and HFU: the TFLOPs are the rate in TFLOP/s, the MFU is the log's (no GPU peak)."""
    lines = ["NeoXArgs.from_ymls() ['configs/125M.yml']\n"]
    for i in range(10, 130, 10):
        lines.append(f" samples/sec: 3.412 | iteration {i:8d}/{200:8d} | elapsed time per iteration (ms): 4689.0 | "
                     f"learning rate: 6.000E-04 | approx flops per GPU: 712.3GFLOPS | MFU: 2.28% | HFU: 3.04% | "
                     f"lm_loss: {9 - i / 100:.6E} | number of skipped iterations:   0 | number of nan iterations:   0 |\n")
    row = one(tmp_path, "neox.log", "".join(lines))
    assert row["framework"] == "gpt-neox"
    assert row["tflops_per_gpu"]["reported"] == pytest.approx(0.7123, abs=0.005)  # not 712.3 (2 decimals)
    assert row["mfu"] == pytest.approx(0.0228) and row["gpu_peak_source"] == "log: the run's own MFU"


def test_torchtitan_counting_its_batch_in_tokens_sizes_the_run(tmp_path):
    """torchtitan since 2026-08 says its batch in tokens (``131072 tokens per train step, ...
    maximum context length 2048``) and its model's size in parameters: the run's global batch
    is 64 sequences of 2048, its tokens/s a step's tokens over the step time, its size 8.03 B."""
    head = "[rank0]:[titan] 2026-08-21 10:00:{:02d},000 - root - INFO - "
    lines = [head.format(0) + "\x1b[34mModel llama3 8B \x1b[31msize: 8,030,261,248 total parameters\x1b[39m",
             head.format(0) + "Applied FullAC activation checkpointing to the model",
             head.format(1) + "Trainer is initialized with 16384 tokens per DP rank, 131072 tokens per train step, "
                              "gradient accumulation steps 2, maximum context length 2048, total steps 100 (warmup 10)"]
    for step in range(1, 41):  # a metrics line every 2 s
        lines.append(head.format(0).replace("10:00:00", f"10:{(2 * step) // 60:02d}:{(2 * step) % 60:02d}")
                     + f"step: {step:2}  loss: {8 - step / 10:8.5f}  memory: 60.25GiB(63.40%)  tps: 8,192  "
                       f"tflops: 385.12  mfu: 38.94%")
    row = one(tmp_path, "titan.log", "\n".join(lines) + "\n")
    assert (row["global_batch"], row["seq_length"], row["train_iters"]) == (64, 2048, 100)
    assert row["params_billion"] == pytest.approx(8.030, abs=5e-4) and row["activation_checkpointing"] is True
    assert row["iter_time_ms"]["median"] == pytest.approx(2000.0)
    assert row["tokens_per_sec_computed"] == pytest.approx(131072 / 2.0)


def test_nanogpt_reports_its_own_mfu_once_its_estimate_exists(tmp_path):
    """nanoGPT prints ``mfu -100.00%`` until its running estimate exists (five iterations), then the
    estimate: the run's MFU is the log's, and the placeholder is no figure."""
    lines = [f"iter {i}: loss {4.0 - i / 100:.4f}, time {120.0 + i % 3:.2f}ms, mfu {-100.0 if i < 5 else 35.0:.2f}%"
             for i in range(0, 40)]
    row = one(tmp_path, "nanogpt.log", "\n".join(lines) + "\n")
    assert row["mfu"] == pytest.approx(0.35) and row["gpu_peak_source"] == "log: the run's own MFU"


def test_too_few_iterations_mark_the_figures_and_no_share_exceeds_the_whole(tmp_path):
    """A smoke run of two iterations: its timers reported once (a part of 1770 ms) against a steady
    iteration of 1000 ms would be a share of 1.77; no such share is printed, and the run's rates are
    said to be warm-up figures.  One logged iteration, the first, is no throughput at all."""
    def line(i: int, ms: float) -> str:
        return (f" iteration {i:8d}/      10 | consumed samples: {8 * i:8d} | elapsed time per iteration (ms): {ms:.1f} "
                f"| throughput per GPU (TFLOP/s/GPU): 50.0 | learning rate: 1.0E-04 | global batch size:     8 | "
                f"lm loss: 9.0E+00 | loss scale: 1.0 | number of skipped iterations:   0 | number of nan iterations:   0 |\n")
    text = line(1, 5000.0) + line(2, 1000.0) + "time (ms) | forward-backward: 1770.0 | optimizer: 10.0\n"
    row = one(tmp_path, "smoke.log", text)
    assert row["breakdown"] == [] and row["breakdown_whole_ms"] is None
    assert any(c.startswith("no breakdown: forward-backward (1770.0 ms) is longer than") for c in row["checks"])
    assert any("only 2 timed iterations" in c for c in row["checks"])
    assert row["tflops_per_gpu"]["reported"] == 50.0  # the second iteration's, marked as warm-up above
    first = one(tmp_path, "first.log", line(1, 5000.0))
    assert first["tflops_per_gpu"]["reported"] is None and first["mfu"] is None
    assert first["iter_time_ms"]["median"] == 5000.0  # what it took stays a fact
    assert any(c.startswith("one iteration logged, the first") for c in first["checks"])
