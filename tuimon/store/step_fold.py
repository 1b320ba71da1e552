"""Step and rate rows into a job, in bulk.

The compiled core reads TorchTitan's metrics lines, Hugging Face Trainer's metrics dicts
and DeepSpeed's step lines (its engine's and its pipeline engine's) into
:class:`~tuimon.parsers.columns.StepRows`, which stand at the place of their events among
the others (a run of step lines with no other event between).  The store takes them in as
it would take each row's events (its Step, and the Throughput and Memory its line gives),
column by column: none of them starts a run, and what each changes of the job is a sum, a
bound or the latest value; a step told again fills the point it made, as the event path's
``fill_last``.  Where that does not hold (a loss that is not finite, a divergence said at
its line; an evaluation pass's interval; a bounded series, which thins as it takes points)
the rows go through the event path one by one.

Rate lines (:class:`~tuimon.parsers.columns.RateRows`: Megatron-DeepSpeed's, with the
parameter count an ``Effective Tera Flops`` line gives, a RunConfig that shapes no run;
DeepSpeed's throughput timer's, with the memory it gives) change nothing an iteration
reads: among iteration rows of their file still to fold they are taken at once where none
of those rows before them starts a run (as the event path lets each wait,
:meth:`~tuimon.store.iteration_fold.Pending.may_wait`).  Their step rows' and their lines
may interleave (DeepSpeed's step and samples lines): neither reads what the other changes.

The tests hold the store of rows to the store of the same rows' events.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Optional

from tuimon.parsers.columns import MemoryRows, RateRows, StepRows

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
    if job.bounded or not _COLUMNAR or segment.aside or run.after_eval or not _finite(rows):
        for ev in rows.events():
            job = take(ev)
        return job
    walls = _counts(job, rows, max_ranks)
    # the Steps: a step told again (DeepSpeed's step line, then its pipeline engine's for the same step)
    # fills the point the step made where that has no value yet, as the event path's fill_last
    run.progressed = True
    file_id = job.file_index.get(rows.file, 0)
    made, fills = _told_again(rows, job.last_step_number)
    head = [fill for fill in fills if fill[0] < 0]  # (the point told again is the series' last, from before)
    for _, column, value in head:
        job.steps.fill_last(column, value)
    job.steps.stage(_STEP, _points(_STEP, rows, made, _STEP_COLUMNS), [], file_id, fills[len(head):])
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
    _maxima(job, {"gpu_max_reserved_mb": [g * 1024.0 for g in rows.gib if g is not None]})
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
    # the Memory of the samples lines that give one (kind 2)
    _maxima(job, {"gpu_allocated_mb": rows.allocated_mb, "gpu_max_allocated_mb": rows.max_allocated_mb})
    return job


def fold_memory(store: Any, rows: MemoryRows, segments: dict, take: Callable[[Any], Any],
                new_segment: Callable[[], Any], max_ranks: int) -> Any:
    """Memory reports into ``store`` as their events would go (the caller knows none of its
    file's iteration rows still to fold starts a run before them); the job they went to."""
    job, _ = store.job_for(rows.file)
    if rows.file not in segments:
        segments[rows.file] = new_segment()
    if job.bounded:
        for ev in rows.events():
            job = take(ev)
        return job
    _counts(job, rows, max_ranks)
    _maxima(job, {"gpu_max_allocated_mb": rows.max_allocated_mb, "gpu_max_reserved_mb": rows.max_reserved_mb,
                  "gpu_allocated_mb": rows.allocated_mb, "gpu_reserved_mb": rows.reserved_mb})
    return job


#: a Memory's figures, in the order the store's event path takes them
MEMORY_FIGURES = ("gpu_max_allocated_mb", "gpu_max_reserved_mb", "cpu_used_gb", "gpu_allocated_mb", "gpu_reserved_mb")


def _maxima(job: Any, columns: dict[str, list]) -> None:
    """The job's memory figures, each the highest of its own and a column's (NaN: none)."""
    for name in MEMORY_FIGURES:
        column = columns.get(name)
        if column is None:
            continue
        top = max((v for v in column if v is not None and v == v), default=None)
        if top is not None and top > job.memory.get(name, float("-inf")):
            job.memory[name] = top


def _counts(job: Any, rows: Any, max_ranks: int) -> list[float]:
    """What the store counts of every event (how many, the ranks seen, the first and last
    stamps) for the rows' events; their stamps."""
    job.events += rows.weight()
    seen_in(job, rows.rank, rows.wall_time, max_ranks)
    return [w for w in rows.wall_time if w is not None]


def _finite(rows: StepRows) -> bool:
    """Whether every loss is finite or none (a divergence is said at its line)."""
    return all(loss is None or math.isfinite(loss) for loss in rows.loss)


def _told_again(rows: StepRows, last_step: Optional[int]) -> tuple[Any, list[tuple[int, str, float]]]:
    """The rows that make a point (a range where every row does), and what the others fill:
    (the made point they fill, among those of the rows: -1 the series' last; column, value)."""
    steps = rows.step
    before = last_step
    again = []
    for k, step in enumerate(steps):
        if step is not None and step == before:
            again.append(k)
        before = step
    if not again:
        return range(len(steps)), []
    made, fills = [], []
    told = set(again)
    for k in range(len(steps)):
        if k not in told:
            made.append(k)
            continue
        for column in STEP_FILLS:
            value = getattr(rows, column)[k]
            if value is not None:
                fills.append((len(made) - 1, column, value))
    return made, fills


def _last(values: list) -> Any:
    return next((v for v in reversed(values) if v is not None), None)


#: an attribute of a row's Step, of its Throughput -> the column of StepRows that holds it (the
#: others are None: see StepRows.events)
_STEP_COLUMNS = {"step": "step", "loss": "loss", "lr": "lr", "elapsed_ms": "elapsed_ms", "wall_time": "wall_time",
                 "line": "line", "samples_per_sec": "samples_per_sec"}
#: what a step's second line may add to the point its first made (NeoX prints DeepSpeed's 'step=N' with
#: the lr and its pipeline engine's 'steps: N loss: ... iter time (s): ...' for the same step)
STEP_FILLS = ("elapsed_ms", "loss", "samples_per_sec")
_THROUGHPUT_COLUMNS = {"iteration": "step", "tflops_reported": "tflops", "tokens_per_gpu_per_sec": "tps",
                       "mfu": "mfu", "wall_time": "wall_time", "line": "line"}
#: the same of a rate row's Throughput
_RATE_COLUMNS = {"iteration": "iteration", "tflops_reported": "tflops", "samples_per_sec": "samples_per_sec",
                 "iteration_time_s": "iteration_time_s", "wall_time": "wall_time", "line": "line"}


def _points(plan: PointPlan, rows: Any, at: Any, attrs: dict[str, str]) -> list[list]:
    """What ``plan.fetch`` reads off the events of rows ``at`` (``attrs``: where their
    attributes are), a column a name of the plan's."""
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
    return columns
