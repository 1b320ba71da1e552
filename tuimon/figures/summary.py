"""Per-job summary figures derived from the store (:class:`~tuimon.figures.record.Summary`);
tables of them are :mod:`tuimon.figures.columns`.

Rates (iteration time, samples/s, TFLOPs) are steady-state medians: warm-up
points are left out (see :func:`tuimon.figures.metrics.warmup_count`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import numpy as np

from tuimon.parsers.events import GLOG_LAUNCH, GLOG_START, INIT_TIME, JOB_END, LOG_START, RUN_START, RUN_STOP
from tuimon.parsers.hf_trainer import TQDM_RATE, TRAINER_RUNTIME
from tuimon.parsers.timestamps import glog_wall as glog_wall

from ..store.evals import finite_or_word
from ..store.fields import FIELDS, primary_loss
from ..store.job_store import Job
from . import breakdown as breakdown_mod
from . import flops
from .alerts import logged_every, quiet_in_log
from .gpus import Peak, choose_peak
from .metrics import aggregate, mfu, startup_timeline, steady_stats, warmup_count
from .record import Failure, IterTime, Memory, ModelConfig, Summary, Tflops
from .run_ledger import run_ledger
from .thresholds import DEFAULTS as ALERT_DEFAULTS
from .thresholds import STARTUP_TIMEOUT_S as STARTUP_TIMEOUT_S

#: A job with no iteration whose files were written less than this long ago is still starting.
LIVE_WINDOW_S = 600.0


def _clean(value: Optional[float], digits: int = 3) -> Optional[float]:
    if value is None or not math.isfinite(value):
        return None
    return round(float(value), digits)


def _loss_value(value: Optional[float]):
    """A diverged loss is news: keep nan/inf as words rather than dropping them."""
    if value is None or math.isfinite(value):
        return _clean(value, 6)
    return "nan" if value != value else ("inf" if value > 0 else "-inf")


def _column(series, name: str) -> np.ndarray:
    if series is None or not len(series):
        return np.empty(0, dtype=np.float32)
    return series.column(name)


def _without_evals(job: Job, series, elapsed: np.ndarray) -> np.ndarray:
    """``elapsed`` (of ``series``) with the records whose interval held an evaluation pass
    (:attr:`Job.after_eval`) made NaN: in place, so the warm-up is counted as before."""
    if series is None or not len(series) or len(series) != elapsed.size:
        return elapsed
    out = np.array(elapsed, dtype=np.float64)
    out[_aside(job, series)] = np.nan
    return out


def _aside(job: Job, series) -> np.ndarray:
    """Which points of ``series`` are records :attr:`Job.after_eval` puts aside: their lines looked up
    a file and a million points at a time in a table of the lines put aside (numpy's ``isin`` of
    ``kind="table"``: a bool a line between the first and last put aside), not by a sort of every
    point's (file, line) key (12 bytes a point over the store, 32 MB on 100 MB of modded-nanogpt's
    lines evaluated every 125 steps; now 8, the step times' float64 copy)."""
    lines = series.column("line")
    held = np.zeros(lines.size, dtype=bool)
    by_file: dict[int, list[int]] = {}
    for file, line in job.after_eval:  # (a job keeps up to 4,096 such records)
        if file in job.file_index:
            by_file.setdefault(job.file_index[file], []).append(line)
    files = series.column("file")
    one = int(files[0]) if lines.size and files.min() == files.max() else None  # (the points' one file, if one)
    for index, aside in by_file.items():
        if one is not None and index != one:
            continue
        table = np.array(aside, dtype=np.int64)
        for a in range(0, lines.size, _ASIDE_CHUNK):  # (isin's table copies the lines it looks up, as int64)
            hit = np.isin(lines[a:a + _ASIDE_CHUNK], table, kind="table")
            if one is None:
                hit &= files[a:a + _ASIDE_CHUNK] == index
            held[a:a + _ASIDE_CHUNK] |= hit
    return held


_ASIDE_CHUNK = 1 << 20


def _first_known(key: str, *series) -> np.ndarray:
    """The column of the first series that has a finite value in it."""
    values = _column(series[0], key)
    for more in series[1:]:
        if _finite(values).size:
            break
        values = _column(more, key)
    return values


def _finite(arr: np.ndarray) -> np.ndarray:
    return arr[np.isfinite(arr)]


