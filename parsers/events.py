"""Typed, immutable event records produced by the parsers.

Every event carries the file it came from, its 1-based line number, and the rank
(or node label) the line was attributed to.  Fields a line does not give stay None.
Mappings inside events are read-only views so that a record cannot be changed
after a parser emitted it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any, ClassVar, Mapping, Optional

_EMPTY: Mapping[str, float] = MappingProxyType({})


def frozen_map(values: Optional[Mapping[str, Any]]) -> Mapping[str, Any]:
    if not values:
        return _EMPTY
    return MappingProxyType(dict(values))


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    file: str = ""
    line: int = 0
    rank: Optional[int] = None
    node: Optional[str] = None
    wall_time: Optional[float] = None  # POSIX seconds; naive log stamps are read as UTC

    type: ClassVar[str] = "event"

    def to_dict(self) -> dict[str, Any]:
        """Flat JSON-ready dict: ``type``, ``file``, ``line`` and the fields at top level."""
        out: dict[str, Any] = {"type": self.type}
        for f in fields(self):
            out[f.name] = _jsonable(getattr(self, f.name))
        return out


def _jsonable(value: Any) -> Any:
    if isinstance(value, float):
        # JSON has no inf/nan: keep them as strings rather than lose them.
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return value
    if isinstance(value, Mapping):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [_jsonable(v) for v in value]
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class RunConfig(Event):
    """Partial run configuration: None means this line did not say."""

    type: ClassVar[str] = "run_config"

    framework: Optional[str] = None
    num_layers: Optional[int] = None
    hidden_size: Optional[int] = None
    num_heads: Optional[int] = None
    seq_length: Optional[int] = None
    vocab_size: Optional[int] = None
    padded_vocab_size: Optional[int] = None
    micro_batch: Optional[int] = None
    global_batch: Optional[int] = None
    tp: Optional[int] = None
    pp: Optional[int] = None
    dp: Optional[int] = None
    world_size: Optional[int] = None
    activation_checkpointing: Optional[bool] = None
    train_iters: Optional[int] = None
    total_params_b: Optional[float] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Iteration(Event):
    type: ClassVar[str] = "iteration"

    iteration: Optional[int] = None
    train_iters: Optional[int] = None
    elapsed_ms: Optional[float] = None
    lr: Optional[float] = None
    global_batch: Optional[int] = None
    consumed_samples: Optional[int] = None
    consumed_tokens: Optional[int] = None
    losses: Mapping[str, float] = field(default_factory=lambda: _EMPTY)
    loss_scale: Optional[float] = None
    grad_norm: Optional[float] = None
    skipped: Optional[int] = None
    nan_count: Optional[int] = None
    tflops_reported: Optional[float] = None
    samples_per_sec: Optional[float] = None
    tokens_per_sec: Optional[float] = None
    tokens_per_gpu_per_sec: Optional[float] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Step(Event):
    """An optimizer/engine step report that is not a Megatron iteration line
    (DeepSpeed ``step=N, skipped=K``, pipeline-engine ``steps: N loss: ...``)."""

    type: ClassVar[str] = "step"

    step: Optional[int] = None
    skipped: Optional[int] = None
    lr: Optional[float] = None
    loss: Optional[float] = None
    elapsed_ms: Optional[float] = None
    samples_per_sec: Optional[float] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Throughput(Event):
    """Throughput reported on its own line, attached to the latest iteration."""

    type: ClassVar[str] = "throughput"

    iteration: Optional[int] = None
    tflops_reported: Optional[float] = None
    samples_per_sec: Optional[float] = None
    iteration_time_s: Optional[float] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Timers(Event):
    type: ClassVar[str] = "timers"

    timers: Mapping[str, float] = field(default_factory=lambda: _EMPTY)  # name -> ms
    groups: Mapping[str, str] = field(default_factory=lambda: _EMPTY)  # name -> forward/backward/optimizer/offload/...
    iteration: Optional[int] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Memory(Event):
    type: ClassVar[str] = "memory"

    label: Optional[str] = None
    gpu_allocated_mb: Optional[float] = None
    gpu_max_allocated_mb: Optional[float] = None
    gpu_reserved_mb: Optional[float] = None
    gpu_max_reserved_mb: Optional[float] = None
    cpu_used_gb: Optional[float] = None
    cpu_percent: Optional[float] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Milestone(Event):
    """A startup milestone.  ``duration_s`` is set when the line reports how long
    the phase took (e.g. kernel compilation time) rather than when it happened."""

    type: ClassVar[str] = "milestone"

    name: str = ""
    duration_s: Optional[float] = None
    detail: Optional[str] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Checkpoint(Event):
    type: ClassVar[str] = "checkpoint"

    iteration: Optional[int] = None
    save_ms: Optional[float] = None
    path: Optional[str] = None


FAILURE_KINDS = ("oom", "nccl", "traceback", "cancelled", "killed", "nan", "no-iterations")


@dataclass(frozen=True, slots=True, kw_only=True)
class Failure(Event):
    type: ClassVar[str] = "failure"

    kind: str = "traceback"
    message: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Exit(Event):
    type: ClassVar[str] = "exit"

    iteration: Optional[int] = None
    status: Optional[int] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Truncated(Event):
    """The followed file shrank or was replaced; reading restarted at 0."""

    type: ClassVar[str] = "truncated"

    reason: str = ""


EVENT_TYPES: dict[str, type[Event]] = {
    cls.type: cls
    for cls in (RunConfig, Iteration, Step, Throughput, Timers, Memory, Milestone,
                Checkpoint, Failure, Exit, Truncated)
}
