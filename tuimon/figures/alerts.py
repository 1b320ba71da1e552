"""Alerts: when a run fails, hangs, stalls, diverges or slows down.

Every rule reads a job's store (and its summary's status) and gives every alert the
job has earned so far, oldest first, each keyed by what it is about (job, kind,
rank, iteration).  A rule looks only at points before the one it judges, so reading
a log again, or live as it grows, gives the same alerts at the same iterations;
callers deliver each key once.

Rules and their defaults (each settable, ``--alert loss-spike.k=8``, or off,
``--alert grad-norm-spike=off``):

* ``failed``: the job's status is failed (its first fatal failure);
* ``stalled``: no line for max(``factor`` x the steady median iteration, ``min_s``);
* ``startup-hang``: started, and no first step ``timeout_s`` after (STUCK IN STARTUP);
* ``nan``: a loss or grad norm that is not finite (a fp16 loss-scale skip aside);
* ``loss-spike``: a loss above the median of the ``window`` points before it by more
  than ``k`` x their median absolute deviation (at least ``min_points`` of them);
* ``grad-norm-spike``: the same on the grad norm;
* ``slowdown``: the median iteration time of the last ``window`` points above ``factor``
  x the steady median of the ``baseline`` points before them (an episode ends below half
  way back, so a run hovering on the line does not flap);

A restart (the iteration number going back) starts the windows afresh.
* ``straggler``: a rank whose median iteration time is ``factor`` x the median rank's.
* ``goodput``: a job's training time (its runs together, :mod:`.ledger`) under ``below`` of its
  span, once the span is ``min_h`` hours long (:func:`ledger_alerts`);
* ``redone``: a job's work redone after restarts over ``gpu_h`` GPU-hours.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Iterable, Mapping, Optional

import numpy as np

from ..store.fields import BY_KEY
from ..store.job_store import Job
from ..store.series import Series
from .cells import iter_time, num
from .ledger import LABELS as LEDGER_LABELS
from .ledger import Ledger
from .metrics import median_step, steady_median
from .record import Summary
from .thresholds import DEFAULTS as DEFAULTS
from .thresholds import KINDS as KINDS

#: the first points of a run are warm-up (compilation, allocator, NCCL): no baseline for slowdowns
_WARMUP = 2
#: a MAD below this share of the median is taken as this share: a loss logged as an average over an
#: interval is so smooth that a 2% wiggle would be six MADs
_MAD_FLOOR = 0.01


def named(key: str) -> str:
    """A figure's name in an alert's text: the field registry's label (as every table heads it)."""
    return BY_KEY[key].label


def said(key: str, value: float) -> str:
    """A figure's value in an alert's text, as the tables show it: an iteration time to
    three figures (:func:`.cells.iter_time`), others to the registry's decimals."""
    f = BY_KEY[key]
    return iter_time(value) if f.unit == "ms" else num(value, f.digits)


#: the version of an alert's JSON (``docs/alerts.schema.json``): bumped when a key changes meaning or goes
ALERTS_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Alert:
    PRIVATE: ClassVar[tuple[str, ...]] = ("job_key",)  # not in its JSON

    job: str
    kind: str
    rank: Optional[str]
    iteration: Optional[int]
    wall_time: Optional[float]
    message: str
    file: Optional[str]
    line: Optional[int]
    job_key: str = ""  # the job's own key (its directory and name): two runs may share a name

    @property
    def key(self) -> tuple:
        return (self.job_key or self.job, self.kind, self.rank, self.iteration)

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": ALERTS_SCHEMA_VERSION, "type": "alert", "job": self.job, "kind": self.kind,
                "rank": self.rank, "iteration": self.iteration,
                "wall_time": self.wall_time, "message": self.message, "file": self.file, "line": self.line}


class RuleError(ValueError):
    """A rule setting the user gave that cannot be used (one line for the user)."""