def params_billion(config: dict) -> Optional[float]:
    """The model's size, billions of parameters: what the log states first (figures.flops)."""
    return flops.params_billion(config)[0]


def world_size(config: dict) -> Optional[int]:
    if config.get("world_size"):
        return config["world_size"]
    tp, pp, dp = config.get("tp"), config.get("pp"), config.get("dp")
    if tp and pp and dp:
        return tp * pp * dp
    return None


def data_parallel(config: dict, stated: bool = False) -> Optional[int]:
    """The data-parallel size: as logged, else the world over the model-parallel sizes (with
    ``stated``, only over tensor and pipeline sizes the log states, never one assumed 1)."""
    if config.get("dp"):
        return config["dp"]
    tp, pp = config.get("tp"), config.get("pp")
    if stated and not (tp and pp):
        return None
    world, tp, pp = world_size(config), tp or 1, pp or 1
    if world and world % (tp * pp) == 0:
        return world // (tp * pp)
    return None


def global_batch(config: dict) -> Optional[int]:
    """As logged, else the micro-batch (Megatron 1.x's per-GPU ``batch_size``) times data
    parallelism (no gradient accumulation is known then)."""
    if config.get("global_batch"):
        return config["global_batch"]
    micro, dp = config.get("micro_batch"), data_parallel(config)
    if micro and dp:
        return micro * dp
    return None


def tokens_rates(reported: Optional[float], reported_per_gpu: Optional[float], gbs: Optional[int],
                 seq: Optional[int], iter_s: Optional[float], samples_per_sec: Optional[float],
                 gpus: Optional[int]) -> tuple[Optional[float], Optional[float], Optional[float], Optional[str]]:
    """(tokens/s, tokens/s/GPU, tokens/s computed, where tokens/s came from): what the
    log prints where it prints it, else global batch x sequence length over the
    iteration time (or the log's samples/s x sequence length); per GPU over the world."""
    computed = None
    if gbs and seq and iter_s:
        computed = gbs * seq / iter_s
    elif samples_per_sec and seq:
        computed = samples_per_sec * seq
    total, source = reported, "log"
    if total is None and reported_per_gpu is not None and gpus:
        total, source = reported_per_gpu * gpus, "log (per GPU x GPUs)"
    if total is None and computed is not None:
        total, source = computed, "computed"
    per_gpu = reported_per_gpu
    if per_gpu is None and total is not None and gpus:
        per_gpu = total / gpus
    return total, per_gpu, computed, (source if total is not None else None)


def _first_step_only(job: Job) -> bool:
    """The job logged one step, its first (iteration 0 or 1: compilation, allocation, warm-up),
    which is no throughput of the job's (a later step alone, NeMo's global_step 5 or Megatron's
    iteration 10 of a log interval, is a mean over the steps before it)."""
    series = job.primary if job.primary is not None and len(job.primary) else job.steps
    if len(series) != 1:
        return False
    first = series.column("iteration")
    return bool(first.size and 0 <= int(first[0]) <= 1)


def _started(job: Job) -> bool:
    """Whether the job says it started: a framework, or a milestone other than the log's
    first stamp (which any stamped file has)."""
    return bool(job.frameworks) or any(m.name != LOG_START for m in job.milestones)


def settled_status(job: Job, top_step: Optional[int] = None) -> Optional[tuple[str, Optional[Failure]]]:
    """A job's status where its log alone says it (failed, nan, finished, training, a job
    script's end without a step); None where it depends on the clock (:func:`startup_status`)."""
    failure = job.fatal_failure
    if failure is not None and not completed_before_teardown(job, top_step):
        return "failed", Failure(failure.kind, failure.message, failure.line, failure.file)
    if job.nan_at is not None:
        step, file, line = job.nan_at
        where = f"at iteration {step}" if step is not None else f"at line {line}"
        return "nan", Failure("nan", f"loss or grad norm not finite {where}", line, file)
    train_iters = job.config.get("train_iters")
    last = job.last_iteration if job.last_iteration is not None else (
        top_step if top_step is not None else last_step(job))
    # an exit with no status is a framework's own word that training ended (one with a status is a task's)
    if any(e.iteration is not None or e.status is None for e in job.exits) or \
            (last is not None and train_iters and last >= train_iters):
        return "finished", None
    if job.iterations_seen or len(job.steps):
        if closes_with_eval(job):
            return None  # finished, or a step to come: the clock says (closing_status)
        return "training", None
    ended = next((m for m in job.milestones if m.name == JOB_END), None)
    if ended is not None:  # the job script said it was over: it never trained, whatever the clock says
        return "no-iterations", Failure("no-iterations", "the job ended without logging a training iteration",
                                        ended.line, ended.file)
    return None


