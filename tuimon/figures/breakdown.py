"""The per-iteration timer breakdown: timers nested as their frameworks nest them.

Each timer hangs under its parent (:data:`parsers.timers.TIMER_PARENTS`), else under
the whole iteration.  Shares are fractions of the iteration, so a bar's length
means the same in every row.  The model keeps two promises by construction:

* a part never outweighs what holds it: a node counts as the larger of its own time
  and the sum of its parts (timers measured on different ranks or intervals can
  overlap a little); the iteration counts as the larger of its time and its parts';
* what a level's parts leave unmeasured is an ``other`` row, so the parts of a
  level add up to their parent exactly.

One-off timers (setup, checkpoint loads and saves) are no part of an iteration:
:func:`one_off` lists them for the startup panel instead.

A DeepSpeed micro-step timer is the same work as its global timer, one micro-step
of it.  It is shown as its global timer's part only where that is the global
timer's only part; beside the global timer's real parts (``backward_inner``,
``backward_allreduce``) it would count their time twice.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Optional

from parsers.timers import TIMER_PARENTS, WHOLE_TIMERS, one_off_timer

OTHER = "other"


@dataclass
class Part:
    name: str
    mean_ms: float  # as measured (``other``: the rest of its parent)
    parent: Optional[str]  # None: a part of the whole iteration
    share: float = 0.0  # fraction of the iteration
    depth: int = 0
    counted_ms: float = 0.0  # max(own, sum of parts): what the share is of
    parts: list["Part"] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"name": self.name, "mean_ms": round(self.mean_ms, 3), "parent": self.parent,
                "share": round(self.share, 4), "depth": self.depth}


@dataclass
class Breakdown:
    whole_ms: Optional[float]  # the iteration, as the shares' denominator
    whole_source: str  # the timer that gave it, "iteration time", or "sum of timers"
    parts: list[Part]  # depth first, parents before their parts

    def as_list(self) -> list[dict]:
        return [p.as_dict() for p in self.parts]


def _micro_view(name: str, parent: str) -> bool:
    return name.endswith("_microstep") and name[: -len("_microstep")] == parent


def build(timer_means: Mapping[str, float], iteration_ms: Optional[float]) -> Breakdown:
    """``timer_means``: mean ms per timer name; ``iteration_ms``: the mean iteration time
    over the same run (None when the log gives none)."""
    means = {n: v for n, v in timer_means.items() if math.isfinite(v) and v >= 0 and not one_off_timer(n)}
    whole_name = next((n for n in WHOLE_TIMERS if n in means), None)
    whole = means.pop(whole_name) if whole_name is not None else None
    source = whole_name or ("iteration time" if iteration_ms else "sum of timers")
    if whole is None and iteration_ms is not None and math.isfinite(iteration_ms) and iteration_ms > 0:
        whole = iteration_ms

    parent_of: dict[str, Optional[str]] = {
        name: next((p for p in TIMER_PARENTS.get(name, ()) if p in means), None) for name in means}
    dropped = {n for n, p in parent_of.items() if p is not None and _micro_view(n, p)
               and any(q == p and not _micro_view(s, p) for s, q in parent_of.items())}
    for name in dropped:  # left out (see the module's note); its own parts move up
        for sub, parent in parent_of.items():
            if parent == name:
                parent_of[sub] = parent_of[name]
    for name in dropped:
        del parent_of[name]
    children: dict[Optional[str], list[str]] = {}
    for name, parent in parent_of.items():
        children.setdefault(parent, []).append(name)

    def node(name: str, depth: int) -> Part:
        parts = [node(c, depth + 1) for c in sorted(children.get(name, ()), key=lambda c: -means[c])]
        counted = max(means[name], sum(p.counted_ms for p in parts))
        return Part(name, means[name], parent_of.get(name), depth=depth, counted_ms=counted, parts=parts)

    top = [node(n, 0) for n in sorted(children.get(None, ()), key=lambda c: -means[c])]
    measured = sum(p.counted_ms for p in top)
    if whole is None or measured > whole:
        whole = measured if measured > 0 else None
        if whole_name is None and iteration_ms is None:
            source = "sum of timers"
    flat: list[Part] = []
    if whole:
        _flatten(top, None, whole, whole, 0, flat)
    return Breakdown(whole, source, flat)


def _flatten(parts: list[Part], parent: Optional[str], counted: float, whole: float, depth: int,
             out: list[Part]) -> None:
    for p in parts:
        p.share = p.counted_ms / whole
        out.append(p)
        if p.parts:
            _flatten(p.parts, p.name, p.counted_ms, whole, depth + 1, out)
    rest = counted - sum(p.counted_ms for p in parts)
    if parts and rest > counted * 1e-3:
        out.append(Part(OTHER, rest, parent, share=rest / whole, depth=depth, counted_ms=rest))


def one_off(timer_means: Mapping[str, float]) -> list[dict]:
    """Setup and checkpoint timers, for the startup panel: ``{name, ms}``."""
    return [{"name": n, "ms": round(v, 3)} for n, v in timer_means.items() if one_off_timer(n) and math.isfinite(v)]
