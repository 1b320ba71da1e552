"""The time ledger: where a job's wall-clock time went, across its runs, from the logs alone.

A *job* here is what belongs together: a file's runs (``name``, ``name#2``: a script that runs
the trainer again, a Slurm job requeued into the same output), and jobs of one run name in one
directory whose later one says it goes on from a checkpoint (a resubmission with a new job id).
Its span, first run's start to last run's last stamp, splits into:

* ``startup``: each run's start to the end of its first step (the startup figure);
* ``training``: steps that moved the job forward;
* ``checkpoint``: the blocking part of saves: where the log states a save's time, that time
  (at most its interval's time past its steps); else the interval's time past its steps;
* ``eval``: the time past its steps of an interval that holds an evaluation pass;
* ``stall``: the time past its steps of an interval longer than the stall alert's limit
  (``factor`` x its steps' time, at least ``min_s``) that holds neither;
* ``redone``: training time spent again on iterations an earlier run of the job had reached
  and lost (a restart from an earlier checkpoint, or from scratch, after a run that did not
  finish); a finished run followed by another (a benchmark's repeats) redoes nothing;
* ``teardown``: each run's last step to its last stamp (final saves, evaluation, shutdown);
* ``gap``: between one run's last stamp and the next one's start (queue, downtime).

"Past its steps" is the interval's time less its iterations at the run's steady step time
(the summary's median), or, in an interval holding a save or an evaluation, at the time its record
states where that leaves the event room (Megatron-LM's interval timer stops for both; GPT-NeoX's
record holds them in its mean).  A part whose bounds a log does not give (no stamps, no step time,
a run that begins mid-run without a start stamp) is unknown (None) with a note saying why:
the ledger never guesses.  GPU-hours are each run's world size x its seconds; the time
between runs holds no GPUs this ledger can count (its GPU-hours are None).

A run's part is made from its store by :mod:`.run_ledger` (numpy); this module only adds runs
up, and is light enough for the command line's options to import.
"""
from __future__ import annotations

import bisect
import dataclasses
import math
import os
import re
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from ..store.identity import identify

#: the parts, in the order a run goes through them (and the bar's legend)
PARTS = ("startup", "training", "checkpoint", "eval", "stall", "redone", "teardown", "gap")
#: what a part is called on screen and in tables
LABELS = {"startup": "startup", "training": "training", "checkpoint": "checkpoint saves", "eval": "evaluation",
          "stall": "stalls", "redone": "work redone", "teardown": "teardown", "gap": "between runs"}
RUN_PARTS = ("startup", "training", "checkpoint", "eval", "stall", "teardown")
MAX_SEGMENTS = 400  # the bar's pieces a run keeps (more are merged into even time buckets)


@dataclass(frozen=True)
class RunLedger:
    """One run's part of its job's ledger: what no clock and no other run changes."""
    start: Optional[float]  # POSIX s: the run's start (None where its startup is unknown)
    first_step: Optional[float]  # the end of its first step
    last_step: Optional[float]  # its last logged step's stamp
    end: Optional[float]  # its last stamp
    world_size: Optional[int]
    start_iteration: Optional[int]  # where its training began: a checkpoint's iteration, 0 from scratch
    last_iteration: Optional[int]
    resumed_from: Optional[int]  # the checkpoint's iteration the log says it loaded
    seconds: dict[str, Optional[float]]  # each of RUN_PARTS; None: unknown
    knots: list[list[float]]  # [iteration, training seconds from its first step to it]
    segments: list[list[Any]]  # [part, from, to]: seconds after its first stamp known (start, else first step)
    notes: list[str]


@dataclass(frozen=True)
class Ledger:
    """A job's ledger: its runs together (:func:`ledgers`)."""
    group: str
    runs: list[str]  # the jobs (runs) it is made of, in time order
    start: Optional[float]
    end: Optional[float]
    whole_s: Optional[float]
    seconds: dict[str, Optional[float]]  # each of PARTS
    gpu_hours: dict[str, Optional[float]]
    share: dict[str, Optional[float]]
    goodput: Optional[float]  # training / whole
    redone_iterations: Optional[int]
    segments: list[list[Any]]  # [part, from, to]: seconds after start
    run_starts: list[float]  # seconds after start where each run after the first begins
    notes: list[str] = field(default_factory=list)


def add_segment(segments: list[list[Any]], part: str, t0: float, t1: float) -> None:
    if t1 <= t0:
        return
    if segments and segments[-1][0] == part and abs(segments[-1][2] - t0) < 1e-6:
        segments[-1][2] = t1
    else:
        segments.append([part, t0, t1])


