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
_CHUNK = 1 << 18  # intervals looked at together for stalls


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
    if not stated:  # step times made from stamps: they hold whatever the interval held
        elapsed = np.full(its.size, np.nan)
    # a step line without a stamp of its own carries the last one read: the first of equal stamps is kept
    its, walls, elapsed = _kept(np.isfinite(walls), its, walls, elapsed)
    its, walls, elapsed = _kept(np.concatenate(([True], np.diff(walls) != 0)), its, walls, elapsed)
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
    split = _split_intervals(its, walls, elapsed, t_first, median_ms, checkpoints, evals, stall_opts)
    if split is None:
        span = max(0.0, last_step - t_first)
        notes.append(f"no steady step time: its {span:.0f} s from first step to last are not split "
                     "into training, saves, evaluation and stalls")
        knots: list[list[float]] = []
        segments.append(["unknown", t_first - origin, last_step - origin])
    else:
        totals, special, knots = split
        seconds.update(totals)
        # the bar: training between the intervals that hold something else (those alone are walked: a
        # run's points may be millions)
        cursor = t_first - origin
        for k, train, ckpt, evaluation, stall in special:
            t = max(float(walls[k]), t_first) - origin + train
            add_segment(segments, "training", cursor, t)
            for part, length in (("checkpoint", ckpt), ("eval", evaluation), ("stall", stall)):
                if length > 0:
                    add_segment(segments, part, t, t + length)
                    t += length
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
        return np.empty(0, np.int32), np.empty(0), np.empty(0, np.float32)
    # the columns as they are stored (int32, float32): only the stamps widen, to absolute float64 seconds
    its = series.column("iteration")
    if series.wall_base is None:  # no stamp: NaN a point, read-only and held nowhere (llm.c's 23 million: 8 bytes each)
        walls = np.broadcast_to(np.float64(np.nan), its.shape)
    else:
        walls = series.column("wall").astype(np.float64)
        walls += series.wall_base
    elapsed = series.column("elapsed_ms")
    its, walls, elapsed = _kept(its >= 0, its, walls, elapsed)
    if its.size > 1:
        its, walls, elapsed = _kept(np.concatenate(([True], its[1:] != its[:-1])), its, walls, elapsed)
    return its, walls, elapsed


def _kept(keep: np.ndarray, *columns: np.ndarray) -> tuple[np.ndarray, ...]:
    """The ``columns`` where ``keep`` holds; the columns themselves where it holds everywhere (an llm.c
    log of 23 million steps: each copy of the three was 16 bytes a point more at the summary's peak).
    Nothing here writes into them."""
    if keep.all():
        return columns
    return tuple(column[keep] for column in columns)


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


#: what a split gives: each part's total seconds, the intervals that hold more than training
#: ((interval, training, checkpoint, evaluation, stall) seconds), and the knots for work redone
Split = tuple[dict[str, float], list[tuple[int, float, float, float, float]], list[list[float]]]


