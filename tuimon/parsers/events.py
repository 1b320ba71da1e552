"""Typed, immutable event records produced by the parsers.

Every event carries the file it came from, its 1-based line number, the rank (or
node label) the line was attributed to and the wall-clock time the line (or the
nearest earlier line) gives.  Fields a line does not give stay None.

Events are named tuples: immutable like frozen dataclasses but about five times
cheaper to build, which matters at millions of lines.  Mappings inside events are
read-only dicts.  ``type`` names the kind; ``to_dict()`` gives the flat JSON form.
Named tuples cannot inherit fields, so each record spells out the five common
ones (file, line, rank, node, wall_time) first; tests check they all agree.
"""
from __future__ import annotations

import math
from typing import Any, Mapping, NamedTuple, Optional, Union


class FrozenDict(dict):
    """A read-only dict: mappings inside events cannot be changed after the fact,
    and (unlike a mappingproxy) events stay picklable for the ingest process."""

    __slots__ = ()

    def _readonly(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("event mappings are read-only")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _readonly  # type: ignore[assignment]
    __ior__ = _readonly  # type: ignore[assignment]

    def __reduce__(self):
        return (FrozenDict, (dict(self),))

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(sorted(self.items())))


_EMPTY: Mapping[str, Any] = FrozenDict()


def frozen_map(values: Optional[Mapping[str, Any]]) -> Mapping[str, Any]:
    if not values:
        return _EMPTY
    return FrozenDict(values)


def _to_dict(self: Any) -> dict[str, Any]:
    """Flat JSON-ready dict: ``type``, ``file``, ``line`` and the fields at top level."""
    out: dict[str, Any] = {"type": self.type}
    for name, value in zip(self._fields, self):
        # most fields are None, str or int: no call for them (events --follow writes 20,000 a second)
        out[name] = value if type(value) in _AS_IS else _jsonable(value)
    return out


_AS_IS = frozenset({type(None), str, int, bool})


def _jsonable(value: Any) -> Any:
    kind = type(value)
    if kind in _AS_IS:
        return value
    if kind is float:
        # JSON has no inf/nan: keep them as strings rather than lose them.
        if value != value:
            return "nan"
        if value in (math.inf, -math.inf):
            return "inf" if value > 0 else "-inf"
        return value
    # (exact types first: asking the Mapping ABC is a slow isinstance, and it was most of the output's cost)
    if kind is FrozenDict or kind is dict or isinstance(value, Mapping):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [_jsonable(v) for v in value]
    if isinstance(value, float):  # a float subclass (numpy's float64)
        return _jsonable(float(value))
    return value


class RunConfig(NamedTuple):
    """Partial run configuration: None means this line did not say."""

    @property
    def type(self) -> str:
        return "run_config"

    def to_dict(self) -> dict[str, Any]:
        return _to_dict(self)

    file: str = ""
    line: int = 0
    rank: Optional[int] = None
    node: Optional[str] = None
    wall_time: Optional[float] = None  # POSIX seconds; naive log stamps are read as UTC
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
    total_params: Optional[int] = None  # the same, counted (llm.c's num_parameters)
    gpu: Optional[str] = None  # the accelerator as the log names it ("NVIDIA A100-SXM4-80GB")
    precision: Optional[str] = None  # bf16, fp16 or fp32: what the run computes in
    # the model's shape beyond the seed's GPT (figures.flops): MLP width, grouped attention, gated MLP,
    # an output layer of its own, mixture of experts
    ffn_hidden_size: Optional[int] = None
    num_query_groups: Optional[int] = None
    kv_channels: Optional[int] = None
    swiglu: Optional[bool] = None
    untied: Optional[bool] = None
    output_gate: Optional[bool] = None  # Megatron's attention_output_gate
    linear_bias: Optional[bool] = None  # Megatron's add_bias_linear (its default: on)
    rmsnorm: Optional[bool] = None  # RMSNorm (no bias) rather than LayerNorm
    num_experts: Optional[int] = None
    moe_topk: Optional[int] = None
    moe_ffn_hidden_size: Optional[int] = None
    moe_shared_ffn_size: Optional[int] = None
    ep: Optional[int] = None  # expert-parallel size
    # Megatron's count of one model-parallel rank's parameters ("(tensor, pipeline) ... rank (1, 0): N")
    step_time_source: Optional[str] = None  # where the step time comes from, where it is no log's figure
    model_rank: Optional[str] = None  # "1, 0": the rank's place in the model-parallel grid
    rank_params: Optional[int] = None


