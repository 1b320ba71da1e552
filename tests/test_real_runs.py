"""Logs that today's frameworks wrote for real (tests/real/*/PROVENANCE.md says how), read as a user
would read them: what each run did, by hand from the log."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT

HF = ROOT / "tests" / "real" / "hf-trainer-resume"


def _tuimon(*args: str) -> str:
    r = subprocess.run([sys.executable, "-m", "tuimon", *args, "--no-cache"], capture_output=True, text=True,
                       cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout


def _summaries() -> dict[str, dict]:
    return {s["job"]: s for s in json.loads(_tuimon("summary", str(HF), "--format", "json"))}


def _steps(name: str) -> list[int]:
    events = [json.loads(line) for line in _tuimon("events", str(HF / name)).splitlines()]
    return [e["step"] for e in events if e["type"] == "step" and e["loss"] is not None]


def test_a_killed_hugging_face_run_and_its_resume():
    """Run 1 raised at step 130 (a traceback: failed), its last logged loss 6.219 and evaluation 6.218
    (step 100); run 2 resumed and finished all 200 steps, its closing dict's 2,705 samples/s, its last
    evaluation 6.215 (step 200)."""
    runs = _summaries()
    one, two = runs["hf-resume-run1"], runs["hf-resume-run2"]
    assert one["framework"] == two["framework"] == "hf-trainer"
    assert one["status"] == "failed" and one["failure"]["kind"] == "traceback"
    assert "simulated node failure at step 130" in one["failure"]["message"]
    assert one["loss_last"] == 6.219 and (one["eval_last"], one["eval_iteration"]) == ({"eval_loss": 6.218}, 100)
    assert two["status"] == "finished" and two["last_step"] == 200 and two["train_iters"] == 200
    assert two["samples_per_sec"] == 2705 and two["loss_last"] == 6.215
    assert (two["eval_last"], two["eval_iteration"]) == ({"eval_loss": 6.215}, 200)


@pytest.mark.xfail(strict=True, reason="known: a dict the Trainer prints through tqdm.write takes the bar drawn "
                   "before it (at most every 0.1 s: 0 for the dicts at 1-40 here, 50 for 60); its count is in the "
                   "bar drawn right after it, on the next line, which the framing drops (a cleared bar line keeps "
                   "its last segment). Needs a chunk-independent look-ahead in the framing.")
def test_the_steps_of_the_dicts_are_the_ones_the_trainer_logged():
    assert _steps("hf-resume-run1.log") == [1, *range(10, 130, 10)]
    assert _steps("hf-resume-run2.log") == list(range(130, 210, 10))
