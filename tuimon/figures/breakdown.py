"""The per-iteration timer breakdown: timers nested as their frameworks nest them.

Each timer hangs under its parent (:data:`parsers.timers.TIMER_PARENTS`), else under
the whole iteration.  What a researcher would paste, and the rules that give it:

* every mean is a steady-state mean: the warm-up reports are left out by the rule the
  iteration time's median uses (:func:`tuimon.store.timers.warmup_count`);
* the whole is the steady mean of the log's own whole-iteration timer (``e2e-time``),
  else of the iteration time; only a log with neither is measured by its timers' sum;
* a part's share is its own time over the whole, always: a parent is never inflated by
  its parts.  Parts measured on other streams or asynchronously (offloading copies,
  DeepSpeed's timers on other ranks) can add up to more than what holds them: they are
  then marked ``overlap`` and no ``other`` row is made for that level;
* what a level's parts leave unmeasured is an ``other`` row;
* a timer that reads 0 in every steady report measured nothing and is left out;
* a timer reported in fewer than half as many steady reports as the most reported one
  is no part of every iteration (Megatron's startup timer block, an occasional
  all-reduce): it is listed apart (:func:`apart`), with setup and checkpoint timers.

A DeepSpeed micro-step timer is the same work as its global timer, one micro-step
of it.  It is shown as its global timer's part only where that is the global
timer's only part; beside the global timer's real parts (``backward_inner``,
``backward_allreduce``) it would count their time twice.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Collection, Mapping, Optional

from tuimon.parsers.timers import TIMER_PARENTS, WHOLE_TIMERS, one_off_timer, timer_group

OTHER = "other"


#: parts summing to more than what holds them by more than this are overlapping
OVERLAP_TOLERANCE = 1e-3


@dataclass
class Part:
    name: str
    mean_ms: float  # steady mean (``other``: the rest of its parent)
    parent: Optional[str]  # None: a part of the whole iteration
    share: float = 0.0  # own time over the whole iteration
    depth: int = 0
    overlap: bool = False  # it and its siblings add up to more than their parent: they overlap
    parts: list["Part"] = field(default_factory=list)
    spread: Optional[tuple[float, float]] = None  # (p10, p90) ms of its steady reports

    def as_dict(self) -> dict:
        p10, p90 = self.spread if self.spread is not None else (None, None)
        return {"name": self.name, "mean_ms": round(self.mean_ms, 3), "parent": self.parent,
                "share": round(self.share, 4), "depth": self.depth, "overlap": self.overlap,
                "p10_ms": None if p10 is None else round(p10, 3), "p90_ms": None if p90 is None else round(p90, 3)}


@dataclass
class Breakdown:
    whole_ms: Optional[float]  # the iteration, as the shares' denominator
    whole_source: str  # the timer that gave it, "iteration time", or "sum of timers"
    parts: list[Part]  # depth first, parents before their parts
    apart: list[dict] = field(default_factory=list)  # timers not in every iteration: {name, ms, count}
    withheld: Optional[str] = None  # why no parts are given although timers are known

    def as_list(self) -> list[dict]:
        return [p.as_dict() for p in self.parts]


def _micro_view(name: str, parent: str) -> bool:
    return name.endswith("_microstep") and name[: -len("_microstep")] == parent


def build(steady: Mapping[str, tuple[int, Optional[float]]], iteration_ms: Optional[float],
          occasional: Collection[str] = (),
          spreads: Optional[Mapping[str, Optional[tuple[float, float]]]] = None) -> Breakdown:
    """``steady``: per timer, (steady reports, steady mean ms) (:meth:`TimerStat.steady`);
    ``iteration_ms``: the steady mean iteration time of the same run (None when the log
    gives none); ``occasional``: timers known to be no per-iteration part (timed only
    before training began, or one communication call each); ``spreads``: per timer, the
    (p10, p90) ms of its steady reports (:meth:`TimerStat.spread`), shown beside the mean
    since one offloading timer varies 2-50x between reports of one run."""
    usable = {n: (c, v) for n, (c, v) in steady.items()
              if c and v is not None and math.isfinite(v) and v >= 0 and not one_off_timer(n)}
    most = max((c for n, (c, _) in usable.items() if n not in occasional), default=0)
    regular = {n for n, (c, _) in usable.items() if 2 * c >= most and n not in occasional}
    apart = [{"name": n, "ms": round(v, 3), "count": c} for n, (c, v) in usable.items() if n not in regular]
    # a timer that reads 0.00 in every steady report measured nothing (DeepSpeed prints its global
    # timers so without wall_clock_breakdown): it holds no parts, and is no part itself
    means = {n: v for n, (c, v) in usable.items() if n in regular and v > 0}
    whole_name = next((n for n in WHOLE_TIMERS if n in means), None)
    whole = means.pop(whole_name) if whole_name is not None else None
    if whole is not None and whole <= 0:
        whole, whole_name = None, None
    source = whole_name or "iteration time"
    if whole is None and iteration_ms is not None and math.isfinite(iteration_ms) and iteration_ms > 0:
        whole = iteration_ms
    for name in WHOLE_TIMERS:  # a second whole-iteration timer is no part of the first
        if name in means:
            apart.append({"name": name, "ms": round(means.pop(name), 3), "count": usable[name][0]})

    parent_of: dict[str, Optional[str]] = {
        name: next((p for p in TIMER_PARENTS.get(name, ()) if p in means), None) for name in means}
    dropped = {n for n, p in parent_of.items() if p is not None and _micro_view(n, p)
               and any(q == p and not _micro_view(s, p) for s, q in parent_of.items())}
    # the same where the global timer itself measured nothing (DeepSpeed prints it 0.00 at times):
    # its real parts stand for it, its micro-step view would count them twice
    dropped |= {n for n in parent_of if n.endswith("_microstep") and n[: -len("_microstep")] not in means
                and any(n[: -len("_microstep")] in TIMER_PARENTS.get(s, ()) and not s.endswith("_microstep")
                        for s in means)}
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
        return Part(name, means[name], parent_of.get(name), depth=depth, parts=parts,
                    spread=(spreads or {}).get(name))

    top = [node(n, 0) for n in sorted(children.get(None, ()), key=lambda c: -means[c])]
    if whole is None:
        measured = sum(p.mean_ms for p in top)
        whole, source = (measured, "sum of timers") if measured > 0 else (None, source)
    flat: list[Part] = []
    apart = sorted(apart, key=lambda t: -float(t["ms"]))  # type: ignore[arg-type]
    if whole and (longest := max(top, key=lambda p: p.mean_ms, default=None)) is not None \
            and longest.mean_ms > whole * (1 + OVERLAP_TOLERANCE):
        # a part longer than the whole iteration: the timers' steady window and the iterations' are not
        # the same iterations (a run of two or three), and no share of it would be true
        return Breakdown(None, source, [], apart, withheld=f"{longest.name} ({longest.mean_ms:.1f} ms) is longer than "
                         f"the {source} ({whole:.1f} ms) it would be a share of")
    if whole:
        _flatten(top, None, whole, whole, 0, flat)
    return Breakdown(whole, source, flat, apart)


def _flatten(parts: list[Part], parent: Optional[str], holder_ms: float, whole: float, depth: int,
             out: list[Part]) -> None:
    measured = sum(p.mean_ms for p in parts)
    overlap = measured > holder_ms * (1 + OVERLAP_TOLERANCE)
    for p in parts:
        p.share = p.mean_ms / whole
        p.overlap = overlap
        out.append(p)
        if p.parts:
            _flatten(p.parts, p.name, p.mean_ms, whole, depth + 1, out)
    rest = holder_ms - measured
    if parts and not overlap and rest > holder_ms * OVERLAP_TOLERANCE:
        out.append(Part(OTHER, rest, parent, share=rest / whole, depth=depth))


def one_off(timer_means: Mapping[str, float]) -> list[dict]:
    """Setup and checkpoint timers, for the startup panel: ``{name, ms}``."""
    return [{"name": n, "ms": round(v, 3)} for n, v in timer_means.items() if one_off_timer(n) and math.isfinite(v)]


def offload_share(parts: list[Part]) -> Optional[float]:
    """The steady offload overhead over the whole iteration: the share of the outermost
    offload timers (a STRONGHOLD ``offloading-fwd-overhead`` holds its copies, which are
    not counted again)."""
    names = {p.name for p in parts if _offload(p.name)}
    outer = [p.share for p in parts if _offload(p.name) and p.parent not in names]
    return sum(outer) if outer else None


def _offload(name: str) -> bool:
    return timer_group(name) == "offload"
