"""The summary record: what ``summarize`` gives for one job, typed.

Every layer above the store reads a job through this record (tables, the app, alerts,
Prometheus), by attribute, never by a string key.  Its JSON form (:meth:`Summary.as_dict`)
carries :data:`SCHEMA_VERSION`; :func:`json_schema` derives the JSON Schema from the
types below and the field registry, and ``docs/summary.schema.json`` is that schema,
checked against real output in CI (``tests/test_record.py``).

A registry metric (:data:`tuimon.store.fields.FIELDS` with ``summary=True``) is a key of
the JSON's top level and a value of :attr:`Summary.metrics`: adding one needs no change here.
"""
from __future__ import annotations

import collections.abc
import dataclasses
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Optional, Union

from ..store.fields import FIELDS
from .ledger import Ledger, RunLedger

#: bumped whenever a key changes meaning or goes away (a new key keeps the version)
SCHEMA_VERSION = 2  # 2: tflops_per_gpu.computed counts the model's work only (MFU's); hardware is HFU's

#: every status a summary may have (``stalled``: quiet past its limit, by the log's stamps or
#: while watched; ``ended``: a log that simply stops, never seen growing)
STATUSES = ("starting", "training", "finished", "ended", "failed", "nan", "stuck-in-startup", "no-iterations",
            "stalled")

#: a loss or evaluation figure: a number, or a word where it diverged (``nan``, ``inf``, ``-inf``)
Figure = Union[float, str, None]


@dataclass(frozen=True)
class SpreadStats:
    """A steady-state spread (:func:`tuimon.figures.metrics.steady_stats`)."""
    median: float
    mean: float
    min: float
    max: float
    p10: float
    p90: float
    n: int

    def as_dict(self) -> dict:
        return {"median": self.median, "mean": self.mean, "min": self.min, "max": self.max,
                "p10": self.p10, "p90": self.p90, "n": self.n}


#: steady-state iteration time, ms (warm-up points left out): the spread of a job's steady points
IterTime = SpreadStats


@dataclass(frozen=True)
class Tflops:
    """TFLOPs per GPU: as the log prints them; computed from the model's FLOPs of an iteration
    (:mod:`tuimon.figures.flops`) and its time, counting the model's work only (MFU's measure);
    and with the forward pass recomputed under activation checkpointing (HFU's: None where the
    log does not say whether activations are recomputed)."""
    reported: Optional[float]
    computed: Optional[float]
    hardware: Optional[float] = None


@dataclass(frozen=True)
class Memory:
    gpu_max_allocated_mb: Optional[float]
    gpu_max_reserved_mb: Optional[float]
    cpu_used_gb: Optional[float]


@dataclass(frozen=True)
class ModelConfig:
    num_layers: Optional[int]
    hidden_size: Optional[int]
    num_heads: Optional[int]
    tp: Optional[int]
    pp: Optional[int]
    dp: Optional[int]
    micro_batch: Optional[int]


@dataclass(frozen=True)
class Failure:
    """Why a job failed, hangs in startup or logged no iteration, and where."""
    kind: str
    message: str
    line: Optional[int]
    file: Optional[str]
    last_line: Optional[str] = None  # the last line the job printed (a startup hang)


@dataclass(frozen=True)
class Summary:
    job: str
    files: list[str]
    framework: str
    status: str
    iterations_seen: int
    steps_seen: int
    last_iteration: Optional[int]
    last_step: Optional[int]
    train_iters: Optional[int]
    iter_time_ms: Optional[IterTime]
    iter_time_last_ms: Optional[float]
    tflops_per_gpu: Tflops
    mfu: Optional[float]  # a fraction of the GPU's peak: the model's FLOPs only (or the log's own MFU)
    gpu: Optional[str]
    precision: Optional[str]
    gpu_peak_tflops: Optional[float]
    gpu_peak_source: Optional[str]
    tokens_per_sec_computed: Optional[float]
    tokens_per_sec_source: Optional[str]
    checks: list[str]  # what makes the figures doubtful
    params_billion: Optional[float]  # parameters, in billions
    world_size: Optional[int]
    global_batch: Optional[int]
    seq_length: Optional[int]
    config: ModelConfig
    activation_checkpointing: Optional[bool]
    startup_s: Optional[float]
    startup_note: Optional[str]  # why startup_s is unknown, when it is
    run_time_s: Optional[float]
    startup: list[dict[str, Any]]  # {name, offset_s}: the startup timeline
    offload_ms: dict[str, float]
    timers_ms: dict[str, dict[str, Any]]  # name -> {group, mean_ms, count}
    breakdown: list[dict[str, Any]]  # {name, parent, depth, mean_ms, share, overlap, p10_ms, p90_ms}, parents first
    breakdown_whole_ms: Optional[float]
    breakdown_whole: Optional[str]
    offload_share: Optional[float]
    startup_timers: list[dict[str, Any]]  # {name, ms[, count]}: timers that are no part of an iteration
    memory: Memory
    checkpoints: list[dict[str, Any]]
    loss_last: Figure
    eval_last: dict[str, Figure]  # every evaluation metric's latest value
    eval_metric: Optional[str]  # the one a row shows (a validation loss first)
    eval_value: Figure
    eval_iteration: Optional[int]
    warnings: dict[str, int]  # kind -> count
    ranks_seen: int
    failure: Optional[Failure]
    started: bool  # the job says it started (a live view tells starting from stuck by it)
    wall_span_s: Optional[float]  # first to last stamp; needs two stamps
    #: the field registry's own summary figures (key -> value), aggregated as each row says
    metrics: dict[str, Optional[float]] = field(default_factory=dict)
    hfu: Optional[float] = None  # the hardware's FLOPs (recomputation counted) over the GPU's peak
    flops_formula: Optional[str] = None  # what computed the FLOPs of an iteration (figures.flops)
    params_source: Optional[str] = None  # where the model's size comes from: the log, or a formula
    iter_time_source: Optional[str] = None  # where the step time is no log's own figure: what gives it
    run_ledger: Optional[RunLedger] = None  # this run's part of its job's time ledger (figures.ledger)
    ledger: Optional[Ledger] = None  # the time ledger of the job this run belongs to, its runs together

    def metric(self, key: str) -> Optional[float]:
        return self.metrics.get(key)

    @property
    def last_progress(self) -> Optional[int]:
        """The last iteration, else the last step (a run that logs steps only)."""
        return self.last_iteration if self.last_iteration is not None else self.last_step

    def with_(self, **changes: Any) -> "Summary":
        return dataclasses.replace(self, **changes)

    def as_dict(self) -> dict[str, Any]:
        """The JSON form: ``schema_version`` first, the registry's metrics at the top level."""
        out: dict[str, Any] = {"schema_version": SCHEMA_VERSION}
        for f in dataclasses.fields(self):
            if f.name == "metrics":
                continue
            out[f.name] = _plain(getattr(self, f.name))
        for key, value in self.metrics.items():
            out[key] = value
        return out