#: a run whose last word is an evaluation past its last step (:func:`closes_with_eval`) and whose
#: files were quiet this long ended there: a training loop logs its next step within a step's time
#: of an evaluation (seconds for llm.c's; a run stepping slower than this stays ``training``)
CLOSING_QUIET_S = 120.0


def closes_with_eval(job: Job) -> bool:
    """The run's last word is an evaluation of the step after the last it trained, in a run
    that logs every step: llm.c evaluates at step N after training step N-1, then leaves its
    loop (``s:N tel:...``); mid-run the same evaluation is followed by its step's training
    within a step's time."""
    return job.closing_eval is not None and job.closing_eval == job.last_progress


def closing_status(now: Optional[float], last_write: Optional[float]) -> str:
    """The status of a run that :func:`closes_with_eval`: ``finished`` once its files were
    quiet :data:`CLOSING_QUIET_S` (or no clock is read: the log's word), else ``training``."""
    if now is not None and last_write is not None and now - last_write < CLOSING_QUIET_S:
        return "training"
    return "finished"


def completed_before_teardown(job: Job, top_step: Optional[int] = None) -> bool:
    """The run took all its planned iterations and saved a checkpoint at the last of them: what
    fails after that (a store's socket at exit, a process group torn down, a stderr file of such
    noise) is teardown, not the run's failure."""
    train_iters = job.config.get("train_iters")
    last = job.last_iteration if job.last_iteration is not None else (
        top_step if top_step is not None else last_step(job))
    if last is None or not train_iters or last < train_iters:
        return False
    return any(iteration >= last for iteration in job.checkpoints)


def stamp_span(job: Job) -> Optional[float]:
    """Seconds from the job's first stamp to its last; 0 where its only stamps are a launcher's
    (``Job started at: ...``); None where it has no stamp at all."""
    if job.first_wall is not None and job.last_wall is not None:
        return job.last_wall - job.first_wall
    return 0.0 if any(m.wall_time is not None for m in job.milestones) else None


def startup_status(started: bool, span_s: Optional[float], now: Optional[float], last_write: Optional[float],
                   timeout_s: float, file: Optional[str]) -> tuple[str, Optional[Failure]]:
    """The status of a job with no step yet: ``starting``, ``stuck-in-startup`` or
    ``no-iterations``.  How long it has been starting is the span of its own stamps plus
    the time since its files were last written: two differences on one clock each, so a
    log stamped in another time zone is no older for it.  A log with no span of stamps is
    never stuck from its file's age: quiet past the live window, it is ``no-iterations``."""
    quiet = now - last_write if now is not None and last_write is not None else None
    # a log without two stamps of its own cannot show it hung: the file's quiet alone is as much a
    # job that ended (an evaluation-only run) as one that hangs
    if started and span_s is not None:
        elapsed = span_s + (quiet or 0.0)
        if elapsed > timeout_s:
            return "stuck-in-startup", Failure("stuck-in-startup", f"no first step {timeout_s:.0f} s after the job started",
                                               None, file)
        if quiet is not None:  # without a clock, a job is not said to be starting
            return "starting", None
    if quiet is not None and quiet < LIVE_WINDOW_S:
        return "starting", None
    return "no-iterations", Failure("no-iterations", "no training iteration was logged", None, file)


def last_step(job: Job) -> Optional[int]:
    """The highest step number of a job's step lines (runs that log steps, not
    Megatron iterations: DeepSpeed, Hugging Face, TorchTitan, scripts' own), or of the
    framework's own word that training ended at a step (a Trainer's closing dict at 94 of 94,
    its last logged dict at 90; a run of 4 steps that logged none, its closing dict after them),
    where the run logged no iterations."""
    numbers = job.steps.column("iteration")
    ended = [e.iteration for e in job.exits if e.iteration is not None and e.status is None]
    if not len(numbers) and (job.ranks or not ended):
        return None
    top = max(([int(numbers.max())] if len(numbers) else []) + ended)
    return top if top >= 0 else None


