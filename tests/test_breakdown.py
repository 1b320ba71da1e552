"""The timer breakdown: frameworks' nesting, steady means, shares of the iteration, overlap
marked rather than hidden, occasional timers apart."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import ROOT, shared_or_skip
from tuimon.figures.breakdown import OVERLAP_TOLERANCE, offload_share, one_off
from tuimon.figures.breakdown import build as build_steady
from tuimon.store.timers import MAX_MARKS, TimerStat, warmup_count


def build(means: dict, iteration_ms, reports: int = 9, occasional=()):
    """The breakdown of timers each reported ``reports`` times in the steady window."""
    return build_steady({n: (reports, v) for n, v in means.items()}, iteration_ms, occasional)

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
    """Every level's parts add up to at most their parent's share (the whole: 1), unless
    they are marked as overlapping; a share is always the part's own time over the whole."""
    shares = {p.name: p.share for p in tree.parts if p.name != "other"}
    levels: dict = {}
    for p in tree.parts:
        assert p.share == pytest.approx(p.mean_ms / tree.whole_ms)
        levels.setdefault(p.parent, []).append(p)
    for parent, parts in levels.items():
        cap = 1.0 if parent is None else shares[parent]
        if any(p.overlap for p in parts):
            assert all(p.overlap for p in parts) and not any(p.name == "other" for p in parts)
            assert sum(p.share for p in parts) > cap
        else:
            # within the 0.1% a log's own rounding gives (19.41 ms of micro-steps in a 19.40 ms timer)
            assert sum(p.share for p in parts) <= cap * (1 + OVERLAP_TOLERANCE) + 1e-9, (parent, parts, cap)


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


def test_parts_that_outweigh_their_parent_are_marked_overlapping_and_never_inflate_it():
    # timed on other streams or asynchronously: the parts sum past their parent and past the iteration
    timers = {"forward-compute": 500.0, "backward-compute": 900.0, "offloading-bwd-overhead": 1200.0,
              "mystery": 300.0}
    tree = build(timers, iteration_ms=1000.0)
    _levels_hold(tree)
    parts = _by_name(tree)
    assert tree.whole_ms == pytest.approx(1000.0)  # the iteration stays the whole
    assert parts[("backward-compute", None)].share == pytest.approx(0.9)  # its own time, not its parts'
    assert parts[("offloading-bwd-overhead", "backward-compute")].overlap
    assert parts[("offloading-bwd-overhead", "backward-compute")].share == pytest.approx(1.2)
    assert all(p.overlap for p in tree.parts if p.parent is None)  # 500 + 900 + 300 > 1000
    assert ("mystery", None) in parts  # an unknown timer sits under the whole
    assert all(d["overlap"] is True for d in tree.as_list() if d["parent"] is None)


def test_timers_reported_in_fewer_than_half_the_reports_are_listed_apart():
    steady = {"forward-compute": (40, 500.0), "backward-compute": (40, 900.0), "all-reduce-once": (3, 300.0),
              "broadcast": (4000, 0.2)}
    tree = build_steady(steady, 1500.0, occasional={"broadcast"})
    names = {p.name for p in tree.parts}
    assert names == {"forward-compute", "backward-compute", "other"}
    assert {t["name"] for t in tree.apart} == {"all-reduce-once", "broadcast"}
    assert next(t for t in tree.apart if t["name"] == "all-reduce-once") == {
        "name": "all-reduce-once", "ms": 300.0, "count": 3}


def test_a_timer_that_measured_nothing_is_left_out_and_its_parts_move_up():
    tree = build({"forward": 0.0, "forward_microstep": 20.0, "backward": 0.0, "optimizer": 0.0}, 25.0)
    assert [(p.name, p.parent) for p in tree.parts] == [("forward_microstep", None), ("other", None)]
    assert build({"forward": 0.0, "backward": 0.0}, 25.0).parts == []


def _exact_steady(values):
    from tuimon.store.timers import warmup_count
    kept = values[warmup_count(len(values)):]
    return len(kept), sum(kept) / len(kept)