def from_dict(data: dict[str, Any]) -> Summary:
    """A summary read back from its JSON form (``tuimon summary --format json``), the
    same schema version only: a file of another version says so rather than being misread."""
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise ValueError(f"summary schema version {version!r}, this tuimon reads {SCHEMA_VERSION}")
    nested = {"iter_time_ms": IterTime, "tflops_per_gpu": Tflops, "memory": Memory, "config": ModelConfig,
              "failure": Failure, "run_ledger": RunLedger, "ledger": Ledger}
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(Summary):
        if f.name == "metrics":
            continue
        value = data[f.name]
        cls = nested.get(f.name)
        kwargs[f.name] = cls(**value) if cls is not None and value is not None else value
    kwargs["metrics"] = {f.key: data.get(f.key) for f in FIELDS if f.summary}
    return Summary(**kwargs)


_LEAVES = (str, int, float, bool, type(None))


def _plain(value: Any) -> Any:
    # the leaves first: most values are (a dataclass test a value cost a tenth of a reopen)
    if isinstance(value, _LEAVES):
        return value
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    return value


# -- the JSON Schema, derived from the types -------------------------------------------------
_SCALARS: dict[Any, dict[str, Any]] = {float: {"type": "number"}, int: {"type": "integer"}, str: {"type": "string"},
                                       bool: {"type": "boolean"}, type(None): {"type": "null"}}


def _schema_of(tp: Any, scalars: Optional[dict[Any, dict[str, Any]]] = None) -> dict[str, Any]:
    """The JSON Schema of a type hint; ``scalars`` overrides how a scalar is written (the events keep a
    float that is not finite as a string: :mod:`.schemas`)."""
    table = _SCALARS if scalars is None else {**_SCALARS, **scalars}
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        members = [_schema_of(a, scalars) for a in typing.get_args(tp)]
        if all(set(m) == {"type"} for m in members):
            names: list[str] = []
            for m in members:
                names += m["type"] if isinstance(m["type"], list) else [m["type"]]
            return {"type": names}
        return {"anyOf": members}
    if origin is list:
        (item,) = typing.get_args(tp)
        return {"type": "array", "items": _schema_of(item, scalars)}
    if origin in (dict, collections.abc.Mapping):
        _, item = typing.get_args(tp)
        return {"type": "object", "additionalProperties": _schema_of(item, scalars)}
    if tp is Any:
        return {}
    if dataclasses.is_dataclass(tp):
        return _object_schema(tp)
    return dict(table[tp])


def _object_schema(cls: Any, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    props = {f.name: _schema_of(hints[f.name]) for f in dataclasses.fields(cls) if f.name not in skip}
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


def json_schema() -> dict[str, Any]:
    """The JSON Schema of one summary (``tuimon summary --format json`` gives a list of them)."""
    one = _object_schema(Summary, skip=("metrics",))
    one["properties"] = {"schema_version": {"const": SCHEMA_VERSION}, **one["properties"]}
    one["properties"]["status"] = {"enum": list(STATUSES)}
    for f in FIELDS:
        if f.summary:
            one["properties"][f.key] = {"type": ["number", "null"], "description": f"{f.label} ({f.unit}, {f.agg})"}
    one["required"] = list(one["properties"])
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "tuimon job summary",
            "description": __doc__.split("\n\n")[0] if __doc__ else "", "type": "array", "items": one}


def achieved_tflops(t: Tflops) -> tuple[Optional[float], bool]:
    """The TFLOPs per GPU a run achieved, and whether they are the log's own: the rate the log
    prints first (its statement wins over a formula); else the computed rate of what the GPUs
    executed (recomputation counted, seed 001's TFLOPs) where the log says whether activations
    are recomputed, else of the model's work."""
    if t.reported is not None:
        return t.reported, True
    return (t.hardware if t.hardware is not None else t.computed), False