class Iteration(NamedTuple):
    @property
    def type(self) -> str:
        return "iteration"

    def to_dict(self) -> dict[str, Any]:
        return _to_dict(self)

    file: str = ""
    line: int = 0
    rank: Optional[int] = None
    node: Optional[str] = None
    wall_time: Optional[float] = None  # POSIX seconds; naive log stamps are read as UTC
    iteration: Optional[int] = None
    train_iters: Optional[int] = None
    elapsed_ms: Optional[float] = None
    lr: Optional[float] = None
    global_batch: Optional[int] = None
    consumed_samples: Optional[int] = None
    consumed_tokens: Optional[int] = None
    losses: Mapping[str, float] = _EMPTY
    loss_scale: Optional[float] = None
    grad_norm: Optional[float] = None
    skipped: Optional[int] = None
    nan_count: Optional[int] = None
    tflops_reported: Optional[float] = None
    samples_per_sec: Optional[float] = None
    tokens_per_sec: Optional[float] = None
    tokens_per_gpu_per_sec: Optional[float] = None
    mfu: Optional[float] = None  # percent, as the framework reports it (GPT-NeoX)
    energy_j_per_gpu: Optional[float] = None  # joules an iteration, per GPU (Megatron's --log-energy)
    power_w_per_gpu: Optional[float] = None  # watts per GPU over the interval (the same)


class Step(NamedTuple):
    """An optimizer/engine step report that is not a Megatron iteration line
    (DeepSpeed ``step=N, skipped=K``, pipeline-engine ``steps: N loss: ...``)."""

    @property
    def type(self) -> str:
        return "step"

    def to_dict(self) -> dict[str, Any]:
        return _to_dict(self)

    file: str = ""
    line: int = 0
    rank: Optional[int] = None
    node: Optional[str] = None
    wall_time: Optional[float] = None  # POSIX seconds; naive log stamps are read as UTC
    step: Optional[int] = None
    skipped: Optional[int] = None
    lr: Optional[float] = None
    loss: Optional[float] = None
    elapsed_ms: Optional[float] = None
    samples_per_sec: Optional[float] = None


class Throughput(NamedTuple):
    """Throughput reported on its own line, attached to the latest iteration."""

    @property
    def type(self) -> str:
        return "throughput"

    def to_dict(self) -> dict[str, Any]:
        return _to_dict(self)

    file: str = ""
    line: int = 0
    rank: Optional[int] = None
    node: Optional[str] = None
    wall_time: Optional[float] = None  # POSIX seconds; naive log stamps are read as UTC
    iteration: Optional[int] = None
    tflops_reported: Optional[float] = None
    samples_per_sec: Optional[float] = None
    iteration_time_s: Optional[float] = None
    tokens_per_sec: Optional[float] = None
    tokens_per_gpu_per_sec: Optional[float] = None
    mfu: Optional[float] = None  # as the log prints it: percent of peak


class Timers(NamedTuple):
    @property
    def type(self) -> str:
        return "timers"

    def to_dict(self) -> dict[str, Any]:
        return _to_dict(self)

    file: str = ""
    line: int = 0
    rank: Optional[int] = None
    node: Optional[str] = None
    wall_time: Optional[float] = None  # POSIX seconds; naive log stamps are read as UTC
    timers: Mapping[str, float] = _EMPTY  # name -> ms
    groups: Mapping[str, str] = _EMPTY  # name -> forward/backward/optimizer/offload/...
    iteration: Optional[int] = None


