from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT


def test_demo_runs_five_jobs_and_cleans_up():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-m", "tuimon", "demo", "--headless", "--seconds", "3"], capture_output=True, text=True,
                       env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    last = r.stdout.split("tuimon demo: 5 simulated jobs in ")[-1]
    directory = last.split(" ")[0]
    assert not os.path.exists(directory)
    for job, status in (("gpt-52b-oom-4004", "failed (oom)"), ("gpt-175b-startup-4003", "starting"),
                        ("stronghold-5b-offload-4002", "training"), ("megatron-deepspeed-gpt-13b-4001", "training"),
                        ("llama-7b-ranks-straggler-4005", "training")):
        assert re.search(rf"{job}\s+\S+\s+{re.escape(status)}", last), job
    assert "\x1b" not in r.stdout  # not a terminal: no screen clearing sequences


def test_the_demo_logs_show_everything(tmp_path):
    """Its logs, as they stand after 50 ticks: MFU on every training job (each names its
    GPU), the OOM job's .out and .err as one job, memory and checkpoints, a timer tree that
    adds up, and the alerts it is meant to raise."""
    import json

    from tuimon.commands import demo

    tick = demo.simulate(tmp_path)
    for _ in range(50):
        tick()
    tick.close()  # type: ignore[attr-defined]

    def cli(*argv):
        out = subprocess.run([sys.executable, "-m", "tuimon", *argv, "--no-cache", str(tmp_path)], cwd=ROOT,
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == (1 if argv[0] == "alerts" else 0), out.stderr  # (alerts: 1 when it found some)
        return json.loads(out.stdout)

    rows = {r["job"]: r for r in cli("summary", "--format", "json", "--startup-timeout", "25")}
    assert len(rows) == 5 and sorted(f.rsplit(".", 1)[1] for f in rows["gpt-52b-oom-4004"]["files"]) == ["err", "out"]
    assert rows["gpt-52b-oom-4004"]["status"] == "failed" and rows["gpt-52b-oom-4004"]["failure"]["kind"] == "oom"
    for name, r in rows.items():
        if name != "gpt-175b-startup-4003":
            assert r["mfu"] is not None and 0 < r["mfu"] < 1 and r["tflops_per_gpu"]["computed"], name
            assert r["params_billion"] and r["memory"]["gpu_max_allocated_mb"], name
    assert rows["stronghold-5b-offload-4002"]["checkpoints"]
    for r in rows.values():
        assert all(p["share"] <= 1.0 for p in r["breakdown"])
    stronghold = {p["name"]: p for p in rows["stronghold-5b-offload-4002"]["breakdown"]}
    assert stronghold["offloading-bwd-overhead"]["parent"] == "backward-compute"
    alerts = {(a["job"], a["kind"], a["iteration"]) for a in cli("alerts", "--format", "json")}
    assert {("megatron-deepspeed-gpt-13b-4001", "nan", 40), ("llama-7b-ranks-straggler-4005", "loss-spike", 30),
            ("llama-7b-ranks-straggler-4005", "straggler", None), ("gpt-52b-oom-4004", "failed", 6)} <= alerts


@pytest.mark.parametrize("signame", ["SIGHUP", "SIGTERM"])
def test_the_demo_s_logs_go_when_its_terminal_closes(signame):
    """A closed terminal (SIGHUP) or a kill ends the demo: its temporary directory goes with it."""
    import signal
    import time

    proc = subprocess.Popen([sys.executable, "-m", "tuimon", "demo", "--headless", "--seconds", "60"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        m = None
        for _ in range(20):  # its first frame names the directory
            line = proc.stdout.readline()
            m = re.search(r"simulated jobs in (\S+)", line)
            if m:
                break
        assert m, line
        directory = Path(m.group(1))
        assert directory.is_dir()
        time.sleep(1.0)
        proc.send_signal(getattr(signal, signame))
        assert proc.wait(timeout=20) == -getattr(signal, signame)
        assert not directory.exists()
    finally:
        proc.kill()
        proc.wait(timeout=10)
        for pipe in (proc.stdout, proc.stderr):  # (left open, a pipe warns when collected: an error in pytest)
            if pipe is not None:
                pipe.close()
