from __future__ import annotations

import os
import re
import subprocess
import sys

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
