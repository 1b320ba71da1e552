"""The timer breakdown: frameworks' nesting, shares of the iteration, no level above 100%."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT, shared_or_skip
from tuimon.figures.breakdown import build, one_off

STRONGHOLD = {  # parsers.timers' sample line, as one STRONGHOLD iteration prints it
    "e2e-time": 6051.73, "forward-compute": 852.5, "backward-compute": 5188.55, "backward-embedding-all-reduce": 0.02,
    "optimizer": 2.45, "batch-generator": 1.21, "offloading-func-call-overhead": 14.16,
    "offloading-fwd-overhead": 751.53, "offloading-bwd-overhead": 61.74, "offloading-fwd-2gpu-overhead": 348.26,
    "offloading-fwd-2cpu-overhead": 402.66, "offloading-bwd-2gpu-overhead": 0.76,
    "offloading-bwd-2cpu-overhead": 60.09, "startup-megatron-init-global": 85280.4, "load-checkpoint": 1200.0,
}


def _by_name(tree):
    return {(p.name, p.parent): p for p in tree.parts}


def _levels_hold(tree) -> None:
    """Every level's parts add up to at most their parent's share (the whole: 1)."""
    shares = {p.name: p.share for p in tree.parts if p.name != "other"}
    levels: dict = {}
    for p in tree.parts:
        levels.setdefault(p.parent, []).append(p.share)
    for parent, parts in levels.items():
        cap = 1.0 if parent is None else shares[parent]
        assert sum(parts) <= cap + 1e-9, (parent, parts, cap)


def test_stronghold_nesting_and_shares():
    tree = build(STRONGHOLD, iteration_ms=6000.0)
    assert tree.whole_ms == pytest.approx(6051.73) and tree.whole_source == "e2e-time"
    parts = _by_name(tree)
    assert parts[("offloading-bwd-2cpu-overhead", "offloading-bwd-overhead")].share == pytest.approx(60.09 / 6051.73)
    assert ("offloading-bwd-overhead", "backward-compute") in parts
    assert ("offloading-fwd-overhead", "forward-compute") in parts
    assert ("batch-generator", "forward-compute") in parts
    assert parts[("backward-compute", None)].share == pytest.approx(5188.55 / 6051.73)
    names = {p.name for p in tree.parts}
    assert "e2e-time" not in names  # the whole is no part of itself
    assert not names & {"startup-megatron-init-global", "load-checkpoint"}  # one-off: the startup panel's
    assert {t["name"] for t in one_off(STRONGHOLD)} == {"startup-megatron-init-global", "load-checkpoint"}
    # the unmeasured rest of the whole: e2e minus its top-level parts
    top = [p for p in tree.parts if p.parent is None]
    other = next(p for p in top if p.name == "other")
    assert other.mean_ms == pytest.approx(6051.73 - (852.5 + 5188.55 + 0.02 + 2.45))
    assert sum(p.share for p in top) == pytest.approx(1.0)
    _levels_hold(tree)


def test_deepspeed_micro_steps_beside_real_parts_are_left_out():
    timers = {"forward": 100.0, "backward": 300.0, "backward_inner": 250.0, "backward_allreduce": 40.0,
              "step": 50.0, "forward_microstep": 100.0, "backward_microstep": 300.0,
              "backward_inner_microstep": 250.0, "backward_allreduce_microstep": 40.0, "step_microstep": 50.0,
              "optimizer_step": 30.0}
    tree = build(timers, iteration_ms=None)
    parts = _by_name(tree)
    assert tree.whole_ms == pytest.approx(450.0) and tree.whole_source == "sum of timers"
    assert ("forward_microstep", "forward") in parts  # forward's only part: shown
    assert ("backward_inner", "backward") in parts and ("backward_allreduce", "backward") in parts
    assert ("backward_inner_microstep", "backward_inner") in parts
    assert not any(name == "backward_microstep" for name, _ in parts)  # would count backward twice
    assert not any(name == "step_microstep" for name, _ in parts)  # step has a real part (optimizer_step)
    _levels_hold(tree)


def test_megatron_deepspeed_wraps_the_engine_timers():
    timers = {"forward-backward": 3965.0, "fwd": 715.0, "bwd": 2380.0, "bwd_inner": 1206.0, "bwd_allreduce": 1173.0,
              "optimizer": 158.0, "step": 154.0, "optimizer_allgather": 146.0}
    tree = build(timers, iteration_ms=4176.0)
    parts = _by_name(tree)
    assert ("fwd", "forward-backward") in parts and ("bwd", "forward-backward") in parts
    assert ("step", "optimizer") in parts and ("optimizer_allgather", "step") in parts
    assert tree.whole_source == "iteration time"
    _levels_hold(tree)


def test_parts_that_outweigh_their_parent_never_give_a_level_above_100():
    # measured on different ranks or intervals: the parts sum past their parent and past the iteration
    timers = {"forward-compute": 500.0, "backward-compute": 900.0, "offloading-bwd-overhead": 1200.0,
              "mystery": 300.0}
    tree = build(timers, iteration_ms=1000.0)
    _levels_hold(tree)
    parts = _by_name(tree)
    assert parts[("backward-compute", None)].share >= parts[("offloading-bwd-overhead", "backward-compute")].share
    assert tree.whole_ms == pytest.approx(500.0 + 1200.0 + 300.0)  # the iteration counts as its parts' sum
    assert ("mystery", None) in parts  # an unknown timer sits under the whole


def test_no_timers_no_breakdown():
    assert build({}, iteration_ms=1000.0).parts == []
    assert build({"load-checkpoint": 10.0}, iteration_ms=None).parts == []


@pytest.mark.parametrize("sub", ["stronghold", "deepspeed", "megatron-deepspeed"])
def test_corpus_breakdowns_stay_within_100_percent(sub):
    corpus = shared_or_skip(f"corpus/{sub}")
    out = subprocess.run([sys.executable, "-m", "tuimon", "summary", "--format", "json", "--no-cache", str(corpus)],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    with_breakdown = [r for r in rows if r["breakdown"]]
    assert with_breakdown, f"no job in {corpus} has a timer breakdown"
    for r in with_breakdown:
        shares = {p["name"]: p["share"] for p in r["breakdown"] if p["name"] != "other"}
        levels: dict = {}
        for p in r["breakdown"]:
            assert set(p) >= {"name", "mean_ms", "parent", "share"}
            assert 0.0 <= p["share"] <= 1.0, (r["job"], p)
            assert not p["name"].startswith("startup"), (r["job"], p)
            levels.setdefault(p["parent"], []).append(p["share"])
        for parent, parts in levels.items():
            cap = 1.0 if parent is None else shares[parent]
            assert sum(parts) <= cap + 2e-4, (r["job"], parent, parts)  # shares are rounded to 4 places


def test_megatron_1x_backward_holds_the_engine_backward():
    """sc22's ZeRO-Offload/Infinity runs: Megatron 1.x's backward-backward calls the DeepSpeed
    engine's backward, which times backward_inner and backward_allreduce."""
    timers = {"forward": 1797.4, "backward": 12730.0, "backward-backward": 6370.5, "backward-allreduce": 0.0,
              "backward_inner": 6331.8, "backward_allreduce": 38.5, "optimizer": 8020.0}
    parts = _by_name(build(timers, iteration_ms=22560.9))
    assert ("backward_inner", "backward-backward") in parts and ("backward_allreduce", "backward-backward") in parts
    _levels_hold(build(timers, iteration_ms=22560.9))