@dataclass(frozen=True)
class Rules:
    """Which rules are on, and their settings."""

    settings: Mapping[str, Mapping[str, float]]

    @classmethod
    def default(cls) -> "Rules":
        return cls({k: dict(v) for k, v in DEFAULTS.items()})

    @classmethod
    def parse(cls, options: Iterable[str]) -> "Rules":
        """``KIND=off``, ``KIND=on`` or ``KIND.PARAM=NUMBER``; raises :class:`RuleError`."""
        settings: dict[str, Optional[dict[str, float]]] = {k: dict(v) for k, v in DEFAULTS.items()}
        for option in options:
            name, sep, value = option.partition("=")
            kind, _, param = name.strip().partition(".")
            if not sep or kind not in DEFAULTS:
                raise RuleError(f"--alert {option!r}: expected KIND=off, KIND=on or KIND.PARAM=NUMBER, "
                                f"KIND one of {', '.join(KINDS)}")
            if not param:
                if value.strip().lower() not in ("off", "on"):
                    raise RuleError(f"--alert {option!r}: {kind} takes on or off")
                settings[kind] = None if value.strip().lower() == "off" else dict(DEFAULTS[kind])
                continue
            if param not in DEFAULTS[kind]:
                known = ", ".join(DEFAULTS[kind]) or "none"
                raise RuleError(f"--alert {option!r}: {kind} has no setting {param!r} (settings: {known})")
            try:
                number = float(value)
            except ValueError:
                raise RuleError(f"--alert {option!r}: {value!r} is not a number") from None
            if not math.isfinite(number) or number <= 0:
                raise RuleError(f"--alert {option!r}: must be a positive number")
            current = settings[kind]
            if current is None:
                current = settings[kind] = dict(DEFAULTS[kind])
            current[param] = number
        return cls({k: v for k, v in settings.items() if v is not None})


def evaluate(job: Job, summary: Summary, rules: Rules, *, now: Optional[float] = None,
             last_write: Optional[float] = None, grew: bool = True) -> list[Alert]:
    """Every alert ``job`` has earned, by rule, oldest first within a rule.  ``grew``: its
    files were seen written while watched (see :func:`quiet_verdict`)."""
    out: list[Alert] = []
    on = rules.settings
    name = summary.job
    status, failure = summary.status, summary.failure
    last_it = summary.last_progress
    if "failed" in on and status == "failed" and failure is not None:
        out.append(Alert(name, "failed", None, last_it, job.last_wall,
                         f"{failure.kind}: {failure.message}"[:300], failure.file, failure.line))
    if "startup-hang" in on and status == "stuck-in-startup" and failure is not None:
        text = failure.message
        if failure.last_line:
            text += f"; last line: {failure.last_line}"
        out.append(Alert(name, "startup-hang", None, None, job.last_wall, text[:300], failure.file, None))
    if "nan" in on:
        for step, rank, file, line, wall in job.nan_events:
            where = f"at iteration {step}" if step is not None else f"at line {line}"
            out.append(Alert(name, "nan", rank, step, wall,
                             f"{named('loss')} or {named('grad_norm').lower()} not finite {where}",
                             file, line))
    if "stalled" in on and status == "training":
        out.extend(_stalled(job, summary, on["stalled"], now, last_write, grew))
    primary_key, primary = _primary(job)
    if primary is not None:
        for kind, column in (("loss-spike", "loss"), ("grad-norm-spike", "grad_norm")):
            if kind in on:
                out.extend(_spikes(job, name, kind, column, primary_key, primary, on[kind]))
        if "slowdown" in on:
            out.extend(_slowdowns(job, name, primary_key, primary, on["slowdown"]))
    elif "slowdown" in on and len(job.steps):
        out.extend(_slowdowns(job, name, None, job.steps, on["slowdown"]))
    if "loss-spike" in on and primary is None and len(job.steps):
        out.extend(_spikes(job, name, "loss-spike", "loss", None, job.steps, on["loss-spike"]))
    if "straggler" in on:
        out.extend(_stragglers(job, name, on["straggler"]))
    return [replace(alert, job_key=job.key) for alert in out]