class Memory(NamedTuple):
    @property
    def type(self) -> str:
        return "memory"

    def to_dict(self) -> dict[str, Any]:
        return _to_dict(self)

    file: str = ""
    line: int = 0
    rank: Optional[int] = None
    node: Optional[str] = None
    wall_time: Optional[float] = None  # POSIX seconds; naive log stamps are read as UTC
    label: Optional[str] = None
    gpu_allocated_mb: Optional[float] = None
    gpu_max_allocated_mb: Optional[float] = None
    gpu_reserved_mb: Optional[float] = None
    gpu_max_reserved_mb: Optional[float] = None
    cpu_used_gb: Optional[float] = None
    cpu_percent: Optional[float] = None


class Milestone(NamedTuple):
    """A startup milestone.  ``duration_s`` is set when the line reports how long
    the phase took (e.g. kernel compilation time) rather than when it happened."""

    @property
    def type(self) -> str:
        return "milestone"

    def to_dict(self) -> dict[str, Any]:
        return _to_dict(self)

    file: str = ""
    line: int = 0
    rank: Optional[int] = None
    node: Optional[str] = None
    wall_time: Optional[float] = None  # POSIX seconds; naive log stamps are read as UTC
    name: str = ""
    duration_s: Optional[float] = None
    detail: Optional[str] = None


class Checkpoint(NamedTuple):
    @property
    def type(self) -> str:
        return "checkpoint"

    def to_dict(self) -> dict[str, Any]:
        return _to_dict(self)

    file: str = ""
    line: int = 0
    rank: Optional[int] = None
    node: Optional[str] = None
    wall_time: Optional[float] = None  # POSIX seconds; naive log stamps are read as UTC
    iteration: Optional[int] = None
    save_ms: Optional[float] = None
    path: Optional[str] = None


class Resume(NamedTuple):
    """A run loading its training state from a checkpoint to go on from it (Megatron's ``loading
    checkpoint from DIR at iteration N``, torchtitan's ``Loading the checkpoint from .../step-N.``,
    DeepSpeed's ``global_stepN``, the Trainer's ``Continuing training from global step N``):
    ``iteration`` is the last one the checkpoint holds, what the run goes on after."""

    @property
    def type(self) -> str:
        return "resume"

    def to_dict(self) -> dict[str, Any]:
        return _to_dict(self)

    file: str = ""
    line: int = 0
    rank: Optional[int] = None
    node: Optional[str] = None
    wall_time: Optional[float] = None  # POSIX seconds; naive log stamps are read as UTC
    iteration: Optional[int] = None
    path: Optional[str] = None


class Evaluation(NamedTuple):
    """An evaluation's figures at a step: validation and test losses, perplexities,
    accuracies, named as the log names them (``val lm loss``, ``eval_loss``, ``val_loss``,
    ``eval_accuracy``).  No training loss: a run's steps are :class:`Iteration` and :class:`Step`."""

    @property
    def type(self) -> str:
        return "eval"

    def to_dict(self) -> dict[str, Any]:
        return _to_dict(self)

    file: str = ""
    line: int = 0
    rank: Optional[int] = None
    node: Optional[str] = None
    wall_time: Optional[float] = None  # POSIX seconds; naive log stamps are read as UTC
    iteration: Optional[int] = None  # the step evaluated at, where the log says
    metrics: Mapping[str, float] = _EMPTY  # name -> value