def _first_step_wall(job: Job) -> Optional[float]:
    """When the first step completed: the latest of two lower bounds, its line's time
    (its own stamp, or that of the last stamped line a parser read above it, which can
    be well before) and the start of training plus the first logged step time."""
    bounds = [job.first_step_wall] if job.first_step_wall is not None else []
    start = next((m.wall_time for m in job.milestones if m.name == "training-start" and m.wall_time), None)
    primary = job.primary
    if start is not None and primary is not None and len(primary):
        first_ms = float(primary.column("elapsed_ms")[0])
        if math.isfinite(first_ms):
            bounds.append(start + first_ms / 1000.0)
    return max(bounds) if bounds else None


def _milestone(job: Job, name: str) -> Optional[float]:
    return next((m.wall_time for m in job.milestones if m.name == name and m.wall_time is not None), None)


def _first_progress(job: Job) -> tuple[Optional[int], Optional[int]]:
    """The first logged iteration (or step) number, and the gap to the second (None with one)."""
    primary = job.primary
    series = primary if primary is not None and len(primary) else job.steps
    numbers = _first_counted(series.column("iteration") if len(series) else np.empty(0, np.int32), 2)
    if not numbers:
        return None, None
    first = numbers[0]
    return first, (numbers[1] - first if len(numbers) > 1 and numbers[1] > first else None)


def _first_counted(numbers: np.ndarray, k: int) -> list[int]:
    """The first ``k`` of ``numbers`` that are counters (not -1, none), a few thousand at a time (not a
    copy of all of them: 5 bytes a point of an llm.c log's 23 million, at the summary's peak)."""
    out: list[int] = []
    for a in range(0, numbers.size, 4096):
        chunk = numbers[a:a + 4096]
        out.extend(chunk[chunk >= 0][:k - len(out)].tolist())
        if len(out) == k:
            break
    return out


def resumed_mid_run(job: Job) -> Optional[int]:
    """The first iteration of a log that begins mid-run, else None: one further on than
    its first logging interval could put it (199 where the run logs every iteration),
    with no line of the job's startup (a configuration or milestone) stamped before it.
    A restarted job that logs its own startup before resuming is no such log."""
    first, gap = _first_progress(job)
    if first is None or first <= (2 * gap if gap else 100):
        return None
    step = job.first_step_wall
    if step is None:
        return first
    before = [m.wall_time for m in job.milestones if m.name != LOG_START and m.wall_time is not None]
    if job.first_config_wall is not None:
        before.append(job.first_config_wall)
    return None if any(w < step for w in before) else first


def startup(job: Job) -> tuple[Optional[float], list[dict], Optional[str]]:
    """Job start to the end of the first step, or to where the log says its startup ends
    (MLPerf's run_start: its own init time), with why it is unknown when it is.  The job
    start is the earliest of the job script's stamps (``START TIME:``, ``date``, ``Job
    started at``) and the first stamped line."""
    starts = [m.wall_time for m in job.milestones if m.name == "job-start" and m.wall_time is not None]
    glog = next((m for m in job.milestones if m.name in (GLOG_START, GLOG_LAUNCH) and m.detail), None)
    placed = glog.wall_time if glog is not None and glog.name == GLOG_LAUNCH and glog.wall_time is not None else \
        glog_wall(glog.detail, job.first_wall) if glog is not None and glog.detail and job.first_wall is not None else None
    if placed is not None:
        starts.append(placed)
    # a stated time from the process start to a stamped milestone (Megatron's time to initialize it)
    for told in (m for m in job.milestones if m.name == INIT_TIME and m.duration_s and m.duration_s > 0):
        counted = next((m.wall_time for m in job.milestones if m.name == told.detail and m.file == told.file
                        and m.line > told.line and m.wall_time is not None), None)
        if counted is not None and told.duration_s is not None:
            starts.append(counted - told.duration_s)
            break
    declared = _milestone(job, RUN_START)
    t1, end = (_first_step_wall(job), "first-step") if declared is None else (declared, RUN_START)
    if not starts:
        resumed = resumed_mid_run(job)
        if resumed is not None:
            return None, [], (f"unknown: the log begins mid-run (at iteration {resumed}) and has no job start "
                              "stamp (START TIME, date, Job started at)")
    t0 = min(starts + ([job.first_wall] if job.first_wall is not None else []), default=None)
    if t0 is None:
        return None, [], ("unknown: no line before the first step has a time stamp"
                          if t1 is not None or job.iterations_seen else None)
    if t1 is not None and t1 < t0:
        return None, [], "unknown: the first step's time stamp comes before the job's start stamp"
    if t1 is not None and t1 == t0 and not starts and declared is None:  # (the first stamp is the first step's own)
        return None, [], "unknown: no line before the first step has a time stamp"
    total, phases = startup_timeline(t0, t1, ((m.name, m.wall_time) for m in job.milestones))
    note = None if t1 is not None else "unknown: the first step has no time stamp" \
        if job.iterations_seen or len(job.steps) else "unknown: the run logged no training step"
    return _clean(total, 1), [{"name": end if p.name == "first-step" else p.name, "offset_s": round(p.offset_s, 3)}
                              for p in phases], note