@pytest.mark.parametrize("n", [1, 2, 5, 11, 100, MAX_MARKS - 1, MAX_MARKS + 1, 10 * MAX_MARKS + 7, 100_003])
def test_a_timer_s_steady_mean_leaves_out_the_warm_up(n):
    """The first report (here 100x the rest) and 10% of the run are left out, as for the
    iteration time; past MAX_MARKS marks the window starts at most a stride later."""
    values = [1500.0] + [14.0 + (i % 7) for i in range(n - 1)]
    stat = TimerStat("offload")
    for v in values:
        stat.add(v)
    count, mean = stat.steady()
    want_count, want_mean = _exact_steady(values)
    assert len(stat._at) <= MAX_MARKS + 1
    assert want_count - count <= max(1, n // 500) and count <= want_count
    assert mean == pytest.approx(want_mean, rel=1e-3)
    if n <= MAX_MARKS:
        assert (count, mean) == (want_count, pytest.approx(want_mean, rel=1e-12))


def test_merged_timers_read_as_one_stream():
    values = [900.0] + [10.0] * 49 + [20.0] * 30
    one, a, b = TimerStat("forward"), TimerStat("forward"), TimerStat("forward")
    for v in values:
        one.add(v)
    for v in values[:50]:
        a.add(v)
    for v in values[50:]:
        b.add(v)
    a.merge(b)
    assert a.steady() == one.steady() and a.count == 80


@pytest.mark.parametrize("n", [1, 80, MAX_MARKS - 1, MAX_MARKS + 1, 5 * MAX_MARKS + 7])
def test_merging_into_an_empty_timer_is_marking_each_report(n):
    """The first part merged (most jobs are one file) is taken whole: the same marks, and
    so the same steady figures, as merging report by report, and a later part still merges."""
    part, by_mark, whole, later = (TimerStat("fwd") for _ in range(4))
    for i in range(n):
        part.add(900.0 if i == 0 else 10.0 + (i % 7))
    for at, total, value in zip(part._at[1:], part._sum[1:], part._val[1:]):  # what merging did report by report
        by_mark._mark(at, total, value)
    by_mark._stride, by_mark.total_ms, by_mark.count = part._stride, part.total_ms, part.count
    by_mark.in_training, by_mark.last_ms = part.in_training, part.last_ms
    whole.merge(part)
    assert list(whole._at) == list(by_mark._at) and list(whole._sum) == list(by_mark._sum)
    assert whole.steady() == by_mark.steady() and whole._stride == part._stride
    assert whole.spread() == by_mark.spread()
    assert whole._at is not part._at  # its own arrays: the part's store is not changed by what follows
    for i in range(50):
        later.add(20.0)
    whole.merge(later)
    by_mark.merge(later)
    assert whole.steady() == by_mark.steady() and whole.count == n + 50



@pytest.mark.parametrize("base", [1, 7, MAX_MARKS - 3, MAX_MARKS, 3 * MAX_MARKS + 5])
@pytest.mark.parametrize("n", [1, 2, MAX_MARKS // 2, MAX_MARKS + 1, 4 * MAX_MARKS + 9])
def test_merging_into_a_timer_marks_as_marking_each_report(base, n):
    """A later part's marks go in a run at a time: the same marks, thinned at the same
    moments, as marking them one by one (what merge did)."""
    first, by_mark, part = TimerStat("fwd"), TimerStat("fwd"), TimerStat("fwd")
    for i in range(base):
        first.add(900.0 if i == 0 else 10.0 + (i % 5) / 3)
    for i in range(n):
        part.add(20.0 + (i % 11) / 7)
    by_mark.merge(first)
    base_n, base_sum = by_mark.count, by_mark.total_ms
    for at, total, value in zip(part._at[1:], part._sum[1:], part._val[1:]):  # what merging did mark by mark
        by_mark._mark(base_n + at, base_sum + total, value)
    by_mark._stride = max(by_mark._stride, part._stride)
    first.merge(part)
    assert list(first._at) == list(by_mark._at) and list(first._sum) == list(by_mark._sum)
    assert str(list(first._val)) == str(list(by_mark._val)) and first._stride == by_mark._stride
    assert len(first._at) <= MAX_MARKS

def _state(t: TimerStat) -> tuple:
    return (t.total_ms, t.count, t.last_ms, t.in_training, list(t._at), list(t._sum),
            list(t._val[1:]), t._stride)  # (marks[0] falls on no report: NaN)


@pytest.mark.parametrize("seed", range(80))
def test_adding_in_bulk_is_adding_one_by_one(seed):
    """The compiled core's timer rows are added a block at a time (``add_many``): the same
    float sums and the same marks as ``add`` report by report, across thinnings, after
    merges and with training and setup reports mixed, from a numpy array or a list."""
    import random

    import numpy as np

    rng = random.Random(seed)
    one, bulk = TimerStat("x"), TimerStat("x")
    for _ in range(rng.randrange(1, 9)):
        if rng.random() < 0.3:  # a part merged in
            part = TimerStat("x")
            for _ in range(rng.randrange(0, 3 * MAX_MARKS)):
                part.add(rng.random() * 100)
            one.merge(part)
            bulk.merge(part)
        values = [rng.random() * 10 ** rng.randrange(-3, 6)
                  for _ in range(rng.choice([0, 1, 2, 7, 16, 17, 900, MAX_MARKS + 1, 2500]))]
        training = rng.random() < 0.5
        for v in values:
            one.add(v, training)
        bulk.add_many(np.array(values, dtype=np.float64) if rng.random() < 0.5 else values, training)
        assert _state(bulk) == _state(one)
    assert bulk.steady() == one.steady()


def test_stronghold_steady_breakdown_from_the_log(tmp_path):
    """The first report's 1505.9 ms func-call overhead is warm-up: left out as the first
    iteration time is; the whole is the steady mean of e2e-time."""
    line = ("time (ms) | e2e-time: {e2e} | forward-compute: 857.2 | backward-compute: {bwd} | optimizer: 2.4 | "
            "offloading-func-call-overhead: {fc} | offloading-fwd-overhead: 700.0 | offloading-fwd-2gpu-overhead: "
            "300.0 | offloading-fwd-2cpu-overhead: 400.0")
    rows = [(6618.7, 5750.5, 1505.9), (6001.6, 5129.4, 14.1), (5990.7, 5122.2, 15.4), (5883.4, 5040.1, 13.7),
            (5964.0, 5076.1, 25.2)]
    text = ["using world size: 1, data-parallel-size: 1, tensor-model-parallel size: 1, "
            "pipeline-model-parallel size: 1"]
    for k, (e2e, bwd, fc) in enumerate(rows, 1):
        text.append(f" iteration {10 * k:8d}/      50 | elapsed time per iteration (ms): {e2e} | "
                    "learning rate: 4.687E-07 | global batch size:     4 | lm loss: 1.106684E+01 |")
        text.append(line.format(e2e=e2e, bwd=bwd, fc=fc))
    log = tmp_path / "stronghold.log"
    log.write_text("\n".join(text) + "\n")
    out = subprocess.run([sys.executable, "-m", "tuimon", "summary", "--format", "json", "--no-cache", str(log)],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    row = json.loads(out.stdout)[0]
    steady = rows[1:]
    whole = sum(r[0] for r in steady) / 4
    assert row["breakdown_whole_ms"] == pytest.approx(whole, abs=1e-3)
    parts = {p["name"]: p for p in row["breakdown"]}
    fc = sum(r[2] for r in steady) / 4
    assert parts["offloading-func-call-overhead"]["mean_ms"] == pytest.approx(fc, abs=1e-3)  # 17.1, not 314.9
    assert parts["offloading-func-call-overhead"]["share"] == pytest.approx(fc / whole, abs=1e-4)
    assert row["offload_share"] == pytest.approx((700.0 + fc) / whole, abs=2e-4)


def test_a_timer_printed_only_in_the_startup_block_is_a_setup_timer():
    log = shared_or_skip("corpus/megatron-lm/elena-1861140.out.log")
    out = subprocess.run([sys.executable, "-m", "tuimon", "summary", "--format", "json", "--no-cache", str(log)],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    row = json.loads(out.stdout)[0]
    assert not any(p["name"] == "all-reduce-start-timestamps-tensor" for p in row["breakdown"])
    assert "all-reduce-start-timestamps-tensor" in {t["name"] for t in row["startup_timers"]}


def test_offload_share_counts_the_outermost_offload_timers_once():
    tree = build(STRONGHOLD, iteration_ms=6000.0)
    assert offload_share(tree.parts) == pytest.approx((14.16 + 751.53 + 61.74) / 6051.73)
    assert offload_share(build({"forward": 10.0}, 20.0).parts) is None


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
            assert set(p) >= {"name", "mean_ms", "parent", "share", "overlap"}
            assert p["share"] == pytest.approx(p["mean_ms"] / r["breakdown_whole_ms"], abs=2e-4), (r["job"], p)
            assert not p["name"].startswith("startup"), (r["job"], p)
            levels.setdefault(p["parent"], []).append(p)
        for parent, parts in levels.items():
            cap = 1.0 if parent is None else shares[parent]
            if not parts[0]["overlap"]:  # shares are rounded to 4 places
                assert sum(p["share"] for p in parts) <= cap + 2e-4, (r["job"], parent, parts)


def test_megatron_1x_backward_holds_the_engine_backward():
    """sc22's ZeRO-Offload/Infinity runs: Megatron 1.x's backward-backward calls the DeepSpeed
    engine's backward, which times backward_inner and backward_allreduce."""
    timers = {"forward": 1797.4, "backward": 12730.0, "backward-backward": 6370.5, "backward-allreduce": 0.0,
              "backward_inner": 6331.8, "backward_allreduce": 38.5, "optimizer": 8020.0}
    parts = _by_name(build(timers, iteration_ms=22560.9))
    assert ("backward_inner", "backward-backward") in parts and ("backward_allreduce", "backward-backward") in parts
    _levels_hold(build(timers, iteration_ms=22560.9))


def test_a_global_timer_that_read_zero_leaves_its_real_parts_not_its_micro_steps():
    """thetagpu-cobalt-10143687's steady report: forward/backward/step 0.00 beside their micro-steps
    and backward_inner: backward_microstep is backward_inner again, not a part of its own."""
    timers = {"forward_microstep": 215937.64, "backward_microstep": 678418.19, "backward_inner_microstep": 678398.62,
              "backward_allreduce_microstep": 19.41, "step_microstep": 173.02, "forward": 0.0, "backward": 0.0,
              "backward_inner": 678398.69, "backward_allreduce": 19.40, "step": 0.0}
    tree = build(timers, iteration_ms=894667.875)
    names = [p.name for p in tree.parts]
    assert "backward_microstep" not in names and not any(p.overlap for p in tree.parts)
    top = sum(p.share for p in tree.parts if p.parent is None)
    assert top == pytest.approx(1.0, abs=1e-3)  # the rest, 0.02%, is below an "other" row's 0.1%
    _levels_hold(tree)


def _neox_log(evals: bool, megatron_eval: bool = False, n: int = 60,
              timers_after: bool = False) -> tuple[str, list[float], list[float]]:
    """A GPT-NeoX run as its training loop prints it (DeepSpeed's timer lines, then NeoX's
    iteration record; every 10th iteration an evaluation pass, whose forward passes and wall
    time the next interval's timers and record hold); the steady record times and forward
    reports a breakdown must take (the warm-up out, the record after each evaluation out, and
    the timer reports of the two intervals after it: a log may print its timers before its
    record, as NeoX does, or after it, as Megatron does: ``timers_after``)."""
    lines, elapsed, forward = [], [], []
    for it in range(1, n + 1):
        after = evals and it > 1 and (it - 1) % 10 == 0
        fwd = 7000.0 + it if after else 100.0 + (it % 7)
        ms = 20000.0 + it if after else 600.0 + (it % 5)
        timers = ["[2023-10-20 00:22:16,821] [INFO] [logging.py:96:log_dist] [Rank 0] step=" + str(it) +
                  ", skipped=0, lr=[0.0009976611397856518, 0.0009976611397856518], mom=[[0.9, 0.95], [0.9, 0.95]]",
                  "[2023-10-20 00:22:16,821] [INFO] [logging.py:96:log_dist] [Rank 0] rank=0 time (ms) | "
                  f"forward: {fwd:.2f} | backward: 317.85 | backward_inner: 317.81 | backward_allreduce: 0.01 | "
                  "step: 4.31"]
        record = (f" samples/sec: 858.114 | iteration {it:8d}/{n:8d} | elapsed time per iteration (ms): {ms:.1f} | "
                  "learning rate: 9.977E-04 | approx flops per GPU: 55.3TFLOPS | lm_loss: 3.960461E+00 | "
                  "loss scale: 4096.0 | number of skipped iterations:   0 | number of nan iterations:   0 |")
        lines += [record, *timers] if timers_after else [*timers, record]
        elapsed.append(ms)
        forward.append(fwd)
        if evals and it % 10 == 0:
            if megatron_eval:
                text = f" validation loss at iteration {it} | lm loss value: 3.948146E+00 | lm loss PPL: 5.183916E+01 | "
            else:
                text = f" validation results at iteration {it} | lm_loss value: 3.948146E+00 | " \
                       "lm_loss_ppl value: 5.183916E+01 | "
            lines += ["-" * (len(text) + 1), text, "-" * (len(text) + 1)]
    skip = warmup_count(n)

    def after_pass(it: int, intervals: int) -> bool:
        return evals and it > 10 and 1 <= (it - 1) % 10 + 1 <= intervals

    whole = [e for i, e in enumerate(elapsed) if i >= skip and not after_pass(i + 1, 1)]
    # the timer reports: those aside are out of the count (before their record: the reports until the
    # second record after the pass, two; after it: the one after the first record), then the warm-up
    counted = [(i + 1, f) for i, f in enumerate(forward) if not after_pass(i + 1, 1 if timers_after else 2)]
    fwd_skip = warmup_count(len(counted))
    return "\n".join(lines) + "\n", whole, [f for _, f in counted[fwd_skip:]]


@pytest.mark.parametrize("engine", ["core", "python"])
@pytest.mark.parametrize("megatron_eval", [False, True])
@pytest.mark.parametrize("timers_after", [False, True])
def test_intervals_that_held_an_evaluation_are_out_of_the_breakdown(engine, megatron_eval, timers_after):
    """NeoX times its next interval over the evaluation pass (forward 7,685 ms, elapsed
    20,649 ms between 103 and 599 ms ones): that record and its timer reports are out of
    the breakdown's steady window, on either engine, and each part carries the p10-p90 of
    the reports it is the mean of."""
    from tests.helpers.records import summary_of_text
    from tuimon.engine import native

    if engine == "core" and native.core is None:
        pytest.skip("the compiled core is not importable: pip install -e '.[test]' builds it")
    text, whole, forward = _neox_log(True, megatron_eval, timers_after=timers_after)
    before = native.use(native.core if engine == "core" else None)
    try:
        s = summary_of_text(text, "neox.log").as_dict()
    finally:
        native.use(before)
    assert s["eval_iteration"] == 60
    assert s["breakdown_whole_ms"] == pytest.approx(sum(whole) / len(whole), abs=1e-3)
    parts = {p["name"]: p for p in s["breakdown"]}
    assert parts["forward"]["mean_ms"] == pytest.approx(sum(forward) / len(forward), abs=1e-3)
    p10, p90 = np.percentile(forward, [10, 90])
    assert (parts["forward"]["p10_ms"], parts["forward"]["p90_ms"]) == (pytest.approx(p10, abs=1e-3),
                                                                      pytest.approx(p90, abs=1e-3))
    assert parts["backward"]["share"] == pytest.approx(317.85 / (sum(whole) / len(whole)), abs=1e-4)
    # the record times stay what the log printed: the evaluation's intervals are in the run's wall time
    assert s["iter_time_ms"]["max"] == pytest.approx(20051.0, abs=0.1)  # (iteration 51, after the pass at 50)


def test_without_an_evaluation_every_record_is_in_the_window():
    from tests.helpers.records import summary_of_text

    text, whole, forward = _neox_log(False)
    s = summary_of_text(text, "neox.log").as_dict()
    assert s["breakdown_whole_ms"] == pytest.approx(sum(whole) / len(whole), abs=1e-3)
    assert {p["name"]: p for p in s["breakdown"]}["forward"]["mean_ms"] == pytest.approx(
        sum(forward) / len(forward), abs=1e-3)


@pytest.mark.parametrize("n", [5, 300, 3 * MAX_MARKS + 11])
def test_a_timer_s_spread_is_of_its_steady_reports(n):
    """Every steady report while they fit the marks; past them a systematic sample (every
    stride-th report) whose p10-p90 is within a few percent of the reports' own."""
    rng = np.random.default_rng(n)
    values = np.concatenate(([1505.9], rng.lognormal(2.6, 0.5, n - 1)))  # a first report 100x the rest
    t = TimerStat("offload")
    t.add_many(values[: n // 2])
    for v in values[n // 2:]:
        t.add(float(v))
    p10, p90 = t.spread()
    want = np.percentile(values[warmup_count(n):], [10, 90])
    if t._stride == 1:
        assert (p10, p90) == (pytest.approx(want[0], abs=1e-9), pytest.approx(want[1], abs=1e-9))
    else:
        assert p10 == pytest.approx(want[0], rel=0.05) and p90 == pytest.approx(want[1], rel=0.05)
    assert p90 < 1505.9  # the warm-up report is never in it


def test_a_timer_with_too_few_steady_reports_has_no_spread():
    t = TimerStat("fwd")
    for v in (900.0, 10.0, 11.0):
        t.add(v)
    assert t.spread() is None


def test_breakdown_lines_show_the_spread_where_there_is_room():
    from tuimon.ui.render import tree_bars

    parts = [{"name": "forward", "mean_ms": 102.8, "share": 0.15, "depth": 0, "p10_ms": 101.8, "p90_ms": 103.7},
             {"name": "offloading-fwd-overhead", "mean_ms": 16.6, "share": 0.02, "depth": 0, "p10_ms": 3.1,
              "p90_ms": 1505.9},
             {"name": "other", "mean_ms": 3.0, "share": 0.01, "depth": 0, "p10_ms": None, "p90_ms": None}]
    wide = tree_bars(parts, line_width=100).plain.splitlines()
    assert wide[0].endswith("101.8–103.7") and wide[1].endswith("3.10–1506") and wide[2].endswith("1.0%")
    assert all(len(line) <= 100 for line in wide)
    for width in range(44, 140):  # a full line: the bars grow to the width, never past it
        assert max(map(len, tree_bars(parts, width=200, line_width=width).plain.splitlines())) <= width
    narrow = tree_bars(parts, line_width=44).plain.splitlines()
    assert all("–" not in line and len(line) <= 44 for line in narrow)  # the spread goes before the names


def test_timer_names_cut_to_fit_stay_told_apart():
    """On a narrow panel the names are cut where they tell nothing apart: STRONGHOLD's
    offloading-bwd-2cpu-overhead and -2gpu-overhead keep what differs (a plain cut read the same)."""
    from tuimon.ui.render import tree_bars

    names = ["offloading-bwd-2cpu-overhead", "offloading-bwd-2gpu-overhead", "offloading-fwd-2cpu-overhead"]
    parts = [{"name": n, "depth": 1, "share": 0.01, "mean_ms": 1.0} for n in names]
    lines = tree_bars(parts, line_width=48).plain.splitlines()
    labels = [line[:line.index(" ·")].strip() for line in lines]
    assert all(len(label) < len(name) for label, name in zip(labels, names)), labels  # cut, to fit
    assert len(set(labels)) == 3, labels
    assert "2cpu" in labels[0] and "2gpu" in labels[1] and "fwd" in labels[2], labels


@pytest.mark.parametrize("seed", range(30))
def test_the_names_of_a_block_come_in_order_of_first_report(seed):
    """timer_fold._first_seen: each distinct name index once, in order of first report, with
    where that report is (what np.unique's first indexes, ordered, give)."""
    import numpy as np

    from tuimon.store.timer_fold import _first_seen

    rng = np.random.default_rng(seed)
    ids = rng.integers(0, rng.integers(1, 400), size=rng.integers(0, 2000)).astype(np.uint32)
    unique, first = np.unique(ids, return_index=True)
    expected = [(int(unique[j]), int(first[j])) for j in np.argsort(first, kind="stable")]
    assert _first_seen(ids) == expected
