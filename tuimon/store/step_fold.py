"""Step and rate rows into a job, in bulk.

The compiled core reads TorchTitan's metrics lines and Hugging Face Trainer's metrics
dicts into :class:`~tuimon.parsers.columns.StepRows`, which stand at the place of their
events among the others (a run of step lines with no other event between).  The store
takes them in as it would take each row's events (its Step, and the Throughput and
Memory its line gives), column by column: none of them starts a run, and what each
changes of the job is a sum, a bound or the latest value.  Where that does not hold (a
step told twice, which fills the point it made; a loss that is not finite, a divergence
said at its line; an evaluation pass's interval; a bounded series, which thins as it
takes points) the rows go through the event path one by one.

Megatron-DeepSpeed's rate lines (:class:`~tuimon.parsers.columns.RateRows`: Throughputs,
and the parameter count an ``Effective Tera Flops`` line gives, a RunConfig that shapes no
run) change nothing an iteration reads: among iteration rows of their file still to fold
they are taken at once where none of those rows before them starts a run (as the event
path lets each wait, :meth:`~tuimon.store.iteration_fold.Pending.may_wait`).

The tests hold the store of rows to the store of the same rows' events.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Optional

from tuimon.parsers.columns import RateRows, StepRows

from .iteration_fold import seen_in
from .series import PointPlan, point_plan

_STEP = point_plan("step")
_THROUGHPUT = point_plan("throughput")
#: whether the rows' points can be staged from their columns (each getter a plain attribute)
_COLUMNAR = not _STEP.computed and not _THROUGHPUT.computed and _STEP.iteration_at == 0 \
    and _THROUGHPUT.iteration_at == 0


def fold(store: Any, rows: StepRows, segments: dict, take: Callable[[Any], Any], new_segment: Callable[[], Any],
         max_ranks: int) -> Any:
    """``rows`` into ``store`` as their events would go (``take`` takes one event the event
    path's way); the job they went to."""
    job, _ = store.job_for(rows.file)
    segment = segments.get(rows.file)
    if segment is None:
        segment = segments[rows.file] = new_segment()
    run = job.run_of(rows.file)
    if job.bounded or not _COLUMNAR or segment.aside or run.after_eval or not _plain(rows, job.last_step_number):
        for ev in rows.events():
            job = take(ev)
        return job
    n = len(rows.line)
    walls = _counts(job, rows, max_ranks)
    # the Steps
    run.progressed = True
    file_id = job.file_index.get(rows.file, 0)
    job.steps.stage(_STEP, _points(_STEP, rows, range(n), _STEP_COLUMNS), [], file_id)
    job.last_step_number = rows.step[-1]
    job.last_progress = (rows.file, rows.line[-1])
    if walls:
        job.last_progress_wall = walls[-1]
        if job.first_step_wall is None or min(walls) < job.first_step_wall:
            job.first_step_wall = min(walls)
    loss = _last(rows.loss)
    if loss is not None:
        job.last_step_loss = loss
        job.nan_at = None  # (every loss is finite: see _plain)
    lr = _last(rows.lr)
    if lr is not None:
        job.last_step_lr = lr
    if not segment.progressed:  # the state its timers count in moves with the run's first progress
        segment.mark(rows.line[0], store._timer_state(rows.file))
    # the Throughputs
    told = rows.throughputs()
    if told:
        job.reported.stage(_THROUGHPUT, _points(_THROUGHPUT, rows, told, _THROUGHPUT_COLUMNS), [], file_id)
    # the Memory reports
    reserved = [g * 1024.0 for g in rows.gib if g is not None]
    top = max((v for v in reserved if v == v), default=None)
    if top is not None and top > job.memory.get("gpu_max_reserved_mb", float("-inf")):
        job.memory["gpu_max_reserved_mb"] = top
    return job


def fold_rates(store: Any, rows: RateRows, segments: dict, take: Callable[[Any], Any],
               new_segment: Callable[[], Any], max_ranks: int) -> Any:
    """``rates`` into ``store`` as their events would go (the caller knows none of its file's
    iteration rows still to fold starts a run before them; ``take`` takes one event the event
    path's way); the job they went to."""
    job, _ = store.job_for(rows.file)
    if rows.file not in segments:  # (what its timers count in from here, as an event's taking makes it)
        segments[rows.file] = new_segment()
    if job.bounded or not _COLUMNAR:
        for ev in rows.events():
            job = take(ev)
        return job
    _counts(job, rows, max_ranks)
    file_id = job.file_index.get(rows.file, 0)
    job.reported.stage(_THROUGHPUT, _points(_THROUGHPUT, rows, range(len(rows.line)), _RATE_COLUMNS), [], file_id)
    told = [k for k, kind in enumerate(rows.kind) if kind == 0]  # the RunConfigs of the parameters
    if told:
        walls = [w for w in (rows.wall_time[k] for k in told) if w is not None]
        if walls and (job.first_config_wall is None or min(walls) < job.first_config_wall):
            job.first_config_wall = min(walls)
        params = _last([rows.params_b[k] for k in told])
        if params is not None:
            job.config["total_params_b"] = params
    return job


def _counts(job: Any, rows: Any, max_ranks: int) -> list[float]:
    """What the store counts of every event (how many, the ranks seen, the first and last
    stamps) for the rows' events; their stamps."""
    job.events += rows.weight()
    seen_in(job, rows.rank, rows.wall_time, max_ranks)
    return [w for w in rows.wall_time if w is not None]


def _plain(rows: StepRows, last_step: Optional[int]) -> bool:
    """Whether no row tells its step again (its point is filled, not made) and every loss is
    finite or none (a divergence is said at its line)."""
    before = last_step
    for step in rows.step:
        if step is not None and step == before:
            return False
        before = step
    return all(loss is None or math.isfinite(loss) for loss in rows.loss)


def _last(values: list) -> Any:
    return next((v for v in reversed(values) if v is not None), None)


#: an attribute of a row's Step, of its Throughput -> the column of StepRows that holds it (the
#: others are None: see StepRows.events)
_STEP_COLUMNS = {"step": "step", "loss": "loss", "lr": "lr", "elapsed_ms": "elapsed_ms", "wall_time": "wall_time",
                 "line": "line"}
_THROUGHPUT_COLUMNS = {"iteration": "step", "tflops_reported": "tflops", "tokens_per_gpu_per_sec": "tps",
                       "mfu": "mfu", "wall_time": "wall_time", "line": "line"}
#: the same of a rate row's Throughput
_RATE_COLUMNS = {"iteration": "iteration", "tflops_reported": "tflops", "samples_per_sec": "samples_per_sec",
                 "iteration_time_s": "iteration_time_s", "wall_time": "wall_time", "line": "line"}


def _points(plan: PointPlan, rows: Any, at: Any, attrs: dict[str, str]) -> list[tuple]:
    """What ``plan.fetch`` reads off the events of rows ``at`` (``attrs``: where their
    attributes are), column by column."""
    k = len(at)
    everyone = k == len(rows.line)
    columns = []
    for name in plan.names:
        attr = attrs.get(name)
        if attr is None:
            columns.append([None] * k)
        else:
            column = getattr(rows, attr)
            columns.append(column if everyone else [column[j] for j in at])
    return list(zip(*columns))
