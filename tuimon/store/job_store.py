"""The job store: events in, per-job and per-rank state out.  No Textual here.

Each job keeps its iteration points per rank in :class:`~tuimon.store.series.Series`
(numpy), running aggregates for timers and memory, and the few discrete facts
(config, milestones, checkpoints, failures) needed to derive every summary figure.
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Optional, Union

import numpy as np

from tuimon.parsers.columns import Item, IterationRows, MemoryRows, PlacedRows, RateRows, StepRows, TimerRows
from tuimon.parsers.events import (
    GLOG_LAUNCH,
    Checkpoint,
    Evaluation,
    Event,
    Exit,
    Failure,
    Iteration,
    LogWarning,
    Memory,
    Milestone,
    Resume,
    RunConfig,
    Step,
    Throughput,
    Timers,
    Truncated,
)
from tuimon.parsers.timers import COMM_OP

from .evals import Evals
from .fields import primary_loss
from .identity import identify
from .iteration_fold import MAX_ASIDE, Pending, after_spike, diverges, key_of, nan_check
from .iteration_fold import fold as fold_iterations
from .series import Series, point_plan
from .step_fold import MEMORY_FIGURES, STEP_FILLS, fold_memory, fold_rates
from .step_fold import fold as fold_steps
from .timer_fold import Segment, fold
from .timers import TimerStat

RankKey = Union[int, str]
_CONFIG_FIELDS = ("num_layers", "hidden_size", "num_heads", "seq_length", "vocab_size", "padded_vocab_size",
                  "micro_batch", "global_batch", "tp", "pp", "dp", "world_size", "activation_checkpointing",
                  "train_iters", "total_params_b", "total_params", "gpu", "precision", "ffn_hidden_size", "num_query_groups",
                  "kv_channels", "swiglu", "untied", "output_gate", "linear_bias", "rmsnorm", "num_experts",
                  "moe_topk", "moe_ffn_hidden_size", "moe_shared_ffn_size", "ep", "step_time_source")
#: model-parallel ranks whose parameter counts a job keeps (config["rank_params"]: "t, p" -> count)
MAX_MODEL_RANKS = 4096
# a failure of these kinds is what ended a job, whatever came after; the first of them is the cause (a CUDA
# fault reported by NCCL's watchdog comes before the DistBackendError it throws)
_ROOT_CAUSES = ("oom", "cuda", "nccl", "hardware")
_FATAL = _ROOT_CAUSES + ("cancelled", "killed")
MAX_TIMERS = 512  # names a job keeps: a log printing a new name each line must not grow the store
MAX_MILESTONES = 1024
MAX_FAILURES = 256
MAX_WARNING_KINDS = 64
MAX_RUNS = 64  # runs told apart in one file; past them (two programs interleaving one file) the last takes all
MAX_RANKS_SEEN = 1 << 16  # distinct ranks a job counts (the largest runs have tens of thousands)
MAX_EVAL_MARKS = 8192  # evaluation passes a job places in its time ledger (figures.ledger)


@dataclass
class FileRun:
    """What one file has told of the run it is in now, to tell where the next run starts.
    Kept per file, so that a job built from its files' stores read apart (the pool, the
    cache) splits and counts as one built from their events read in order."""
    progressed: bool = False  # an iteration or step was logged
    last: dict[RankKey, tuple[int, int]] = field(default_factory=dict)  # rank -> (last iteration, its step)
    shape: dict[str, int] = field(default_factory=dict)  # seq_length, train_iters, num_layers, hidden_size
    #: records to come whose interval may hold the evaluation pass logged last: 2 after it, 0 once two
    #: records followed.  A log prints its timers before its record (NeoX: DeepSpeed's step timers) or
    #: after it (Megatron): the reports until the second record are aside either way
    after_eval: int = 0

    def take(self, other: "FileRun") -> None:
        self.progressed = self.progressed or other.progressed
        self.after_eval = other.after_eval
        self.last.update(other.last)
        self.shape.update(other.shape)


@dataclass
class Job:
    key: str
    name: str
    files: list[str] = field(default_factory=list)
    file_index: dict[str, int] = field(default_factory=dict)  # file -> its place in files (points keep it)
    config: dict = field(default_factory=dict)
    frameworks: list[str] = field(default_factory=list)
    ranks: dict[RankKey, Series] = field(default_factory=dict)
    bounded: bool = False  # its series keep a thinned history (a long-running verb's store)
    steps: Series = field(default_factory=Series)
    reported: Series = field(default_factory=Series)  # Throughput lines: tflops / samples/s / iteration time
    timers: dict[str, TimerStat] = field(default_factory=dict)
    memory: dict[str, float] = field(default_factory=dict)
    milestones: list[Milestone] = field(default_factory=list)
    checkpoints: dict[int, dict] = field(default_factory=dict)
    failures: list[Failure] = field(default_factory=list)
    exits: list[Exit] = field(default_factory=list)
    evals: Evals = field(default_factory=Evals)
    warnings: dict[str, int] = field(default_factory=dict)  # kind -> how many
    ranks_seen: set[int] = field(default_factory=set)  # every rank a line of the job's named
    truncations: int = 0
    last_iteration: Optional[int] = None
    last_progress: Optional[tuple[str, int]] = None  # (file, line) of the latest iteration/step
    last_progress_wall: Optional[float] = None  # the latest iteration/step's own time (its stamp)
    last_losses: dict[str, float] = field(default_factory=dict)
    last_iteration_lr: Optional[float] = None
    last_step_lr: Optional[float] = None
    last_step_loss: Optional[float] = None  # the latest step line that gives one (nan included: a diverged run)
    last_step_number: Optional[int] = None  # the step of the steps' last point (a second line of it fills it in)
    last_loss_scale: Optional[float] = None
    #: the iteration of the latest step whose loss or grad norm was not finite (a fp16 loss-scale
    #: skip aside), None once a finite one followed: a run that diverged reads NAN, not training
    nan_at: Optional[tuple[Optional[int], str, int]] = None  # (iteration, file, line)
    #: each time the run went non-finite after finite steps: (iteration, rank, file, line, wall time)
    nan_events: list[tuple] = field(default_factory=list)
    first_wall: Optional[float] = None
    last_wall: Optional[float] = None
    first_step_wall: Optional[float] = None
    first_config_wall: Optional[float] = None  # the earliest stamped configuration line
    runs_by_file: dict[int, FileRun] = field(default_factory=dict)  # file index -> its run so far
    #: (file, line) of the iteration records whose interval held an evaluation pass (the first after
    #: each): no sample of a training iteration's time (NeoX 129: 20,649 ms between 599 ms ones)
    after_eval: set[tuple[str, int]] = field(default_factory=set)
    #: the latest progress (last_progress) when an evaluation of the step after the last trained was
    #: logged: while it is still the latest, the run's last word is that evaluation (llm.c's loop
    #: evaluates at step N after training step N-1, and ends)
    closing_eval: Optional[tuple[str, int]] = None
    #: the stamp of the launch that began this run (a later run of its file): its lines' stamps start
    #: there, and an earlier one is a stamp carried over from the run before (a line without a stamp
    #: of its own takes the last one before it)
    launch_wall: Optional[float] = None
    #: the iteration the checkpoint this run went on from holds (its first Resume), None for a fresh start
    resumed_from: Optional[int] = None
    #: where evaluation passes ran: (iteration or -1, its line's stamp), at most MAX_EVAL_MARKS
    eval_marks: list[tuple[int, Optional[float]]] = field(default_factory=list)
    events: int = 0

    def flush_series(self) -> None:
        """Make the points its series staged (:meth:`Series.append_event`)."""
        for series in self.ranks.values():
            series.flush()
        self.steps.flush()
        self.reported.flush()

    def add_file(self, file: str) -> int:
        at = self.file_index.get(file)
        if at is None:
            at = self.file_index[file] = len(self.files)
            self.files.append(file)
        return at

    # -- one file's job, merged in -------------------------------------------------------
    def merge(self, other: "Job") -> None:
        """Take in ``other`` (the same job, built from the events of files read after
        this one's): the state the events would have left, added here one by one.
        ``other`` is used up: its series may become this job's own."""
        for name, value in other.config.items():
            if name == "rank_params":
                _count_rank_params(self.config, value)
            else:
                self.config[name] = value
        for fw in other.frameworks:
            if fw not in self.frameworks:
                self.frameworks.append(fw)
        mapping = np.array([self.add_file(f) for f in other.files] or [0], dtype=np.uint16)
        for key, series in other.ranks.items():
            mine = self.ranks.get(key)
            if mine is None:
                self.ranks[key] = series  # the usual case, a rank in one file: no copy
                series.bounded = series.bounded or self.bounded
                series.remap_files(mapping)
            else:
                start = len(mine)
                mine.extend_from(series)
                mine.remap_files(mapping, start)
        if len(other.steps):
            self.last_step_number = other.last_step_number
        for name in ("steps", "reported"):
            mine, theirs = getattr(self, name), getattr(other, name)
            if len(mine):
                start = len(mine)
                mine.extend_from(theirs)
                mine.remap_files(mapping, start)
            else:
                theirs.remap_files(mapping)
                setattr(self, name, theirs)
        for name, stat in other.timers.items():
            have = self.timers.get(name)
            if have is None:
                if len(self.timers) >= MAX_TIMERS:
                    continue
                have = self.timers[name] = TimerStat(stat.group)
            have.merge(stat)
        for name, value in other.memory.items():
            if value > self.memory.get(name, float("-inf")):
                self.memory[name] = value
        self.milestones.extend(other.milestones[:max(0, MAX_MILESTONES - len(self.milestones))])
        for key, entry in other.checkpoints.items():
            mine_entry = self.checkpoints.setdefault(key, {"iteration": key, "save_ms": None})
            if entry["save_ms"] is not None:
                mine_entry["save_ms"] = entry["save_ms"]
        self.failures.extend(other.failures[:max(0, MAX_FAILURES - len(self.failures))])
        self.exits.extend(other.exits)
        self.evals.merge(other.evals)
        for kind, n in other.warnings.items():
            if kind in self.warnings or len(self.warnings) < MAX_WARNING_KINDS:
                self.warnings[kind] = self.warnings.get(kind, 0) + n
        if len(self.ranks_seen) < MAX_RANKS_SEEN:
            self.ranks_seen.update(other.ranks_seen)
        self.truncations += other.truncations
        if other.closing_eval is not None:
            self.closing_eval = other.closing_eval
        if self.launch_wall is None:
            self.launch_wall = other.launch_wall
        if self.resumed_from is None:
            self.resumed_from = other.resumed_from
        self.eval_marks.extend(other.eval_marks[:max(0, MAX_EVAL_MARKS - len(self.eval_marks))])
        for point in other.after_eval:
            if len(self.after_eval) < MAX_ASIDE:
                self.after_eval.add(point)
        if other.last_iteration is not None and (self.last_iteration is None
                                                 or other.last_iteration >= self.last_iteration):
            self.last_iteration = other.last_iteration
        if other.last_progress is not None:
            self.nan_at = other.nan_at
        self.nan_events.extend(other.nan_events[:max(0, MAX_FAILURES - len(self.nan_events))])
        for name in ("last_progress", "last_progress_wall", "last_iteration_lr", "last_step_lr", "last_step_loss",
                     "last_loss_scale"):
            value = getattr(other, name)
            if value is not None:
                setattr(self, name, value)
        if other.last_losses:
            self.last_losses = dict(other.last_losses)
        self.first_wall = _low(self.first_wall, other.first_wall)
        self.first_step_wall = _low(self.first_step_wall, other.first_step_wall)
        self.first_config_wall = _low(self.first_config_wall, other.first_config_wall)
        for at, run in other.runs_by_file.items():
            self.runs_by_file.setdefault(int(mapping[at]) if at < len(mapping) else at, FileRun()).take(run)
        if other.last_wall is not None and (self.last_wall is None or other.last_wall > self.last_wall):
            self.last_wall = other.last_wall
        self.events += other.events

    # -- derived facts ------------------------------------------------------------------
    @property
    def iterations_seen(self) -> int:
        """Iteration lines of the run, each counted once however many ranks printed it (the
        rank that printed most); thinned-out points count."""
        return max((s.appended for s in self.ranks.values()), default=0)

    def run_of(self, file: str) -> FileRun:
        """The state of ``file``'s current run in this job."""
        at = self.file_index.get(file, 0)
        state = self.runs_by_file.get(at)
        if state is None:
            state = self.runs_by_file[at] = FileRun()
        return state

    @property
    def last_lr(self) -> Optional[float]:
        """The learning rate of the latest iteration line that gives one, else of the
        latest step line (DeepSpeed's own): whatever order their batches came in."""
        return self.last_iteration_lr if self.last_iteration_lr is not None else self.last_step_lr

    @property
    def primary(self) -> Optional[Series]:
        """The rank that logged the most iterations (Megatron logs them on one rank)."""
        if not self.ranks:
            return None
        return max(self.ranks.values(), key=len)

    def occasional_timers(self) -> set[str]:
        """Timers that are no part of every iteration: timed only before the job's first
        iteration or step (Megatron's startup timer block), or one communication call each."""
        started = bool(self.ranks) or bool(len(self.steps))
        return {name for name, t in self.timers.items()
                if t.group == COMM_OP or (started and t.reports and not t.in_training)}

    @property
    def framework(self) -> str:
        fw = set(self.frameworks)
        # an offloading method names the run (runs are compared by method, as seed 004's
        # table does), unless a trainer that is not Megatron's or DeepSpeed's drives it
        for name in ("stronghold", "l2l", "gpt-neox", "nemo"):
            if name in fw:
                return name
        megatron_deepspeed = "megatron-lm" in fw and "deepspeed" in fw
        if "hf-trainer" in fw and not megatron_deepspeed:  # the Trainer drives the run, DeepSpeed or not
            return "hf-trainer"
        for name in ("zero-infinity", "zero-offload"):
            if name in fw:
                return name
        if megatron_deepspeed:
            return "megatron-deepspeed"
        for name in ("megatron-lm", "deepspeed"):
            if name in fw:
                return name
        return self.frameworks[0] if self.frameworks else "unknown"

    @property
    def fatal_failure(self) -> Optional[Failure]:
        """The failure that ended the job: the first OOM, NCCL or hardware error, else the first
        other failure after which the job made no more progress; else a task's
        non-zero exit status (``srun: error: ... Exited with exit code 1``) that no
        progress followed: its error went to another stream, the job still died."""
        at = next((k for k, f in enumerate(self.failures) if f.kind in _ROOT_CAUSES), None)
        progress = self.last_progress
        if at is not None:
            # a traceback that ended the run before it (no progress after it) is the cause, the NCCL
            # watchdog or abort that other ranks then hit its symptom: a data loader's StopIteration on
            # the tensor-parallel ranks 0, long before the watchdog's timeout on the others
            before = next((k for k, f in enumerate(self.failures[:at]) if f.kind == "traceback"
                           and (progress is None or f.file != progress[0] or f.line > progress[1])), None)
            if before is not None:
                first, root = self.failures[before], self.failures[at]
                if first.wall_time is None or root.wall_time is None or first.wall_time <= root.wall_time:
                    at = before
            root_cause = self.failures[at]
            # the symptom it led to, kept as context ("... then: c10::DistBackendError ...")
            symptom = next((f for f in self.failures[at + 1:] if f.kind != root_cause.kind), None)
            if symptom is None:
                return root_cause
            return root_cause._replace(message=f"{root_cause.message[:400]} (then, line {symptom.line}: "
                                               f"{symptom.message[:200]})")
        for f in self.failures:
            if f.kind in _FATAL:
                return f
            if progress is None or f.file != progress[0] or f.line > progress[1]:
                return f
        for e in self.exits:
            if e.status and (progress is None or e.file != progress[0] or e.line > progress[1]):
                how = f"was killed by signal {-e.status}" if e.status < 0 else f"exited with exit code {e.status}"
                return Failure(file=e.file, line=e.line, rank=e.rank, node=e.node, wall_time=e.wall_time,
                               kind="killed", message=f"a task {how}")
        return None


class JobStore:
    """Routes events to jobs by their file (see :mod:`tuimon.store.identity`).

    A file that holds several runs (a job script that runs the trainer three times, a
    Slurm job requeued into the same ``.out``) gives one job per run: ``name``, then
    ``name#2``, ``name#3``.  A new run starts where the file's iteration counter goes
    back, the total of iterations or the model's shape changes, or a job script's start
    stamp comes after the run logged progress (see :data:`_STARTS_A_RUN`)."""

    def __init__(self, bounded: bool = False) -> None:
        """``bounded``: every series keeps its recent points and a thinned history (see
        :mod:`tuimon.store.series`): what long-running verbs use, so memory has a bound."""
        self.jobs: dict[str, Job] = {}
        self._file_job: dict[str, tuple[Job, Optional[int]]] = {}
        self._runs: dict[str, list[Job]] = {}  # file -> the jobs of its runs, in order
        self._by_job_id: dict[str, Job] = {}  # scheduler job id -> the job of its output (for its companions)
        self.bounded = bounded

    def _job(self, key: str, name: str) -> Job:
        job = self.jobs.get(key)
        if job is None:
            job = self.jobs[key] = Job(key, name)
            if getattr(self, "bounded", False):
                job.bounded = job.steps.bounded = job.reported.bounded = True
        return job

    def job_for(self, file: str) -> tuple[Job, Optional[int]]:
        """The job of ``file``'s latest run, and the rank its name gives."""
        hit = self._file_job.get(file)
        if hit is None:
            ident = identify(file)
            by_id = self._by_job_id
            job = self.jobs.get(ident.job_key)
            if job is None and ident.companion and ident.job_id in by_id:
                job = by_id[ident.job_id]  # Cobalt's .cobaltlog, an .error: with the job's output read before
            if job is None:
                job = self._job(ident.job_key, ident.job_name)
            if ident.job_id is not None and not ident.companion:
                by_id.setdefault(ident.job_id, job)
            job.add_file(file)
            hit = self._file_job[file] = (job, ident.rank)
            self.runs_of(file).append(job)
        return hit

    def runs_of(self, file: str) -> list[Job]:
        """The jobs of every run ``file`` holds (one, unless the file holds several)."""
        return self._runs.setdefault(file, [])

    def _next_run(self, file: str) -> Job:
        """Start a new run of ``file``: its events from here on go to a job of their own."""
        first, rank = self.job_for(file)
        runs = self.runs_of(file)
        base_key, base_name = runs[0].key, runs[0].name
        n = len(runs) + 1
        while f"{base_key}#{n}" in self.jobs and self.jobs[f"{base_key}#{n}"] in runs:
            n += 1
        job = self._job(f"{base_key}#{n}", f"{base_name}#{n}")
        job.add_file(file)
        # what parsers say once a file (the framework, the GPU, the precision) holds for its next run
        # too, until that run says otherwise; its shape and batch are its own
        previous = runs[-1]
        job.frameworks.extend(fw for fw in previous.frameworks if fw not in job.frameworks)
        for name in _INHERITED:
            if name in previous.config and name not in job.config:
                job.config[name] = previous.config[name]
        runs.append(job)
        self._file_job[file] = (job, rank)
        return job

    def _timer_state(self, file: str) -> tuple[Job, bool, bool]:
        """What a timer report of ``file`` counts to now: its run's job, whether that run
        had logged progress (a report before is a setup timer), and whether it is put aside
        (an evaluation pass since the run's last iteration record)."""
        job = self.job_for(file)[0]
        run = job.run_of(file)
        return job, run.progressed, run.after_eval > 0

    def job_of(self, file: str) -> Optional[Job]:
        """The job ``file``'s latest events went to, or None (no job is made for it)."""
        hit = self._file_job.get(file)
        return hit[0] if hit is not None else None

    def add_file(self, file: str) -> Job:
        return self.job_for(file)[0]

    def merge_file(self, file: str, part: "JobStore") -> None:
        """Take in ``part``, a store of ``file``'s events alone, as if they were added here:
        its first run continues this file's latest, its further runs follow as runs of their own."""
        theirs = part.runs_of(file) or list(part.jobs.values())
        for k, other in enumerate(theirs):
            job = self.job_for(file)[0] if k == 0 else self._next_run(file)
            job.merge(other)

    def add(self, events: Iterable[Item]) -> None:
        """Take in events in their files' line order, and the compiled core's rows (a block's,
        after the block's other events; see :mod:`tuimon.store.timer_fold` and
        :mod:`tuimon.store.iteration_fold`)."""
        items = events if isinstance(events, list) else list(events)
        segments: dict[str, Segment] = {}  # per file: its events since its last rows
        touched: dict[int, Job] = {}  # the jobs whose series may hold staged points
        pending = Pending(items) if any(type(item) is IterationRows for item in items) else None
        last_job = None
        i, n = 0, len(items)
        while i < n:
            ev = items[i]
            i += 1
            if isinstance(ev, PlacedRows):
                j = i
                while j < n and isinstance(items[j], PlacedRows) and items[j].file == ev.file:
                    j += 1
                if j > i:  # rows of other kinds closed with these (their lines interleave)
                    job = self._fold_kinds(items[i - 1:j], pending, segments, touched)  # type: ignore[arg-type]
                    i = j
                else:
                    job = self._fold_in_place(ev, pending, segments, touched)
                if job is not last_job:
                    touched[id(job)] = last_job = job
                continue
            if isinstance(ev, TimerRows):
                held = segments.pop(ev.file) if ev.file in segments else Segment(self._timer_state(ev.file))
                fold(held, ev, MAX_TIMERS, MAX_RANKS_SEEN)
                continue
            if pending is not None and ev.file in pending.queue:  # rows of earlier lines go first
                for job in self._rows_before(ev, pending, segments):
                    touched[id(job)] = job
            if isinstance(ev, IterationRows):
                continue
            job = self._take(ev, segments)
            if job is not last_job:
                touched[id(job)] = last_job = job
        for segment in segments.values():
            if segment.held:
                fold(segment, None, MAX_TIMERS, MAX_RANKS_SEEN)
        for job in touched.values():  # (staged points are bounded by what one call takes)
            job.flush_series()

    def _fold_in_place(self, rows: PlacedRows, pending: Optional[Pending], segments: dict[str, Segment],
                       touched: dict[int, "Job"]) -> "Job":
        """Rows that stand at the place of their events, folded in bulk; one by one where their
        file's iteration rows still to fold go in between (step rows) or may have to go first
        (rate and memory rows); the job they went to."""
        def take(ev: Event) -> Job:
            return self._take(ev, segments)

        def new_segment() -> Segment:
            return Segment(self._timer_state(rows.file))

        if pending is not None and rows.file in pending.queue and (
                isinstance(rows, StepRows) or not self._may_go_first(rows, pending)):
            if isinstance(rows, StepRows):
                return self._steps_pending(rows, pending, segments, touched)
            return self._take_each(rows.events(), pending, segments, touched)
        if isinstance(rows, StepRows):
            return fold_steps(self, rows, segments, take, new_segment, MAX_RANKS_SEEN)
        if isinstance(rows, MemoryRows):
            return fold_memory(self, rows, segments, take, new_segment, MAX_RANKS_SEEN)
        assert isinstance(rows, RateRows)
        return fold_rates(self, rows, segments, take, new_segment, MAX_RANKS_SEEN)

    def _steps_pending(self, rows: StepRows, pending: Pending, segments: dict[str, Segment],
                       touched: dict[int, "Job"]) -> "Job":
        """Step rows whose file's iteration rows still to fold go in between them: the first
        ones one by one while an evaluation's interval is open (the iteration records after
        the pass close it) or the run has logged no progress, the rest in bulk with those
        iteration rows where that leaves the store as the events would
        (:meth:`_steps_among_iterations`), else one by one too."""
        file, k, n = rows.file, 0, len(rows)
        job = self.job_for(file)[0]
        while k < n:
            segment = segments.get(file)
            if not job.run_of(file).after_eval and segment is not None and segment.progressed and not segment.aside:
                break
            job = self._take_each(rows.part(k, k + 1).events(), pending, segments, touched)
            k += 1
        if k == n:
            return job
        rest = rows.part(k, n) if k else rows
        if file not in pending.queue:  # (those taken folded its rows still to fold)
            return self._fold_steps(rest, segments)  # type: ignore[arg-type]
        folded = self._steps_among_iterations(rest, pending, segments, touched)  # type: ignore[arg-type]
        return folded if folded is not None else self._take_each(rest.events(), pending, segments, touched)

    def _steps_among_iterations(self, rows: StepRows, pending: Pending, segments: dict[str, Segment],
                                touched: dict[int, "Job"]) -> Optional["Job"]:
        """Step rows whose file's iteration rows still to fold go in between them (Megatron-DeepSpeed's
        iteration lines and DeepSpeed's step lines, NeoX's and its pipeline engine's), both folded in
        bulk, the iteration rows first, where their order changes nothing: none of those rows starts
        a run, neither says a divergence (where the steps say a loss, each clears one: the latest of
        either leaves none), the last step (the latest line) has a stamp or none of those rows has,
        no evaluation's interval is open and the file's run logged progress before (its timers'
        state moves with neither); else None."""
        file = rows.file
        job = self.job_for(file)[0]
        segment = self._segment(file, segments)
        last = rows.line[-1]
        if job.bounded or job.run_of(file).after_eval or not segment.progressed or segment.aside or \
                not pending.may_wait(self, file, last, MAX_RUNS, MAX_RANKS_SEEN):
            return None
        ahead = pending.peek(file, last)
        if any(loss is not None for loss in rows.loss) and (
                not all(loss is None or math.isfinite(loss) for loss in rows.loss) or
                any(diverges(its, a, b) for its, a, b in ahead)):
            return None
        # the job's last progress is its latest line's, the steps' last: its stamp too (the iteration
        # rows', folded first, are of earlier lines), where it has one or none of theirs has
        if rows.wall_time[-1] is None and any(w is not None for its, a, b in ahead for w in its.wall_time[a:b]):
            return None
        for moved in self._fold_parts(pending.before(file, last), segments):
            touched[id(moved)] = moved
        return self._fold_steps(rows, segments)

    def _fold_steps(self, rows: StepRows, segments: dict[str, Segment]) -> "Job":
        """``rows`` folded in bulk where they may be (:func:`tuimon.store.step_fold.fold`)."""
        return fold_steps(self, rows, segments, lambda e: self._take(e, segments),
                          lambda: Segment(self._timer_state(rows.file)), MAX_RANKS_SEEN)

    def _fold_parts(self, parts: list, segments: dict[str, Segment]) -> list["Job"]:
        """Slices (rows, start, end) of iteration rows folded; the jobs whose series they staged points in."""
        touched: list[Job] = []
        for rows, a, b in parts:
            touched += fold_iterations(self, rows, a, b, self._segment(rows.file, segments),
                                       lambda e: self._take(e, segments), (MAX_RUNS, MAX_RANKS_SEEN, MAX_FAILURES))
        return touched

    def _segment(self, file: str, segments: dict[str, Segment]) -> Segment:
        """``file``'s events since its last rows, in this call (begun here if none)."""
        segment = segments.get(file)
        if segment is None:
            segment = segments[file] = Segment(self._timer_state(file))
        return segment

    def _fold_kinds(self, run: list[PlacedRows], pending: Optional[Pending], segments: dict[str, Segment],
                    touched: dict[int, "Job"]) -> "Job":
        """Rows at their place of one file, a PlacedRows a kind, their lines interleaved: each
        kind folded on its own (the rate and memory rows first: they change nothing the steps
        read, nor the iteration rows of their file still to fold, which may wait for them when
        none of those before them starts a run), where the ranks a job counts cannot fill up
        meanwhile and one kind at most gives the job's reported rates (a series: its points go in
        line order); else their events merged in line order, one by one."""
        file = run[0].file
        job = self.job_for(file)[0]
        others = [rows for rows in run if not isinstance(rows, StepRows)]
        rates = sum(1 for rows in run if isinstance(rows, RateRows) or (
            isinstance(rows, StepRows) and rows.throughputs()))
        waits = rates > 1 or (pending is not None and file in pending.queue and not all(
            self._may_go_first(rows, pending) for rows in others))
        ranks = set().union(*(rows.rank for rows in run))
        ranks.discard(None)
        if waits or len(job.ranks_seen) + len(ranks - job.ranks_seen) > MAX_RANKS_SEEN:
            events = list(heapq.merge(*(rows.events() for rows in run), key=_line_of))
            if pending is not None:
                return self._take_each(events, pending, segments, touched)
            for ev in events:
                job = self._take(ev, segments)
            return job
        for rows in others + [rows for rows in run if isinstance(rows, StepRows)]:
            job = self._fold_in_place(rows, pending, segments, touched)
            touched[id(job)] = job
        return job

    def _may_go_first(self, rows: PlacedRows, pending: Pending) -> bool:
        """Whether ``rows`` (rate or memory rows: nothing an iteration reads or changes) may be taken
        before their file's iteration rows still to fold (those of earlier lines start no run: what
        :meth:`_rows_before` asks of each of their events)."""
        line = rows.line[-1]
        return pending.first_line(rows.file) >= line or pending.may_wait(self, rows.file, line, MAX_RUNS,
                                                                          MAX_RANKS_SEEN)

    def _take_each(self, events: list[Event], pending: Pending, segments: dict[str, Segment],
                   touched: dict[int, "Job"]) -> "Job":
        """``events`` one by one, each after its file's iteration rows that go before it."""
        for ev in events:
            if ev.file in pending.queue:
                for job in self._rows_before(ev, pending, segments):
                    touched[id(job)] = job
            job = self._take(ev, segments)
            touched[id(job)] = job
        return job

    def _rows_before(self, ev: Union[Event, IterationRows], pending: Pending,
                     segments: dict[str, Segment]) -> list[Job]:
        """The iteration rows of ``ev``'s file that go before it, folded (all the rest of ``ev``
        when it is rows); the jobs whose series they staged points in."""
        if isinstance(ev, IterationRows):
            parts = pending.rest(ev)
        else:
            line = ev.line or 0
            commutes = _commutes(ev)
            if pending.first_line(ev.file) >= line:
                parts = []
            elif commutes and pending.may_wait(self, ev.file, line, MAX_RUNS, MAX_RANKS_SEEN):
                parts = []  # (the rows and the event come to the same whichever goes first)
            else:
                parts = pending.before(ev.file, line)
            if not commutes and type(ev) in _STARTS_A_RUN:  # it may change what the rows do to their run
                pending.epoch += 1
        touched: list[Job] = []
        if parts:
            runs = len(self.runs_of(ev.file))
            touched = self._fold_parts(parts, segments)
            if len(self.runs_of(ev.file)) != runs:  # a row started a new run
                pending.epoch += 1
        return touched

    def _take(self, ev: Event, segments: dict[str, Segment]) -> Job:
        """One event (its file's events before it taken); the job it went to."""
        job, file_rank = self.job_for(ev.file)
        segment = self._segment(ev.file, segments)
        kind = type(ev)
        starts = _STARTS_A_RUN.get(kind)
        new_run = starts is not None and starts(job, ev, file_rank) and len(self.runs_of(ev.file)) < MAX_RUNS
        if new_run:
            job = self._next_run(ev.file)
            if kind is Milestone:
                job.launch_wall = ev.wall_time
        job.events += 1
        if ev.rank is not None and ev.rank not in job.ranks_seen and len(job.ranks_seen) < MAX_RANKS_SEEN:
            job.ranks_seen.add(ev.rank)
        if ev.wall_time is not None and (job.launch_wall is None or ev.wall_time >= job.launch_wall):
            if job.first_wall is None or ev.wall_time < job.first_wall:
                job.first_wall = ev.wall_time
            if job.last_wall is None or ev.wall_time > job.last_wall:
                job.last_wall = ev.wall_time
        if kind is Timers:  # held, for the rows it may interleave with
            segment.held.append((ev.line or 0, self._timer_state(ev.file), ev))  # type: ignore[arg-type]
            return job
        handler = _HANDLERS.get(kind)
        if handler is not None:
            handler(job, ev, file_rank)
        # the state its timers count in moves with a new run, a run's first progress, an evaluation
        # pass and the iteration record after it
        if new_run or kind is Evaluation or (kind in _PROGRESS and (not segment.progressed or segment.aside)):
            segment.mark(ev.line, self._timer_state(ev.file))
        return job


#: what a file's next run takes from its run before until it says otherwise
_INHERITED = ("gpu", "precision", "world_size")
#: a run's shape: another value of one of these, once the run logged progress, is another run
_RUN_SHAPE = ("seq_length", "train_iters", "num_layers", "hidden_size")


def _iteration_starts_a_run(job: Job, ev: Iteration, file_rank: Optional[int]) -> bool:
    if ev.iteration is None:
        return False
    run = job.run_of(ev.file)
    seen = run.last.get(_rank_key(ev, file_rank))
    if seen is None:
        return False
    # the counter went back (to the start, or to a checkpoint): a restart.  By more than one
    # logging interval: unlabelled ranks' lines of one iteration may come slightly out of order
    if ev.iteration < seen[0] - seen[1]:
        return True
    # another total where the counter does not go on (1/2, then 1/18141); NeMo's total grows
    # epoch by epoch while its counter goes on
    known = run.shape.get("train_iters")
    return ev.iteration <= seen[0] and ev.train_iters is not None and known is not None and ev.train_iters != known


def _config_starts_a_run(job: Job, ev: RunConfig, _: Optional[int]) -> bool:
    """A model's shape after the run logged progress: a second argument or config block
    (the same program started again), or another shape."""
    run = job.run_of(ev.file)
    if not run.progressed:
        return False
    if ev.num_layers is not None and ev.hidden_size is not None:
        return True
    return any((value := getattr(ev, name)) is not None and run.shape.get(name) not in (None, value)
               for name in _RUN_SHAPE)


def _milestone_starts_a_run(job: Job, ev: Milestone, _: Optional[int]) -> bool:
    # a job script's start stamp (a bare `date` line may as well end a script: detail "date"), torchrun's banner
    return ((ev.name == "job-start" and ev.detail != "date") or ev.name == GLOG_LAUNCH) \
        and job.run_of(ev.file).progressed


def _resume_starts_a_run(job: Job, ev: Resume, _: Optional[int]) -> bool:
    """A checkpoint loaded after the run logged progress: the program started again (a requeued
    job appending to its output) and goes on from it, whether or not its counter goes back past
    a logging interval (killed at 130, going on from 120 while logging every 10)."""
    run = job.run_of(ev.file)
    if ev.iteration is None or not run.progressed:
        return False
    # where the run is (its iterations' counter, else its steps': DeepSpeed's step=N, torchtitan's), and
    # how many steps it logs once
    if run.last:
        reached, every = max(run.last.values())
    elif job.last_step_number is not None:
        steps = job.steps.column("iteration")[-2:]
        reached, every = job.last_step_number, int(steps[1] - steps[0]) if steps.size == 2 else 1
    else:
        return False
    # at or before it, or a step or two of logging past (saved after the last step it logged, killed
    # before the next): going back to it.  Far past it: a fine-tune loading another run's weights
    # (torchtitan's initial load, then "Training starts at step 1"), no restart of this one
    return ev.iteration <= reached + 2 * max(1, every)


def _line_of(ev: Event) -> int:
    return ev.line or 0


def _commutes(ev: Item) -> bool:
    """Whether ``ev`` and iteration rows of its file give the same store whichever is taken
    first, when the rows start no new run (:mod:`tuimon.store.iteration_fold`): what it
    changes, no iteration reads, and what it reads, no iteration changes (a run's
    progress, shape and total, the latest counter, the config's total and batch)."""
    if isinstance(ev, RunConfig):
        return ev.train_iters is None and ev.global_batch is None and (
            ev.num_layers is None or ev.hidden_size is None) and all(getattr(ev, name) is None for name in _RUN_SHAPE)
    return type(ev) in _COMMUTING


#: what an iteration never reads nor changes: a job's reported rates, its memory, its warnings
_COMMUTING = frozenset((Throughput, Memory, LogWarning))


#: event type -> whether such an event begins a new run of its file (see JobStore)
_STARTS_A_RUN: dict[type, Callable[[Job, Any, Optional[int]], bool]] = {
    Iteration: _iteration_starts_a_run, RunConfig: _config_starts_a_run, Milestone: _milestone_starts_a_run,
    Resume: _resume_starts_a_run}


def _low(a: Optional[float], b: Optional[float]) -> Optional[float]:
    return b if a is None or (b is not None and b < a) else a


def _rank_key(ev: Event, file_rank: Optional[int]) -> RankKey:
    return key_of(ev.rank, ev.node, file_rank)



def _on_config(job: Job, ev: RunConfig, _: Optional[int]) -> None:
    job.first_config_wall = _low(job.first_config_wall, ev.wall_time)
    shape = job.run_of(ev.file).shape
    for name in _RUN_SHAPE:
        value = getattr(ev, name)
        if value is not None:
            shape[name] = value
    if ev.framework and ev.framework not in job.frameworks:
        job.frameworks.append(ev.framework)
    for name in _CONFIG_FIELDS:
        value = getattr(ev, name)
        if value is not None:
            if name == "precision" and value == "fp32" and job.config.get("precision") in ("bf16", "fp16"):
                continue  # "fp16 off" said beside a bf16 run (see parsers.formats.hardware)
            job.config[name] = value
    if ev.model_rank is not None and ev.rank_params is not None:
        _count_rank_params(job.config, {ev.model_rank: ev.rank_params})


def _count_rank_params(config: dict, counts: dict[str, int]) -> None:
    """Keep each model-parallel rank's parameter count (the latest of a rank wins), at most
    :data:`MAX_MODEL_RANKS` ranks: figures.flops sums them once every rank of the grid is in."""
    kept = config.setdefault("rank_params", {})
    for rank, count in counts.items():
        if rank in kept or len(kept) < MAX_MODEL_RANKS:
            kept[rank] = count


_ITERATION_FIELDS = point_plan("iteration")
_STEP_FIELDS = point_plan("step")
_THROUGHPUT_FIELDS = point_plan("throughput")


def _on_iteration(job: Job, ev: Iteration, file_rank: Optional[int]) -> None:
    key = _rank_key(ev, file_rank)
    series = job.ranks.get(key)
    if series is None:
        series = job.ranks[key] = Series(bounded=job.bounded)
    run = job.run_of(ev.file)
    run.progressed = True
    if ev.train_iters is not None:
        run.shape["train_iters"] = ev.train_iters
    reset: Optional[tuple[int, int]] = None
    if ev.iteration is not None:
        seen = run.last.get(key)
        if seen is not None and ev.iteration == seen[0]:
            return  # the same iteration again: printed by another rank whose lines carry no rank
        if seen is not None and after_spike(seen, ev.iteration):
            reset = (seen[0], max([ev.iteration] + [v[0] for k, v in run.last.items() if k != key]))
            run.last[key] = (ev.iteration, ev.iteration - (seen[0] - seen[1]))
        elif seen is not None or len(run.last) < MAX_RANKS_SEEN:
            run.last[key] = (ev.iteration, ev.iteration - seen[0] if seen is not None and ev.iteration > seen[0] else 0)
    if run.after_eval:
        if run.after_eval == 2 and len(job.after_eval) < MAX_ASIDE:  # the first record after the pass timed it
            job.after_eval.add((ev.file, ev.line or 0))
        run.after_eval -= 1
    series.append_event(ev, _ITERATION_FIELDS, job.file_index.get(ev.file, 0))
    if ev.iteration is not None and (job.last_iteration is None or ev.iteration >= job.last_iteration):
        job.last_iteration = ev.iteration
    elif reset is not None and job.last_iteration == reset[0]:
        job.last_iteration = reset[1]  # the counter before was a torn line's: the run is where this one says
    job.last_progress = (ev.file, ev.line)
    if ev.wall_time is not None:
        job.last_progress_wall = ev.wall_time
    if ev.losses:
        job.last_losses = dict(ev.losses)
    loss = primary_loss(ev.losses) if ev.losses else None
    if ev.nan_count:  # Megatron counts the iterations of the interval whose loss was NaN
        loss = math.nan
    nan_check(job, ev.iteration, ev, loss, ev.grad_norm, bool(ev.skipped), MAX_FAILURES)
    if ev.lr is not None:
        job.last_iteration_lr = ev.lr
    if ev.loss_scale is not None:
        job.last_loss_scale = ev.loss_scale
    if ev.train_iters is not None:
        job.config["train_iters"] = ev.train_iters
    if ev.global_batch is not None:
        job.config["global_batch"] = ev.global_batch
    _first_step(job, ev.wall_time)


def _first_step(job: Job, wall: Optional[float]) -> None:
    if wall is not None and (job.first_step_wall is None or wall < job.first_step_wall):
        job.first_step_wall = wall


def _on_step(job: Job, ev: Step, _: Optional[int]) -> None:
    run = job.run_of(ev.file)
    run.progressed = True
    if run.after_eval and not job.ranks:  # a run of steps alone: its steps end the evaluation's interval
        run.after_eval -= 1
    steps = job.steps
    # (the number is kept beside the series: reading its last point flushes the points it stages)
    if ev.step is not None and ev.step == job.last_step_number:
        for name in STEP_FILLS:  # the same step told again: one point, each step counted once
            value = getattr(ev, name)
            if value is not None:
                steps.fill_last(name, value)
    else:
        steps.append_event(ev, _STEP_FIELDS, job.file_index.get(ev.file, 0))
        job.last_step_number = ev.step
    job.last_progress = (ev.file, ev.line)
    if ev.wall_time is not None:
        job.last_progress_wall = ev.wall_time
    if ev.loss is not None:
        job.last_step_loss = ev.loss
    nan_check(job, ev.step, ev, ev.loss, None, bool(ev.skipped), MAX_FAILURES)
    if ev.lr is not None:
        job.last_step_lr = ev.lr
    _first_step(job, ev.wall_time)


def _on_throughput(job: Job, ev: Throughput, file_rank: Optional[int]) -> None:
    job.reported.append_event(ev, _THROUGHPUT_FIELDS, job.file_index.get(ev.file, 0))


def _on_memory(job: Job, ev: Memory, _: Optional[int]) -> None:
    for name in MEMORY_FIGURES:
        value = getattr(ev, name)
        if value is not None and value == value and value > job.memory.get(name, float("-inf")):
            job.memory[name] = value


def _on_milestone(job: Job, ev: Milestone, _: Optional[int]) -> None:
    last = job.milestones[-1] if job.milestones else None
    if last is not None and last.line == ev.line and last.name == ev.name and last.file == ev.file \
            and last.wall_time == ev.wall_time:
        return  # one line told by two rules (a launch line is also a date line)
    if len(job.milestones) < MAX_MILESTONES:
        job.milestones.append(ev)


def _on_checkpoint(job: Job, ev: Checkpoint, _: Optional[int]) -> None:
    key = ev.iteration if ev.iteration is not None else (job.last_iteration or 0)
    entry = job.checkpoints.setdefault(key, {"iteration": key, "save_ms": None})
    if ev.save_ms is not None and (entry["save_ms"] is None or ev.save_ms > entry["save_ms"]):
        entry["save_ms"] = ev.save_ms  # one save told by several ranks (or timers) took the longest of them


def _on_failure(job: Job, ev: Failure, _: Optional[int]) -> None:
    if len(job.failures) < MAX_FAILURES:
        job.failures.append(ev)


def _on_exit(job: Job, ev: Exit, _: Optional[int]) -> None:
    job.exits.append(ev)


def _on_warning(job: Job, ev: LogWarning, _: Optional[int]) -> None:
    if ev.kind in job.warnings or len(job.warnings) < MAX_WARNING_KINDS:
        job.warnings[ev.kind] = job.warnings.get(ev.kind, 0) + 1


def _on_resume(job: Job, ev: Resume, _: Optional[int]) -> None:
    if job.resumed_from is None and ev.iteration is not None and not job.run_of(ev.file).progressed:
        job.resumed_from = ev.iteration


def _on_eval(job: Job, ev: Evaluation, _: Optional[int]) -> None:
    job.evals.add(ev.iteration, ev.metrics, ev.wall_time)
    marks = job.eval_marks
    mark = (ev.iteration if ev.iteration is not None else -1, ev.wall_time)
    # one pass, its metrics on several lines (Megatron's validation block, a rank each): one mark
    if (not marks or marks[-1] != mark) and len(marks) < MAX_EVAL_MARKS:
        marks.append(mark)
    job.run_of(ev.file).after_eval = 2
    # the step right after the last one trained, in a run that logs every step: where a run logs every
    # Nth step, an evaluation past the last logged one is how every mid-run evaluation reads
    top, run = job.last_iteration, job.run_of(ev.file)
    if ev.iteration is not None and top is not None and ev.iteration == top + 1 and job.last_progress is not None \
            and run.last and max(step for _, step in run.last.values()) == 1:
        job.closing_eval = job.last_progress


def _on_truncated(job: Job, ev: Truncated, _: Optional[int]) -> None:
    job.truncations += 1



#: events that log a run's progress (its timers count as training from then on; see timer_fold)
_PROGRESS = frozenset((Iteration, Step))

_HANDLERS: dict[type, Callable[[Job, Any, Optional[int]], None]] = {
    RunConfig: _on_config, Iteration: _on_iteration, Step: _on_step, Throughput: _on_throughput,
    Memory: _on_memory, Milestone: _on_milestone, Checkpoint: _on_checkpoint,
    Resume: _on_resume, Evaluation: _on_eval, LogWarning: _on_warning, Failure: _on_failure, Exit: _on_exit,
    Truncated: _on_truncated,
}