def _primary(job: Job) -> tuple[Optional[str], Optional[Series]]:
    if not job.ranks:
        return None, None
    key = max(job.ranks, key=lambda k: len(job.ranks[k]))
    return str(key), job.ranks[key]


def _point(job: Job, series: Series, i: int) -> tuple[Optional[int], Optional[float], Optional[str], Optional[int]]:
    """(iteration, wall time, file, line) of point ``i``."""
    p = series.point(i)
    it = int(p["iteration"]) if int(p["iteration"]) >= 0 else None
    wall = float(p["wall"]) + series.wall_base if series.wall_base is not None and math.isfinite(p["wall"]) else None
    fid = int(p["file"])
    return it, wall, job.files[fid] if fid < len(job.files) else None, int(p["line"]) or None


def time_deadline(job: Job, summary: Summary, rules: "Rules", now: Optional[float],
                  last_write: Optional[float], startup_timeout: float, grew: bool = True) -> Optional[float]:
    """When time alone, with no new line and no new write, could next change ``job``'s
    alerts: the moment it stalls (``training``) or hangs in startup (``starting``).
    None when it cannot (it stalled already, has no iteration time, or no clock says).
    A follower judges a quiet job again at this deadline, not on every tick."""
    if now is None or last_write is None:
        return None
    on = rules.settings
    status = summary.status
    if status == "training" and "stalled" in on:
        it = summary.iter_time_ms
        if not it or not grew:  # a log not seen growing does not stall with time (quiet_verdict)
            return None
        at = last_write + stall_limit(it.median, on["stalled"], logged_every(job))
        return at if at >= now else None
    if status == "starting" and "startup-hang" in on and job.first_wall is not None:
        span = (job.last_wall - job.first_wall) if job.last_wall is not None else 0.0
        at = last_write + startup_timeout - span  # startup_status: span + (now - last_write) > timeout
        return at if at >= now else None
    return None


def quiet_verdict(job: Job, summary: Summary, opts: Mapping[str, float], now: Optional[float],
                  last_write: Optional[float], grew: bool = True) -> Optional[str]:
    """What a training job quiet for longer than its limit is: ``stalled`` when it was
    seen growing and then stopped, or when the log's own clock shows it stopped making
    progress (lines stamped past the limit after its last step); ``ended`` when the log
    simply stops: a copied or finished-long-ago log is no stalled run.  None while it is
    not quiet past its limit.  ``grew``: whether its files were seen written while watched."""
    return quiet_verdict_of(summary, quiet_in_log(job), opts, now, last_write, grew, logged_every(job))


def quiet_verdict_of(summary: Summary, quiet_in_log_s: float, opts: Mapping[str, float], now: Optional[float],
                     last_write: Optional[float], grew: bool = True, every: int = 1) -> Optional[str]:
    """:func:`quiet_verdict` of a job known by its summary and how long its log's stamps
    went on after its last step (:func:`quiet_in_log`)."""
    it = summary.iter_time_ms
    if not it or summary.status != "training":
        return None
    limit = stall_limit(it.median, opts, every)
    if quiet_in_log_s > limit:
        return "stalled"  # its own stamps: lines went on, progress did not
    if now is None or last_write is None or now - last_write <= limit:
        return None
    return "stalled" if grew else "ended"


def quiet_in_log(job: Job) -> float:
    """Seconds the log's own stamps went on after its last step (0 without both stamps)."""
    if job.last_wall is None or job.last_progress_wall is None:
        return 0.0
    return job.last_wall - job.last_progress_wall


