"""The store takes the core's step rows (TorchTitan's metrics lines, Hugging Face Trainer's
metrics dicts, DeepSpeed's step lines), rate rows (Megatron-DeepSpeed's Effective Tera Flops
and NumWorkers lines, DeepSpeed's samples lines) and memory rows (Megatron's memory reports)
as it takes their events, one by one.

Generated runs of step rows (ranks or none, steps going on, told again, going back, none;
losses finite, NaN, infinite or none; stamps or none; rates and memory or none) among the
events a store sees beside them (an evaluation pass, a job script's start, configs, other
steps, iteration rows of the same file), taken at once, in slices, by a bounded store:
they must leave the store what their events leave it.  And the engine puts a run of
step lines at the place of its events (the log's first stamp before the row of its line).
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers.stores import events_taken, iteration_rows, stored
from tuimon.engine import native
from tuimon.engine.ingest import parse_file
from tuimon.figures.summary import summarize
from tuimon.parsers.columns import IterationRows, MemoryRows, RateRows, StepRows, expand
from tuimon.parsers.events import Evaluation, Memory, Milestone, RunConfig, Step, Throughput, frozen_map

_RANKS = st.sampled_from([None, None, 0, 1])
_LOSS = st.sampled_from([2.5, 3.25, 1.0, None, math.nan, math.inf, -math.inf])
_MAYBE = st.sampled_from([None, None, 120.5, 0.0, -1.0, math.nan])
_SOME = st.sampled_from([120.5, 0.0, -1.0, math.nan])  # (a samples line's memory: both figures, or none)


def _other(kind: str, file: str, line: int, rank, wall, step: int):
    common = dict(file=file, line=line, rank=rank, node=None, wall_time=wall)
    if kind == "evaluation":
        return Evaluation(**common, iteration=step, metrics=frozen_map({"loss": 2.0}))
    if kind == "job-start":
        return Milestone(**common, name="job-start")
    if kind == "config":
        return RunConfig(**common, train_iters=3000, global_batch=256)
    if kind == "step":
        return Step(**common, step=step, loss=2.0, lr=1e-4, samples_per_sec=12.5)
    if kind == "throughput":
        return Throughput(**common, iteration=step, tflops_reported=99.0)
    if kind == "memory":
        return Memory(**common, gpu_max_reserved_mb=1000.0 + line)
    return IterationRows(file, [line], [rank], [None], [wall], [max(step, 1)], [1000],
                         {"losses": [frozen_map({"lm loss": 2.75})], "elapsed_ms": [900.0]})


_OTHERS = ["evaluation", "job-start", "config", "step", "throughput", "memory", "iteration-rows"]


@st.composite
def _items(draw) -> list:
    """A log's items as the engine hands them over, for one or two files: runs of step rows
    at their place among other events."""
    items: list = []
    for file in draw(st.sampled_from([["a.log"], ["a.log", "b.log"]])):
        step, line = 0, 0
        rows: list = []
        for _ in range(draw(st.integers(1, 40))):
            line += draw(st.integers(1, 3))
            wall = draw(st.sampled_from([None, 1.7e9 + line, 1.6e9]))
            step = max(0, step + draw(st.sampled_from([1, 1, 1, 0, -3])))
            if draw(st.integers(0, 3)) > 0:
                rows.append((line, draw(_RANKS), None, wall, draw(st.sampled_from([step, step, None])), draw(_LOSS),
                             draw(st.sampled_from([None, 3e-4])), draw(st.sampled_from([None, 1000.0, -2.0])),
                             draw(_MAYBE), draw(_MAYBE), draw(_MAYBE), draw(st.sampled_from([None, 30.5, math.nan])),
                             draw(st.sampled_from([None, 0, 4])), draw(st.sampled_from([None, None, 12.5, math.nan]))))
                continue
            if rows:
                items.append(StepRows(file, rows))
                rows = []
            items.append(_other(draw(st.sampled_from(_OTHERS)), file, line, draw(_RANKS), wall, step))
        if rows:
            items.append(StepRows(file, rows))
    return items


@st.composite
def _blocks(draw) -> list:
    """Megatron-DeepSpeed's blocks as the engine hands them over: rate, step and memory rows at
    their place among the block's other events (their lines interleaved), its iteration rows
    (counters going on, repeated, going back: a restart) after them all, for one or two files."""
    items: list = []
    for file in draw(st.sampled_from([["a.log"], ["a.log", "b.log"]])):
        counter, line = 0, 0
        for _ in range(draw(st.integers(1, 6))):
            iterations: list = []
            rates: list = []
            steps: list = []
            memories: list = []
            for _ in range(draw(st.integers(1, 12))):
                line += draw(st.integers(1, 3))
                wall = draw(st.sampled_from([None, 1.7e9 + line]))
                rank = draw(_RANKS)
                kind = draw(st.sampled_from(["iteration", "iteration", "effective", "numworkers", "samples", "memory",
                                             "step", "other"]))
                if kind == "iteration":
                    counter = max(1, counter + draw(st.sampled_from([1, 1, 0, -30])))
                    iterations.append((line, rank, wall, counter, _iteration_fields(draw)))
                    continue
                if kind == "other":
                    _close(items, file, rates, steps, memories)
                    items.append(_other(draw(st.sampled_from(_OTHERS[:-1])), file, line, rank, wall, counter))
                    continue
                if kind == "step":  # DeepSpeed's step line or its pipeline engine's, told again or not
                    step = counter + draw(st.sampled_from([0, 0, 1]))
                    steps.append((line, rank, None, wall, step, draw(_LOSS), draw(st.sampled_from([None, 3e-4])),
                                  draw(st.sampled_from([None, 900.0])), draw(st.sampled_from([None, None, 99.0])),
                                  None, None, None,
                                  draw(st.sampled_from([None, 2])), draw(st.sampled_from([None, 12.5]))))
                    continue
                if kind == "memory":  # Megatron's memory report
                    memories.append((line, rank, None, wall, "after 10 iterations", draw(_MAYBE), draw(_MAYBE),
                                     draw(_MAYBE), draw(_MAYBE)))
                    continue
                if kind == "samples":  # DeepSpeed's throughput timer, with its memory or not
                    memory = draw(st.booleans())
                    rates.append((line, rank, None, wall, counter, None, None, draw(_MAYBE), None, 2,
                                  draw(_SOME) if memory else None, draw(_SOME) if memory else None))
                    continue
                tflops, params = draw(_MAYBE), draw(st.sampled_from([52.005, 1.3, math.nan]))
                rates.append((line, rank, None, wall, draw(st.sampled_from([counter, None])),
                               tflops if kind == "effective" else None, params if kind == "effective" else None,
                               None if kind == "effective" else draw(_MAYBE),
                               None if kind == "effective" else draw(_MAYBE), 0 if kind == "effective" else 1,
                               None, None))
            _close(items, file, rates, steps, memories)
            if iterations:
                items.append(iteration_rows(file, [r[0] for r in iterations], [r[1] for r in iterations],
                                           [None] * len(iterations), [r[2] for r in iterations],
                                           [r[3] for r in iterations], [1000] * len(iterations),
                                           [r[4] for r in iterations]))
    return items


def _iteration_fields(draw) -> dict:
    """An iteration row's fields: its time, a loss or none (finite or not), a grad norm or none."""
    fields: dict = {"elapsed_ms": 900.0}
    loss = draw(st.sampled_from([None, 2.5, 2.5, math.nan]))
    if loss is not None:
        fields["losses"] = frozen_map({"lm loss": loss})
    grad = draw(st.sampled_from([None, None, 1.5, math.inf]))
    if grad is not None:
        fields["grad_norm"] = grad
    return fields


