"""DeepSpeed engine lines (also inside Megatron-DeepSpeed, HF+DeepSpeed, ZeRO-Offload/Infinity).

``[ts] [INFO] [logging.py:N:log_dist] [Rank R] step=N, skipped=K, lr=[...]``,
``[timer.py:N:stop] e/N, SamplesPerSec=x`` (and the newer
``epoch=E/micro_step=M/global_step=N, RunningAvgSamplesPerSec=...``), the pipeline
engine's ``steps: N loss: x iter time (s): y samples/sec: z`` and
``see_memory_usage`` reports (MA/Max_MA/CA/Max_CA in GB, then CPU virtual memory).
Timer lines are handled by :mod:`parsers.timers`.
"""
from __future__ import annotations

from typing import Optional

from .base import LineContext, LineParser, Sample, compile_sniff
from .common import RANK_TAG, rank_or
from .events import Checkpoint, Event, Memory, Milestone, RunConfig, Step, Throughput
from .numbers import to_float, to_int
from .patterns import lazy

_STEP = lazy(r"step=(\d+), skipped=(\d+), lr=\[([^\],]*)")
_SAMPLES = lazy(r"\[timer\.py:\d+:stop\] (\d+)/(\d+), SamplesPerSec=(\S+)")
# timer.py's ThroughputTimer: "epoch=E/micro_step=M/global_step=N, RunningAvgSamplesPerSec=..." (0.10 on) and,
# before it, "E/N, RunningAvgSamplesPerSec=..." (epoch and global step; 0.6-0.9)
_SAMPLES_NEW = lazy(r"(?:global_step=|\] \d{1,9}/)(\d+), RunningAvgSamplesPerSec=([^,\s]+), "
                    r"CurrSamplesPerSec=([^,\s]+)")
# the same line's "MemAllocated=12.3GB, MaxMemAllocated=20.5GB" (GB of 2**30 bytes, as see_memory_usage's)
_SAMPLES_MEM = lazy(r"MemAllocated=([^,\s]+?)GB, MaxMemAllocated=([^,\s]+?)GB")
# how ZeRO is set up, from the engine's configuration print ("zero_config ....... stage=3 ...
# offload_param=DeepSpeedZeroOffloadParamConfig(device='cpu', ...) offload_optimizer=...") or,
# in older versions, ZeRO stage 2's "CPU Offload: True"
_ZERO_STAGE = lazy(r"zero_config \.+ stage=(\d)")
_ZERO_CPU_OFFLOAD = lazy(r"\[stage(?:2|_1_and_2)\.py:\d+:__init__\] CPU Offload: True\s*$")
_ZERO_OFFLOAD = lazy(r"offload_(param|optimizer)=\w+\(device='(?:cpu|nvme)'|(cpu_offload)=True")
# the same configuration as multi-line JSON ("zero_config .... {" / "json = {" then one key a line,
# the closing brace at the start of a line): its keys come one a line, so they are read one a line
_JSON_OPEN = lazy(r"(?:zero_config \.+ |json = )\{\s*$")
_JSON_KEY = lazy(r'^\s*"(stage|offload_param|offload_optimizer|device|cpu_offload)": ("?[\w{]+"?)')
_JSON_CLOSE = lazy(r"^\}\s*$")
# the pipeline engine's train_batch: "steps: {global_steps} loss: {agg_train_loss:0.4f} ", since 0.14.1 (MoE
# pipelines) each additional loss as "{name}: {value:0.4f} ", then "iter time (s): {:0.3f} samples/sec: {:0.3f}"
_PIPE = lazy(r"steps: (\d+) loss: (\S+) (?:\S+: \S+ )*?iter time \(s\): (\S+) samples/sec: (\S+)")
_MA = lazy(r"MA (\S+) GB\s+Max_MA (\S+) GB\s+CA (\S+) GB\s+Max_CA (\S+) GB")
_CPU = lazy(r"CPU Virtual Memory:\s+used = (\S+) GB, percent = (\S+)%")
_MEM_LABEL = lazy(r"see_memory_usage\] (.*)")
#: also the compiled core's (tuimon._core.FieldLines): the hooks' own regexes, the groups they read (ints
#: as to_int reads them, the rest as to_float does), the [Rank N] tag rank_or reads, the older samples line
#: the hook reads first, the memory figures searched after the samples
CORE_STEP = {"pattern": _STEP.pattern, "groups": [1, 2, 3], "ints": [1, 2], "tag": RANK_TAG}
CORE_SAMPLES = {"pattern": _SAMPLES_NEW.pattern, "groups": [1, 3], "ints": [1], "hook_if": _SAMPLES.pattern,
                "then": {"pattern": _SAMPLES_MEM.pattern, "groups": [1, 2]}}