def stall_limit(median_ms: float, opts: Mapping[str, float], every: int = 1) -> float:
    """``factor`` x the time between two logged steps (the step time x ``every``, the steps a log
    logs once: DeepSpeed's step=N every 200, Megatron's log interval), at least ``min_s``."""
    return max(opts["factor"] * median_ms * every / 1000.0, opts["min_s"])


RECENT_POINTS = 65  # the points logged_every reads


def logged_every(job: Job) -> int:
    """How many steps a run logs once: the median step between its latest logged points (1 where
    it logs every step or has one point).  The latest: a follower's older points are thinned out."""
    series = job.primary if job.primary is not None and len(job.primary) else job.steps
    if len(series) < 2:
        return 1
    return median_step(series.column("iteration")[-RECENT_POINTS:])


def progress_words(summary: Summary) -> str:
    """``after iteration 120`` (``after step 12``), or nothing for a job with neither."""
    if summary.last_iteration is not None:
        return f" after iteration {summary.last_iteration}"
    if summary.last_step is not None:
        return f" after step {summary.last_step}"
    return ""


def _stalled(job: Job, summary: Summary, opts: Mapping[str, float], now: Optional[float],
             last_write: Optional[float], grew: bool) -> list[Alert]:
    if quiet_verdict(job, summary, opts, now, last_write, grew) != "stalled":
        return []
    it = summary.iter_time_ms
    assert it is not None  # quiet_verdict said stalled: it has one
    every = logged_every(job)
    limit = stall_limit(it.median, opts, every)
    rule = f"limit {limit:.0f} s: {opts['factor']:g}x the steady {named('elapsed_ms').lower()} " \
           f"{said('elapsed_ms', it.median)}{f' x the {every} steps logged once' if every > 1 else ''}, " \
           f"at least {opts['min_s']:.0f} s"
    if quiet_in_log(job) > limit:
        text = (f"no progress for {quiet_in_log(job):.0f} s{progress_words(summary)}, by the log's own time "
                f"stamps ({rule})")
        when = job.last_wall
    else:
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(last_write or 0.0))
        text = f"no line since {since}{progress_words(summary)} ({rule})"
        when = last_write
    return [Alert(summary.job, "stalled", None, summary.last_progress, when,  # no "N s ago": the same alert, whenever read
                  text, job.last_progress[0] if job.last_progress else None,
                  job.last_progress[1] if job.last_progress else None)]


def _segments(series: Series) -> list[tuple[int, int]]:
    """[start, end) ranges of points between restarts (where the iteration number goes back):
    a resumed run's points are judged against its own, not the run before."""
    its = series.column("iteration").astype(np.int64)
    cuts = np.flatnonzero((its[1:] <= its[:-1]) & (its[1:] >= 0)) + 1
    bounds = [0, *cuts.tolist(), len(its)]
    return [(a, b) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]


def _spikes(job: Job, name: str, kind: str, column: str, rank: Optional[str], series: Series,
            opts: Mapping[str, float]) -> list[Alert]:
    window, k, least = int(opts["window"]), opts["k"], int(opts["min_points"])
    out = []
    all_values = series.column(column).astype(np.float64)
    for a, b in _segments(series):
        values = all_values[a:b]
        finite = np.flatnonzero(np.isfinite(values)) + a
        v = all_values[finite]
        flagged = _spike_flags(v, window, k, least)
        for j in np.flatnonzero(flagged & ~np.r_[False, flagged[:-1]]):  # the first point of each episode
            if finite[j] < series.history:
                continue  # a thinned history's point was judged while it was recent
            step, wall, file, line = _point(job, series, int(finite[j]))
            base = float(np.median(v[max(0, j - window):j]))
            out.append(Alert(name, kind, rank, step, wall,
                             f"{named(column)} {said(column, float(v[j]))} at iteration {step}, median of the "
                             f"{min(int(j), window)} before {said(column, base)}", file, line))
    return out