def _close(items: list, file: str, rates: list, steps: list, memories: list) -> None:
    """The rows at their place walked since the last event, one PlacedRows a kind (their lines
    interleaved), as the engine closes them."""
    for kind, rows in ((StepRows, steps), (RateRows, rates), (MemoryRows, memories)):
        if rows:
            items.append(kind(file, list(rows)))
            rows.clear()


def _state(items: list, bounded: bool = False, slice_size: int = 0) -> list:
    """What the store keeps of its jobs (the step rows' part bit for bit)."""
    store = stored(items, bounded, slice_size)
    out = []
    for key, job in store.jobs.items():
        out.append((key, job.events, sorted(job.ranks_seen), job.first_wall, job.last_wall, job.first_step_wall,
                    job.steps.points.tobytes(), job.reported.points.tobytes(), repr(sorted(job.memory.items())),
                    job.last_step_number, repr(job.last_step_loss), job.last_step_lr, job.last_progress,
                    job.last_progress_wall, repr(job.nan_at), repr(job.nan_events), sorted(job.after_eval),
                    repr({f: (r.progressed, r.after_eval) for f, r in job.runs_by_file.items()}),
                    repr(summarize(job, now=0.0).as_dict())))
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_items(), st.sampled_from([0, 0, 3, 7]), st.booleans())
def test_step_rows_leave_the_store_their_events_leave(items, slice_size, bounded):
    with np.errstate(all="ignore"):
        assert _state(items, bounded, slice_size) == _state(expand(items), bounded)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_blocks(), st.sampled_from([0, 0, 3, 7]), st.booleans())
