"""Alerts: each fixture log gives exactly its alerts, at the right iteration; the corpus
gives none but the ones its logs really show; delivery by events, `tuimon alerts`,
--on-alert (rate-limited, no shell) and a follower's --state (no duplicates)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.conftest import ROOT, shared_or_skip
from tuimon.engine.ingest import parse_file
from tuimon.figures.alerts import RuleError, Rules, evaluate
from tuimon.figures.summary import summarize
from tuimon.store.job_store import JobStore


def megatron_line(i: int, *, loss: float = 2.5, ms: float = 1000.0, grad: str = "1.000", skipped: int = 0,
                  scale: float = 65536.0, total: int = 1000, prefix: str = "") -> str:
    loss_text = "nan" if loss != loss else f"{loss:.6E}"
    return (f"{prefix} iteration {i:8d}/{total:8d} | consumed samples: {i * 8:10d} | elapsed time per iteration (ms): "
            f"{ms:.1f} | learning rate: 1.000E-04 | global batch size:     8 | lm loss: {loss_text} | loss scale: "
            f"{scale:.1f} | grad norm: {grad} | number of skipped iterations: {skipped:3d} | number of nan "
            f"iterations:   0 |\n")


def noisy(i: int) -> float:
    """A loss that falls slowly with a little deterministic noise."""
    return 3.0 - 0.002 * i + 0.01 * ((i * 7919) % 13 - 6) / 6


def log_of(lines) -> str:
    return "".join(lines)


def alerts_of(path: Path, **kw):
    store = JobStore()
    parse_file(path, str(path), sink=store.add)
    (job,) = store.jobs.values()
    return evaluate(job, summarize(job, **kw), Rules.default(), **kw)


def kinds_at(alerts) -> list[tuple[str, object]]:
    return [(a.kind, a.iteration) for a in alerts]


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_nan_at_a_known_iteration(tmp_path):
    lines = [megatron_line(i, loss=noisy(i)) for i in range(1, 80)]
    lines += [megatron_line(80, loss=float("nan"), grad="nan")]
    lines += [megatron_line(i, loss=noisy(i)) for i in range(81, 90)]  # it recovered: one alert, at 80
    alerts = alerts_of(write(tmp_path, "nan-run.log", log_of(lines)))
    assert kinds_at(alerts) == [("nan", 80)]
    assert alerts[0].line == 80 and alerts[0].file.endswith("nan-run.log")


def test_a_loss_spike(tmp_path):
    lines = [megatron_line(i, loss=noisy(i) + (1.2 if i == 120 else 0.0)) for i in range(1, 200)]
    assert kinds_at(alerts_of(write(tmp_path, "spike-run.log", log_of(lines)))) == [("loss-spike", 120)]


def test_a_slowdown(tmp_path):
    # steady at 1 s, then from iteration 150 every iteration takes 1.6 s
    lines = [megatron_line(i, loss=noisy(i), ms=(1600.0 if i >= 150 else 1000.0) + (i % 5))
             for i in range(1, 260)]
    alerts = alerts_of(write(tmp_path, "slow-run.log", log_of(lines)))
    assert [a.kind for a in alerts] == ["slowdown"]
    # the median of the last 20 turns slow once 11 of them are: iteration 160
    assert alerts[0].iteration == 160


def test_a_hang_in_startup(tmp_path):
    text = ("Job started at: 2023-11-02-183000 on nid001234\n> initializing torch distributed ...\n"
            "[2023-11-02 18:30:40,000] [INFO] [logging.py:96:log_dist] [Rank 0] DeepSpeed info: version=0.14.0\n")
    path = write(tmp_path, "hang-7001.out", text)
    now = time.time()
    os.utime(path, (now - 3600, now - 3600))
    alerts = alerts_of(path, now=now, last_write=now - 3600)
    assert kinds_at(alerts) == [("startup-hang", None)]
    assert "last line" not in alerts[0].message or "DeepSpeed info" in alerts[0].message


def test_a_straggler_rank(tmp_path):
    lines = []
    for i in range(1, 40):
        for rank in range(4):
            ms = 1000.0 * (1.3 if rank == 2 else 1.0) + rank
            lines.append(megatron_line(i, loss=noisy(i), ms=ms, prefix=f"{rank}:"))
    alerts = alerts_of(write(tmp_path, "ranks-8001.out", log_of(lines)))
    assert [(a.kind, a.rank) for a in alerts] == [("straggler", "2")]


def test_alert_texts_name_their_figures_from_the_field_registry(tmp_path, monkeypatch):
    """An alert names a figure as the tables head it (the registry's label) and gives its
    value as they show it; renaming a field in the registry renames it in the alerts."""
    from dataclasses import replace

    from tuimon.store import fields

    slow = [megatron_line(i, loss=noisy(i), ms=(1600.0 if i >= 150 else 1000.0)) for i in range(1, 260)]
    spike = [megatron_line(i, loss=noisy(i) + (1.2 if i == 120 else 0.0)) for i in range(1, 200)]
    (slowdown,) = alerts_of(write(tmp_path, "slow.log", log_of(slow)))
    assert slowdown.message == ("Iter time 1.60s (median of the last 20 points), 1.60x the steady 1.00s before "
                                "them")
    (spiked,) = alerts_of(write(tmp_path, "spike.log", log_of(spike)))
    assert spiked.message.startswith(f"Loss {noisy(120) + 1.2:.4f} at iteration 120, median of the 50 before ")
    monkeypatch.setitem(fields.BY_KEY, "elapsed_ms", replace(fields.BY_KEY["elapsed_ms"], label="Step time"))
    monkeypatch.setitem(fields.BY_KEY, "loss", replace(fields.BY_KEY["loss"], label="Train loss", digits=2))
    (slowdown,) = alerts_of(write(tmp_path, "slow.log", log_of(slow)))
    assert slowdown.message.startswith("Step time 1.60s (median")
    (spiked,) = alerts_of(write(tmp_path, "spike.log", log_of(spike)))
    assert spiked.message.startswith(f"Train loss {noisy(120) + 1.2:.2f} at iteration 120")


def test_fp16_loss_scale_skips_are_no_alert(tmp_path):
    lines = []
    scale = 65536.0
    for i in range(1, 150):
        skip = i % 25 == 0  # an overflow every 25 steps: the scaler halves and skips
        if skip:
            scale /= 2
        lines.append(megatron_line(i, loss=noisy(i), grad="inf" if skip else "1.000", skipped=int(skip), scale=scale))
    assert alerts_of(write(tmp_path, "fp16-run.log", log_of(lines))) == []


def test_rules_are_settable_and_refuse_nonsense():
    rules = Rules.parse(["loss-spike.k=8", "grad-norm-spike=off"])
    assert rules.settings["loss-spike"]["k"] == 8.0 and "grad-norm-spike" not in rules.settings
    for bad in ("nosuch=1", "loss-spike.q=1", "loss-spike.k=abc", "loss-spike.k=-1", "failed=maybe", "loss-spike"):
        with pytest.raises(RuleError):
            Rules.parse([bad])


def test_alerts_are_deterministic_and_reach_events_and_the_alerts_verb(tmp_path):
    lines = [megatron_line(i, loss=noisy(i) + (1.2 if i == 120 else 0.0)) for i in range(1, 200)]
    lines += [megatron_line(200, loss=float("nan"), grad="nan")]
    write(tmp_path, "two-9001.log", log_of(lines))

    def cli(*argv, status=0):
        out = subprocess.run([sys.executable, "-m", "tuimon", *argv], cwd=ROOT, capture_output=True, text=True,
                             timeout=120)
        assert out.returncode == status, out.stderr
        return out.stdout

    # `alerts` exits as grep does: 1 when it printed some, 0 when none
    first = json.loads(cli("alerts", "--format", "json", "--no-cache", str(tmp_path), status=1))
    again = json.loads(cli("alerts", "--format", "json", str(tmp_path), status=1))
    assert [(a["kind"], a["iteration"]) for a in first] == [("nan", 200), ("loss-spike", 120)]
    assert first == again
    events = [json.loads(line) for line in cli("events", "--no-cache", str(tmp_path)).splitlines()]
    alerts = [e for e in events if e["type"] == "alert"]
    assert [(a["kind"], a["iteration"]) for a in alerts] == [("nan", 200), ("loss-spike", 120)]
    assert set(alerts[0]) == {"schema_version", "type", "job", "rank", "kind", "iteration", "wall_time", "message",
                              "file", "line"}
    table = cli("alerts", str(tmp_path), status=1)
    assert "loss-spike" in table and "two-9001.log:120" in table
    assert json.loads(cli("alerts", "--format", "json", "--alert", "loss-spike=off", "--alert", "nan=off",
                          str(tmp_path))) == []


def test_bad_alert_options_are_one_line_and_exit_2(tmp_path):
    write(tmp_path, "x.log", megatron_line(1))
    for argv in (["--alert", "loss-spike.k=zero"], ["--on-alert", "notify 'unclosed"], ["--alert", "bogus=on"]):
        out = subprocess.run([sys.executable, "-m", "tuimon", "alerts", *argv, str(tmp_path)], cwd=ROOT,
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 2 and out.stderr.count("\n") == 1 and "Traceback" not in out.stderr, out.stderr


def test_on_alert_runs_without_a_shell_with_json_on_stdin_once_per_job_and_kind(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    # two loss spikes in one job (one run of the hook: same job and kind), a NaN in another
    spikes = [megatron_line(i, loss=noisy(i) + (1.2 if i in (120, 170) else 0.0)) for i in range(1, 200)]
    write(logs, "spiky-1.log", log_of(spikes))
    write(logs, "nan-2.log", log_of([megatron_line(i, loss=noisy(i)) for i in range(1, 30)]
                                    + [megatron_line(30, loss=float("nan"), grad="nan")]))
    hook = tmp_path / "hook.py"
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    hook.write_text("import sys, json, uuid, pathlib\n"
                    "data = json.load(sys.stdin)\n"
                    f"pathlib.Path({str(out_dir)!r}, uuid.uuid4().hex + '.json').write_text(json.dumps(data))\n")
    # a word with a shell metacharacter stays one argument: no shell runs it
    command = f"{sys.executable} {hook} ';touch {tmp_path}/pwned'"
    out = subprocess.run([sys.executable, "-m", "tuimon", "alerts", "--on-alert", command, str(logs)], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 1, out.stderr  # (it found alerts)
    calls = [json.loads(p.read_text()) for p in out_dir.iterdir()]
    assert all(isinstance(c, list) for c in calls), "a JSON list of alerts on stdin"
    runs = [r for c in calls for r in c]
    assert sorted((r["job"], r["kind"]) for r in runs) == [("nan-2", "nan"), ("spiky-1", "loss-spike")]
    assert not (tmp_path / "pwned").exists()


def test_a_thousand_alerts_at_once_start_a_few_hook_calls_not_a_thousand(tmp_path):
    """1,000 jobs fail at once: the alerts arriving together go to the command in
    groups (a JSON list each), on at most 4 runners."""
    logs = tmp_path / "logs"
    logs.mkdir()
    for k in range(1000):
        write(logs, f"job-{k}.log", log_of([megatron_line(i, loss=noisy(i)) for i in range(1, 4)])
              + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    hook = tmp_path / "hook.py"
    hook.write_text("import sys, json, os, time, pathlib\n"
                    "data = json.load(sys.stdin)\n"
                    f"pathlib.Path({str(out_dir)!r}, str(os.getpid())).write_text(str(len(data)))\n"
                    "time.sleep(0.5)\n")
    out = subprocess.run([sys.executable, "-m", "tuimon", "alerts", "--on-alert", f"{sys.executable} {hook}",
                          str(logs)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 1, out.stderr  # (it found alerts)
    sizes = [int(p.read_text()) for p in out_dir.iterdir()]
    assert sum(sizes) == 1000 and len(sizes) <= 4, sizes


def test_hook_runners_are_bounded_and_group_what_waits():
    import threading as th

    from tuimon.figures.alerts import Alert
    from tuimon.live.alerting import _Grouped

    running, peak, groups = [0], [0], []
    lock = th.Lock()
    gate = th.Event()

    def action(group):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        gate.wait(5)
        with lock:
            running[0] -= 1
            groups.append(len(group))

    grouped = _Grouped(action, rate_s=600, clock=time.monotonic, workers=4)
    before = th.active_count()
    for k in range(200):  # alerts arriving one by one while runners are busy
        grouped([Alert(f"j{k}", "failed", None, None, None, "x", None, None)])
    assert th.active_count() - before <= 4
    gate.set()
    grouped.join(10)
    assert peak[0] <= 4 and sum(groups) == 200 and len(groups) < 200, groups
    # the same job and kind within the rate: not again
    grouped([Alert("j0", "failed", None, None, None, "again", None, None)])
    grouped.join(5)
    assert sum(groups) == 200


@pytest.mark.slow
def test_following_with_state_across_a_restart_gives_no_duplicates(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    log = logs / "live-3001.log"
    log.write_text(log_of(megatron_line(i, loss=noisy(i) + (1.2 if i == 120 else 0.0)) for i in range(1, 150)))
    state = tmp_path / "state.json"

    def follow_once(extra_lines: str, expected: int) -> list[dict]:
        """Append ``extra_lines``, follow until ``expected`` alerts came out (an event,
        not a time: a loaded machine starts tuimon slowly), then Ctrl-C.  A duplicate would
        come with them: the lines are read in one block and judged in one tick."""
        if extra_lines:
            with open(log, "a") as fh:
                fh.write(extra_lines)
        proc = subprocess.Popen([sys.executable, "-m", "tuimon", "alerts", "--follow", "--format", "json",
                                 "--poll", "0.2", "--state", str(state), str(logs)], cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        got: list[dict] = []
        reader = threading.Thread(target=lambda: got.extend(json.loads(line) for line in proc.stdout
                                                            if line.strip()), daemon=True)
        reader.start()
        deadline = time.monotonic() + 120
        while len(got) < expected and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        reader.join(timeout=10)
        return got

    first = follow_once("", 1)
    assert [(a["kind"], a["iteration"]) for a in first] == [("loss-spike", 120)]
    second = follow_once(megatron_line(150, loss=float("nan"), grad="nan"), 1)
    assert [(a["kind"], a["iteration"]) for a in second] == [("nan", 150)]  # the spike is not delivered again
    third = follow_once(megatron_line(151, loss=float("nan"), grad="nan"), 1)
    assert [(a["kind"], a["iteration"]) for a in third] == [("nan", 151)]  # nor the first nan


#: what the corpus really shows (checked by eye in each log at the line given): job, kind, iteration
CORPUS_ALERTS = {
    ("sc22-stronghold_l-16_hs-2048_bs-4_ws-15_2022-07-02.1656742529", "nan", 10),
    ("sc22-stronghold_l-16_hs-2048_bs-4_ws-15_2022-07-02.1656742529", "nan", 30),
    ("evo2-bionemo-nemo2-finetune-2025-06", "loss-spike", 67),
    ("evo2-bionemo-nemo2-finetune-2025-06", "slowdown", 59),
    ("mlprof-polaris-deepspeed-comm-logging", "slowdown", 355),
    ("neox-scaling01-70M-512step", "slowdown", 310),
    ("neox-scaling02-70M-0", "slowdown", 597),
    *(("qiu-llama3-175m-baseline", "loss-spike", it) for it in (
        2910, 3410, 4250, 5760, 5870, 6010, 6770, 7070, 8490, 13890, 15540, 17390, 18920, 19100, 19450)),
    *(("qiu-llama3-175m-crashed", "loss-spike", it) for it in (2910, 3410, 4870, 5760, 6010, 6770, 7070, 8490)),
}


def test_the_corpus_gives_only_the_alerts_its_logs_show():
    corpus = shared_or_skip("corpus")
    out = subprocess.run([sys.executable, "-m", "tuimon", "alerts", "--format", "json", "--no-cache", str(corpus)],
                         cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert out.returncode == 1, out.stderr  # (it found alerts)
    found = {(a["job"], a["kind"], a["iteration"]) for a in json.loads(out.stdout)
             if a["kind"] in ("nan", "loss-spike", "slowdown")}
    assert found == CORPUS_ALERTS


def test_two_runs_with_one_name_each_raise_their_own_alert(tmp_path, run_cli):
    """runA/train.log and runB/train.log are two jobs named ``train``: each NaN is its
    own alert (keyed by the job's directory and name), not a duplicate of the other."""
    for run in ("runA", "runB"):
        (tmp_path / run).mkdir()
        (tmp_path / run / "train.log").write_text("".join(
            f" iteration {i}/ 100 | elapsed time per iteration (ms): 1000 | lm loss: {'nan' if i == 20 else '2.0'} |\n"
            for i in range(1, 41)))
    code, out, err = run_cli("alerts", str(tmp_path), "--format", "json")
    assert code == 1, err  # (alerts found: exit 1, as grep)
    alerts = json.loads(out)
    nans = sorted(a["file"] for a in alerts if a["kind"] == "nan")
    assert nans == [str(tmp_path / "runA" / "train.log"), str(tmp_path / "runB" / "train.log")], alerts


def test_a_job_is_judged_again_when_its_last_write_becomes_known(tmp_path):
    """A job judged before its files' last write time was known (a session's first snapshot)
    is judged again when it arrives, though its figures did not change: a started job that
    has logged no step for an hour is stuck in startup then, and says so."""
    from tuimon.live.alerting import AlertFeed

    path = tmp_path / "job-1.out"
    path.write_text("2025-01-01 10:00:00 > initializing torch distributed ...\n")
    store = JobStore()
    parse_file(path, path.name, sink=store.add)
    (job,) = store.jobs.values()
    now = 1_735_730_000.0  # 2025-01-01 11:13:20, an hour and more after the job started
    feed = AlertFeed(Rules.default(), clock=lambda: now)
    versions = {job.key: 1}
    assert feed.update([job], {}, now=now, versions=versions) == []
    fresh = feed.update([job], {job.key: now - 3600}, now=now, versions=versions)
    assert [a.kind for a in fresh] == ["startup-hang"]


async def test_the_alerts_screen_waits_for_its_columns_before_its_rows(tmp_path):
    """The app's refresh timer can reach a pushed alerts screen before its on_mount has added
    the table's columns: the rows wait (they raised, and the screen stayed empty for good)."""
    from textual.widgets import DataTable

    from tests.conftest import copy_fixture_logs, loaded_session, until
    from tuimon.ui.alerts import AlertsScreen
    from tuimon.ui.app import TuimonApp

    app = TuimonApp(loaded_session([copy_fixture_logs(tmp_path)]))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, AlertsScreen))
        screen = app.screen
        table = screen.query_one("#alerts", DataTable)
        table.clear(columns=True)  # as between compose and on_mount
        screen._alerts = []
        screen.show(app.session.alerts())  # must neither raise nor count the alerts as shown
        assert table.row_count == 0 and screen._alerts == []
        screen.on_mount()  # the columns, and a refresh
        await until(pilot, lambda: table.row_count == 4)
        assert table.row_count == 4