class LogWarning(NamedTuple):
    """A warning a run printed (a rank's stderr, mostly): counted by kind, so a job whose
    ``.err`` holds nothing else still says what its ranks complained of."""

    @property
    def type(self) -> str:
        return "warning"

    def to_dict(self) -> dict[str, Any]:
        return _to_dict(self)

    file: str = ""
    line: int = 0
    rank: Optional[int] = None
    node: Optional[str] = None
    wall_time: Optional[float] = None  # POSIX seconds; naive log stamps are read as UTC
    kind: str = "python"  # nccl, process-group, python (UserWarning...), torch (glog W lines)
    message: str = ""


#: the milestone of a log's first stamp (the engine's, matched line or not): a reference point, no phase
LOG_START = "log-start"
#: torch's first glog line (``W0519 20:23:14.721000 ...``): a stamp without a year, its detail "MMDD HH:MM:SS.ffffff"
GLOG_START = "glog-start"
#: torch's launcher banner (``W0519 20:23:14.721000 140 torch/distributed/run.py:793] *****``), once a launch:
#: a stamp like GLOG_START's; one after a run logged progress launches the next run of its file
GLOG_LAUNCH = "glog-launch"
#: milestones that mark an end, not a step of startup: a job script's ``END TIME``, MLPerf's ``run_stop``
JOB_END, RUN_STOP = "job-end", "run-stop"
#: where a log says its own startup ends (MLPerf's ``run_start``: its init time ends there, not at a first step)
RUN_START = "run-start"
#: a stated time from the process start to a later milestone (Megatron's "time to initialize megatron
#: (seconds): 41.829", printed just before "[after megatron is initialized] datetime: ..."): its
#: duration_s counted back from that milestone's stamp (its detail names it) is when the process began
INIT_TIME = "init-time"
NOT_PHASES = (LOG_START, JOB_END, RUN_START, RUN_STOP, GLOG_START, GLOG_LAUNCH, INIT_TIME)
FAILURE_KINDS = ("oom", "cuda", "nccl", "hardware", "traceback", "cancelled", "killed", "script", "nan",
                 "no-iterations")


class Failure(NamedTuple):
    @property
    def type(self) -> str:
        return "failure"

    def to_dict(self) -> dict[str, Any]:
        return _to_dict(self)

    file: str = ""
    line: int = 0
    rank: Optional[int] = None
    node: Optional[str] = None
    wall_time: Optional[float] = None  # POSIX seconds; naive log stamps are read as UTC
    kind: str = "traceback"
    message: str = ""


class Exit(NamedTuple):
    @property
    def type(self) -> str:
        return "exit"

    def to_dict(self) -> dict[str, Any]:
        return _to_dict(self)

    file: str = ""
    line: int = 0
    rank: Optional[int] = None
    node: Optional[str] = None
    wall_time: Optional[float] = None  # POSIX seconds; naive log stamps are read as UTC
    iteration: Optional[int] = None
    status: Optional[int] = None


class Truncated(NamedTuple):
    """The followed file shrank or was replaced; reading restarted at 0."""

    @property
    def type(self) -> str:
        return "truncated"

    def to_dict(self) -> dict[str, Any]:
        return _to_dict(self)

    file: str = ""
    line: int = 0
    rank: Optional[int] = None
    node: Optional[str] = None
    wall_time: Optional[float] = None  # POSIX seconds; naive log stamps are read as UTC
    reason: str = ""


Event = Union["RunConfig", "Iteration", "Step", "Throughput", "Timers", "Memory", "Milestone", "Checkpoint",
              "Resume", "Evaluation", "LogWarning", "Failure", "Exit", "Truncated"]

EVENT_TYPES: dict[str, type] = {
    cls(file="", line=0).type: cls
    for cls in (RunConfig, Iteration, Step, Throughput, Timers, Memory, Milestone,
                Checkpoint, Resume, Evaluation, LogWarning, Failure, Exit, Truncated)
}
#: the event types whose JSON is their fields at its top level (``_to_dict``): the compiled core
#: writes their lines (engine.native.json_lines), each as Python's encoder writes it
FLAT_TYPES: tuple[type, ...] = tuple(EVENT_TYPES.values())
