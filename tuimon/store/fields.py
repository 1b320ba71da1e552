"""The field registry: every per-point metric, in one table.

A row says where a metric comes from (an event type and how to read it), how a
point keeps it (series column and dtype), how a job's summary aggregates it, its
unit, and its labels in summaries, CSV and the app.  :class:`~tuimon.store.series.Series`
is laid out from it, :class:`~tuimon.store.job_store.JobStore` fills series from it, and
``summarize`` and the table columns read it.  A new metric is one row here (and
the format line that reads it).
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import repeat
from operator import contains, getitem
from typing import Any, Callable, Mapping, Optional

Getter = Callable[[Any], Any]


class Attr:
    """An event's attribute, times ``scale``: a getter whose parts a series reads off many
    events at once (:class:`~tuimon.store.series.Series` stages points)."""

    __slots__ = ("name", "scale", "floor")

    def __init__(self, name: str, scale: float = 1.0, floor: Optional[float] = None) -> None:
        self.name, self.scale, self.floor = name, scale, floor

    def __call__(self, ev: Any) -> Any:
        return self.value(getattr(ev, self.name))

    def value(self, value: Any) -> Any:
        """What this getter gives for an attribute of ``value``."""
        if self.scale != 1.0 and value is not None:
            try:
                value = value * self.scale
            except (OverflowError, TypeError):  # an int past a float (a user's int group): no value
                return None
        return value if self.floor is None else above(value, self.floor)


class Of:
    """``fn`` of an event's attribute: a getter that rows of values (not events) can use too
    (:mod:`tuimon.store.iteration_fold`)."""

    __slots__ = ("name", "fn", "many")

    def __init__(self, name: str, fn: Callable[[Any], Any],
                 many: Optional[Callable[[list], list]] = None) -> None:
        self.name, self.fn = name, fn
        self.many = many  # ``fn`` of each value of a column at once (what ``map`` of it gives), if it has one

    def __call__(self, ev: Any) -> Any:
        return self.fn(getattr(ev, self.name))

    def of_each(self, values: list) -> list:
        """``fn`` of each of ``values`` (a column of rows' attribute)."""
        return self.many(values) if self.many is not None else list(map(self.fn, values))


def above(value: Any, floor: float) -> Any:
    """``value`` if it is over ``floor`` (or None, or NaN, which stays NaN); else None: a bad value."""
    try:
        return value if value is None or value > floor or value != value else None
    except TypeError:
        return None


def _attr(name: str, scale: float = 1.0) -> Getter:
    return Attr(name, scale)


_PRIMARY_LOSSES = ("lm loss", "loss", "reduced train loss")  # the first a log names is the one


def primary_loss(losses: Optional[Mapping[str, float]]) -> Optional[float]:
    """The loss a job is judged by: the LM loss where the log names several."""
    if not losses:
        return None
    for name in _PRIMARY_LOSSES:
        if name in losses:
            return losses[name]
    return next(iter(losses.values()))


def primary_losses(column: list) -> list:
    """:func:`primary_loss` of each of ``column`` (rows' losses): in C where every row names one of
    :data:`_PRIMARY_LOSSES` and none an earlier one (Megatron's rows name the first, llm.c's and a
    declared format's the second: a call a row was a tenth of their fold).  A column of one key's
    maps (:class:`~tuimon.parsers.columns.KeyMaps`): its values, each its map's only loss."""
    from tuimon.parsers.columns import map_values  # (not at import: `tuimon --help` loads this module, not the readers)

    values = map_values(column)
    if values is not None:
        return list(values)
    if None not in column:
        for name in _PRIMARY_LOSSES:
            if all(map(contains, column, repeat(name))):
                return list(map(getitem, column, repeat(name)))
            if any(map(contains, column, repeat(name))):
                break  # (some rows name it, others a later one: a row at a time)
    return list(map(primary_loss, column))


@dataclass(frozen=True)
class Field:
    key: str  # series column and summary key
    dtype: str  # numpy dtype of the column
    #: event type -> how to read the value off such an event
    sources: Mapping[str, Getter]
    agg: str  # "median" (steady state), "last", "max" or "sum": what a job's summary gives
    unit: str
    label: str  # column header in tables, CSV and the app
    digits: int = 2  # decimals shown in tables
    summary: bool = True  # a key of its own in the summary JSON (and a CSV column)
    shown: bool = False  # a column of the default table and of the app's jobs screen
    #: values at or below this (a duration of -5 ms, a negative rate) are bad values: the
    #: point keeps its other fields, this one is missing (NaN), never a minimum or a median
    floor: Optional[float] = None
    #: the Prometheus family of a summary figure (``tuimon serve``'s /metrics); by default
    #: ``tuimon_job_`` and the key, a rate's ``_sec`` spelt ``_second`` as Prometheus names units
    prometheus: Optional[str] = None

    def __post_init__(self) -> None:
        if self.agg not in AGGS:
            raise ValueError(f"field {self.key}: agg {self.agg!r} is none of {', '.join(AGGS)}")

    @property
    def metric_name(self) -> str:
        if self.prometheus:
            return self.prometheus
        name = self.key[:-4] + "_second" if self.key.endswith("_sec") else self.key
        return f"tuimon_job_{name.replace('_per_sec_', '_per_second_')}"

    @property
    def metric_help(self) -> str:
        how = {"median": "steady median", "last": "latest", "max": "largest", "sum": "total"}[self.agg]
        return f"{self.label} ({self.unit}, {how})" if self.unit else f"{self.label} ({how})"


#: how a job's points become its figure (tuimon.figures.metrics.AGGREGATES implements each)
AGGS = ("median", "last", "max", "sum")


FIELDS: tuple[Field, ...] = (
    Field("iteration", "<i4", {"iteration": _attr("iteration"), "step": _attr("step"),
                               "throughput": _attr("iteration")}, "last", "", "Iter", 0, summary=False),
    Field("elapsed_ms", "<f4", {"iteration": _attr("elapsed_ms"), "step": _attr("elapsed_ms"),
                                "throughput": _attr("iteration_time_s", 1000.0)}, "median", "ms", "Iter time",
          summary=False, floor=0.0),
    Field("loss", "<f4", {"iteration": Of("losses", primary_loss, primary_losses), "step": _attr("loss")}, "last", "",
          "Loss", 4, summary=False),
    Field("grad_norm", "<f4", {"iteration": _attr("grad_norm")}, "last", "", "Grad norm", 3, summary=False),
    Field("tflops", "<f4", {"iteration": _attr("tflops_reported"), "throughput": _attr("tflops_reported")},
          "median", "TFLOP/s/GPU", "TFLOPs rep", 1, summary=False, floor=0.0),
    Field("samples_per_sec", "<f4", {"iteration": _attr("samples_per_sec"), "step": _attr("samples_per_sec"),
                                     "throughput": _attr("samples_per_sec")}, "median", "samples/s", "Samples/s", 3,
          shown=True, floor=0.0),
    # a job's summary gives tokens/s where the log prints none: global batch x sequence length
    # over the iteration time (tuimon.figures.summary.tokens_rates)
    Field("tokens_per_sec", "<f4", {"iteration": _attr("tokens_per_sec"), "throughput": _attr("tokens_per_sec")},
          "median", "tokens/s", "Tokens/s", 0, shown=True, floor=0.0),
    Field("tokens_per_gpu_per_sec", "<f4", {"iteration": _attr("tokens_per_gpu_per_sec"),
                                            "throughput": _attr("tokens_per_gpu_per_sec")},
          "median", "tokens/s/GPU", "Tokens/s/GPU", 0, floor=0.0),
    Field("mfu_reported", "<f4", {"iteration": _attr("mfu", 0.01), "throughput": _attr("mfu", 0.01)}, "median",
          "ratio", "MFU rep", 4, floor=0.0,
          prometheus="tuimon_job_mfu_reported_ratio"),
    Field("energy_j_per_gpu", "<f4", {"iteration": _attr("energy_j_per_gpu")}, "median", "J/iter/GPU",
          "Energy/GPU", 1, floor=0.0, prometheus="tuimon_job_energy_joules_per_iteration_per_gpu"),
    Field("power_w_per_gpu", "<f4", {"iteration": _attr("power_w_per_gpu")}, "median", "W/GPU", "Power/GPU", 1,
          floor=0.0, prometheus="tuimon_job_power_watts_per_gpu"),
)

BY_KEY = {f.key: f for f in FIELDS}
#: the registry's own summary keys, in order: shown in the table and app, then the rest (CSV)
SHOWN = tuple(f for f in FIELDS if f.summary and f.shown)
EXTRA = tuple(f for f in FIELDS if f.summary and not f.shown)


def getters_for(event_type: str) -> tuple[tuple[str, Getter], ...]:
    """(column, getter) of every field an event of this type gives."""
    return _GETTERS.get(event_type, ())


def _above(get: Getter, floor: float) -> Getter:
    if isinstance(get, Attr):
        return Attr(get.name, get.scale, floor)
    if isinstance(get, Of):
        fn = get.fn
        return Of(get.name, lambda value: above(fn(value), floor))
    return lambda ev: above(get(ev), floor)


_GETTERS: dict[str, tuple[tuple[str, Getter], ...]] = {}
for _f in FIELDS:
    for _event, _get in _f.sources.items():
        _GETTERS[_event] = _GETTERS.get(_event, ()) + ((_f.key, _get if _f.floor is None else _above(_get, _f.floor)),)