def test_alerts_are_judged_again_when_the_session_clock_stands_still(tmp_path):
    """The once-a-second throttle on judging alerts runs on real time: a session whose clock
    stands still (a replay's, or a wall clock set back) still judges what changed after its
    first snapshot."""
    from tests.conftest import FIXED_NOW, loaded_session

    log = tmp_path / "logs" / "run-7.log"
    log.parent.mkdir()
    log.write_text(log_of(megatron_line(i) for i in range(1, 4)))
    session = loaded_session([log.parent])
    assert session.clock() == FIXED_NOW
    session.tick()
    assert session.alerts() == []
    with open(log, "a") as fh:
        fh.write("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    (job,) = session.store.jobs.values()
    deadline = time.monotonic() + 10
    while not job.failures and time.monotonic() < deadline:  # the follower reads the line
        session.follower.poll()
        time.sleep(0.1)
    assert job.failures
    time.sleep(1.1)
    session.tick()
    assert [a.kind for a in session.alerts()] == ["failed"]


def test_quiet_jobs_are_judged_at_their_deadline_not_on_every_tick(tmp_path, monkeypatch):
    """200 quiet training jobs and 50 starting ones: after a first judgement, ticks cost
    no judgement until a job's stall (or startup hang) is due, and then that alert comes
    on time."""
    import tuimon.live.alerting as alerting
    from tuimon.live.alerting import AlertFeed

    store = JobStore()
    for k in range(200):
        p = write(tmp_path, f"train-{k}.log", log_of([megatron_line(i, ms=10_000.0) for i in range(1, 6)]))
        events, _ = parse_file(p, str(p))
        store.add(events)
    for k in range(50):
        p = write(tmp_path, f"start-{k}.out", "Job started at: 2023-11-02-183000 on nid001234\n"
                  "> initializing torch distributed ...\n[2023-11-02 18:30:30,000] [INFO] [logging.py:96:log_dist] "
                  "[Rank 0] DeepSpeed info: version=0.14.0\n")
        events, _ = parse_file(p, str(p))
        store.add(events)
    judged = [0]
    real = alerting.summarize

    def counted(*a, **kw):
        judged[0] += 1
        return real(*a, **kw)
    monkeypatch.setattr(alerting, "summarize", counted)
    feed = AlertFeed(Rules.default(), startup_timeout=600.0)
    versions = {key: 1 for key in store.jobs}
    t0 = 1_000_000.0
    # seen growing (a write after the first read), as a followed job does: then it can stall
    writes = {key: t0 - 10 for key in store.jobs}
    assert feed.update(list(store.jobs.values()), writes, now=t0 - 10, versions=versions) == []
    judged[0] = 0
    writes = {key: t0 for key in store.jobs}
    assert feed.update(list(store.jobs.values()), writes, now=t0, versions=versions) == []
    assert judged[0] == 250
    for tick in range(1, 50):  # 49 quiet seconds: stall limit is max(5 x 10 s, 60 s) = 60 s away
        assert feed.update(list(store.jobs.values()), writes, now=t0 + tick, versions=versions) == []
    assert judged[0] == 250, "a quiet job was judged again before its deadline"
    stalled = feed.update(list(store.jobs.values()), writes, now=t0 + 61, versions=versions)
    assert sorted(a.kind for a in stalled) == ["stalled"] * 200 and judged[0] == 450
    for tick in range(62, 120):  # stalled already: nothing more can come from time alone but the hangs
        feed.update(list(store.jobs.values()), writes, now=t0 + tick, versions=versions)
    assert judged[0] == 450
    # a startup hang is due 600 s after the job started: 30 s of its own stamps, then 570 s of quiet
    assert feed.update(list(store.jobs.values()), writes, now=t0 + 569, versions=versions) == []
    hangs = feed.update(list(store.jobs.values()), writes, now=t0 + 571, versions=versions)
    assert sorted(a.kind for a in hangs) == ["startup-hang"] * 50 and judged[0] == 500
    versions[next(iter(store.jobs))] = 2  # a job that changes is judged at once
    feed.update(list(store.jobs.values()), writes, now=t0 + 602, versions=versions)
    assert judged[0] == 501


def test_a_job_slow_to_judge_takes_at_most_a_tenth_of_the_time(tmp_path, monkeypatch):
    """A big job whose figures change at every sink is not judged at every change (that
    held the session's lock and slowed /metrics past 2 s): no sooner than 10x its last
    judgement's time after it; the change is judged at its turn, not lost."""
    import tuimon.live.alerting as alerting
    from tuimon.live.alerting import AlertFeed

    p = write(tmp_path, "big-1.log", log_of([megatron_line(i) for i in range(1, 40)]))
    events, _ = parse_file(p, str(p))
    store = JobStore()
    store.add(events)
    real, judged = alerting.evaluate, [0]
    clock = [1000.0]  # the feed's monotonic clock, moved by the test: no wall-clock bound (a loaded machine)
    monkeypatch.setattr(alerting, "time", SimpleNamespace(monotonic=lambda: clock[0], time=time.time))

    def slow(*a, **kw):
        judged[0] += 1
        clock[0] += 0.06  # judging this job takes 0.06 s
        return real(*a, **kw)
    monkeypatch.setattr(alerting, "evaluate", slow)
    feed = AlertFeed(Rules.default())
    key = next(iter(store.jobs))
    versions = {key: 0}
    for _ in range(100):  # a change every 0.01 s for 1 s
        versions[key] += 1
        feed.update_some(store.jobs, [key], {}, versions, now=1e6)
        clock[0] += 0.01
    assert judged[0] == 2, judged[0]  # at 0 and at 0.67 s (0.06 s, then ten times that to wait)
    before = judged[0]
    feed.update_some(store.jobs, [], {}, versions, now=1e6)
    assert judged[0] == before, "not before its turn"
    clock[0] += 0.7
    feed.update_some(store.jobs, [], {}, versions, now=1e6)  # its turn came: the last change is judged
    assert judged[0] == before + 1


async def test_enter_on_an_alert_opens_the_log_at_its_line(tmp_path):
    from tests.conftest import copy_fixture_logs, loaded_session, until
    from tuimon.ui.alerts import AlertsScreen
    from tuimon.ui.app import TuimonApp
    from tuimon.ui.logscreen import LogScreen

    app = TuimonApp(loaded_session([copy_fixture_logs(tmp_path)]))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, AlertsScreen) and app.screen._alerts)
        screen = app.screen
        table = screen.query_one("#alerts")
        alert = next(a for a in screen._alerts if a.kind == "failed" and a.line)
        if not any(e.alerts == (alert,) for e in screen._rows):  # folded in its job's row: Enter unfolds it
            table.move_cursor(row=next(i for i, e in enumerate(screen._rows) if alert in e.alerts))
            await pilot.press("enter")
            await until(pilot, lambda: any(e.alerts == (alert,) for e in screen._rows))
        table.move_cursor(row=next(i for i, e in enumerate(screen._rows) if e.alerts == (alert,)))
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, LogScreen))
        log = app.screen
        await until(pilot, lambda: log._at is None and f"line, {alert.line}" in log.message)
        view = log.view
        assert view.top <= alert.line - 1 < view.top + view.size.height  # the alert's line is in view
        assert log.sources[log.which].name.endswith(os.path.basename(alert.file))