def test_rate_rows_leave_the_store_their_events_leave(items, slice_size, bounded):
    with np.errstate(all="ignore"):
        assert _state(items, bounded, slice_size) == _state(expand(items), bounded)


def test_rate_rows_fold_at_once_among_iteration_rows():
    """A block of 200 iteration lines, each followed by its Effective Tera Flops and NumWorkers
    lines (Megatron-DeepSpeed's): the rate rows are taken at once, not an event a row."""
    rates = [(3 * k + 2, 0, None, 1.7e9 + k, k, 150.0 + k, 52.0, None, None, 0, None, None) for k in range(200)] + \
        [(3 * k + 3, 0, None, 1.7e9 + k, k, None, None, 12.5, 2.0, 1, None, None) for k in range(200)]
    rows = RateRows("a.log", sorted(rates))
    iterations = IterationRows("a.log", [3 * k + 1 for k in range(200)], [0] * 200, [None] * 200,
                               [1.7e9 + k for k in range(200)], list(range(1, 201)), [1000] * 200,
                               {"elapsed_ms": [900.0] * 200})
    with events_taken() as taken:
        state = _state([rows, iterations])
    assert "Throughput" not in taken and "RunConfig" not in taken
    assert state == _state(expand([rows, iterations]))
    assert state[0][1] == 200 + 600  # the iterations' and the rates' events


def test_step_rows_count_as_their_events():
    rows = StepRows("a.log", [(1, 0, None, None, 1, 2.0, None, None, None, None, None, None, None, None),  # a step alone
                              (2, 0, None, None, 2, 2.0, None, None, 1.0, None, None, 30.0, None, None),  # a rate, memory
                              (3, 0, None, None, 3, None, None, None, None, None, 5.0, None, 4, 1.5)])  # an MFU
    assert rows.weight() == len(rows.events()) == 6
    assert [type(e).__name__ for e in rows.events()] == ["Step", "Step", "Throughput", "Memory", "Step", "Throughput"]
    assert StepRows("a.log").weight() == 0 and not StepRows("a.log").events()


def test_a_run_of_steps_folds_in_bulk():
    """A run of 500 TorchTitan rows (with a rate and memory each) is folded without an event a row."""
    rows = StepRows("a.log", [(k + 1, 0, None, 1.7e9 + k, k + 1, 3.0 - k / 1000, None, 1000.0 if k else None, 150.0,
                               6000.0, 40.0, 30.0 + k % 7, None, None) for k in range(500)])
    with events_taken() as taken:
        state = _state([rows])
    assert taken == []
    assert state == _state(rows.events())
    job = state[0]
    assert job[1] == 1500 and job[9] == 500  # events, the last step


def _both_engines(path, core) -> dict:
    """The items of ``path`` as the Python engine and the compiled core give them."""
    got: dict = {}
    for engine in ("python", "core"):
        before = native.use(core if engine == "core" else None)
        try:
            items: list = []
            parse_file(path, sink=items.extend)
        finally:
            native.use(before)
        got[engine] = items
    return got


def test_the_first_stamp_goes_before_the_step_row_of_its_line(tmp_path):
    """The log's first stamp (a log-start milestone) goes before the events of its line, a
    step row's too: the rows before it stay before it (both engines, the same events)."""
    core = native.core
    if core is None:
        pytest.skip("the compiled core is not built here: the Python engine makes no rows")
    lines = ["***** Running training *****", "  Total optimization steps = 40",
             "{'loss': 2.5, 'grad_norm': 0.5, 'learning_rate': 5e-05, 'epoch': 0.1}",
             "{'loss': 2.4, 'grad_norm': 0.5, 'learning_rate': 5e-05, 'epoch': 0.2}",
             "{'loss': 2.3, 'grad_norm': 0.5, 'learning_rate': 5e-05, 'epoch': 0.3}",
             "[2024-05-01 10:00:01,250] {'loss': 2.2, 'grad_norm': 0.5, 'learning_rate': 5e-05, 'epoch': 0.4}",
             "{'loss': 2.1, 'grad_norm': 0.5, 'learning_rate': 5e-05, 'epoch': 0.5}"]
    path = tmp_path / "hf.log"
    path.write_text("\n".join(lines) + "\n")
    got = _both_engines(path, core)
    assert any(type(item) is StepRows for item in got["core"]), got["core"]
    events = expand(got["core"])
    assert [repr(e) for e in events] == [repr(e) for e in got["python"]]
    kinds = [(type(e).__name__, e.line) for e in events]
    start = kinds.index(("Milestone", 6))
    assert kinds[start + 1] == ("Step", 6) and ("Step", 5) in kinds[:start]