def run_time(job: Job) -> Optional[float]:
    """Seconds from the start of training to a logged end of the run (MLPerf's run_start to
    run_stop, its time to train); None where the log marks no such end."""
    start, stop = _milestone(job, RUN_START), _milestone(job, RUN_STOP)
    return _clean(stop - start, 3) if start is not None and stop is not None and stop >= start else None


#: reported and computed TFLOPs further apart than this are flagged
TFLOPS_DISAGREE = 0.25


def checks(tflops_reported: Optional[float], computed: Optional[float], hardware: Optional[float],
           mfu_value: Optional[float], peak: Optional[Peak], work: Optional[flops.IterationFlops] = None) -> list[str]:
    """What makes a job's figures doubtful, each with both figures and its likeliest cause.  The
    log's TFLOPs may count the model's work or the hardware's (recomputation included): they
    disagree only where they are far from both (from the model's work and a third more, where
    the log does not say whether activations are recomputed)."""
    out = []
    if mfu_value is not None and peak is not None and mfu_value > 1.0:
        against = f"{peak.gpu or 'the given'} {peak.precision or ''} peak".replace("  ", " ")
        out.append(f"MFU {100 * mfu_value:.0f}% is above 100% of the {against} ({peak.tflops:g} TFLOPs, from "
                   f"{peak.source}): check the GPU model and precision, the model size and the GPU count")
    if tflops_reported and computed:
        bases = [computed, hardware if hardware is not None else computed * 4 / 3]
        nearest = min(bases, key=lambda b: abs(tflops_reported / b - 1.0))
        ratio = tflops_reported / nearest
        if abs(ratio - 1.0) > TFLOPS_DISAGREE:
            out.append(f"reported {tflops_reported:.1f} and computed {nearest:.1f} TFLOPs/GPU differ by "
                       f"{100 * abs(ratio - 1.0):.0f}%: {_likely_cause(ratio, work)}")
    return out


def _likely_cause(ratio: float, work: Optional[flops.IterationFlops]) -> str:
    """Why a log's TFLOPs are ``ratio`` times the computed ones, as far as the figures tell."""
    if not 0.5 <= ratio <= 2.0 or work is None:
        return ("more than the formulas tell apart: check the GPU count (world size) and the global batch, or the "
                "log's figure measures something else")
    if work.formula == flops.SIZE_ONLY:
        return ("the log states the model's size, not its shape: 6 x params x tokens leaves out attention over the "
                "sequence and may not describe the model (grouped attention, a gated MLP, experts)")
    if ratio > 1.0 and work.attention_share > 0.15:
        return (f"causal attention is {100 * work.attention_share:.0f}% of the work here: the log's formula may "
                "count the whole attention matrix (Megatron-DeepSpeed's and NeoX's do)")
    if work.formula == flops.SEED:
        return "seed 001's formula (6 x params x tokens) leaves out attention over the sequence and the logits"
    return "the log's formula counts the attention, the vocabulary or the recomputation otherwise"


#: a job with fewer timed iterations than this after its warm-up has no steady state yet: its rates are
#: warm-up figures
STEADY_POINTS = 3