def test_the_alerts_verb_exits_as_grep_does(tmp_path, run_cli):
    """0 when it found no alert, 1 when it printed some (a script's `if tuimon alerts ...` reads
    "found"), 2 on misuse."""
    (tmp_path / "ok").mkdir()
    (tmp_path / "ok" / "train.log").write_text("".join(
        f" iteration {i}/ 40 | elapsed time per iteration (ms): 1000 | lm loss: 2.0 |\n" for i in range(1, 41)))
    code, out, err = run_cli("alerts", str(tmp_path / "ok"), "--format", "json")
    assert (code, json.loads(out)) == (0, []), err
    (tmp_path / "ok" / "train.log").write_text((tmp_path / "ok" / "train.log").read_text()
                                               + " iteration 41/ 40 | elapsed time per iteration (ms): 1000 | lm loss: nan |\n")
    code, out, err = run_cli("alerts", str(tmp_path / "ok"), "--format", "json")
    assert code == 1 and [a["kind"] for a in json.loads(out)] == ["nan"], err
    misuse = subprocess.run([sys.executable, "-m", "tuimon", "alerts", "--bogus", str(tmp_path)], cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    assert misuse.returncode == 2 and misuse.stderr.count("\n") == 1


async def test_the_alerts_screen_folds_a_jobs_alerts_and_filters_with_slash(tmp_path):
    """Seven alerts of one run fold into one row with their count and kinds (Enter unfolds it, `f`
    folds all), beside the fixtures' single alerts; `/` narrows the rows as it is typed (`kind:nan`,
    bare words), Esc clears the filter, a second Esc leaves."""
    from textual.widgets import DataTable

    from tests.conftest import copy_fixture_logs, loaded_session, until
    from tuimon.ui.alerts import AlertsScreen
    from tuimon.ui.app import TuimonApp
    from tuimon.ui.jobs import JobsScreen

    logs = copy_fixture_logs(tmp_path)
    spiky = {20: float("nan"), 40: float("nan"), 60: float("nan")}
    (logs / "spiky-4242.log").write_text(log_of(
        megatron_line(i, loss=spiky.get(i, noisy(i) * 3 if i in (80, 100, 120, 140) else noisy(i)))
        for i in range(1, 200)))
    app = TuimonApp(loaded_session([logs]))
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, AlertsScreen) and len(app.screen._alerts) == 11)
        screen = app.screen
        table = screen.query_one("#alerts", DataTable)

        def cells(row: int) -> list[str]:
            return [str(c) for c in table.get_row_at(row)]
        await until(pilot, lambda: table.row_count == 5)  # 4 single alerts and the spiky job's row
        (folded,) = [i for i, e in enumerate(screen._rows) if len(e.alerts) > 1]
        row = cells(folded)
        assert "spiky-4242" in row[1] and row[3] == "7 ▸" and row[2] == "loss-spike 4, nan 3", row
        table.move_cursor(row=folded)
        await pilot.press("enter")
        await until(pilot, lambda: table.row_count == 12)
        assert cells(folded)[3] == "7 ▾" and [cells(folded + 1 + k)[2] for k in range(7)] == \
            ["loss-spike"] * 4 + ["nan"] * 3  # newest first: the spikes came last
        await pilot.press("f")  # fold all (something was unfolded)
        await until(pilot, lambda: table.row_count == 5)
        await pilot.press("slash")
        await pilot.press(*"kind:nan")
        title = screen.query_one("#alerts-title")
        await until(pilot, lambda: "Alerts (3 of 11 match 'kind:nan')" in str(title.render()))
        assert table.row_count == 1 and cells(0)[2:4] == ["nan", "3 ▸"]  # the spiky job's three, folded
        await pilot.press("enter")  # keeps the filter, back to the table
        await until(pilot, lambda: screen.focused is table)
        assert table.row_count == 1
        await pilot.press("escape")  # clears the filter
        await until(pilot, lambda: table.row_count == 5)
        assert isinstance(app.screen, AlertsScreen)
        await pilot.press("slash", *"oom")  # a bare word: any column (the kind, the message)
        await until(pilot, lambda: table.row_count == 1)
        assert "oom" in cells(0)[1] + cells(0)[6]
        await pilot.press("escape", "escape")
        await until(pilot, lambda: isinstance(app.screen, JobsScreen))


