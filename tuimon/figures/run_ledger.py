"""One run's part of its job's time ledger (:mod:`.ledger` says what the parts are), made from
the run's progress points, its saves and its evaluation passes."""
from __future__ import annotations

import math
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from .alerts import RECENT_POINTS
from .ledger import MAX_SEGMENTS, RUN_PARTS, RunLedger, add_segment, bounded
from .metrics import median_step

KNOTS = 64  # (iteration, training seconds) points a run keeps to place work redone


def run_ledger(series: Any, *, first_step: Optional[float], startup_s: Optional[float],
               startup_note: Optional[str], end: Optional[float], median_ms: Optional[float], stated: bool,
               world_size: Optional[int], resumed_from: Optional[int],
               checkpoints: Mapping[int, Optional[float]], evals: Sequence[tuple[int, Optional[float]]],
               stall_opts: Mapping[str, float]) -> RunLedger:
    """One run's ledger from its progress points (``series``: the rank that logged most, or
    its steps), the end of its first step, its startup figure, its last stamp, its steady step
    time, its saves (iteration -> stated ms or None) and evaluation passes ((iteration or -1,
    stamp or None))."""
    notes: list[str] = []
    seconds: dict[str, Optional[float]] = dict.fromkeys(RUN_PARTS)
    its, walls, elapsed = _points(series)
    if not stated:  # step times made from stamps: they hold whatever the interval held
        elapsed = np.full(its.size, np.nan)
    start = first_step - startup_s if first_step is not None and startup_s is not None else None
    if startup_s is not None:
        seconds["startup"] = float(startup_s)
    else:
        notes.append(f"startup {startup_note or 'unknown'}")
    gap = median_step(its[:RECENT_POINTS])  # the log interval where the run began
    if resumed_from is not None and its.size and int(its[0]) <= resumed_from:
        notes.append(f"loaded the checkpoint of iteration {resumed_from} and began at {int(its[0])}: "
                     "another run's weights, not a resume")
        resumed_from = None
    start_iteration = resumed_from if resumed_from is not None else \
        (max(0, int(its[0]) - gap) if its.size else None)
    last_iteration = int(its.max()) if its.size else None
    why = _unstamped(its, walls, median_ms)
    if why is not None:
        notes.append(f"{why}: training, saves, evaluation, stalls and teardown are unknown")
        if end is not None and first_step is not None and end < first_step:
            end = None  # (a first step placed after every stamp: no span to tell)
        placed: list[list[Any]] = []
        if start is not None and first_step is not None:
            add_segment(placed, "startup", 0.0, first_step - start)
            if end is not None:
                add_segment(placed, "unknown", first_step - start, end - start)
        return RunLedger(start, first_step, None, end, world_size, start_iteration, last_iteration, resumed_from,
                         seconds, [], _bounded(placed), notes)
    # a step line without a stamp of its own carries the last one read: the first of equal stamps is kept
    stamped = np.isfinite(walls)
    its, walls, elapsed = its[stamped], walls[stamped], elapsed[stamped]
    moved = np.concatenate(([True], np.diff(walls) != 0))
    its, walls, elapsed = its[moved], walls[moved], elapsed[moved]
    t_first = max(first_step, float(walls[0])) if first_step is not None else float(walls[0])
    last_step = float(walls[-1])
    if end is not None and end >= last_step:
        seconds["teardown"] = end - last_step
    else:
        end = last_step
        seconds["teardown"] = 0.0
    origin = start if start is not None else t_first
    segments: list[list[Any]] = []
    if start is not None:
        segments.append(["startup", 0.0, t_first - origin])
    parts = _split_intervals(its, walls, elapsed, t_first, median_ms, checkpoints, evals, stall_opts)
    if parts is None:
        span = max(0.0, last_step - t_first)
        notes.append(f"no steady step time: its {span:.0f} s from first step to last are not split "
                     "into training, saves, evaluation and stalls")
        knots: list[list[float]] = []
        segments.append(["unknown", t_first - origin, last_step - origin])
    else:
        train, ckpt, evaluation, stall, cum = parts
        seconds.update(training=float(train.sum()), checkpoint=float(ckpt.sum()), eval=float(evaluation.sum()),
                       stall=float(stall.sum()))
        knots = _knots(its, cum)
        # the bar: training between the intervals that hold something else (a walk over those alone: a
        # run's points may be a million)
        at = np.maximum(walls[:-1], t_first) - origin
        cursor = t_first - origin
        for k in np.flatnonzero((ckpt + evaluation + stall) > 0):
            t = float(at[k] + train[k])
            add_segment(segments, "training", cursor, t)
            for part, length in (("checkpoint", ckpt[k]), ("eval", evaluation[k]), ("stall", stall[k])):
                if length > 0:
                    add_segment(segments, part, t, t + float(length))
                    t += float(length)
            cursor = t
        add_segment(segments, "training", cursor, last_step - origin)
    if seconds["teardown"]:
        add_segment(segments, "teardown", last_step - origin, end - origin)
    return RunLedger(start, first_step, last_step, end, world_size, start_iteration, last_iteration, resumed_from,
                     seconds, knots, _bounded(segments), notes)


