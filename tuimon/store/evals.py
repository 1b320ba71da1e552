"""A job's evaluation figures: one short series per metric, bounded by design.

Evaluations are rare (every few hundred steps), but a log may print one a step
(NeMo's progress line repeats its last ``val_loss``) or invent metric names without
end.  So a job keeps at most :data:`MAX_METRICS` names and :data:`MAX_POINTS` points a
name: when a series is full, every other point of its older half is dropped (an evenly
thinned history, as TensorBoard's reservoir keeps one), so the recent points stay at full
resolution and the bound holds whatever the log does.  A repeated value at the same
step is one point.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Optional, Union

MAX_METRICS = 32
MAX_POINTS = 2048

#: the metric a job is judged by, where a log gives several: losses first, then perplexity,
#: then whatever comes first (an accuracy)
_PREFERRED = ("loss", "ppl", "perplexity")


@dataclass
class EvalSeries:
    iterations: list[Optional[int]] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    walls: list[Optional[float]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.values)

    def add(self, iteration: Optional[int], value: float, wall: Optional[float]) -> None:
        if self.values and self.iterations[-1] == iteration and iteration is not None:
            if self.values[-1] == value or (value != value and self.values[-1] != self.values[-1]):
                return  # the same evaluation told again (each rank, or a progress line repeating it)
            self.values[-1], self.walls[-1] = value, wall  # a later word on the same step
            return
        if len(self.values) >= MAX_POINTS:
            half = len(self.values) // 2
            for name in ("iterations", "values", "walls"):
                column = getattr(self, name)
                column[:half] = column[:half:2]
        self.iterations.append(iteration)
        self.values.append(value)
        self.walls.append(wall)


@dataclass
class Evals:
    series: dict[str, EvalSeries] = field(default_factory=dict)
    last: dict[str, float] = field(default_factory=dict)
    last_iteration: Optional[int] = None

    def add(self, iteration: Optional[int], metrics: Mapping[str, float], wall: Optional[float]) -> None:
        for name, value in metrics.items():
            if not isinstance(value, (int, float)):
                continue
            series = self.series.get(name)
            if series is None:
                if len(self.series) >= MAX_METRICS:
                    continue
                series = self.series[name] = EvalSeries()
            series.add(iteration, float(value), wall)
            self.last[name] = float(value)
        if iteration is not None:
            self.last_iteration = iteration

    def merge(self, other: "Evals") -> None:
        for name, theirs in other.series.items():
            for it, value, wall in zip(theirs.iterations, theirs.values, theirs.walls):
                self.add(it, {name: value}, wall)
        self.last.update(other.last)
        if other.last_iteration is not None:
            self.last_iteration = other.last_iteration

    @property
    def primary(self) -> Optional[str]:
        """The metric a job's row shows: a loss before a perplexity, a validation set before a test set."""
        return primary_metric(self.last)


def primary_metric(names: Mapping[str, float]) -> Optional[str]:
    if not names:
        return None
    lowered = {n: n.lower() for n in names}
    for word in _PREFERRED:
        found = [n for n, low in lowered.items() if word in low and (word != "loss" or "ppl" not in low)]
        hits = [n for n in found if "test" not in lowered[n]] or found
        if hits:
            return hits[0]
    return next(iter(names))


def finite_or_word(value: float) -> Union[float, str]:
    """A value for JSON: nan and inf as words (a diverged evaluation is news)."""
    if math.isfinite(value):
        return round(value, 6)
    return "nan" if value != value else ("inf" if value > 0 else "-inf")