def _ds_log(path, steps: int) -> None:
    """DeepSpeed's engine lines as NeoX prints them: its step line, its throughput timer's samples
    line (with memory), its pipeline engine's line for the same step (told again)."""
    lines = []
    for k in range(1, steps + 1):
        stamp = f"[2023-04-18 02:{k // 60 % 60:02d}:{k % 60:02d},474]"
        lines += [f"{stamp} [INFO] [logging.py:96:log_dist] [Rank 0] step={k * 10}, skipped={k // 7}, "
                  f"lr=[{3e-4 / k!r}, {3e-4 / k!r}], mom=[(0.9, 0.95), (0.9, 0.95)]",
                  f"{stamp} [INFO] [timer.py:199:stop] epoch=0/micro_step={k * 10}/global_step={k * 10}, "
                  f"RunningAvgSamplesPerSec=171.7{k}, CurrSamplesPerSec=17{k % 10}.5, MemAllocated=2.{k % 9}GB, "
                  f"MaxMemAllocated=19.{k % 5}GB",
                  f"steps: {k * 10} loss: {2.0 + 1 / k:.4f} iter time (s): 7.4{k % 10} samples/sec: 17{k % 10}.4"]
    path.write_text("\n".join(lines) + "\n")


def test_deepspeed_step_lines_fold_in_bulk(tmp_path):
    """DeepSpeed's step, samples and pipeline lines are the core's rows (the hook reads the first,
    which says the framework): the engines give the same events, and the store folds them without
    an event a line, to what the events leave it (a step told again fills its point)."""
    core = native.core
    if core is None:
        pytest.skip("the compiled core is not built here: the Python engine makes no rows")
    path = tmp_path / "neox.log"
    _ds_log(path, 300)
    got = _both_engines(path, core)
    kinds = {type(item).__name__ for item in got["core"]}
    assert {"StepRows", "RateRows"} <= kinds, kinds
    assert [repr(e) for e in expand(got["core"])] == [repr(e) for e in got["python"]]
    with events_taken() as taken:
        state = _state(got["core"])
    assert len(taken) < 10, taken  # (the first lines' events: the framework said)
    assert state == _state(got["python"])
    (job,) = stored(got["core"]).jobs.values()
    assert job.steps.n == 300 and job.last_step_number == 3000
    last = job.steps.point(299)
    assert float(last["loss"]) == pytest.approx(2.0 + 1 / 300, abs=1e-4)  # (filled by the pipeline line)
    assert job.memory["gpu_max_allocated_mb"] == pytest.approx(19.4 * 1024)


def _ctx():
    from tuimon.parsers.base import LineContext
    return LineContext("d.log", 2, None, None, None, None, False)


def test_the_engine_step_zero_and_odd_values_go_to_the_hook():
    """The core leaves to DeepSpeed's hook the step lines only it reads: its engine's step 0
    (a milestone, no step; "00" is a step), a counter of leading zeros, a value only to_float reads."""
    from tuimon.parsers import deepspeed

    reader = native.core.FieldLines(deepspeed.CORE_STEP) if native.core is not None else None
    if reader is None:
        pytest.skip("the compiled core is not built here")
    bodies = ["[Rank 2] step=10, skipped=1, lr=[0.5, 0.5]", "step=0, skipped=0, lr=[0.0]", "step=00, skipped=0, lr=[1]",
              "step=5, skipped=0, lr=[1.5x]", "step=5, skipped=0, lr=[]", "step=12345678901234567890, skipped=0, lr=[1]"]
    text = "\n".join(bodies) + "\n"
    spans, at = [], 0
    for body in bodies:
        spans.append((at, at + len(body)))
        at += len(body) + 1
    verdicts, rows = reader.read(text, spans)
    assert list(verdicts) == [3, 3, 1, 1, 1, 1] and rows == [[10, 1, 0.5, 2], [0, 0, 0.0, None]]
    for body in bodies[2:]:  # (what the hook makes of them: a step, its lr as to_float reads it)
        assert [type(e).__name__ for e in deepspeed.DeepSpeedParser("d.log")._on_step(body, _ctx())] == \
            ["RunConfig", "Step"], body
    parser = deepspeed.DeepSpeedParser("d.log")
    frame = (2, 0, 0, 7, None, None, None)
    out = parser.step_into([], rows[1], frame, None)
    assert [type(e).__name__ for e in out] == ["RunConfig", "Milestone"]  # the engine built: no step
