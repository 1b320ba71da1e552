"""TorchTitan: its metrics line (``step:  10  loss: 11.78140  grad_norm:  9.8978
memory: 29.11GiB(92.83%)  tps: 70,593  tflops: 47.97  mfu: 15.38%``, coloured with
ANSI codes, after ``[titan] 2026-04-18 22:15:44,378 - root - INFO - ``) and the
line that sizes the run (``Trainer is initialized with local batch size 8, global
batch size 16, ..., sequence length 2048, total steps 20000 (warmup 500)``).

A metrics line is a step (loss), the TFLOPs a GPU it reports and the most memory
reserved.  TorchTitan prints no step time: each metrics line is stamped (to the
millisecond), so a step's time is the time between two metrics lines over the steps
between them (``log_freq`` apart); the first line of a run, or of a restart, has none.
Validation lines (``validate step:``) are evaluations (:mod:`parsers.evals`).
"""
from __future__ import annotations

import re
from typing import Optional

from .base import LineContext, LineParser, Sample, compile_sniff
from .common import STAMP_DIFFERENCES, StampClock, strip_ansi
from .events import Checkpoint, Event, Exit, Memory, RunConfig, Step, Throughput
from .numbers import to_float, to_int
from .patterns import lazy

# a metrics line: from "step:" on (a validation line, "validate step: ...", is an evaluation's), its pairs
_VALIDATION, _START, _UNIT = "validate step", "step:", "GiB"
METRIC = lazy(r"([a-z_]+):\s+([-+]?[\d.,]+(?:[eE][-+]?\d+)?|nan|inf)(" + re.escape(_UNIT) + ")?")
#: a typed row's keys: the step and the loss, the rates, and the memory (the one value read with the unit)
_ROW_KEYS = ("step", "loss", "tflops", "tps", "wps", "mfu", "memory")
#: what the compiled core is handed to read metrics lines as _on_metrics does (core/src/metrics.rs: the pairs'
#: grammar is METRIC's, by hand; tuimon.engine.rows builds the reader)
CORE_METRICS = {"skip": (_VALIDATION,), "start": _START, "keys": _ROW_KEYS, "unit": _UNIT}
# "Finished saving the checkpoint (or staging if async is enabled)in 12.34 seconds."; since 2025 "Finished saving
# the checkpoint in 12.34 seconds." or, async, "Finished staging ..." (what blocks training), and at the last step
# "Last step checkpoint completed in 3.21s"
_SAVED = lazy(r"(?:Finished (?:saving|staging) the checkpoint\b.*?\bin (\d{1,9}(?:\.\d+)?) seconds"
              r"|Last step checkpoint completed in (\d{1,9}(?:\.\d+)?)s\b)")
_INIT = lazy(r"local batch size (\d+), global batch size (\d+),.*?sequence length (\d+), total steps (\d+)")
# since 2026-08 the batch is counted in tokens: "... with 16384 tokens per DP rank, 32768 tokens per train step,
# gradient accumulation steps 2, maximum context length 2048, total steps 20000 (warmup 500)"
_INIT_TOKENS = lazy(r"(\d+) tokens per train step,.*?maximum context length (\d+), total steps (\d+)")
# "Applied selective activation checkpointing to the model" ("SelectiveAC", "FullAC" since 2026): whether the
# forward is computed twice (full), which the seed formula's factor 4 assumes, or not (selective: cheap ops only)
_AC = lazy(r"Applied (full|FullAC|selective|SelectiveAC) activation checkpointing to the model")
# "Model llama3 8B size: 8,030,261,248 total parameters" (coloured)
_SIZE = lazy(r"\bsize: (\d{1,3}(?:,\d{3})*|\d+) total parameters")


def metric_values(body: str) -> Optional[dict[str, tuple[str, str]]]:
    """A metrics line's ``key: value`` pairs from ``step:`` on, as {key: (value, unit)} (the
    last of a key wins); None for a validation line."""
    text = strip_ansi(body)
    if _VALIDATION in text:
        return None
    return {key: (value, unit) for key, value, unit in METRIC.findall(text[text.find(_START):])}