def _points(series: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Iterations, absolute stamps and stated step times (ms, the mean over the interval each
    point ends) of a series' points, in the order logged, each iteration once (a second line of
    one step fills it in; it is no step of its own)."""
    if series is None or not len(series):
        return np.empty(0, np.int64), np.empty(0), np.empty(0)
    its = series.column("iteration").astype(np.int64)
    walls = series.column("wall").astype(np.float64) + (series.wall_base if series.wall_base is not None else np.nan)
    elapsed = series.column("elapsed_ms").astype(np.float64)
    keep = its >= 0
    its, walls, elapsed = its[keep], walls[keep], elapsed[keep]
    if its.size > 1:
        fresh = np.concatenate(([True], its[1:] != its[:-1]))
        its, walls, elapsed = its[fresh], walls[fresh], elapsed[fresh]
    return its, walls, elapsed


def _unstamped(its: np.ndarray, walls: np.ndarray, median_ms: Optional[float]) -> Optional[str]:
    """Why the steps' stamps cannot time the run's parts, or None when they can: none has one, the
    last has none (the time after the last stamped one is training and teardown, unsplit), or their
    span is shorter than their iterations at the steady step time (stamps carried from lines
    before them, not their own)."""
    if not its.size or not np.isfinite(walls).any():
        return "no step has a time stamp"
    if not math.isfinite(float(walls[-1])):
        last = int(its[np.flatnonzero(np.isfinite(walls))[-1]])
        return f"the steps after iteration {last} have no time stamp"
    if median_ms is not None and math.isfinite(median_ms) and median_ms > 0:
        stamped = np.flatnonzero(np.isfinite(walls))
        a, b = int(stamped[0]), int(stamped[-1])
        work = float(its[b] - its[a]) * median_ms / 1000.0
        span = float(walls[b] - walls[a])
        if work > 0 and span < 0.8 * work:
            return (f"the steps' stamps are not their own: {int(its[b] - its[a])} iterations of "
                    f"{median_ms / 1000.0:.3g} s span {span:.0f} s of stamps")
    return None


def _split_intervals(its: np.ndarray, walls: np.ndarray, elapsed: np.ndarray, t_first: float,
                     median_ms: Optional[float],
                     checkpoints: Mapping[int, Optional[float]], evals: Sequence[tuple[int, Optional[float]]],
                     stall_opts: Mapping[str, float]) -> Optional[tuple[np.ndarray, ...]]:
    """Each interval between logged points split into training, checkpoint, evaluation and
    stall seconds, and the training seconds up to each point; None without a step time.  What
    an interval holds past its steps' time is a save's, an evaluation's or a stall's."""
    if median_ms is None or not math.isfinite(median_ms) or median_ms <= 0:
        return None
    n = its.size - 1
    zero = np.zeros(max(n, 0))
    if n <= 0:
        return zero, zero, zero, zero, np.zeros(its.size)
    dt = np.maximum(np.diff(walls), 0.0)
    dt[0] = max(0.0, float(walls[1]) - max(float(walls[0]), t_first))
    steps = np.maximum(np.diff(its), 0).astype(np.float64)
    # an event at iteration c comes after step c: it lies in the interval that ends at the first point past c
    saved = np.zeros(n)
    unmeasured = np.zeros(n, dtype=bool)
    for iteration, save_ms in checkpoints.items():
        k = int(np.searchsorted(its, iteration, side="right")) - 1
        if 0 <= k < n:
            if save_ms is None or not math.isfinite(save_ms):
                unmeasured[k] = True
            else:
                saved[k] += save_ms / 1000.0
    evaluated = np.zeros(n, dtype=bool)
    for iteration, wall in evals:
        if iteration >= 0:
            k = int(np.searchsorted(its, iteration, side="right")) - 1
        elif wall is not None:
            k = int(np.searchsorted(walls, wall, side="left")) - 1
        else:
            continue
        if 0 <= k < n:
            evaluated[k] = True
    # an interval's steps take the steady median each; one that holds a save or an evaluation takes
    # what its record states where that leaves the event room (Megatron-LM stops its interval timer for
    # both: after a save its steps may state 1,070 ms against a median 850, and the save its own 3.4 s).
    # A record that states nearly the whole interval holds the event in its mean (GPT-NeoX: 20,649 ms
    # between 599 ms ones, around an evaluation pass): the median then.  A stall is measured against the
    # median too (a hang inflates any record that holds it)
    stated = steps * elapsed[1:] / 1000.0
    own = ((saved > 0) | unmeasured | evaluated) & np.isfinite(stated) & (stated > 0) & (stated < 0.9 * dt)
    expected = np.where(own, stated, steps * (median_ms / 1000.0))
    excess = np.maximum(dt - expected, 0.0)
    ckpt = np.where(unmeasured & ~evaluated, excess, np.minimum(saved, excess))
    # an unmeasured save beside an evaluation: the save's share is not in the log; the pass has it all
    rest = excess - ckpt
    evaluation = np.where(evaluated, rest, 0.0)
    limit = np.maximum(stall_opts["factor"] * expected, stall_opts["min_s"])
    stall = np.where(~evaluated & ~unmeasured & (dt - ckpt > limit), rest, 0.0)
    train = dt - ckpt - evaluation - stall
    cum = np.concatenate(([0.0], np.cumsum(train)))
    return train, ckpt, evaluation, stall, cum


def _knots(its: np.ndarray, cum: np.ndarray) -> list[list[float]]:
    if its.size <= KNOTS:
        pick = np.arange(its.size)
    else:
        pick = np.unique(np.linspace(0, its.size - 1, KNOTS).round().astype(np.int64))
    return [[float(its[k]), round(float(cum[k]), 3)] for k in pick]


def _bounded(segments: list[list[Any]]) -> list[list[Any]]:
    """:func:`.ledger.bounded` for a long run, in numpy: past MAX_SEGMENTS pieces, even buckets of
    the span, each the part with most of its time (a run of a million steps may hold thousands)."""
    if len(segments) <= MAX_SEGMENTS:
        return bounded(segments)
    names = sorted({p for p, _, _ in segments})
    code = np.array([names.index(p) for p, _, _ in segments])
    a = np.array([s[1] for s in segments], dtype=np.float64)
    b = np.array([s[2] for s in segments], dtype=np.float64)
    edges = np.linspace(a.min(), b.max(), MAX_SEGMENTS + 1)
    covered = np.zeros((len(names), edges.size))
    for k in range(len(names)):  # each part's time before each edge: whole pieces, then the one cut
        mine = code == k
        s0, s1 = a[mine], b[mine]
        order = np.argsort(s1)
        s0, s1 = s0[order], s1[order]
        done = np.concatenate(([0.0], np.cumsum(s1 - s0)))
        whole = np.searchsorted(s1, edges, side="right")
        cut = np.zeros(edges.size)
        inside = whole < s1.size
        cut[inside] = np.clip(edges[inside] - s0[whole[inside]], 0.0, None)
        covered[k] = done[whole] + cut
    most = np.argmax(np.diff(covered, axis=1), axis=0)
    out: list[list[Any]] = []
    for j, k in enumerate(most):
        add_segment(out, names[int(k)], float(edges[j]), float(edges[j + 1]))
    return [[p, round(x, 3), round(y, 3)] for p, x, y in out]