def test_a_hook_over_its_time_is_killed_with_what_it_started(tmp_path, monkeypatch):
    """A hook that backgrounds a child and then hangs (`sleep 1000 & exec sleep 1000`): at its time limit
    it is killed with its process group, the child too (the child ran on for minutes)."""
    from tuimon.figures.alerts import Alert
    from tuimon.live import alerting

    monkeypatch.setattr(alerting, "HOOK_TIMEOUT_S", 1.0)
    pidfile = tmp_path / "child.pid"
    warnings: list[str] = []
    feed = alerting.AlertFeed(Rules.default(), on_warning=warnings.append)
    alert = Alert("job-1", "failed", None, 3, None, "oom", None, None)
    started = time.monotonic()
    feed._run(["sh", "-c", f"sleep 1000 & echo $! > {pidfile}; exec sleep 1000"], [alert])
    assert time.monotonic() - started < 10
    assert any("ran over 1 s: killed" in w for w in warnings), warnings
    child = pidfile.read_text().strip()

    def alive(pid: str) -> bool:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return False
    deadline = time.monotonic() + 10
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(child), "the hook's background child outlived it"


@pytest.mark.parametrize("how", ["session", "follow"])
def test_a_clock_two_hours_ahead_raises_one_stalled_alert_at_most(tmp_path, how):
    """tuimon's clock 2 h ahead of the files' mtimes (a wall-clock jump, a file server's skew) while
    a run writes on: at most one "stalled" alert (17 on one active log, one per new iteration: a
    file's writes were dated by its mtime, 2 h "ago" on our clock).  A write seen is dated on our
    own clock."""
    from tuimon.commands.alerts import StoreTicker
    from tuimon.follow.local import LocalFollower
    from tuimon.live.alerting import AlertFeed
    from tuimon.live.session import LiveSession

    ahead = 7200.0
    log = tmp_path / "logs" / "run-8.log"
    log.parent.mkdir()
    log.write_text(log_of(megatron_line(i) for i in range(1, 4)))
    stalled: list = []
    if how == "session":
        session = LiveSession([str(log.parent)], clock=lambda: time.time() + ahead, poll=0.1)

        def step(i: int) -> None:
            session.follower.poll()
            time.sleep(1.05)  # past the once-a-second throttle on judging
            session.tick()
            stalled[:] = [a for a in session.alerts() if a.kind == "stalled"]
    else:
        feed = AlertFeed(Rules.default(), clock=lambda: time.time() + ahead)
        follower = LocalFollower([str(log.parent)], lambda events: ticker.add(events), poll=0.1, wall=feed.clock)
        ticker = StoreTicker(feed, lambda alerts: stalled.extend(a for a in alerts if a.kind == "stalled"),
                             follower.take_mtimes)

        def step(i: int) -> None:
            follower.poll()
            time.sleep(1.05)
            ticker.tick()
    for i in range(4, 10):
        with open(log, "a") as fh:
            fh.write(megatron_line(i))
        step(i)
    assert len(stalled) <= 1, [a.message for a in stalled]