class TorchTitanParser(LineParser):
    name = "torchtitan"
    READS = "torchtitan's metrics lines (loss, tps, tflops, mfu, memory)"
    framework = "torchtitan"
    STEPS_WITH_LOSS = True
    # the [titan] tag came in 2025; before it, the metrics line alone says torchtitan
    SNIFF = compile_sniff(r"\[titan\] \d{4}-", r"step: *\d+ +loss: *\S+ +(?:grad_norm: *\S+ +)?memory: *[\d.]+GiB\(")
    ROUTES = ((r"step: *\d+ ", "_on_metrics"), (r"Trainer is initialized with ", "_on_init"),
              (r" total parameters", "_on_size"), (r" activation checkpointing to the model", "_on_ac"),
              (r" - Training completed", "_on_completed"), (r"Finished (?:saving|staging) the checkpoint", "_on_saved"),
              (r"Last step checkpoint completed in ", "_on_saved"))
    ONCE_FLAGS = ("_announced", "_timed_said")
    # with the compiled core, a metrics line whose values it reads as to_float does is typed there
    # and handed to metrics_into in its place (tuimon.engine.rows)
    COLUMNS = {"_on_metrics": "metrics"}

    SAMPLES = (
        Sample("[rank0]:[titan] 2026-04-18 22:15:44,378 - root - INFO - \x1b[31mstep: 10  \x1b[32mloss: 11.78140  "
               "\x1b[38;2;180;60;0mgrad_norm:  9.8978  \x1b[38;2;54;234;195mmemory: 29.11GiB(92.83%)  "
               "\x1b[34mtps: 70,593  \x1b[36mtflops: 47.97  \x1b[35mmfu: 15.38%\x1b[39m", "step",
               {"rank": 0, "step": 10, "loss": 11.7814, "wall_time": 1776550544.378}),
        Sample("[rank0]:[titan] 2026-04-18 22:15:54,378 - root - INFO - step: 20  loss: 9.1  "
               "memory: 29.11GiB(92.83%)  tps: 70,593  tflops: 47.97  mfu: 15.38%", "step",
               {"step": 20, "elapsed_ms": 1000.0},
               context=("[rank0]:[titan] 2026-04-18 22:15:44,378 - root - INFO - step: 10  loss: 11.78140  "
                        "memory: 29.11GiB(92.83%)  tps: 70,593  tflops: 47.97  mfu: 15.38%",)),
        Sample("[rank0]:[titan] 2026-04-18 22:15:54,378 - root - INFO - step:  1  loss: 12.1  "
               "memory: 29.11GiB(92.83%)  tps: 70,593  tflops: 47.97  mfu: 15.38%", "step",
               {"step": 1, "elapsed_ms": None},
               context=("[rank0]:[titan] 2026-04-18 22:15:44,378 - root - INFO - step: 10  loss: 11.78140  "
                        "memory: 29.11GiB(92.83%)  tps: 70,593  tflops: 47.97  mfu: 15.38%",)),  # a restart
        Sample("[rank0]:[titan] 2026-04-18 22:15:44,378 - root - INFO - step: 10  loss: 11.78140  grad_norm:  9.8978  "
               "memory: 29.11GiB(92.83%)  tps: 70,593  tflops: 47.97  mfu: 15.38%", "throughput",
               {"iteration": 10, "tflops_reported": 47.97}),
        Sample("[rank0]:[titan] 2026-04-18 22:15:44,378 - root - INFO - step: 10  loss: 11.78140  grad_norm:  9.8978  "
               "memory: 29.11GiB(92.83%)  tps: 70,593  tflops: 47.97  mfu: 15.38%", "memory",
               {"gpu_max_reserved_mb": 29.11 * 1024}),
        Sample("[rank0]:[titan] 2026-04-18 22:15:36,647 - root - INFO - Trainer is initialized with local batch size 8, "
               "global batch size 16, gradient accumulation steps 2, sequence length 2048, total steps 20000 "
               "(warmup 500)", "run_config",
               {"framework": "torchtitan", "micro_batch": 8, "global_batch": 16, "seq_length": 2048,
                "train_iters": 20000}),
        Sample("[rank0]:[titan] 2026-08-21 10:00:01,000 - root - INFO - Trainer is initialized with 16384 tokens per DP "
               "rank, 131072 tokens per train step, gradient accumulation steps 2, maximum context length 2048, total "
               "steps 20000 (warmup 500)", "run_config",
               {"framework": "torchtitan", "global_batch": 64, "seq_length": 2048, "train_iters": 20000}),
        Sample("[rank0]:[titan] 2026-04-18 22:15:35,953 - root - INFO - \x1b[34mModel llama3 150M \x1b[31msize: 75,516,672 "
               "total parameters\x1b[39m", "run_config", {"total_params": 75516672}),
        Sample("[rank0]:[titan] 2026-04-18 22:15:35,100 - root - INFO - Applied selective activation checkpointing to "
               "the model", "run_config", {"activation_checkpointing": False}),
        Sample("[rank0]:[titan] 2026-08-21 10:00:00,100 - root - INFO - Applied FullAC activation checkpointing to the "
               "model", "run_config", {"activation_checkpointing": True}),
        Sample("[rank0]:[titan] 2026-08-21 10:00:00,100 - root - INFO - Applied MemoryBudgetAC activation checkpointing "
               "to the model", None),
        Sample("[rank0]:[titan] 2026-04-18 22:16:45,002 - root - INFO - Training completed", "exit", {"iteration": 40},
               context=("[rank0]:[titan] 2026-04-18 22:16:44,100 - root - INFO - step: 40  loss:  4.28883  "
                        "memory: 29.50GiB(92.00%)  tps: 70,001  tflops: 46.10  mfu: 14.78%",)),
        Sample("[rank0]:2024-05-15 10:00:20,000 - root - INFO - step: 10  loss:  7.1234  memory: 30.12GiB(31.70%)  "
               "wps: 5,678  mfu: 39.57%", "throughput",
               {"rank": 0, "iteration": 10, "tokens_per_gpu_per_sec": 5678.0, "mfu": 39.57}),
        Sample("[rank0]:[titan] 2025-01-01 12:00:13,345 - root - INFO - Finished saving the checkpoint (or staging "
               "if async is enabled)in 12.34 seconds.", "checkpoint", {"iteration": 10, "save_ms": 12340.0},
               context=("[rank0]:[titan] 2025-01-01 12:00:00,000 - root - INFO - step: 10  loss:  7.1234  "
                        "memory: 30.12GiB(31.70%)  tps: 5,678  tflops: 123.45  mfu: 39.57%",)),
        Sample("[rank0]:[titan] 2026-04-30 03:00:01,000 - root - INFO - validate step: 14000  loss:  3.3315  "
               "memory: 30.1GiB(95.0%)  tps: 6,995", None),
        Sample("[rank0]:[titan] 2026-08-21 12:00:13,345 - root - INFO - Finished staging the checkpoint in 2.05 seconds.",
               "checkpoint", {"iteration": 500, "save_ms": 2050.0},
               context=("[rank0]:[titan] 2026-08-21 12:00:00,000 - root - INFO - step: 500  loss:  7.1234  "
                        "memory: 30.12GiB(31.70%)  tps: 5,678  tflops: 123.45  mfu: 39.57%",)),
        Sample("[rank0]:[titan] 2026-08-21 12:00:13,345 - root - INFO - Last step checkpoint completed in 3.21s",
               "checkpoint", {"iteration": 1000, "save_ms": 3210.0},
               context=("[rank0]:[titan] 2026-08-21 12:00:00,000 - root - INFO - step: 1000  loss:  7.1234  "
                        "memory: 30.12GiB(31.70%)  tps: 5,678  tflops: 123.45  mfu: 39.57%",)),
    )

    def __init__(self, file: str = "") -> None:
        super().__init__(file)
        self._announced = False
        self._last_step: Optional[int] = None
        #: each rank's latest stamped metrics line: ranks that each log their steps interleave
        self._clock = StampClock()
        self._timed_said = False

    def _on_metrics(self, body: str, ctx: LineContext) -> list[Event]:
        values = metric_values(body)
        if values is None:
            return []
        step_key, loss_key, *middle, unit_key = _ROW_KEYS
        step = to_int(values[step_key][0]) if step_key in values else None
        if step is None or loss_key not in values:
            return []
        tflops, tps, wps, mfu = (to_float(values[k][0]) if k in values else None for k in middle)
        memory = values.get(unit_key)
        gib = to_float(memory[0]) if memory is not None and memory[1] == _UNIT else None
        return self._metrics(step, to_float(values[loss_key][0]), tflops, tps, wps, mfu, gib, ctx)

    def metrics_into(self, rows: list[tuple], row: tuple, frame: tuple, wall: Optional[float]) -> Optional[list[Event]]:
        """A metrics line the compiled core read, into ``rows`` (None) where its events are a
        row's (a tuple of :class:`~.columns.StepRows`), else its events: the first says the
        framework, the first timed one where its step time comes from."""
        step, loss, tflops, tps, wps, mfu, gib = row
        self._last_step = step
        elapsed = self._clock.elapsed_ms(frame[3], step, wall if frame[6] is not None else None)
        if not self.reported("_announced") or (elapsed is not None and not self.reported("_timed_said")):
            return self._metric_events(step, loss, tflops, tps, wps, mfu, gib, elapsed, self.context_of(frame, wall))
        rows.append(_metrics_row(row, frame, wall, elapsed))
        return None

    def metrics_rows(self, values: list[tuple], frames: list[tuple], walls: list, _iterations: list
                     ) -> Optional[list[tuple]]:
        """The rows of many such lines at once (``metrics_into``'s), once no line can make events
        (the framework and the step time's source said); else None, and nothing read."""
        if not (self.reported("_announced") and self.reported("_timed_said")):
            return None
        elapsed_ms, out = self._clock.elapsed_ms, []
        for row, frame, wall in zip(values, frames, walls):
            out.append(_metrics_row(row, frame, wall, elapsed_ms(frame[3], row[0], wall if frame[6] is not None else None)))
        if values:
            self._last_step = values[-1][0]
        return out

    def _metrics(self, step: int, loss: Optional[float], tflops: Optional[float], tps: Optional[float],
                 wps: Optional[float], mfu: Optional[float], gib: Optional[float], ctx: LineContext) -> list[Event]:
        self._last_step = step
        elapsed = self._clock.elapsed_ms(ctx.rank, step, ctx.wall_time if ctx.own_stamp else None)
        return self._metric_events(step, loss, tflops, tps, wps, mfu, gib, elapsed, ctx)

    def _metric_events(self, step: int, loss: Optional[float], tflops: Optional[float], tps: Optional[float],
                       wps: Optional[float], mfu: Optional[float], gib: Optional[float], elapsed: Optional[float],
                       ctx: LineContext) -> list[Event]:
        events: list[Event] = [self.make(Step, ctx, step=step, loss=loss, elapsed_ms=elapsed)]
        if elapsed is not None and self.first_time("_timed_said"):
            events.insert(0, self.make(RunConfig, ctx, step_time_source=STAMP_DIFFERENCES))
        if tps is None:
            tps = wps  # before 2024-08 it said wps ("words"), the same tokens a second on each device
        if tflops is not None or tps is not None or mfu is not None:
            # tps is torchtitan's tokens a second on each device
            events.append(self.make(Throughput, ctx, iteration=step, tflops_reported=tflops,
                                    tokens_per_gpu_per_sec=tps, mfu=mfu))
        if gib is not None:
            events.append(self.make(Memory, ctx, gpu_max_reserved_mb=gib * 1024.0))
        return self.announce(events, ctx)

    def _on_saved(self, body: str, ctx: LineContext) -> list[Event]:
        """The checkpoint of the last step, and how long saving it took."""
        m = _SAVED.search(body)
        if not m:
            return []
        seconds = to_float(m.group(1) or m.group(2))
        return [self.make(Checkpoint, ctx, iteration=self._last_step,
                          save_ms=seconds * 1000.0 if seconds is not None else None)]

    def _on_completed(self, body: str, ctx: LineContext) -> list[Event]:
        """TorchTitan's last word when the run reached its total steps."""
        if "[titan]" not in body:
            return []
        return [self.make(Exit, ctx, iteration=self._last_step)] if self._last_step is not None else []

    def _on_init(self, body: str, ctx: LineContext) -> list[Event]:
        m = _INIT.search(body)
        if m:
            config = self.make(RunConfig, ctx, framework=self.framework, micro_batch=to_int(m.group(1)),
                               global_batch=to_int(m.group(2)), seq_length=to_int(m.group(3)),
                               train_iters=to_int(m.group(4)))
        elif (m := _INIT_TOKENS.search(body)) is not None:
            # a step's tokens in sequences of the context length: the global batch, where they divide evenly
            tokens, length = to_int(m.group(1)), to_int(m.group(2))
            batch = tokens // length if tokens and length and tokens % length == 0 else None
            config = self.make(RunConfig, ctx, framework=self.framework, global_batch=batch, seq_length=length,
                               train_iters=to_int(m.group(3)))
        else:
            return []
        self.first_time("_announced")
        return [config]

    def _on_ac(self, body: str, ctx: LineContext) -> list[Event]:
        m = _AC.search(body)
        return [self.make(RunConfig, ctx, activation_checkpointing=m.group(1).lower().startswith("full"))] if m else []

    def _on_size(self, body: str, ctx: LineContext) -> list[Event]:
        """The model's size as torchtitan counts it (``Model llama3 8B size: 8,030,261,248 total
        parameters``): the run's size where no formula has its shape."""
        m = _SIZE.search(strip_ansi(body)) if "[titan]" in body or "Model " in body else None
        count = to_int(m.group(1).replace(",", "")) if m else None
        return [self.make(RunConfig, ctx, total_params=count)] if count else []


def _metrics_row(row: tuple, frame: tuple, wall: Optional[float], elapsed: Optional[float]) -> tuple:
    """A metrics line's row of :class:`~.columns.StepRows` (tps: wps where the line says that)."""
    step, loss, tflops, tps, wps, mfu, gib = row
    return (frame[0], frame[3], frame[5], wall, step, loss, None, elapsed, tflops, wps if tps is None else tps, mfu,
            gib, None, None)