def _spike_flags(v: np.ndarray, window: int, k: float, least: int) -> np.ndarray:
    """For each point: above the median of the ``window`` before it by more than ``k`` MADs."""
    n = v.size
    flags = np.zeros(n, dtype=bool)
    for j in range(least, min(n, window)):  # the first points: a window still filling
        flags[j] = _above(v[j], v[:j], k)
    for start in range(0, max(0, n - window), _CHUNK):  # window i: the points before i+window (chunks bound the memory)
        end = min(n - window, start + _CHUNK)
        med, mad = _rolling(v[start:end + window - 1], window, True)
        mad = np.maximum(mad, _MAD_FLOOR * np.abs(med))
        flags[window + start:window + end] = (v[window + start:window + end] > med + k * mad) & (mad > 0)
    return flags


_CHUNK = 1 << 16  # windows slid at once: a series of 24 million points held 16 bytes a point more at once


def _rolling(v: np.ndarray, window: int, mad: bool) -> tuple[np.ndarray, np.ndarray]:
    """The median of each window of ``v`` (finite), and with ``mad`` each one's median absolute
    deviation (else an empty array), as ``np.median`` gives them: by the compiled core's sliding
    window, :data:`_CHUNK` windows at a time (what crosses to the core and back is a chunk's), where
    numpy partitions each window afresh (1.5 us a point for windows of 50: most of ``tuimon events``
    on an llm.c log); without the core, by numpy, 8,192 windows at a time (a chunk's deviations)."""
    from ..engine import native

    count = max(0, v.size - window + 1)
    med, dev = np.empty(count), np.empty(count if mad else 0)
    core = native.core
    for start in range(0, count, _CHUNK if core is not None else 8192):
        end = min(count, start + (_CHUNK if core is not None else 8192))
        part = v[start:end + window - 1]
        if core is not None:
            got = core.rolling_median(np.ascontiguousarray(part, dtype=np.float64).tobytes(), window, mad)
            med[start:end] = np.frombuffer(got[0], dtype=np.float64)
            if mad:
                dev[start:end] = np.frombuffer(got[1], dtype=np.float64)
            continue
        windows = np.lib.stride_tricks.sliding_window_view(part, window)
        med[start:end] = np.median(windows, axis=1)
        if mad:
            dev[start:end] = np.median(np.abs(windows - med[start:end, None]), axis=1)
    return med, dev


def _above(x: float, before: np.ndarray, k: float) -> bool:
    med = float(np.median(before))
    mad = max(float(np.median(np.abs(before - med))), _MAD_FLOOR * abs(med))
    return mad > 0 and x > med + k * mad


def _slowdowns(job: Job, name: str, rank: Optional[str], series: Series, opts: Mapping[str, float]) -> list[Alert]:
    window, factor, base_n = int(opts["window"]), opts["factor"], int(opts["baseline"])
    rearm = 1.0 + (factor - 1.0) / 2.0  # an episode ends only well below the line: no flapping on it
    out = []
    all_ms = series.column("elapsed_ms").astype(np.float64)
    for a, b in _segments(series):
        ms = all_ms[a:b]
        finite = np.flatnonzero(np.isfinite(ms) & (ms > 0)) + a
        v = all_ms[finite][_WARMUP:]
        finite = finite[_WARMUP:]
        if v.size < 2 * window:
            continue
        rolling = _rolling(v, window, False)[0]  # rolling[s]: v[s:s+window]
        bases = _medians_before(v, base_n, window, v.size - window + 1)
        ratios = rolling[window:v.size - window + 1] / bases
        slow = False
        for start in range(window, v.size - window + 1):
            # the steady median of the (up to) base_n points before the window
            ratio = float(ratios[start - window])
            base = float(bases[start - window])
            if not slow and ratio > factor:
                end = start + window - 1
                slow = True
                if finite[end] < series.history:
                    continue  # judged while it was recent
                step, wall, file, line = _point(job, series, int(finite[end]))
                out.append(Alert(name, "slowdown", rank, step, wall,
                                 f"{named('elapsed_ms')} {said('elapsed_ms', float(rolling[start]))} (median of the "
                                 f"last {window} points), {ratio:.2f}x the steady {said('elapsed_ms', base)} before "
                                 "them", file, line))
            elif slow and ratio < rearm:
                slow = False
    return out


