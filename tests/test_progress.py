"""The fallback reader of training scripts' own step lines (parsers.progress):
when it reads a file, and what a run of such lines sums up to."""
from __future__ import annotations

import pytest

from tuimon.parsers import ALL_PARSERS
from tuimon.parsers.columns import expand
from tuimon.parsers.events import Step
from tests.conftest import FORMATS
from tests.test_summary import summary_of
from tuimon.engine.blocks import BlockEngine
from tuimon.figures.columns import progress_text
from tuimon.figures.record import from_dict

MEGATRON = (" iteration      {i}/    1000 | consumed samples:          {s} | elapsed time per iteration (ms): 2500.0 |"
            " learning rate: 3.000E-04 | global batch size:    64 | lm loss: 2.000000E+00 | loss scale: 4096.0 |"
            " number of skipped iterations:   0 | number of nan iterations:   0 |")
CUSTOM = "step {i} | loss 2.5 | step_time 0.25 s"


def _events(lines: list[str], block: int = 3) -> list:
    ps = BlockEngine("run.log", ALL_PARSERS)
    events: list = []
    for at in range(0, len(lines), block):
        text = "".join(line + "\n" for line in lines[at:at + block])
        events.extend(expand(ps.feed_block(text, at + 1)))
    return events, ps


def _custom_steps(events) -> list[int]:
    return [e.step for e in events if isinstance(e, Step)]


def test_a_script_s_own_lines_are_steps():
    events, ps = _events([CUSTOM.format(i=i) for i in range(1, 7)])
    assert _custom_steps(events) == [1, 2, 3, 4, 5, 6]
    assert all(e.elapsed_ms == 250.0 for e in events if isinstance(e, Step))
    assert "progress" in ps.active_names


def test_off_in_a_run_whose_framework_gives_its_steps():
    """A Megatron-LM log holding a line of a script's shape: its iterations are
    read by Megatron's parser, and nothing is read twice."""
    lines = [CUSTOM.format(i=0)] + [MEGATRON.format(i=i, s=64 * i) for i in range(1, 10)]
    for block in (1, 3, 20):  # the fallback woken first, then switched off; or never on
        events, ps = _events(lines, block)
        assert "progress" not in ps.active_names
        assert [e.iteration for e in events if e.type == "iteration"] == list(range(1, 10))
        assert _custom_steps(events) == ([0] if block == 1 else [])


def test_on_beside_a_framework_that_logs_no_loss():
    """DeepSpeed's step lines carry no loss: a script driving its engine logs its
    own, and both are read (the engine's step=0 when it is built is no step)."""
    ds = "[2026-03-02 10:16:01,000] [INFO] [logging.py:96:log_dist] [Rank 0] step={i}, skipped=0, lr=[0.0001]"
    lines = [ds.format(i=0)] + [CUSTOM.format(i=i) for i in range(1, 5)] + [ds.format(i=5)]
    events, ps = _events(lines)
    assert {"deepspeed", "progress"} <= set(ps.active_names)
    assert [(e.step, e.loss) for e in events if isinstance(e, Step)] == \
        [(1, 2.5), (2, 2.5), (3, 2.5), (4, 2.5), (5, None)]


@pytest.mark.parametrize("line", [
    "step 20: train loss 2.1000, val loss 2.3000",  # an evaluation
    "Evaluating:  100%|##########| 8/8 [00:01<00:00,  6.50it/s, loss=2.300]",  # a bar
    "Skipping step. Attempted loss scale: 65536, reducing to 32768",  # no step number
    "step 5 | loss n/a",  # no loss value
    "time per step: 1.5 s, loss: 2.0",
])
def test_lines_that_are_no_step(line):
    events, _ = _events([CUSTOM.format(i=1), line])
    assert _custom_steps(events) == [1]


def test_custom_loop_run():
    """A hand-written loop on a DeepSpeed engine: 60 steps of its own with their
    loss, time and samples/s (evaluation lines and bars left out), DeepSpeed's
    step lines every 10 (the same steps: each counted once), and the run's length from ``step N/60``."""
    s = summary_of(FORMATS / "custom-loop-run.log")
    assert s["framework"] == "deepspeed" and s["status"] == "finished"  # its last step is the 60th of 60
    assert s["steps_seen"] == 60 and s["train_iters"] == 60 and s["last_step"] == 60
    assert s["last_iteration"] is None and progress_text(from_dict(s)) == "60/60"  # the Iter column
    assert s["loss_last"] == 1.5
    assert 250 < s["iter_time_ms"]["median"] < 280 and s["iter_time_ms"]["n"] >= 50
    assert 110 < s["samples_per_sec"] < 130


def test_olmo_headers_and_their_metric_lines():
    """OLMo logs each step as a header line and one metric a line under it."""
    lines = []
    for step in range(1, 4):
        lines += [f"[2024-02-04 21:30:3{step}] INFO     [olmo.train:816, rank=0] [step={step}/739328]",
                  f"    train/CrossEntropyLoss={11 - step}.07",
                  "    train/Perplexity=64,150",
                  "    throughput/device/tokens_per_second=9,563"]
    lines.append("    train/CrossEntropyLoss=1.0")  # no header of its own: no step
    for block in (2, 5, 100):
        events, _ = _events(lines, block)
        assert [(e.step, e.loss) for e in events if isinstance(e, Step)] == [(1, 10.07), (2, 9.07), (3, 8.07)]


def test_composer_batches_and_their_metric_lines():
    """Composer (LLM Foundry) logs each batch as '[batch=N/M]:' and one metric a
    line under it; evaluation metrics are no training loss."""
    lines = []
    for batch in range(1, 4):
        lines += [f"[batch={batch}/4800]:", "\t Train time/batch: 0", f"\t Train loss/train/total: {4 - batch}.5",
                  "\t Train metrics/train/LanguageCrossEntropy: 3.1", "\t Eval loss/eval/total: 9.9"]
    for block in (3, 100):
        events, _ = _events(lines, block)
        assert [(e.step, e.loss) for e in events if isinstance(e, Step)] == [(1, 3.5), (2, 2.5), (3, 1.5)]