def _split_intervals(its: np.ndarray, walls: np.ndarray, elapsed: np.ndarray, t_first: float,
                     median_ms: Optional[float], checkpoints: Mapping[int, Optional[float]],
                     evals: Sequence[tuple[int, Optional[float]]], stall_opts: Mapping[str, float]) -> Optional[Split]:
    """Each interval between logged points split into training, checkpoint, evaluation and stall
    seconds; None without a step time.  What an interval holds past its steps' time is a save's,
    an evaluation's or a stall's.  Arrays the length of the run are few (a run of millions of
    points is summed, not kept a column a part): the intervals that hold an event or may hold a
    stall are taken one by one."""
    if median_ms is None or not math.isfinite(median_ms) or median_ms <= 0:
        return None
    n = its.size - 1
    if n <= 0:
        return {"training": 0.0, "checkpoint": 0.0, "eval": 0.0, "stall": 0.0}, [], _knots(its, np.zeros(0), [])
    dt = np.diff(walls)
    np.maximum(dt, 0.0, out=dt)
    dt[0] = max(0.0, float(walls[1]) - max(float(walls[0]), t_first))
    # an event at iteration c comes after step c: it lies in the interval that ends at the first point past c
    saved: dict[int, float] = {}
    unmeasured: set[int] = set()
    for iteration, save_ms in checkpoints.items():
        k = int(np.searchsorted(its, iteration, side="right")) - 1
        if 0 <= k < n:
            if save_ms is None or not math.isfinite(save_ms):
                unmeasured.add(k)
            else:
                saved[k] = saved.get(k, 0.0) + save_ms / 1000.0
    evaluated: set[int] = set()
    for iteration, wall in evals:
        if iteration >= 0:
            k = int(np.searchsorted(its, iteration, side="right")) - 1
        elif wall is not None:
            k = int(np.searchsorted(walls, wall, side="left")) - 1
        else:
            continue
        if 0 <= k < n:
            evaluated.add(k)
    # an interval's steps take the steady median each (a stall is measured against it too: a hang
    # inflates any record that holds it); stall candidates: longer than the stall alert's limit
    median_s, factor, min_s = median_ms / 1000.0, stall_opts["factor"], stall_opts["min_s"]
    found = []
    for a in range(0, n, _CHUNK):  # (a chunk at a time: no third column the length of the run)
        limit = np.diff(its[a:a + _CHUNK + 1]).astype(np.float64)
        np.maximum(limit, 0.0, out=limit)
        limit *= median_s * factor
        np.maximum(limit, min_s, out=limit)
        found.append(np.flatnonzero(dt[a:a + _CHUNK] > limit) + a)
    candidates = np.concatenate(found)
    special: list[tuple[int, float, float, float, float]] = []
    for k in sorted(set(saved) | unmeasured | evaluated | set(candidates.tolist())):
        length, steps = float(dt[k]), max(0, int(its[k + 1] - its[k]))
        expected = steps * median_s
        # one that holds a save or an evaluation takes what its record states where that leaves the
        # event room (Megatron-LM stops its interval timer for both: after a save its steps may state
        # 1,070 ms against a median 850, and the save its own 3.4 s).  A record that states nearly the
        # whole interval holds the event in its mean (GPT-NeoX: 20,649 ms between 599 ms ones around an
        # evaluation pass): the median then
        stated = steps * float(elapsed[k + 1]) / 1000.0
        event = k in saved or k in unmeasured or k in evaluated
        if event and math.isfinite(stated) and 0.0 < stated < 0.9 * length:
            expected = stated
        excess = max(length - expected, 0.0)
        ckpt = excess if k in unmeasured and k not in evaluated else min(saved.get(k, 0.0), excess)
        # an unmeasured save beside an evaluation: the save's share is not in the log; the pass has it all
        rest = excess - ckpt
        evaluation = rest if k in evaluated else 0.0
        over = k not in evaluated and k not in unmeasured and length - ckpt > max(factor * expected, min_s)
        stall = rest if over else 0.0
        if ckpt or evaluation or stall:
            special.append((k, length - ckpt - evaluation - stall, ckpt, evaluation, stall))
    totals = {"checkpoint": sum(x[2] for x in special), "eval": sum(x[3] for x in special),
              "stall": sum(x[4] for x in special)}
    totals["training"] = float(dt.sum()) - totals["checkpoint"] - totals["eval"] - totals["stall"]
    return totals, special, _knots(its, dt, special)


def _knots(its: np.ndarray, dt: np.ndarray, special: list[tuple[int, float, float, float, float]]
           ) -> list[list[float]]:
    """Up to KNOTS points (iteration, training seconds from the first point to it): the intervals'
    seconds up to point i (``dt[:i]``, summed between knots), less what the special intervals
    before it held besides training."""
    if its.size <= KNOTS:
        pick = np.arange(its.size)
    else:
        pick = np.unique(np.linspace(0, its.size - 1, KNOTS).round().astype(np.int64))
    out: list[list[float]] = []
    removed, total, j, last = 0.0, 0.0, 0, 0
    for i in (int(p) for p in pick):
        while j < len(special) and special[j][0] < i:
            removed += special[j][2] + special[j][3] + special[j][4]
            j += 1
        total += float(dt[last:i].sum())
        last = i
        out.append([float(its[i]), round(total - removed, 3)])
    return out


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