# -- rolling medians: the compiled core's sliding window against numpy's median of each window --------
import numpy as np  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tuimon.engine import native  # noqa: E402
from tuimon.figures import alerts as alert_figures  # noqa: E402

_VALUES = st.lists(st.one_of(st.floats(-1e6, 1e6, allow_nan=False), st.sampled_from([0.0, -0.0, 1.5, 2.0, 1e300])),
                   max_size=400)


def _both(call):
    """``call()`` with the compiled core, then with numpy alone (the core is required: the README's
    test command builds it)."""
    assert native.core is not None, "the compiled core is not built"
    with_core = call()
    before = native.use(None)
    try:
        return with_core, call()
    finally:
        native.use(before)


@settings(max_examples=300, deadline=None)
@given(_VALUES, st.integers(1, 60), st.floats(0.5, 10), st.sampled_from([1, 7, 1 << 16]))
def test_spike_flags_slid_in_the_core_are_numpys(values, window, k, chunk):
    """(in chunks of windows, as a long series is slid: one window, a few, all at once)"""
    v = np.array(values, dtype=np.float64)
    before, alert_figures._CHUNK = alert_figures._CHUNK, chunk
    try:
        got, want = _both(lambda: alert_figures._spike_flags(v, window, k, min(window, 20)))
    finally:
        alert_figures._CHUNK = before
    assert got.tolist() == want.tolist()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(1e-3, 1e5), max_size=400), st.integers(1, 60), st.integers(1, 60),
       st.sampled_from([1, 7, 1 << 16]))
def test_medians_before_and_rolling_medians_slid_in_the_core_are_numpys(values, n, first, chunk):
    v = np.array(values, dtype=np.float64)
    stop = max(first, len(v) - 3)
    before, alert_figures._CHUNK = alert_figures._CHUNK, chunk
    try:
        got, want = _both(lambda: alert_figures._medians_before(v, n, first, stop))
        assert got.tolist() == want.tolist()
        if len(v) >= n:
            got, want = _both(lambda: alert_figures._rolling(v, n, True) or (
                np.median(windows := np.lib.stride_tricks.sliding_window_view(v, n), axis=1),
                np.median(np.abs(windows - np.median(windows, axis=1)[:, None]), axis=1)))
            assert got[0].tolist() == want[0].tolist() and got[1].tolist() == want[1].tolist()
    finally:
        alert_figures._CHUNK = before
