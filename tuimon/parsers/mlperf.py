"""MLPerf Training's ``mllog`` records: one JSON object a line after ``:::MLLOG``,
whatever framework runs underneath (NeMo, Megatron-DeepSpeed, Pax)::

    :::MLLOG {"namespace": "", "time_ms": 1696466368958, "event_type": "POINT_IN_TIME",
              "key": "tracked_stats", "value": {"train_step_timing": 11.39}, "metadata": {..., "step": 4194304}}

The run's phases (``init_start``, ``init_stop``, ``run_start``, ``run_stop``) are
milestones stamped with ``time_ms``: MLPerf's own init time runs from ``init_start`` to
``run_start``, its run time from ``run_start`` to ``run_stop``.  ``tracked_stats`` with a
step time is a step, with a ``throughput`` (samples a second, as the reference
implementations track it) a throughput; ``train_loss`` (with ``samples_count``) is a step
with its loss; ``eval_accuracy`` (a log perplexity for GPT-3, an accuracy elsewhere) an
evaluation.  A record's ``samples_count`` or ``step`` counts samples or tokens, not steps:
it becomes a step number only when the global batch is known and divides it (samples).
The model and batch keys size the run, ``submission_platform`` names the accelerator
(``64xNVIDIA DGX H100``: 64 DGX nodes of 8 H100s); ``run_stop`` with status ``success`` ends it.
"""
from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import Any, Optional

from .base import LineContext, LineParser, Sample, compile_sniff
from .events import RUN_START, RUN_STOP, Evaluation, Event, Exit, Milestone, RunConfig, Step, Throughput, frozen_map
from .patterns import lazy

_MAX_RECORD = 64 * 1024  # a record is a few hundred bytes; a longer line is no record to trust
# key -> (milestone, the once-only flag of it)
_PHASES = {"init_start": ("job-start", "_started"), "init_stop": ("initialized", "_initialized"),
           "run_start": (RUN_START, "_running"), "run_stop": (RUN_STOP, "_stopped")}
# "64xNVIDIA DGX H100", "8xNVIDIA DGX A100 (80GB)": a DGX node holds 8 GPUs
_DGX = lazy(r"^(?:(\d{1,5})x)?NVIDIA DGX ((?:GB|[ABH])\d{3})\b")
_CONFIG_KEYS = {"global_batch_size": "global_batch", "max_sequence_length": "seq_length",
                "sequence_length": "seq_length", "num_layers": "num_layers", "num_heads": "num_heads",
                "hidden_size": "hidden_size"}


#: where a run's step time comes from when its blocks give it
BLOCK_TIME = "mllog blocks (block_start to block_stop over their steps; an evaluation logged inside counts in)"