def _medians_before(v: np.ndarray, n: int, first: int, stop: int) -> np.ndarray:
    """For each ``start`` in [first, stop): the median of the (up to) ``n`` points of
    ``v`` before it; computed in chunks of windows at once (a median a point, in a
    Python loop, cost 5 s on 100,000 points)."""
    out = np.empty(max(0, stop - first))
    for start in range(first, min(stop, n)):  # windows still filling
        out[start - first] = np.median(v[max(0, start - n):start])
    full = max(first, n)
    if stop > full:
        out[full - first:] = _rolling(v[full - n:stop - 1], n, False)[0]  # window i: v[full-n+i:full+i], before full+i
    return out


def _stragglers(job: Job, name: str, opts: Mapping[str, float]) -> list[Alert]:
    medians: dict[str, float] = {}
    for key, series in job.ranks.items():
        if len(series) >= opts["min_points"]:
            med = steady_median(series.column("elapsed_ms"))
            if med is not None and med > 0:
                medians[str(key)] = med
    if len(medians) < 2:
        return []
    middle = float(np.median(list(medians.values())))
    out = []
    for rank, med in sorted(medians.items()):
        if med >= opts["factor"] * middle:
            series = job.ranks[_rank_key(job, rank)]
            step, wall, file, line = _point(job, series, len(series) - 1)
            out.append(Alert(name, "straggler", rank, None, wall,
                             f"rank {rank}: {named('elapsed_ms')} {said('elapsed_ms', med)} (steady median), "
                             f"{med / middle:.2f}x the median rank's {said('elapsed_ms', middle)} (last seen at "
                             f"iteration {step})", file, line))
    return out


def _rank_key(job: Job, rank: str) -> Any:
    return next(k for k in job.ranks if str(k) == rank)


def ledger_alerts(ledger: Ledger, rules: Rules) -> list[Alert]:
    """The time ledger's alerts of a job (its runs together): named after its latest run, one of
    each kind a job (what the ledger says when it first crossed the line)."""
    on = rules.settings
    out: list[Alert] = []
    name = ledger.runs[-1] if ledger.runs else ledger.group
    hours = ledger.whole_s / 3600.0 if ledger.whole_s is not None else None
    if "goodput" in on and ledger.goodput is not None and hours is not None and hours >= on["goodput"]["min_h"] \
            and ledger.goodput < on["goodput"]["below"]:
        lost = sorted(((v, p) for p, v in ledger.seconds.items() if p != "training" and v), reverse=True)[:3]
        where = ", ".join(f"{LEDGER_LABELS[p]} {v / 3600.0:.2f} h" for v, p in lost)
        out.append(Alert(name, "goodput", None, None, ledger.end,
                         f"goodput {100 * ledger.goodput:.0f}% under {100 * on['goodput']['below']:.0f}%: "
                         f"{ledger.seconds['training'] or 0.0:.0f} s of training in {ledger.whole_s:.0f} s"
                         f"{f' ({where})' if where else ''} over {len(ledger.runs)} run(s)", None, None))
    redone = ledger.gpu_hours.get("redone")
    if "redone" in on and redone is not None and redone > on["redone"]["gpu_h"]:
        out.append(Alert(name, "redone", None, None, ledger.end,
                         f"work redone after restarts: {redone:.1f} GPU-h ({ledger.redone_iterations} iterations "
                         f"trained again) over {on['redone']['gpu_h']:g} GPU-h", None, None))
    return [replace(a, job_key=ledger.group) for a in out]