CORE_PIPE = {"pattern": _PIPE.pattern, "groups": [1, 2, 3, 4], "ints": [1]}
# a checkpoint: "Saving model checkpoint: /ckpt/global_step1000/mp_rank_00_model_states.pt", and (0.10 on)
# "[Torch] Checkpoint global_step1000 is about to be saved!" ... "[Torch] Checkpoint global_step1000 is ready now!"
_CKPT_SAVING = lazy(r"Saving model checkpoint: (\S*?global_step(\d{1,12}))/\S*")
#: the label of the memory figures of a samples line
SAMPLES_MEMORY = "throughput timer"
_CKPT_STAGE = lazy(r"\] Checkpoint global_step(\d{1,12}) is (about to be saved|ready now)!")


class DeepSpeedParser(LineParser):
    name = "deepspeed"
    READS = ("DeepSpeed's engine: config block, step= and samples/s lines, ZeRO-Offload/Infinity, "
             "DeepSpeed-Chat, ezpz on Aurora/Polaris")
    framework = "deepspeed"
    SNIFF = compile_sniff(r"\[logging\.py:\d+:log_dist\]", r"\[timer\.py:\d+:stop\]", r"see_memory_usage",
                          r"\[runner\.py:\d+:main\]", r"DeepSpeed info", r"steps: \d+ loss: ",
                          r"RunningAvgSamplesPerSec")
    ROUTES = ((r"step=\d+, skipped=", "_on_step"), (r"SamplesPerSec=", "_on_samples"),
              (r"see_memory_usage", "_on_memory"), (r"steps: \d+ loss", "_on_pipe"),
              (r"Initializing TorchBackend", "_on_init"), (r"DeepSpeed info: ", "_on_init"),
              # the line its handler reads (a bare " ...." took every argument and "(min, max)" timer line)
              (r"zero_config \.+ stage=\d", "_on_config_print"), (r"CPU Offload: ", "_on_cpu_offload"),
              (r"Saving model checkpoint: ", "_on_checkpoint"), (r"\] Checkpoint global_step", "_on_checkpoint"),
              (r"(?:zero_config \.+ |json = )\{\s*$", "_on_json_open"),
              # at a line's start, or after a launcher's prefix ("0: ", "[rank0]: "): the handler sees the body
              (r'(?:^|:) ?\s*"(?:stage|offload_param|offload_optimizer|device|cpu_offload)": ', "_on_json_key"),
              (r"(?:^|:) ?\}[ \t\r]*$", "_on_json_close"))
    # the step, samples and pipeline lines into rows (FieldLines by CORE_STEP, CORE_SAMPLES, CORE_PIPE)
    COLUMNS = {"_on_step": "ds-step", "_on_samples": "ds-samples", "_on_pipe": "ds-pipe"}
    ONCE_FLAGS = ("_announced",)

    SAMPLES = (
        Sample("[2024-01-01 10:00:01,100] [INFO] [logging.py:96:log_dist] [Rank 0] Saving model checkpoint: "
               "/ckpt/global_step1000/mp_rank_00_model_states.pt", "checkpoint",
               {"iteration": 1000, "path": "/ckpt/global_step1000"}),
        Sample("[2024-01-01 10:00:05,100] [INFO] [torch_checkpoint_engine.py:33:commit] [Torch] Checkpoint "
               "global_step1000 is ready now!", "checkpoint", {"iteration": 1000, "save_ms": 4100.0},
               context=("[2024-01-01 10:00:01,000] [INFO] [logging.py:96:log_dist] [Rank 0] [Torch] Checkpoint "
                        "global_step1000 is about to be saved!",)),
        # the engine reports step=0 when it is built: the run's framework, no step taken
        Sample("[2023-11-02 18:34:13,122] [INFO] [logging.py:96:log_dist] [Rank 0] step=0, skipped=0, "
               "lr=[0.0, 0.0], mom=[(0.9, 0.999), (0.9, 0.999)]", "run_config", {"framework": "deepspeed"}),
        Sample("[2023-11-02 18:34:13,122] [INFO] [logging.py:96:log_dist] [Rank 0] step=0, skipped=0, "
               "lr=[0.0, 0.0], mom=[(0.9, 0.999), (0.9, 0.999)]", "milestone",
               {"name": "engine-built", "wall_time": 1698950053.122},
               context=("[2023-11-02 18:34:13,000] [INFO] [logging.py:96:log_dist] [Rank 0] step=0, skipped=0, "
                        "lr=[0.0]",)),
        Sample("[2023-11-02 18:40:13,122] [INFO] [logging.py:96:log_dist] [Rank 0] step=10, skipped=0, "
               "lr=[0.0001, 0.0001], mom=[(0.9, 0.999), (0.9, 0.999)]",
               "step", {"step": 10, "skipped": 0, "lr": 0.0001, "rank": 0, "wall_time": 1698950413.122}),
        Sample("[2022-06-29 01:36:30,237] [INFO] [logging.py:69:log_dist] [Rank 0] step=50, skipped=0, "
               "lr=[2.34375e-06, 2.34375e-06], mom=[(0.9, 0.999), (0.9, 0.999)]",
               "step", {"step": 50, "lr": 2.34375e-06}),
        Sample("[2022-06-29 01:36:30,237] [INFO] [timer.py:181:stop] 0/50, SamplesPerSec=0.25199842464335126",
               "throughput", {"iteration": 50, "samples_per_sec": 0.25199842464335126}),
        Sample("[2022-08-29 06:58:56,176] [INFO] [timer.py:198:stop] 0/20, RunningAvgSamplesPerSec=232.7340551694273, "
               "CurrSamplesPerSec=227.48090316379353, MemAllocated=0.36GB, MaxMemAllocated=15.06GB",
               "throughput", {"iteration": 20, "samples_per_sec": 227.48090316379353}),
        Sample("[2022-08-29 06:58:56,176] [INFO] [timer.py:198:stop] 0/20, RunningAvgSamplesPerSec=232.7340551694273, "
               "CurrSamplesPerSec=227.48090316379353, MemAllocated=0.36GB, MaxMemAllocated=15.06GB",
               "memory", {"gpu_allocated_mb": 0.36 * 1024, "gpu_max_allocated_mb": 15.06 * 1024}),
        Sample("[2024-01-01 10:00:00,000] [INFO] [timer.py:260:stop] epoch=0/micro_step=10/global_step=10, "
               "RunningAvgSamplesPerSec=27.5, CurrSamplesPerSec=28.1, MemAllocated=1.2GB, MaxMemAllocated=3.4GB",
               "throughput", {"iteration": 10, "samples_per_sec": 28.1}),
        Sample("[2024-01-01 10:00:00,000] [INFO] [timer.py:260:stop] epoch=0/micro_step=10/global_step=10, "
               "RunningAvgSamplesPerSec=27.5, CurrSamplesPerSec=28.1, MemAllocated=1.25GB, MaxMemAllocated=3.5GB",
               "memory", {"label": "throughput timer", "gpu_allocated_mb": 1280.0, "gpu_max_allocated_mb": 3584.0}),
        Sample("[2023-07-13 19:22:32,431] [INFO] [config.py:959:print]   zero_config .................. stage=3 "
               "contiguous_gradients=True offload_param=DeepSpeedZeroOffloadParamConfig(device='nvme', "
               "nvme_path=PosixPath('/raid/scratch'), buffer_count=5) offload_optimizer=DeepSpeedZeroOffloadOptimizerConfig"
               "(device='cpu', nvme_path=None) sub_group_size=50000000", "run_config", {"framework": "zero-infinity"}),
        Sample("}", "run_config", {"framework": "zero-infinity"},
               context=("[2022-07-02 05:10:27,356] [INFO] [config.py:1048:print]   zero_config .................. {",
                        '    "stage": 3, ', '    "overlap_comm": true, ', '    "offload_param": {',
                        '        "device": "cpu", ', '        "nvme_path": null, ', "    }, ",
                        '    "offload_optimizer": {', '        "device": "cpu", ', "    }, ",
                        '    "legacy_stage1": false')),
        Sample("}", "run_config", {"framework": "zero-offload"},
               context=("[2022-07-02 05:00:42,822] [INFO] [config.py:1050:print]   json = {",
                        '    "zero_optimization": {', '        "stage": 2, ', '        "cpu_offload": true, ',
                        "    }, ", '    "steps_per_print": 10')),
        Sample("}", None, context=("[2022-07-02 05:00:42,822] [INFO] [config.py:1048:print]   zero_config .... {",
                                   '    "stage": 3, ', '    "offload_param": null, ',
                                   '    "offload_optimizer": {', '        "device": "none", ', "    }")),
        Sample("[2024-01-01 10:00:00,000] [INFO] [config.py:984:print]   zero_config .................. stage=1 "
               "offload_param=None offload_optimizer=DeepSpeedZeroOffloadOptimizerConfig(device='cpu', nvme_path=None)",
               "run_config", {"framework": "zero-offload"}),
        Sample("[2023-07-13 19:22:32,431] [INFO] [config.py:959:print]   zero_config .................. stage=3 "
               "offload_param=None offload_optimizer=DeepSpeedZeroOffloadOptimizerConfig(device='none') "
               "cpu_offload_param=None cpu_offload=None", None),
        Sample("[2022-07-02 05:00:15,099] [INFO] [stage2.py:115:__init__] CPU Offload: True", "run_config",
               {"framework": "zero-offload"}),
        Sample("[2022-07-02 05:00:15,099] [INFO] [stage2.py:115:__init__] CPU Offload: False", None),
        Sample("[2023-03-01 10:00:00,000] [INFO] [stage_1_and_2.py:133:__init__] CPU Offload: True", "run_config",
               {"framework": "zero-offload"}),
        Sample("steps: 10 loss: 2.5123 moe_loss: 0.0125 iter time (s): 1.250 samples/sec: 51.200",
               "step", {"step": 10, "loss": 2.5123, "elapsed_ms": 1250.0, "samples_per_sec": 51.2}),
        Sample("steps: 2 loss: 12.8004 iter time (s): 145.206 samples/sec: 7.052",
               "step", {"step": 2, "loss": 12.8004, "elapsed_ms": 145206.0, "samples_per_sec": 7.052}),
        Sample("[2022-06-29 01:22:16,071] [INFO] [utils.py:823:see_memory_usage] MA 0.0 GB         Max_MA 0.0 GB"
               "         CA 0.0 GB         Max_CA 0 GB ",
               "memory", {"label": "Before Building Model", "gpu_allocated_mb": 0.0, "gpu_max_reserved_mb": 0.0},
               context=("[2022-06-29 01:22:16,070] [INFO] [utils.py:822:see_memory_usage] Before Building Model",)),
        Sample("[2021-05-26 04:37:53,114] [INFO] [utils.py:589:see_memory_usage] MA 2.34 GB         Max_MA 3.81 GB"
               "         CA 5.4 GB         Max_CA 5 GB ",
               "memory", {"gpu_allocated_mb": 2.34 * 1024, "gpu_max_allocated_mb": 3.81 * 1024,
                          "gpu_reserved_mb": 5.4 * 1024, "gpu_max_reserved_mb": 5 * 1024}),
        Sample("[2022-06-29 01:22:16,071] [INFO] [utils.py:831:see_memory_usage] CPU Virtual Memory:  used = "
               "3.08 GB, percent = 3.4%", "memory", {"cpu_used_gb": 3.08, "cpu_percent": 3.4}),
    )

    def __init__(self, file: str = "") -> None:
        super().__init__(file)
        self._mem_label: Optional[str] = None
        self._announced = False
        # a multi-line JSON configuration being read: its ZeRO stage, the offload section
        # its "device" keys belong to, and what is offloaded
        self._json: Optional[dict] = None
        self._ckpt_start: Optional[tuple[int, float]] = None  # (step, stamp) of a save under way

    def _on_checkpoint(self, body: str, ctx: LineContext) -> list[Event]:
        saving = _CKPT_SAVING.search(body)
        if saving:
            return [self.make(Checkpoint, ctx, iteration=int(saving.group(2)), path=saving.group(1)[:300])]
        m = _CKPT_STAGE.search(body)
        if not m:
            return []
        step = int(m.group(1))
        if m.group(2) == "about to be saved":
            self._ckpt_start = (step, ctx.wall_time) if ctx.wall_time is not None else None
            return []
        # each rank commits its shards and says so: the save ends with the last of them
        start = self._ckpt_start
        if start is None or start[0] != step or ctx.wall_time is None:
            return [self.make(Checkpoint, ctx, iteration=step)]
        return [self.make(Checkpoint, ctx, iteration=step, save_ms=round((ctx.wall_time - start[1]) * 1000.0, 3))]

    def _on_step(self, body: str, ctx: LineContext) -> list[Event]:
        m = _STEP.search(body)
        if not m:
            return []
        if m.group(1) == "0":
            return self._built(ctx)
        return self._step(to_int(m.group(1)), to_int(m.group(2)), to_float(m.group(3)), rank_or(body, ctx.rank), ctx)

    def _built(self, ctx: LineContext) -> list[Event]:
        # the engine reports its progress once when it is built (global_steps counts the steps taken,
        # and none is): no step, so a run's startup ends at its first real one; the moment is a phase of
        # it (seed 002 took it for the first step)
        built = [self.make(Milestone, ctx, name="engine-built")]
        return built if self._announced else self.announce([self.make(RunConfig, ctx)] + built, ctx)

    def _step(self, step: Optional[int], skipped: Optional[int], lr: Optional[float], rank: Optional[int],
              ctx: LineContext) -> list[Event]:
        return self.announce([Step(file=self.file, line=ctx.line, rank=rank, node=ctx.node, wall_time=ctx.wall_time,
                                   step=step, skipped=skipped, lr=lr)], ctx)

    def step_into(self, rows: list[tuple], values: list, frame: tuple, wall: Optional[float]) -> Optional[list[Event]]:
        """A step line the compiled core read (:data:`CORE_STEP`), into ``rows`` (None) where its
        event is a row's (a tuple of :class:`~.columns.StepRows`), else its events: the engine's
        step 0, the first line that says the framework."""
        step, skipped, lr, tag = values
        rank = frame[3] if tag is None else tag
        if step == 0:
            return self._built(self.context_of(frame, wall))
        if not self.reported("_announced"):
            return self._step(step, skipped, lr, rank, self.context_of(frame, wall))
        rows.append(_step_row(values, frame, wall))
        return None

    def step_rows(self, values: list[list], frames: list[tuple], walls: list, _iterations: list
                  ) -> Optional[list[tuple]]:
        """The rows of many step lines at once (``step_into``'s), where none makes events (the
        framework said, no engine's step 0); else None."""
        if not self.reported("_announced") or any(v[0] == 0 for v in values):
            return None
        return list(map(_step_row, values, frames, walls))

    def _on_samples(self, body: str, ctx: LineContext) -> list[Event]:
        m = _SAMPLES.search(body)
        if m:
            return self.announce([self.make(Throughput, ctx, iteration=to_int(m.group(2)),
                                             samples_per_sec=to_float(m.group(3)))], ctx)
        m = _SAMPLES_NEW.search(body)
        if not m:
            return []
        allocated = peak = None
        mem = _SAMPLES_MEM.search(body, m.end())
        if mem:
            allocated, peak = (to_float(g) for g in mem.groups()[:2])
        return self._samples(to_int(m.group(1)), to_float(m.group(3)), allocated, peak, ctx)

    def _samples(self, iteration: Optional[int], rate: Optional[float], allocated: Optional[float],
                 peak: Optional[float], ctx: LineContext) -> list[Event]:
        events: list[Event] = [self.make(Throughput, ctx, iteration=iteration, samples_per_sec=rate)]
        if allocated is not None and peak is not None:
            events.append(self.make(Memory, ctx, label=SAMPLES_MEMORY, gpu_allocated_mb=allocated * 1024.0,
                                    gpu_max_allocated_mb=peak * 1024.0))
        return self.announce(events, ctx)

    def samples_into(self, rows: list[tuple], values: list, frame: tuple,
                     wall: Optional[float]) -> Optional[list[Event]]:
        """A samples line of the throughput timer the compiled core read (:data:`CORE_SAMPLES`), into
        ``rows`` (None) where its events are a row's (a tuple of :class:`~.columns.RateRows`), else its
        events (the first line that says the framework)."""
        iteration, rate, allocated, peak = values
        if not self.reported("_announced"):
            return self._samples(iteration, rate, allocated, peak, self.context_of(frame, wall))
        rows.append(_samples_row(values, frame, wall))
        return None

    def samples_rows(self, values: list[list], frames: list[tuple], walls: list, _iterations: list
                     ) -> Optional[list[tuple]]:
        """The rows of many samples lines at once (``samples_into``'s), once the framework is said."""
        return list(map(_samples_row, values, frames, walls)) if self.reported("_announced") else None

    def _on_pipe(self, body: str, ctx: LineContext) -> list[Event]:
        m = _PIPE.search(body)
        if not m:
            return []
        return self._pipe(to_int(m.group(1)), to_float(m.group(2)), to_float(m.group(3)), to_float(m.group(4)), ctx)

    def _pipe(self, step: Optional[int], loss: Optional[float], secs: Optional[float], rate: Optional[float],
              ctx: LineContext) -> list[Event]:
        return self.announce([self.make(Step, ctx, step=step, loss=loss,
                                        elapsed_ms=secs * 1000.0 if secs is not None else None,
                                        samples_per_sec=rate)], ctx)

    def pipe_into(self, rows: list[tuple], values: list, frame: tuple, wall: Optional[float]) -> Optional[list[Event]]:
        """A line of the pipeline engine the compiled core read (:data:`CORE_PIPE`), into ``rows``
        (None) where its event is a row's (a tuple of :class:`~.columns.StepRows`), else its events
        (the first line that says the framework)."""
        step, loss, secs, rate = values
        if not self.reported("_announced"):
            return self._pipe(step, loss, secs, rate, self.context_of(frame, wall))
        rows.append(_pipe_row(values, frame, wall))
        return None

    def pipe_rows(self, values: list[list], frames: list[tuple], walls: list, _iterations: list
                  ) -> Optional[list[tuple]]:
        """The rows of many pipeline lines at once (``pipe_into``'s), once the framework is said."""
        return list(map(_pipe_row, values, frames, walls)) if self.reported("_announced") else None

    def _on_config_print(self, body: str, ctx: LineContext) -> list[Event]:
        """ZeRO-Offload (optimizer states on the CPU or NVMe) or ZeRO-Infinity (stage 3
        with the parameters there too), named as runs are compared: by method."""
        stage = _ZERO_STAGE.search(body)
        if not stage:
            return []
        where = {m.group(1) or m.group(3) for m in _ZERO_OFFLOAD.finditer(body, stage.end())}
        if not where:
            return []
        method = "zero-infinity" if stage.group(1) == "3" and "param" in where else "zero-offload"
        return [self.make(RunConfig, ctx, framework=method)]

    def _on_json_open(self, body: str, ctx: LineContext) -> list[Event]:
        if _JSON_OPEN.search(body):
            self._json = {"stage": None, "section": None, "where": set()}
        return []

    def _on_json_key(self, body: str, ctx: LineContext) -> list[Event]:
        m = _JSON_KEY.match(body)
        if m is None or self._json is None:
            return []
        key, value = m.group(1), m.group(2).strip('"')
        if key == "stage":
            self._json["stage"] = to_int(value) if self._json["stage"] is None else self._json["stage"]
        elif key.startswith("offload_"):
            self._json["section"] = key[len("offload_"):] if value == "{" else None
        elif key == "device" and value in ("cpu", "nvme") and self._json["section"]:
            self._json["where"].add(self._json["section"])
        elif key == "cpu_offload" and value == "true":
            self._json["where"].add("optimizer")
        return []

    def _on_json_close(self, body: str, ctx: LineContext) -> list[Event]:
        if not _JSON_CLOSE.match(body):
            return []
        state, self._json = self._json, None
        if not state or not state["where"]:
            return []
        method = "zero-infinity" if state["stage"] == 3 and "param" in state["where"] else "zero-offload"
        return [self.make(RunConfig, ctx, framework=method)]

    def _on_cpu_offload(self, body: str, ctx: LineContext) -> list[Event]:
        if _ZERO_CPU_OFFLOAD.search(body):
            return [self.make(RunConfig, ctx, framework="zero-offload")]
        return []

    def _on_init(self, body: str, ctx: LineContext) -> list[Event]:
        return self.announce([self.make(Milestone, ctx, name="deepspeed-init")], ctx)

    def _on_memory(self, body: str, ctx: LineContext) -> list[Event]:
        m = _MA.search(body)
        if m:
            gb = [to_float(g) for g in m.groups()]
            mb = [v * 1024.0 if v is not None else None for v in gb]
            return self.announce([self.make(Memory, ctx, label=self._mem_label, gpu_allocated_mb=mb[0],
                                             gpu_max_allocated_mb=mb[1], gpu_reserved_mb=mb[2],
                                             gpu_max_reserved_mb=mb[3])], ctx)
        m = _CPU.search(body)
        if m:
            return self.announce([self.make(Memory, ctx, label=self._mem_label, cpu_used_gb=to_float(m.group(1)),
                                             cpu_percent=to_float(m.group(2)))], ctx)
        m = _MEM_LABEL.search(body)
        if m:
            self._mem_label = m.group(1).strip()[:120] or None
        return []


# the rows of the lines the compiled core read (see DeepSpeedParser.step_into, samples_into, pipe_into)
def _step_row(values: list, frame: tuple, wall: Optional[float]) -> tuple:
    """A step line's row of :class:`~.columns.StepRows` (its rank: its tag's, else its prefix's)."""
    step, skipped, lr, tag = values
    return (frame[0], frame[3] if tag is None else tag, frame[5], wall, step, None, lr, None, None, None, None, None,
            skipped, None)


def _samples_row(values: list, frame: tuple, wall: Optional[float]) -> tuple:
    """A samples line's row of :class:`~.columns.RateRows` (its memory in MB, where it gives both figures)."""
    iteration, rate, allocated, peak = values
    memory = allocated is not None and peak is not None
    return (frame[0], frame[3], frame[5], wall, iteration, None, None, rate, None, 2,
            allocated * 1024.0 if memory else None, peak * 1024.0 if memory else None)


def _pipe_row(values: list, frame: tuple, wall: Optional[float]) -> tuple:
    """A pipeline line's row of :class:`~.columns.StepRows`."""
    step, loss, secs, rate = values
    return (frame[0], frame[3], frame[5], wall, step, loss, None, secs * 1000.0 if secs is not None else None,
            None, None, None, None, None, rate)