class MLPerfParser(LineParser):
    name = "mlperf"
    READS = "MLPerf mllog (:::MLLOG) records"
    framework = "mlperf"
    SNIFF = compile_sniff(r":::MLLOG \{")
    ROUTES = ((r":::MLLOG \{", "_on_record"),)
    ONCE_FLAGS = ("_announced", "_started", "_initialized", "_running", "_stopped", "_blocks_said")

    SAMPLES = (
        Sample(':::MLLOG {"namespace": "", "time_ms": 1696466368958, "event_type": "POINT_IN_TIME", '
               '"key": "tracked_stats", "value": {"train_step_timing": 11.396877765655518}, "metadata": '
               '{"file": "/workspace/llm/custom_callbacks.py", "lineno": 277, "step": 4194304}}', "step",
               {"step": None, "elapsed_ms": 11396.877765655518, "wall_time": 1696466368.958}),
        Sample(':::MLLOG {"namespace": "", "time_ms": 1696459603967, "event_type": "INTERVAL_START", '
               '"key": "init_start", "value": null, "metadata": {"file": "/usr/local/lib/python3.10/site-packages/'
               'paxml/tasks/lm/params/c4_mllog.py", "lineno": 144}}', "milestone",
               {"name": "job-start", "wall_time": 1696459603.967}),
        Sample(':::MLLOG {"namespace": "", "time_ms": 1696460912474, "event_type": "INTERVAL_START", '
               '"key": "run_start", "value": null, "metadata": {"file": "gpt3.py", "lineno": 188}}', "milestone",
               {"name": "run-start", "wall_time": 1696460912.474}),
        Sample(':::MLLOG {"namespace": "", "time_ms": 1696466228407, "event_type": "POINT_IN_TIME", '
               '"key": "global_batch_size", "value": 2048, "metadata": {"file": "/workspace/llm/custom_callbacks.py", '
               '"lineno": 295}}', "run_config", {"global_batch": 2048}),
        Sample(':::MLLOG {"namespace": "", "time_ms": 1696463580787, "event_type": "INTERVAL_END", "key": "run_stop", '
               '"value": null, "metadata": {"file": "c4_mllog.py", "lineno": 65, "status": "success"}}', "exit",
               {"iteration": 24, "wall_time": 1696463580.787},  # 100,663,296 tokens: 24 steps of 2048 x 2048
               context=(':::MLLOG {"key": "global_batch_size", "value": 2048, "metadata": {}}',
                        ':::MLLOG {"key": "max_sequence_length", "value": 2048, "metadata": {}}',
                        ':::MLLOG {"namespace": "", "time_ms": 1696432628540, "event_type": "POINT_IN_TIME", '
                        '"key": "eval_accuracy", "value": 2.7495551109313965, "metadata": {"file": "training.py", '
                        '"lineno": 1469, "epoch_num": 100663296}}',)),
        Sample(':::MLLOG {"namespace": "", "time_ms": 1696466380017, "event_type": "POINT_IN_TIME", "key": '
               '"tracked_stats", "value": {"train_step_timing": 11.039475679397583}, "metadata": {"step": 8388608}}',
               "step", {"step": 2, "elapsed_ms": 11039.475679397583},  # tokens: 2 steps of 2048 x 2048
               context=(':::MLLOG {"key": "global_batch_size", "value": 2048, "metadata": {}}',
                        ':::MLLOG {"key": "max_sequence_length", "value": 2048, "metadata": {}}')),
        Sample(':::MLLOG {"namespace": "", "time_ms": 1700000000000, "event_type": "POINT_IN_TIME", "key": '
               '"tracked_stats", "value": {"training_sequences_per_second": 3345.42, "final_loss": 1.72}, '
               '"metadata": {"file": "run_pretraining.py", "lineno": 1812, "step": 1420}}', "throughput",
               {"samples_per_sec": 3345.42}),  # BERT's reference implementation
        # a block of 12 steps of 2048 x 2048 tokens, 119.862 s: 9988.5 ms a step (Pax on TPU v5e)
        Sample(':::MLLOG {"namespace": "", "time_ms": 1696461173314, "event_type": "INTERVAL_END", "key": "block_stop", '
               '"value": null, "metadata": {"file": "c4_mllog.py", "lineno": 56, "first_epoch_num": 50331648}}', "step",
               {"step": 24, "elapsed_ms": 9988.5},
               context=(':::MLLOG {"key": "global_batch_size", "value": 2048, "metadata": {}}',
                        ':::MLLOG {"key": "max_sequence_length", "value": 2048, "metadata": {}}',
                        ':::MLLOG {"namespace": "", "time_ms": 1696461053452, "event_type": "INTERVAL_START", "key": '
                        '"block_start", "value": null, "metadata": {"file": "c4_mllog.py", "lineno": 69, "epoch_count": '
                        '50331648, "first_epoch_num": 50331648}}')),
        Sample(':::MLLOG {"namespace": "", "time_ms": 1696461173314, "event_type": "INTERVAL_END", "key": "block_stop", '
               '"value": null, "metadata": {"file": "c4_mllog.py", "lineno": 56, "first_epoch_num": 50331648}}', None,
               context=(':::MLLOG {"namespace": "", "time_ms": 1696461053452, "event_type": "INTERVAL_START", "key": '
                        '"block_start", "value": null, "metadata": {"epoch_count": 50331648, '
                        '"first_epoch_num": 50331648}}',)),  # the batch and length unknown: no step
        Sample(':::MLLOG {"key": "tracked_stats", "value": {"train_step_timing": "n/a"}, "metadata": {"step": 1}',
               None),  # cut short: no JSON
        Sample(':::MLLOG {"namespace": "", "time_ms": 1696432628540, "event_type": "POINT_IN_TIME", '
               '"key": "eval_accuracy", "value": 2.7495551109313965, "metadata": {"file": "training.py", '
               '"lineno": 1469, "epoch_num": 50331648}}', "eval",
               {"iteration": None, "metrics": {"eval_accuracy": 2.7495551109313965}}),
        Sample(':::MLLOG {"namespace": "", "time_ms": 1715641010640, "event_type": "POINT_IN_TIME", "key": "train_loss", '
               '"value": 0.3684, "metadata": {"file": "custom_callbacks.py", "lineno": 263, "samples_count": 3072}}',
               "step", {"step": 384, "loss": 0.3684, "wall_time": 1715641010.64},
               context=(':::MLLOG {"namespace": "", "time_ms": 1715640000000, "event_type": "POINT_IN_TIME", '
                        '"key": "global_batch_size", "value": 8, "metadata": {"file": "train.py", "lineno": 1}}',)),
        Sample(':::MLLOG {"namespace": "", "time_ms": 1715641010640, "event_type": "POINT_IN_TIME", "key": "train_loss", '
               '"value": 0.3684, "metadata": {"file": "custom_callbacks.py", "lineno": 263, "samples_count": 3072}}',
               "step", {"step": None, "loss": 0.3684}),  # the batch unknown: no step number
        Sample(':::MLLOG {"namespace": "", "time_ms": 1715641010700, "event_type": "POINT_IN_TIME", '
               '"key": "tracked_stats", "value": {"throughput": 2.3245}, "metadata": {"file": "custom_callbacks.py", '
               '"lineno": 250, "step": 3072}}', "throughput", {"samples_per_sec": 2.3245}),
        Sample(':::MLLOG {"namespace": "", "time_ms": 1696469852166, "event_type": "POINT_IN_TIME", "key": '
               '"tracked_stats", "value": {"throughput": 345645.44173345104}, "metadata": {"file": "cb.py", '
               '"lineno": 284, "step": 1207959552}}', "throughput", {"tokens_per_sec": 345645.44173345104},
               context=(':::MLLOG {"key": "global_batch_size", "value": 2048, "metadata": {}}',
                        ':::MLLOG {"key": "max_sequence_length", "value": 2048, "metadata": {}}')),
        Sample(':::MLLOG {"namespace": "", "time_ms": 1696466228407, "event_type": "POINT_IN_TIME", '
               '"key": "submission_platform", "value": "64xNVIDIA DGX H100", "metadata": {"file": "cb.py", "lineno": 291}}',
               "run_config", {"gpu": "NVIDIA H100", "world_size": 512}),
        Sample(':::MLLOG {"namespace": "", "time_ms": 1696463580787, "event_type": "INTERVAL_END", "key": "run_stop", '
               '"value": null, "metadata": {"status": "aborted"}}', "milestone", {"name": "run-stop"}),
    )

    def __init__(self, file: str = "") -> None:
        super().__init__(file)
        self._announced = False
        self._started = False
        self._initialized = False
        self._running = False
        self._stopped = False
        self._progress: Optional[int] = None  # the latest step or sample count a record gave
        self._batch: Optional[int] = None  # global_batch_size, once a record gave it
        self._seq: Optional[int] = None  # the sequence length, likewise
        self._timed = False  # a tracked_stats record gave a step time: blocks give none then
        self._blocks_said = False
        self._block: Optional[tuple[float, int, int]] = None  # the open block: (its stamp s, first count, count)

    def _on_record(self, body: str, ctx: LineContext) -> list[Event]:
        start = body.find(":::MLLOG {")
        if start < 0 or len(body) - start > _MAX_RECORD:
            return []
        try:
            record = json.loads(body[start + 9:])
        except (ValueError, RecursionError):  # cut short, or nested past the interpreter's depth
            return []
        if not isinstance(record, dict):
            return []
        key = record.get("key")
        meta: Any = record.get("metadata")
        if not isinstance(meta, dict):
            meta = {}
        stamp = _number(record.get("time_ms"))
        if stamp is not None:  # the record's own stamp, not the line's
            ctx = replace(ctx, wall_time=stamp / 1000.0)
        progress = _count(meta.get("step"), meta.get("epoch_num"))
        if progress is not None:
            self._progress = progress
        events: list[Event] = []
        if key in _PHASES:
            name, flag = _PHASES[key]
            if self.first_time(flag):  # every rank logs its own
                events.append(self.make(Milestone, ctx, name=name))
        elif key == "tracked_stats" and isinstance(record.get("value"), dict):
            stats = record["value"]
            seconds = _number(stats.get("train_step_timing", stats.get("train_step_time")))
            if seconds is not None:
                self._timed = True
                # the record's "step" counts what the benchmark counts (tokens for NVIDIA's GPT-3: 4194304 a
                # step of 2048 sequences of 2048): a step number where it is whole steps of tokens
                events.append(self.make(Step, ctx, step=self._step_of_tokens(meta.get("step")),
                                        elapsed_ms=seconds * 1000.0))
            sequences = _number(stats.get("training_sequences_per_second"))  # BERT's reference: samples a second
            if sequences is not None:
                events.append(self.make(Throughput, ctx, samples_per_sec=sequences))
            throughput = _number(stats.get("throughput"))
            if throughput is not None:
                # in what the record's "step" counts: tokens where it is whole steps of tokens (NVIDIA's
                # GPT-3: 345,645 = 1,207,959,552 tokens over the 3,495 s of training), else samples
                count, per_step = _count(meta.get("step")), (self._batch or 0) * (self._seq or 0)
                if count and per_step and count % per_step == 0:
                    events.append(self.make(Throughput, ctx, tokens_per_sec=throughput))
                else:
                    events.append(self.make(Throughput, ctx, samples_per_sec=throughput))
        elif key in ("block_start", "block_stop"):
            events.extend(self._on_block(key, meta, ctx))
        elif key == "eval_start":
            # a block holds training alone: one with an evaluation inside (Gaudi's Megatron-DeepSpeed opens
            # one block for the whole run, its count an evaluation interval's) times no steps
            self._block = None
        elif key == "train_loss":
            loss = _number(record.get("value"), finite=False)
            if loss is not None:
                events.append(self.make(Step, ctx, step=self._step_of(meta.get("samples_count")), loss=loss))
        elif key == "eval_accuracy":
            value = _number(record.get("value"), finite=False)
            if value is not None:
                where = self._step_of(meta.get("samples_count"))
                events.append(self.make(Evaluation, ctx, iteration=where, metrics=frozen_map({key: value})))
        elif key == "submission_platform" and isinstance(record.get("value"), str):
            m = _DGX.match(record["value"])
            if m:
                nodes = int(m.group(1)) if m.group(1) else None
                events.append(self.make(RunConfig, ctx, gpu=f"NVIDIA {m.group(2)}",
                                        world_size=8 * nodes if nodes else None))
        elif key in _CONFIG_KEYS:
            value = _count(record.get("value"))
            if value is not None:
                if key == "global_batch_size":
                    self._batch = value or None
                elif _CONFIG_KEYS[key] == "seq_length":
                    self._seq = value or None
                events.append(self.make(RunConfig, ctx, **{_CONFIG_KEYS[key]: value}))
        if key == "run_stop" and meta.get("status") == "success":
            events.append(self.make(Exit, ctx, iteration=self._step_of_tokens(self._progress)))
        return self.announce(events, ctx)

    def _on_block(self, key: str, meta: dict, ctx: LineContext) -> list[Event]:
        """A training block (between two evaluations): ``block_start`` says what it counts from and how
        much (``first_epoch_num``, ``epoch_count``: tokens for GPT-3), ``block_stop`` ends it.  Where no
        record times the steps (Pax, Megatron-DeepSpeed on Gaudi), the block's mean step time is a step at
        its end: its duration over the whole steps it held."""
        first, count = _count(meta.get("first_epoch_num")), _count(meta.get("epoch_count"))
        if key == "block_start":
            self._block = (ctx.wall_time, first, count) if ctx.wall_time is not None and first is not None and count \
                else None
            return []
        block, self._block = self._block, None
        if block is None or self._timed or ctx.wall_time is None or first != block[1]:
            return []
        start, first_count, count = block
        steps_before, steps_after = self._step_of_tokens(first_count), self._step_of_tokens(first_count + count)
        if steps_before is None or steps_after is None or steps_after <= steps_before or ctx.wall_time <= start:
            return []
        per_step_ms = (ctx.wall_time - start) * 1000.0 / (steps_after - steps_before)
        step = self.make(Step, ctx, step=steps_after, elapsed_ms=round(per_step_ms, 3))
        if self.first_time("_blocks_said"):
            return [self.make(RunConfig, ctx, step_time_source=BLOCK_TIME), step]
        return [step]

    def _step_of_tokens(self, tokens: object) -> Optional[int]:
        """The step a token count ends, when batch and length are known and it is whole steps."""
        count, per_step = _count(tokens), (self._batch or 0) * (self._seq or 0)
        if count is None or not per_step or count % per_step:
            return None
        return count // per_step

    def _step_of(self, samples: object) -> Optional[int]:
        """The step a sample count ends, when the global batch is known and divides it."""
        count = _count(samples)
        if count is None or not self._batch or count % self._batch:
            return None
        return count // self._batch

def _number(value: object, finite: bool = True) -> Optional[float]:
    """A JSON number; with ``finite`` false, NaN and infinity too (a diverged loss is news)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) or not finite else None


def _count(*values: object) -> Optional[int]:
    """The first value that is a whole number of at most 18 digits."""
    for value in values:
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 10 ** 18:
            return value
    return None