def warmup_check(timed: int, first_only: bool) -> list[str]:
    if first_only:
        return ["one iteration logged, the first (compilation, allocation): no throughput, TFLOPs or MFU yet"]
    steady = timed - warmup_count(timed)
    if 1 < timed and steady < STEADY_POINTS:
        return [f"only {timed} timed iterations ({steady} after the warm-up): the rates are warm-up figures, "
                "not the run's steady state"]
    return []


def teardown_check(job: Job, top_step: Optional[int]) -> list[str]:
    failure = job.fatal_failure
    if failure is None or not completed_before_teardown(job, top_step):
        return []
    return [f"after the run completed and saved its last checkpoint, at teardown: {failure.message[:300]}"]


def breakdown_check(tree: breakdown_mod.Breakdown) -> list[str]:
    return [f"no breakdown: {tree.withheld}"] if tree.withheld else []


def tokens_check(reported: Optional[float], computed: Optional[float]) -> list[str]:
    if reported and computed and abs(reported / computed - 1.0) > TFLOPS_DISAGREE:
        return [f"reported {reported:,.0f} and computed {computed:,.0f} tokens/s differ by "
                f"{100 * abs(reported / computed - 1.0):.0f}%: check the global batch and the sequence length "
                "(packed or variable-length sequences count fewer tokens than batch x length)"]
    return []


@dataclass(frozen=True)
class ClockFacts:
    """What a job's status needs besides its summary once the clock is read (:func:`on_clock`):
    a summary without them is the same whenever it is made, so it can be kept."""
    settled: bool  # the summary's status is the log's own word (settled_status): no clock changes it
    span_s: Optional[float]  # first stamp to last
    quiet_in_log_s: float  # the log's stamps after its last step (figures.alerts.quiet_in_log)
    closing: bool = False  # its last word is an evaluation past its last step (closes_with_eval)
    logged_every: int = 1  # the steps its log logs once (figures.alerts.logged_every)


def summarize(job: Job, *, now: Optional[float] = None, last_write: Optional[float] = None,
              gpu_peak: Optional[float] = None, gpu: Optional[str] = None,
              startup_timeout: float = STARTUP_TIMEOUT_S) -> Summary:
    """``gpu_peak`` (TFLOPs) or ``gpu`` (a table GPU) override the GPU the logs name, for MFU."""
    row, facts = summarize_timeless(job, gpu_peak=gpu_peak, gpu=gpu)
    return on_clock(row, facts, now, last_write, startup_timeout)


def on_clock(row: Summary, facts: ClockFacts, now: Optional[float], last_write: Optional[float],
             startup_timeout: float = STARTUP_TIMEOUT_S) -> Summary:
    """A timeless summary's status at ``now``, its files last written at ``last_write``."""
    if facts.settled:
        return row
    if facts.closing:
        return row.with_(status=closing_status(now, last_write), failure=None)
    status, failure = startup_status(row.started, facts.span_s, now, last_write, startup_timeout,
                                     row.files[0] if row.files else None)
    return row.with_(status=status, failure=failure)