def bounded(segments: list[list[Any]]) -> list[list[Any]]:
    """At most MAX_SEGMENTS pieces: past them, even buckets of the span, each its part of most time."""
    rounded = [[p, round(a, 3), round(b, 3)] for p, a, b in segments]
    if len(segments) <= MAX_SEGMENTS:
        return rounded
    lo, hi = segments[0][1], segments[-1][2]
    width = (hi - lo) / MAX_SEGMENTS
    out: list[list[Any]] = []
    k = 0
    for b in range(MAX_SEGMENTS):
        a0, a1 = lo + b * width, lo + (b + 1) * width
        share: dict[str, float] = {}
        while k < len(segments) and segments[k][2] <= a0:
            k += 1
        j = k
        while j < len(segments) and segments[j][1] < a1:
            p, s0, s1 = segments[j]
            share[p] = share.get(p, 0.0) + max(0.0, min(s1, a1) - max(s0, a0))
            j += 1
        if share:
            add_segment(out, max(share, key=share.__getitem__), a0, a1)
    return [[p, round(a, 3), round(b, 3)] for p, a, b in out]


# -- a job: its runs together -----------------------------------------------------------------
_RUN_SUFFIX = re.compile(r"#\d+$")


def group_of(job: str) -> str:
    """The ledger a run's job counts in: its file's first run (``name#3`` -> ``name``)."""
    return _RUN_SUFFIX.sub("", job)


def _run_name(row: Any) -> Optional[str]:
    """A run's name without its scheduler id, as the job's files name it (``gpt-1234567.out`` ->
    ``gpt``: :func:`tuimon.store.identity.identify`'s job id); None where they name no id."""
    if not row.files:
        return None
    ident = identify(row.files[0])
    if ident.job_id is None:
        return None
    return ident.job_name[:ident.job_name.rfind(ident.job_id)].rstrip("-_.")


def ledgers(rows: Sequence[Any], cache: Optional[dict] = None) -> list[Optional[Ledger]]:
    """Each row's job's ledger (None for a row without a run ledger), from its runs' summaries
    (anything with ``job``, ``files``, ``status`` and ``run_ledger``).  ``cache`` (a dict the caller
    keeps) hands back the ledger of a job whose runs' ledgers and statuses are the same objects as
    last time: a live view builds its rows every tick, its jobs rarely change."""
    by_group: dict[tuple[str, str], list[int]] = {}
    for k, row in enumerate(rows):
        if getattr(row, "run_ledger", None) is not None:
            by_group.setdefault(_key(row), []).append(k)
    out: list[Optional[Ledger]] = [None] * len(rows)
    kept: dict = {}
    for key, members in _chain_resubmissions(by_group, rows).items():
        runs = [rows[k] for k in members]
        held = cache.get(key) if cache is not None else None
        if held is not None and len(held[0]) == len(runs) and all(
                a is r.run_ledger and b == r.status and c == r.job for (a, b, c), r in zip(held[0], runs)):
            ledger = held[1]
        else:
            ledger = combine(group_of(runs[0].job), runs)
        kept[key] = ([(r.run_ledger, r.status, r.job) for r in runs], ledger)
        for k in members:
            out[k] = ledger
    if cache is not None:  # (jobs gone are forgotten)
        cache.clear()
        cache.update(kept)
    return out


def _key(row: Any) -> tuple[str, str]:
    """A run's job: its directory and its file's first run's name."""
    where = os.path.dirname(row.files[0]) if row.files else ""
    return where, group_of(row.job)


def family(row: Any) -> tuple[str, str]:
    """What a run's ledger may take in: the jobs of its directory and run name (scheduler id aside)."""
    where, group = _key(row)
    name = _run_name(row)
    return where, group if name is None else name


@dataclass(frozen=True)
class RunPiece:
    """What a run's ledger needs of its summary, kept by those who judge jobs one at a time."""
    job: str
    files: list[str]
    status: str
    run_ledger: RunLedger


def piece_of(row: Any) -> Optional[RunPiece]:
    """A summary's run, small: its ledger without the bar's pieces."""
    r = row.run_ledger
    if r is None:
        return None
    return RunPiece(row.job, list(row.files[:1]), row.status, dataclasses.replace(r, segments=[]))


def _chain_resubmissions(by_group: dict[tuple[str, str], list[int]], rows: Sequence[Any]
                         ) -> dict[tuple[str, str], list[int]]:
    """Jobs of one run name in one directory whose later one goes on from a checkpoint are one
    job: a run resubmitted under a new scheduler id.  Never by the name alone (a sweep)."""
    by_name: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for (where, group), members in by_group.items():
        name = _run_name(rows[members[0]])
        if name is not None:
            by_name.setdefault((where, name), []).append((where, group))
    out = dict(by_group)
    for groups in by_name.values():
        if len(groups) < 2:
            continue
        groups.sort(key=lambda g: min(_row_time(rows[k]) for k in by_group[g]))
        head = groups[0]
        for g in groups[1:]:
            first = min((rows[k] for k in by_group[g]), key=_row_time)
            if first.run_ledger.resumed_from is not None and head in out:
                out[head] = out[head] + out.pop(g)
            else:
                head = g
    return out


def _row_time(row: Any) -> float:
    r = row.run_ledger
    for t in (r.start, r.first_step, r.end):
        if t is not None:
            return t
    return math.inf


