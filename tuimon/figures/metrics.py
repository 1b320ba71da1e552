"""Derived metrics, as pure functions of numbers (no I/O, no state).

Formulas are the ones users already apply by hand (seed 001):
  model size (B) = (l*(12h^2 + 13h) + v*h + s*h + 2h) / 1e9
  TFLOPs/GPU     = size_B * k * 2 * seq * global_batch / (iter_s * gpus * 1e3)
with k = 4 when activations are checkpointed (recomputed forward), else 3.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Optional, Sequence

import numpy as np

from tuimon.parsers.events import NOT_PHASES

# the warm-up rule is the store's: it keeps timers' sums past it (see tuimon.store.timers)
from ..store.timers import percentiles as percentiles
from ..store.timers import warmup_count as warmup_count
from .record import SpreadStats as SpreadStats


def model_size_billion(layers: int, hidden: int, seq: int, vocab: int) -> float:
    h = float(hidden)
    return (layers * (12 * h * h + 13 * h) + vocab * h + seq * h + 2 * h) / 1e9


def tflops_per_gpu(params_billion: float, seq: int, global_batch: float, iter_time_s: float, gpus: int,
                   activation_checkpointing: bool = True) -> Optional[float]:
    if not iter_time_s or iter_time_s <= 0 or not gpus or gpus <= 0:
        return None
    factor = 4 if activation_checkpointing else 3
    value = params_billion * factor * 2 * seq * global_batch / (iter_time_s * gpus * 1e3)
    return value if math.isfinite(value) else None


def mfu(tflops: Optional[float], peak_tflops: Optional[float]) -> Optional[float]:
    if tflops is None or not peak_tflops:
        return None
    return tflops / peak_tflops


def steady_stats(values: Sequence[float] | np.ndarray, skip_warmup: bool = True) -> Optional[SpreadStats]:
    arr = np.asarray(values, dtype=np.float64)
    if skip_warmup:
        arr = arr[warmup_count(arr.size):]
    arr = arr[np.isfinite(arr)]
    if arr.size == 0:
        return None
    p10, p50, p90 = percentiles(arr, (10, 50, 90))
    return SpreadStats(median=float(p50), mean=float(arr.mean()), min=float(arr.min()), max=float(arr.max()),
                       p10=float(p10), p90=float(p90), n=int(arr.size))


def steady_median(values: Sequence[float] | np.ndarray) -> Optional[float]:
    stats = steady_stats(values)
    return stats.median if stats else None


def _last(values: np.ndarray) -> Optional[float]:
    finite = values[np.isfinite(values)]
    return float(finite[-1]) if finite.size else None


def _max(values: np.ndarray) -> Optional[float]:
    finite = values[np.isfinite(values)]
    return float(finite.max()) if finite.size else None


def _sum(values: np.ndarray) -> Optional[float]:
    finite = values[np.isfinite(values)]
    return float(finite.sum(dtype=np.float64)) if finite.size else None


#: a registry field's ``agg``: how a job's points become its summary figure.  Only the median
#: leaves warm-up out (a rate); the last, the largest and the total are of every point.
AGGREGATES = {"median": lambda v: steady_median(v), "last": _last, "max": _max, "sum": _sum}


def aggregate(agg: str, values: Sequence[float] | np.ndarray) -> Optional[float]:
    """A job's figure from its points, as the field's ``agg`` says (NaN points are missing ones)."""
    return AGGREGATES[agg](np.asarray(values, dtype=np.float64))


@dataclass(frozen=True)
class Phase:
    name: str
    offset_s: float  # seconds after the job-start mark


def startup_timeline(start: Optional[float], first_step: Optional[float],
                     marks: Iterable[tuple[str, Optional[float]]]) -> tuple[Optional[float], list[Phase]]:
    """Seconds from the job-start mark to the first completed training step, and
    the named marks in between (wall-clock seconds, so minutes, hours and midnight
    roll over correctly).  Marks before the start or after the first step are dropped, and
    the log's first stamp (``log-start``): a reference, no phase."""
    if start is None:
        return None, []
    phases = [Phase("job-start", 0.0)]
    seen = {"job-start"}
    for name, wall in sorted(((n, w) for n, w in marks if w is not None), key=lambda nw: nw[1]):
        if name in seen or name in NOT_PHASES or wall < start or (first_step is not None and wall > first_step):
            continue
        seen.add(name)
        phases.append(Phase(name, wall - start))
    total = None
    if first_step is not None and first_step >= start:
        total = first_step - start
        phases.append(Phase("first-step", total))
    return total, phases


def parse_size(text: str) -> float:
    """``52B``, ``1.3b``, ``350M``, ``52`` (billions) -> billions of parameters."""
    t = text.strip().upper()
    scale = 1.0
    if t.endswith("B"):
        t = t[:-1]
    elif t.endswith("M"):
        t, scale = t[:-1], 1e-3
    elif t.endswith("T"):
        t, scale = t[:-1], 1e3
    return float(t) * scale


def median_step(numbers: np.ndarray) -> int:
    """The iterations between two logged points (a log interval): the median of the positive steps
    between ``numbers`` (iteration numbers in the order logged; negatives are no number), 1 where
    there are none (every step logged, or one point)."""
    numbers = numbers[numbers >= 0].astype(np.int64)
    steps = np.diff(numbers)
    steps = steps[steps > 0]
    if not steps.size:
        return 1
    # np.median's value, without its first call's import of numpy.ma (8 ms of every start)
    ordered, half = np.sort(steps), steps.size // 2
    middle = ordered[half] if steps.size % 2 else (float(ordered[half - 1]) + float(ordered[half])) / 2
    return max(1, int(middle))