def summarize_timeless(job: Job, *, gpu_peak: Optional[float] = None,
                       gpu: Optional[str] = None) -> tuple[Summary, ClockFacts]:
    """Every figure of :func:`summarize` that no clock changes, and what :func:`on_clock`
    needs to finish it (a status not settled is left as if no clock were read)."""
    cfg = job.config
    primary = job.primary
    elapsed, timed_series = _column(primary, "elapsed_ms"), primary
    time_source = cfg.get("step_time_source")
    if not _finite(elapsed).size:
        elapsed, timed_series = _column(job.steps, "elapsed_ms"), job.steps
        run_mean = _column(job.reported, "elapsed_ms")
        if time_source == TQDM_RATE and _finite(run_mean).size and _finite(elapsed).size < 3:
            # too few of tqdm's smoothed rates for a steady figure (a bar drawn once, at the end): the Trainer's own
            # run time over its steps (its closing dict) is better.  With more, their median is the steady
            # step, where the run time's mean holds the warm-up
            elapsed, timed_series, time_source = run_mean, job.reported, TRAINER_RUNTIME
    if not _finite(elapsed).size:
        elapsed, timed_series = _column(job.reported, "elapsed_ms"), job.reported
    it_stats = steady_stats(elapsed)

    timed = int(_finite(elapsed).size)
    first_only = _first_step_only(job)
    # the step time the rates are of: none where the only step is the first (its time stays a fact)
    rate_stats = None if first_only else it_stats
    rates = {f.key: None if first_only else aggregate(f.agg, _first_known(f.key, primary, job.reported, job.steps))
             for f in FIELDS if f.summary}
    samples_per_sec = rates["samples_per_sec"]
    gbs = global_batch(cfg)
    if samples_per_sec is None and rate_stats and gbs:
        samples_per_sec = gbs / (rate_stats.median / 1000.0)
    gpus = world_size(cfg)
    tokens, tokens_gpu, tokens_computed, tokens_source = tokens_rates(
        rates["tokens_per_sec"], rates["tokens_per_gpu_per_sec"], gbs, cfg.get("seq_length"),
        rate_stats.median / 1000.0 if rate_stats and rate_stats.median > 0 else None, rates["samples_per_sec"], gpus)
    rates["tokens_per_sec"], rates["tokens_per_gpu_per_sec"] = tokens, tokens_gpu

    reported = _column(primary, "tflops")
    if not _finite(reported).size:
        reported = _column(job.reported, "tflops")
    tflops_reported = None if first_only else aggregate("median", reported)

    params, params_source = flops.params_billion(cfg)
    work = flops.iteration_flops(cfg, gbs, params)
    iter_s = rate_stats.median / 1000.0 if rate_stats else None
    computed = flops.per_gpu_tflops(work.model if work else None, iter_s, gpus)
    hardware = flops.per_gpu_tflops(work.hardware if work else None, iter_s, gpus)

    peak = choose_peak(gpu_peak, gpu, cfg.get("gpu"), cfg.get("precision"))
    # MFU is of the model's work: the run's own MFU where it prints one (its statement wins), else the
    # computed rate over the GPU's peak, else the log's TFLOPs (whichever work they count) over it
    mfu_value, hfu_value, mfu_source = None, None, None
    if rates.get("mfu_reported") is not None:
        mfu_value, mfu_source = rates["mfu_reported"], "log: the run's own MFU"
    elif peak is not None:
        mfu_value = mfu(computed if computed is not None else tflops_reported, peak.tflops)
        mfu_source = f"{peak.source}: {peak.gpu or ''} {peak.precision or ''}".strip()
    if peak is not None:
        hfu_value = mfu(hardware, peak.tflops)

    top_step = last_step(job)
    settled = settled_status(job, top_step)
    started, span = _started(job), stamp_span(job)
    closing = settled is None and closes_with_eval(job)
    if settled is not None:
        status, failure = settled
    elif closing:
        status, failure = closing_status(None, None), None
    else:
        status, failure = startup_status(started, span, None, None, STARTUP_TIMEOUT_S, job.files[0] if job.files else None)
    startup_s, phases, startup_note = startup(job)
    declared_start = _milestone(job, RUN_START)
    run_part = run_ledger(primary if primary is not None and len(primary) else job.steps,
                          first_step=declared_start if declared_start is not None else _first_step_wall(job),
                          startup_s=startup_s, startup_note=startup_note, end=job.last_wall,
                          median_ms=it_stats.median if it_stats else None, world_size=gpus,
                          stated=cfg.get("step_time_source") is None,
                          resumed_from=job.resumed_from,
                          checkpoints={k: v["save_ms"] for k, v in job.checkpoints.items()},
                          evals=job.eval_marks, stall_opts=ALERT_DEFAULTS["stalled"])
    loss_last = primary_loss(job.last_losses) if job.last_losses else job.last_step_loss

    steady = {name: stat.steady() for name, stat in job.timers.items() if stat.reports}
    offload = {name: round(mean, 3) for name, (_, mean) in steady.items()
               if mean is not None and job.timers[name].group == "offload"}
    timers = {name: {"group": stat.group, "mean_ms": _clean(steady[name][1], 3) if name in steady else None,
                     "count": stat.reports}
              for name, stat in job.timers.items()}
    # the timers' steady window leaves out the reports timed over an evaluation pass: so does the whole's
    whole_stats = steady_stats(_without_evals(job, timed_series, elapsed)) if job.after_eval else it_stats
    tree = breakdown_mod.build(steady, whole_stats.mean if whole_stats else None, job.occasional_timers(),
                               spreads={name: stat.spread() for name, stat in job.timers.items() if stat.count})
    finite_elapsed = _finite(elapsed)
    mem = job.memory
    evals = job.evals
    eval_metric = evals.primary
    rates["samples_per_sec"] = samples_per_sec
    return Summary(
        job=job.name,
        files=list(job.files),
        framework=job.framework,
        status=status,
        iterations_seen=job.iterations_seen,
        steps_seen=job.steps.appended,
        last_iteration=job.last_iteration,
        last_step=top_step,
        train_iters=cfg.get("train_iters"),
        iter_time_ms=IterTime(round(it_stats.median, 3), round(it_stats.mean, 3), round(it_stats.min, 3),
                              round(it_stats.max, 3), round(it_stats.p10, 3), round(it_stats.p90, 3), it_stats.n)
        if it_stats else None,
        iter_time_last_ms=_clean(float(finite_elapsed[-1]), 3) if finite_elapsed.size else None,
        tflops_per_gpu=Tflops(_clean(tflops_reported, 2), _clean(computed, 2), _clean(hardware, 2)),
        mfu=_clean(mfu_value, 4),
        hfu=_clean(hfu_value, 4),
        flops_formula=work.formula if work is not None and computed is not None else None,
        params_source=params_source,
        iter_time_source=time_source if it_stats else None,
        run_ledger=run_part,
        gpu=cfg.get("gpu"),
        precision=cfg.get("precision"),
        gpu_peak_tflops=peak.tflops if peak is not None else None,
        gpu_peak_source=mfu_source,
        tokens_per_sec_computed=_clean(tokens_computed, 4),
        tokens_per_sec_source=tokens_source,
        # the figures as the summary keeps them: one rounding for the table and its note
        checks=checks(_clean(tflops_reported, 2), _clean(computed, 2), _clean(hardware, 2), _clean(mfu_value, 4), peak,
                      work) + warmup_check(timed, first_only) + teardown_check(job, top_step)
        + breakdown_check(tree)
        + tokens_check(rates["tokens_per_sec"] if (tokens_source or "").startswith("log") else None, tokens_computed),
        params_billion=_clean(params, 3),
        world_size=gpus,
        global_batch=gbs,
        seq_length=cfg.get("seq_length"),
        config=ModelConfig(**{k: cfg.get(k) for k in ("num_layers", "hidden_size", "num_heads", "tp", "pp",
                                                       "micro_batch")}, dp=data_parallel(cfg, stated=True)),
        activation_checkpointing=cfg.get("activation_checkpointing"),
        startup_s=startup_s,
        startup_note=startup_note,
        run_time_s=run_time(job),
        startup=phases,
        offload_ms=offload,
        timers_ms=timers,
        breakdown=tree.as_list(),
        breakdown_whole_ms=_clean(tree.whole_ms, 3) if tree.parts else None,
        breakdown_whole=tree.whole_source if tree.parts else None,
        offload_share=_clean(breakdown_mod.offload_share(tree.parts), 4),
        startup_timers=breakdown_mod.one_off({n: t.mean_ms for n, t in job.timers.items() if t.reports}) + tree.apart,
        memory=Memory(_clean(mem.get("gpu_max_allocated_mb"), 1), _clean(mem.get("gpu_max_reserved_mb"), 1),
                      _clean(mem.get("cpu_used_gb"), 2)),
        checkpoints=[job.checkpoints[k] for k in sorted(job.checkpoints)],
        loss_last=_loss_value(loss_last),
        eval_last={name: finite_or_word(value) for name, value in evals.last.items()},
        eval_metric=eval_metric,
        eval_value=_loss_value(evals.last[eval_metric]) if eval_metric is not None else None,
        eval_iteration=evals.last_iteration,
        warnings=dict(sorted(job.warnings.items())),
        ranks_seen=len(job.ranks_seen),
        failure=failure,
        started=started,
        # a span needs two stamps: one alone says nothing of how long the log ran
        wall_span_s=_clean(job.last_wall - job.first_wall, 3)
        if job.first_wall is not None and job.last_wall is not None and job.last_wall > job.first_wall else None,
        metrics={key: _clean(value, 4) for key, value in rates.items()},
    ), ClockFacts(settled is not None, span, quiet_in_log(job), closing, logged_every(job))