def combine(name: str, rows: Sequence[Any]) -> Ledger:
    """The ledger of a job's runs (their summaries, any order)."""
    ordered = sorted(rows, key=_row_time)
    notes: list[str] = []
    seconds: dict[str, Optional[float]] = dict.fromkeys(PARTS, 0.0)
    gpu_s: dict[str, Optional[float]] = dict.fromkeys(PARTS, 0.0)
    gpu_s["gap"] = None
    reached: Optional[int] = None  # the highest iteration the runs before reached
    complete = True  # the run before finished (another run after it redoes nothing)
    redone_iterations = 0
    previous_end: Optional[float] = None
    timeline: list[tuple[RunLedger, float]] = []  # (a run's ledger, its redone seconds)
    for k, row in enumerate(ordered):
        r: RunLedger = row.run_ledger
        label = row.job.rsplit("/", 1)[-1]
        for note in r.notes:
            notes.append(f"{label}: {note}")
        redone = 0.0
        if not complete and reached is not None and r.start_iteration is not None \
                and r.last_iteration is not None and r.start_iteration < reached:
            upto = min(reached, r.last_iteration)
            if r.knots:
                redone = _training_at(r.knots, upto)
            elif r.seconds.get("training") is None:
                redone = math.nan
            redone_iterations += upto - r.start_iteration
        part_s = dict(r.seconds)
        redone_s = None if math.isnan(redone) else redone
        if part_s.get("training") is not None and redone_s:
            part_s["training"] = part_s["training"] - redone_s  # type: ignore[operator]
        part_s["redone"] = redone_s
        for part in RUN_PARTS + ("redone",):
            value = part_s.get(part)
            if value is None:
                seconds[part] = gpu_s[part] = None
                continue
            if seconds[part] is not None:
                seconds[part] += value  # type: ignore[operator]
            if gpu_s[part] is not None and value:
                gpu_s[part] = None if r.world_size is None else gpu_s[part] + value * r.world_size  # type: ignore[operator]
        if k:
            if previous_end is not None and r.start is not None:
                between = r.start - previous_end
                if between < -1.0:
                    notes.append(f"{label} starts {-between:.0f} s before the run before it ends: no gap counted")
                if seconds["gap"] is not None:
                    seconds["gap"] += max(0.0, between)  # type: ignore[operator]
            else:
                seconds["gap"] = None
        previous_end = r.end
        if r.last_iteration is not None:
            reached = r.last_iteration if reached is None or complete else max(reached, r.last_iteration)
        complete = row.status == "finished"
        timeline.append((r, redone))
    first, last = ordered[0].run_ledger, ordered[-1].run_ledger
    start, end = first.start, last.end
    whole = end - start if start is not None and end is not None and end >= start else None
    if start is None:
        notes.append("the job's start is unknown: no share, no goodput")
    gpu_hours = {p: (None if v is None else round(v / 3600.0, 3)) for p, v in gpu_s.items()}
    share = {p: (None if v is None or not whole else round(v / whole, 4)) for p, v in seconds.items()}
    training = seconds["training"]
    goodput = round(training / whole, 4) if training is not None and whole else None
    segments, run_starts = _job_segments(timeline, start)
    return Ledger(name, [row.job for row in ordered], start, end, None if whole is None else round(whole, 3),
                  {p: (None if v is None else round(v, 3)) for p, v in seconds.items()}, gpu_hours, share, goodput,
                  redone_iterations, segments, run_starts, notes)


def _training_at(knots: list[list[float]], iteration: int) -> float:
    """Training seconds up to ``iteration``, linear between a run's knots (flat past either end)."""
    xs = [k[0] for k in knots]
    at = bisect.bisect_left(xs, iteration)
    if at == 0:
        return knots[0][1]
    if at == len(xs):
        return knots[-1][1]
    (x0, y0), (x1, y1) = knots[at - 1], knots[at]
    return y0 + (y1 - y0) * (iteration - x0) / (x1 - x0) if x1 > x0 else y1


def _job_segments(timeline: list[tuple[RunLedger, float]], start: Optional[float]
                  ) -> tuple[list[list[Any]], list[float]]:
    """The bar's pieces over the job's span: each run's, its redone training marked, the gaps."""
    if start is None:
        return [], []
    out: list[list[Any]] = []
    run_starts: list[float] = []
    previous_end: Optional[float] = None
    for k, (r, redone) in enumerate(timeline):
        origin = r.start if r.start is not None else r.first_step
        if origin is None:
            continue
        shift = origin - start
        if k:
            run_starts.append(round(shift, 3))
            if previous_end is not None and origin > previous_end:
                add_segment(out, "gap", previous_end - start, shift)
        left = redone if redone and not math.isnan(redone) else 0.0
        for part, a, b in r.segments:
            if part == "training" and left > 0:
                take = min(left, b - a)
                add_segment(out, "redone", shift + a, shift + a + take)
                left -= take
                a += take
            add_segment(out, part, shift + a, shift + b)
        previous_end = r.end
    return bounded(out), run_starts


def attach(rows: Sequence[Any]) -> list[Any]:
    """``rows`` (summaries, statuses read on the clock) each with its job's ledger."""
    return [row if ledger is None else row.with_(ledger=ledger) for row, ledger in zip(rows, ledgers(rows))]
