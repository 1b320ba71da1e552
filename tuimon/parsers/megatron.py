"""Megatron-LM family: Megatron-LM 1.x-core, Megatron-DeepSpeed, GPT-NeoX, NeMo
and the offloading forks built on them (STRONGHOLD, L2L).

Iteration lines are ``|``-separated ``key: value`` (or ``key=value``) records
around an ``iteration N/ M`` field.  Keys vary between forks and versions, so
they are normalised and mapped by meaning rather than matched literally.
"""
from __future__ import annotations

import math
import re
from operator import itemgetter, methodcaller
from typing import Optional

from .base import LineContext, LineParser, Sample, compile_sniff
from .common import RANK_ANCHOR, norm_key, rank_tag
from .events import INIT_TIME, Event, Exit, Failure, Iteration, Memory, Milestone, RunConfig, Step, Throughput, frozen_map
from .numbers import to_float, to_int
from .patterns import lazy
from .timestamps import parse_iso

# Same shape as the grep users run: one event per match, even when two ranks'
# lines were interleaved onto one physical line.
ITERATION = lazy(r"iteration[ =]+(\d+)/ *(\d+) *\|")

_EFFECTIVE = lazy(r"Effective Tera Flops per GPU: (\S+) and total parameters (\S+) B")
_NUMWORKERS = lazy(r"NumWorkers: (\d+); SamplesPerStep: (\d+); IterationTime: (\S+);\s*SamplesPerSecond: (\S+)")
#: what every whole memory report holds (a wrapped report's tail does not)
_WHOLE_REPORT = "memory (MB)"
#: also the compiled core's (tuimon._core.FieldLines): the groups it reads, as to_float does, for the
#: lines' rows (Megatron-DeepSpeed prints both every logging interval)
CORE_EFFECTIVE = {"pattern": _EFFECTIVE.pattern, "groups": [1, 2]}
CORE_NUMWORKERS = {"pattern": _NUMWORKERS.pattern, "groups": [3, 4]}
# one report; ranks printing at once can write several on one physical line, each with its tag
# a report's name is its moment: after N iterations, or (Megatron-LM since 2026-01) around a checkpoint's save,
# where saving may raise the peak
#: also the compiled core's, for the reports it reads (core/src/memory.rs)
MEMORY = (r"(?:\[Rank (\d+)\] )?\(?(after \d+ iterations|(?:before|after) save_checkpoint for iteration \d+)\)?"
          r" memory \(MB\) \| ")
_MEMORY = lazy(MEMORY)
# a wrapped report's tail: the cut field's rest ("erved: 42498.00 "), then whole fields
_MEMORY_TAIL_HEAD = lazy(r"^\s*[a-z ]{0,16}: [-+\d.]+\s*$")
#: a report's four figures, as norm_key spells their keys, in the order of Memory's fields
MEMORY_KEYS = ("allocated", "max allocated", "reserved", "max reserved")
_MEMORY_KEYS = frozenset(MEMORY_KEYS)
# NeMo 2's progress printer: "Training epoch 1, iteration 5/49 | ... | global_step: 55 | ...": the
# iteration counts within the epoch and its total is the epoch's (max_steps when resumed)
_NEMO2_START = "Training epoch"
_NEMO2 = lazy(re.escape(_NEMO2_START) + r" (\d+), iteration \d+/(\d+) \|.*?\| global_step: (\d+)\b")
# --exit-interval, --exit-duration-in-mins, and --exit-signal-handler's SIGTERM (Slurm's warning before a
# time limit or a preemption): the program saved its checkpoint and left
_EXIT = lazy(r"\[exiting program (?:at iteration (\d+)|after [\d.]+ minutes|after receiving SIGTERM\.?)\] "
             r"datetime: (.*)")
_MILESTONES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (lazy(p), name) for p, name in (
        (r"> initializing torch distributed", "init-distributed"),
        (r"> compiling dataset index builder", "compile-dataset-index"),
        (r"done with dataset index builder\. Compilation time: (\S+) seconds", "dataset-index-builder"),
        (r"> compiling and loading fused kernels", "compile-fused-kernels"),
        (r"done with compiling and loading fused kernels\. Compilation time: (\S+) seconds", "fused-kernels"),
        (r"done with compiling and loading strongh utils\. Compilation time: (\S+) seconds", "stronghold-utils"),
        (r"^\s*(?:> )?building (?:GPT2?|BERT|T5) model", "build-model"),
        # training.py: time.time() - _TRAIN_START_TIME (taken as training.py is imported, the min over ranks)
        (r"^\s*time to initialize megatron \(seconds\): (\S+)", INIT_TIME),
        (r"\[after megatron is initialized\] datetime: (.*)", "megatron-initialized"),
        (r"\[after model, optimizer, and learning rate scheduler are built\] datetime: (.*)", "model-built"),
        (r"> building train, validation, and test datasets", "build-datasets"),
        (r"\[after dataloaders are built\] datetime: (.*)", "dataloaders-built"),
        (r"^\s*done with setups? \.\.\.", "setup-done"),
        (r"\[before the start of training step\] datetime: (.*)", "training-start"),
    ))

# GPT-NeoX's human_readable_flops: "123.4TFLOPS", and "712.3GFLOPS" on a slow run, "1.2PFLOPS" on a fast one
_FLOPS_UNITS = (("KFLOPS", 1e-9), ("MFLOPS", 1e-6), ("GFLOPS", 1e-3), ("TFLOPS", 1.0), ("PFLOPS", 1e3),
                ("EFLOPS", 1e6), ("ZFLOPS", 1e9))


def tflops_of(text: str) -> Optional[float]:
    """A FLOP rate with its unit (NeoX's ``approx flops per GPU``), in TFLOP/s; a bare number as is."""
    value = text.strip()
    for unit, scale in _FLOPS_UNITS:
        if value.endswith(unit):
            number = to_float(value[:-len(unit)])
            return None if number is None else number * scale
    return to_float(value)


_NAN_COUNT = "nan_count"  # a record's count of NaN iterations: over 0, a failure
_FIELD_OF = {
    "elapsed time per iteration ms": ("elapsed_ms", 1.0),
    "elapsed time per iteration s": ("elapsed_ms", 1000.0),
    "train step timing in s": ("elapsed_ms", 1000.0),
    "learning rate": ("lr", None),
    "lr": ("lr", None),
    "global batch size": ("global_batch", "int"),
    "consumed samples": ("consumed_samples", "int"),
    "consumed tokens": ("consumed_tokens", "int"),
    "loss scale": ("loss_scale", None),
    "grad norm": ("grad_norm", None),
    "number of skipped iterations": ("skipped", "int"),
    "number of nan iterations": (_NAN_COUNT, "int"),
    "throughput per gpu tflop/s/gpu": ("tflops_reported", None),
    "tflops": ("tflops_reported", None),
    "tflops per gpu": ("tflops_reported", None),  # NeMo 2's FLOPs callback: "TFLOPS_per_GPU: 350.1"
    "approx flops per gpu": ("tflops_reported", tflops_of),
    "mfu": ("mfu", None),  # GPT-NeoX with peak_theoretical_tflops: "MFU: 39.55% | HFU: 52.73% |"
    "samples per second": ("samples_per_sec", None),
    "samples/sec": ("samples_per_sec", None),
    "tokens per second": ("tokens_per_sec", None),
    "tokens per gpu per second tgs": ("tokens_per_gpu_per_sec", None),
    "tokens per gpu per second": ("tokens_per_gpu_per_sec", None),
    "tokens per second per gpu": ("tokens_per_gpu_per_sec", None),
    "tokens/sec/gpu": ("tokens_per_gpu_per_sec", None),  # "tokens/sec/gpu: 8000.5 |" (Megatron forks, 2026)
    "tokens per gpu tokens/s/gpu": ("tokens_per_gpu_per_sec", None),  # Primus: "tokens per GPU (tokens/s/GPU): 9801.4"
    # --log-energy (training.py): the GPUs' energy over the interval per iteration and per GPU, and that
    # over the iteration's time: "energy per GPU (J/iter/GPU): 812.4 | power per GPU (W/GPU): 650.2 |"
    "energy per gpu j/iter/gpu": ("energy_j_per_gpu", None),
    "power per gpu w/gpu": ("power_w_per_gpu", None),
}
_IGNORED_LOSS_KEYS = {"loss scale"}


def _style(line: str) -> str:
    if "approx flops per GPU" in line:
        return "gpt-neox"
    if "reduced_train_loss" in line or _NEMO2_START in line:
        return "nemo"
    return "megatron-lm"


_LOSS = ("loss", None)
_LOSSES = "losses"  # the field of a record's losses (Iteration.losses)
_SKIP = (None, None)
_key_cache: dict[str, tuple] = {}


def spec_of(raw: str) -> tuple:
    """What a raw key (as written, padding included) means; cached, keys repeat every line."""
    spec = _key_cache.get(raw)
    if spec is None:
        key = norm_key(raw)
        spec = _FIELD_OF.get(key) or ((_LOSS[0], key) if "loss" in key and key not in _IGNORED_LOSS_KEYS
                                      else _SKIP)
        if len(_key_cache) < 4096:
            _key_cache[raw] = spec
    return spec


def parse_record(record: str) -> dict:
    """Fields of one iteration record (the text of one ``iteration N/M | ...`` entry)."""
    out: dict = {}
    losses: dict[str, float] = {}
    for seg in record.split("|"):
        raw, sep, value = seg.partition(":")
        if not sep:
            raw, sep, value = seg.partition("=")
            if not sep:
                continue
        name, kind = spec_of(raw)
        if name is None:
            continue
        if name == "loss":
            v = to_float(value)
            if v is not None:
                losses[kind] = v
        elif kind == "int":
            out[name] = to_int(value)
        elif callable(kind):  # a value with a unit
            out[name] = kind(value)
        else:
            v = to_float(value)
            if v is not None and isinstance(kind, float):
                v *= kind
            out[name] = v
    if losses:
        out[_LOSSES] = frozen_map(losses)
    return out


#: what the compiled core is handed to read an iteration line as _iterations does, with spec_of's key table
#: (core/src/records.rs; tuimon.engine.rows builds the reader): the mark; NeMo 2's form (the start it is
#: known by, its pattern: the epoch, the epoch's last counter and the run's step, renumbered as
#: _iterations does); a NaN count over 0 and a NaN loss, left to the hook (a failure event)
CORE_RECORD = {"mark": ITERATION.pattern, "epoch_start": _NEMO2_START, "epoch_mark": _NEMO2.pattern,
               "vetoes": (_NAN_COUNT,), "loss_field": _LOSSES, "loss_tag": _LOSS[0]}
#: and a memory report as _on_memory reads a line holding one (core/src/memory.rs)
CORE_MEMORY = {"pattern": MEMORY, "keys": MEMORY_KEYS, "rank_anchor": RANK_ANCHOR}


class MegatronParser(LineParser):
    name = "megatron"
    READS = ("Megatron-LM/Core, Megatron-DeepSpeed, STRONGHOLD, L2L, "
             "GPT-NeoX and NeMo: iteration records, milestones (argument blocks: parsers.formats.megatron)")
    framework = "megatron-lm"
    STEPS_WITH_LOSS = True
    SNIFF = compile_sniff(r"iteration[ =]+\d+/ *\d+ *\|", r"-{3,} arguments -{3,}", r"using world size: \d+",
                          r"padded vocab \(size:", r"\[before the start of training step\]",
                          r"Effective Tera Flops per GPU", r"> initializing torch distributed",
                          r"reduced_train_loss=")
    ROUTES = (
        (r"iteration[ =]+\d+/", "_on_iteration"),
        (r"reduced_train_loss=", "_on_progress_bar"),
        (r"Effective Tera Flops", "_on_effective"),
        (r"NumWorkers: ", "_on_numworkers"),
        (r"memory \(MB\) \|", "_on_memory"), (r"\| max reserved: ", "_on_memory_tail"),
        (r"\[exiting program", "_on_exit"),
        (r"\] datetime: ", "_on_milestone"),
        (r"> initializing torch distributed", "_on_milestone"),
        (r"time to initialize megatron", "_on_milestone"),
        (r"Compilation time: ", "_on_milestone"),
        (r"> compiling ", "_on_milestone"),
        (r"building (?:GPT|BERT|T5)", "_on_milestone"),
        (r"done with setup", "_on_milestone"),
        (r"> building train, validation", "_on_milestone"),
    )
    ONCE_FLAGS = ("_announced", "_nan_reported")
    # with the compiled core, an iteration line holding one record and no NaN is read there into
    # rows (tuimon.engine.rows: Records.iterations holds to _iterations), and a line holding one
    # memory report is typed there, memory_into making its row (MemoryLines holds to _on_memory, by MEMORY)
    # the Effective Tera Flops and NumWorkers lines into rows (FieldLines by CORE_EFFECTIVE, CORE_NUMWORKERS)
    COLUMNS = {"_on_iteration": "iteration", "_on_memory": "memory", "_on_effective": "effective",
               "_on_numworkers": "numworkers"}
    LEAVES = {"_on_memory_tail": _WHOLE_REPORT}  # (a whole report is _on_memory's)

    SAMPLES = (
        Sample(" iteration       30/      50 | elapsed time per iteration (ms): 6051.8 | learning rate: 1.406E-06 | "
               "global batch size:     4 | lm loss: 1.052111E+01 | loss scale: 1.0 | grad norm: 12.352 | "
               "number of skipped iterations:   0 | number of nan iterations:   0 |",
               "iteration", {"iteration": 30, "train_iters": 50, "elapsed_ms": 6051.8, "lr": 1.406e-06,
                             "global_batch": 4, "losses": {"lm loss": 10.52111}, "loss_scale": 1.0,
                             "grad_norm": 12.352, "skipped": 0, "nan_count": 0}),
        Sample(" iteration        1/    1000 | elapsed time per iteration (ms): 121899.8 | learning rate: 1.875E-05 | "
               "lm loss: 1.252221E+01 | loss scale: 1024.0 | number of skipped iterations:   0 | "
               "number of nan iterations:   0 |",
               "iteration", {"iteration": 1, "train_iters": 1000, "elapsed_ms": 121899.8, "global_batch": None,
                             "consumed_samples": None, "grad_norm": None, "losses": {"lm loss": 12.52221}}),
        Sample(" iteration        1/    1000 | consumed samples:         1024 | elapsed time per iteration (ms): "
               "150891.7 | learning rate: 0.000E+00 | global batch size:  1024 | loss scale: 4294967296.0 | "
               "number of skipped iterations:   1 | number of nan iterations:   0 |",
               "iteration", {"iteration": 1, "consumed_samples": 1024, "global_batch": 1024,
                             "loss_scale": 4294967296.0, "skipped": 1, "losses": {}}),
        Sample(" iteration       10/      50 | elapsed time per iteration (ms): 2723.1 | learning rate: 4.687E-07 | "
               "global batch size:     4 | lm loss: 1.131046E+01 | loss scale: 1.0 | grad norm: inf | "
               "number of skipped iterations:   0 | number of nan iterations:   0 |",
               "iteration", {"iteration": 10, "grad_norm": math.inf}),
        Sample(" iteration        1/    1000 | consumed samples:         1024 | elapsed time per iteration (ms): "
               "159778.9 | learning rate: 1.875E-05 | global batch size:  1024 | lm-loss: 1.244238E+01 | "
               "loss scale: -1.0 | grad norm: 0.000 | num zeros: 0.0 | number of skipped iterations:   0 | "
               "number of nan iterations:   0 |",
               "iteration", {"losses": {"lm loss": 12.44238}, "loss_scale": -1.0, "grad_norm": 0.0}),
        Sample(" [2026-04-15 11:19:02.524672] iteration        1/     500 | consumed samples:           80 | "
               "elapsed time per iteration (ms): 12465.5 | throughput per GPU (TFLOP/s/GPU): 11.9 | learning rate: "
               "6.000000E-06 | global batch size:    80 | lm loss: 1.218301E+01 | loss scale: 1.0 | grad norm: "
               "11.908 | number of skipped iterations:   0 | number of nan iterations:   0 |",
               "iteration", {"iteration": 1, "train_iters": 500, "tflops_reported": 11.9, "consumed_samples": 80,
                             "wall_time": 1776251942.524672}),
        Sample("9: [default3]: [2026-04-15 11:19:02.524672] iteration        1/     500 | consumed samples:"
               "           80 | elapsed time per iteration (ms): 12465.5 | lm loss: 1.218301E+01 |",
               "iteration", {"iteration": 1, "node": "9", "rank": None, "elapsed_ms": 12465.5}),
        Sample(" samples/sec: 206.693 | iteration        1/     512 | elapsed time per iteration (ms): 2477.1 | "
               "learning rate: 1.000E-05 | approx flops per GPU: 13.3TFLOPS | lm_loss: 1.106431E+01 | loss scale: "
               "4096.0 | number of skipped iterations:   0 | number of nan iterations:   0 |",
               "iteration", {"samples_per_sec": 206.693, "tflops_reported": 13.3, "losses": {"lm loss": 11.06431},
                             "train_iters": 512}),
        # GPT-NeoX since 2025, with peak_theoretical_tflops set; a slow run's rate in GFLOPS
        Sample(" samples/sec: 3.412 | iteration       20/     100 | elapsed time per iteration (ms): 4689.0 | "
               "learning rate: 6.000E-04 | approx flops per GPU: 712.3GFLOPS | MFU: 2.28% | HFU: 3.04% | "
               "lm_loss: 9.106431E+00 | number of skipped iterations:   0 | number of nan iterations:   0 |",
               "iteration", {"tflops_reported": 0.7123, "mfu": 2.28, "losses": {"lm loss": 9.106431}}),
        Sample(" samples/sec: 1024.0 | iteration       20/     100 | elapsed time per iteration (ms): 469.0 | "
               "approx flops per GPU: 1.2PFLOPS | MFU: 61.50% | lm_loss: 2.1E+00 |", "iteration",
               {"tflops_reported": 1200.0, "mfu": 61.5}),
        Sample(" iteration      199/  317892 | consumed samples:       152832 | consumed tokens:    625999872 | "
               "elapsed time per iteration (ms): 14287.5 | learning rate: 2.407E-04 | global batch size:   768 | "
               "lm loss: 5.905366E+00 | loss scale: 8192.0 | actual seqlen:  4096 | number of skipped iterations:"
               "   0 | number of nan iterations:   0 | samples per second: 53.753 | tokens per gpu per second (tgs):"
               " 1146.733 | TFLOPs: 63.65 |",
               "iteration", {"iteration": 199, "consumed_tokens": 625999872, "samples_per_sec": 53.753,
                             "tokens_per_gpu_per_sec": 1146.733, "tflops_reported": 63.65}),
        Sample("3:  [2026-05-29 03:52:45] iteration      300/     300 | consumed samples:       307200 | elapsed time "
               "per iteration (ms): 131064.1 | eta: 0:00:00 | tokens/sec/gpu: 8000.5 | throughput per GPU "
               "(TFLOP/s/GPU): 412.3 | learning rate: 1.100000E-05 | global batch size:  1024 | lm loss: 2.1E+00 |",
               "iteration", {"iteration": 300, "tokens_per_gpu_per_sec": 8000.5, "tflops_reported": 412.3}),
        Sample(" iteration 126/ 5000 | consumed samples: 16128 | elapsed time per iteration (ms): 13372.8/13364.7 | "
               "throughput per GPU (TFLOP/s/GPU): 567.6/568.0 | tokens per GPU (tokens/s/GPU): 9801.4/9807.3 | "
               "lm loss: 6.548988E-03 |", "iteration",  # Primus: this interval's figure / the average so far
               {"iteration": 126, "elapsed_ms": 13372.8, "tflops_reported": 567.6, "tokens_per_gpu_per_sec": 9801.4}),
        Sample("[2024-06-21 10:50:42][INFO][training:1609] -  iteration=       1/  317892 | consumed_samples=  "
               "       768 | consumed_tokens=     3145728 | elapsed_time_per_iteration_ms=108893.2 | learning_rate="
               "1.88743e-08 | global_batch_size=  768 | lm loss=11.133188 | loss_scale=1.0 | actual_seqlen= 4096 |"
               " number_of_skipped_iterations=  0 | number_of_nan_iterations=  0 | samples_per_second=7.053 |",
               "iteration", {"iteration": 1, "elapsed_ms": 108893.2, "lr": 1.88743e-08, "global_batch": 768,
                             "losses": {"lm loss": 11.133188}, "samples_per_sec": 7.053, "skipped": 0}),
        Sample("Epoch 0: :  47%|████▋     | 7/15 [06:19<07:13, reduced_train_loss=11.50, global_step=5.000, "
               "consumed_samples=12288.0, train_step_timing in s=49.50]", "step",
               {"step": 5, "elapsed_ms": 49500.0, "loss": 11.5, "lr": None}),
        Sample("Epoch 0: :  47%|████▋     | 7/15 [06:19<07:13, reduced_train_loss=11.50, global_step=5.000]",
               "run_config", {"framework": "nemo", "train_iters": 15}),
        Sample("Training epoch 0, iteration 0/99 | lr: 0 | global_batch_size: 4 | global_step: 0 | "
               "reduced_train_loss: 1.285 | train_step_timing in s: 23.52",
               "iteration", {"iteration": 0, "train_iters": 99, "lr": 0.0, "global_batch": 4,
                             "losses": {"reduced train loss": 1.285}, "elapsed_ms": 23520.0}),
        Sample("Training epoch 2, iteration 5/49 | lr: 1e-05 | global_batch_size: 8 | global_step: 105 | "
               "reduced_train_loss: 1.25 | train_step_timing in s: 0.51 | consumed_samples: 848",
               "iteration", {"iteration": 105, "train_iters": 149, "consumed_samples": 848}),
        Sample("Training epoch 0, iteration 11/99 | lr: 1.6e-05 | global_batch_size: 256 | global_step: 11 | "
               "reduced_train_loss: 10.21 | train_step_timing in s: 1.23 | consumed_samples: 3072 | TFLOPS_per_GPU: "
               "350.1", "iteration", {"iteration": 11, "elapsed_ms": 1230.0, "tflops_reported": 350.1}),
        Sample(" [2026-03-02 10:04:11.271802] iteration       20/    1000 | consumed samples:         2560 | elapsed "
               "time per iteration (ms): 1249.6 | throughput per GPU (TFLOP/s/GPU): 402.7 | energy per GPU "
               "(J/iter/GPU): 812.4 | power per GPU (W/GPU): 650.1 | learning rate: 2.999998E-04 | global batch "
               "size:   128 | lm loss: 7.412309E+00 | loss scale: 1.0 | grad norm: 1.873 |",
               "iteration", {"iteration": 20, "elapsed_ms": 1249.6, "tflops_reported": 402.7,
                             "energy_j_per_gpu": 812.4, "power_w_per_gpu": 650.1}),
        Sample("Effective Tera Flops per GPU: 9.29 and total parameters 1.717 B",
               "throughput", {"tflops_reported": 9.29}),
        Sample("NumWorkers: 1; SamplesPerStep: 4; IterationTime: 6.051781535148621;  SamplesPerSecond: "
               "0.6609623921101718", "throughput", {"samples_per_sec": 0.6609623921101718,
                                                   "iteration_time_s": 6.051781535148621}),
        Sample("[Rank 12] (after 1 iterations) memory (MB) | allocated: 15382.845703125 | max allocated: "
               "19070.73583984375 | reserved: 26762.0 | max reserved: 26762.0", "memory",
               {"rank": 12, "gpu_allocated_mb": 15382.845703125, "gpu_max_allocated_mb": 19070.73583984375,
                "gpu_reserved_mb": 26762.0, "gpu_max_reserved_mb": 26762.0, "label": "after 1 iterations"}),
        Sample("after 10 iterations memory (MB) | allocated: 6943.26611328125 | max allocated: 10359.83984375 | "
               "reserved: 20720.0 | max reserved: 20720.0", "memory",
               {"rank": None, "gpu_max_allocated_mb": 10359.83984375}),
        Sample("[Rank 0] (before save_checkpoint for iteration 100) memory (MB) | allocated: 5728.25 | max allocated: "
               "45008.92 | reserved: 13294.00 | max reserved: 53598.00", "memory",
               {"rank": 0, "gpu_max_reserved_mb": 53598.0, "label": "before save_checkpoint for iteration 100"}),
        # a report srun wrapped behind the rank's label: its tail's whole fields
        Sample("0: erved: 42498.00 | max reserved: 42498.00", "memory", {"gpu_max_reserved_mb": 42498.0, "rank": 0}),
        Sample("erved: 42498.00 | max reserved: 42498.00 | peak: 3", None),  # other fields: no report's
        Sample("the | max reserved: 42498.00 of the pool", None),
        Sample(">>> done with compiling and loading fused kernels. Compilation time: 6.667 seconds", "milestone",
               {"name": "fused-kernels", "duration_s": 6.667}),
        Sample("[before the start of training step] datetime: 2022-06-22 22:22:59 ", "milestone",
               {"name": "training-start", "wall_time": 1655936579.0}),
        Sample("> initializing torch distributed ...", "milestone", {"name": "init-distributed"}),
        Sample("[exiting program at iteration 50] datetime: 2022-06-29 01:00:50 ", "exit",
               {"iteration": 50, "wall_time": 1656464450.0}),
        Sample("[exiting program after receiving SIGTERM.] datetime: 2026-08-22 15:22:22.123456 ", "exit",
               {"iteration": 1200, "wall_time": 1787412142.123456},
               context=(" iteration     1200/  500000 | consumed samples:      1228800 | elapsed time per iteration (ms):"
                        " 3107.0 | lm loss: 3.001000E+00 | number of skipped iterations:   0 | number of nan iterations:"
                        "   0 |",)),
    )

    def __init__(self, file: str = "") -> None:
        super().__init__(file)
        self._announced = False
        self._nan_reported = False
        self.last_iteration: Optional[int] = None

    # -- handlers ----------------------------------------------------------------------
    def _on_iteration(self, body: str, ctx: LineContext) -> list[Event]:
        matches = list(ITERATION.finditer(body))
        return self._iterations(body, matches, ctx) if matches else []

    def iterations_read(self, last: int) -> None:
        """The compiled core read iteration lines (:mod:`tuimon.engine.rows`): into rows, not
        through this parser; ``last`` is the latest counter, which its later lines name."""
        self.last_iteration = last

    def _on_progress_bar(self, body: str, ctx: LineContext) -> list[Event]:
        """NeMo 1.x (PyTorch Lightning): ``Epoch 0: :  47%|████▋  | 7/15 [06:19<07:13,
        reduced_train_loss=11.50, global_step=5.000, consumed_samples=12288.0,
        train_step_timing in s=49.50]``, the bar's latest state (framing keeps the
        text after the last carriage return).  A step at ``global_step``, not an
        iteration line (users count those with grep; this is no such line)."""
        at = body.rfind("reduced_train_loss=")
        bar = _PTL_BAR.search(body, 0, at)
        values = dict(_PTL_PAIR.findall(body, body.rfind("[", 0, at) + 1))
        step = to_int(values.get("global_step"))
        if step is None or bar is None:
            return []
        secs = to_float(values.get("train_step_timing in s"))
        events: list[Event] = []
        if self.first_time("_announced"):
            events.append(self.make(RunConfig, ctx, framework=_style(body), train_iters=to_int(bar.group(2))))
        events.append(self.make(Step, ctx, step=step, loss=to_float(values.get("reduced_train_loss")),
                                lr=to_float(values.get("lr")), elapsed_ms=secs * 1000.0 if secs is not None else None))
        return events

    def _on_effective(self, body: str, ctx: LineContext) -> list[Event]:
        m = _EFFECTIVE.search(body)
        if not m:
            return []
        return [self.make(Throughput, ctx, iteration=self.last_iteration, tflops_reported=to_float(m.group(1))),
                self.make(RunConfig, ctx, total_params_b=to_float(m.group(2)))]

    def effective_into(self, rows: list[tuple], values: list, frame: tuple, wall: Optional[float]) -> None:
        """An ``Effective Tera Flops`` line the compiled core read (its TFLOPs and parameters,
        :data:`CORE_EFFECTIVE`), into ``rows`` (a tuple of :class:`~.columns.RateRows`)."""
        rows.extend(self.effective_rows([values], [frame], [wall], [None]))

    def effective_rows(self, values: list[list], frames: list[tuple], walls: list, iterations: list) -> list[tuple]:
        """The rows of many such lines (``effective_into``'s), each at the iteration ``iterations``
        names (None: this parser's latest, as the lines before it left it)."""
        last = self.last_iteration
        return [(frame[0], frame[3], frame[5], wall, last if at is None else at, v[0], v[1], None, None, 0, None, None)
                for v, frame, wall, at in zip(values, frames, walls, iterations)]

    def numworkers_into(self, rows: list[tuple], values: list, frame: tuple, wall: Optional[float]) -> None:
        """A ``NumWorkers`` line the compiled core read (its iteration time and samples a
        second, :data:`CORE_NUMWORKERS`), into ``rows`` (a tuple of :class:`~.columns.RateRows`)."""
        rows.extend(self.numworkers_rows([values], [frame], [wall], [None]))

    def numworkers_rows(self, values: list[list], frames: list[tuple], walls: list, iterations: list) -> list[tuple]:
        """The rows of many such lines (as :meth:`effective_rows`)."""
        last = self.last_iteration
        return [(frame[0], frame[3], frame[5], wall, last if at is None else at, None, None, v[1], v[0], 1, None, None)
                for v, frame, wall, at in zip(values, frames, walls, iterations)]

    def _on_numworkers(self, body: str, ctx: LineContext) -> list[Event]:
        m = _NUMWORKERS.search(body)
        if not m:
            return []
        return [self.make(Throughput, ctx, iteration=self.last_iteration, samples_per_sec=to_float(m.group(4)),
                          iteration_time_s=to_float(m.group(3)))]

    def _on_exit(self, body: str, ctx: LineContext) -> list[Event]:
        m = _EXIT.search(body)
        if not m:
            return []
        wall = parse_iso(m.group(2))
        return [Exit(file=self.file, line=ctx.line, rank=ctx.rank, node=ctx.node,
                     wall_time=wall if wall is not None else ctx.wall_time,
                     iteration=to_int(m.group(1)) if m.group(1) else self.last_iteration)]

    def _on_milestone(self, body: str, ctx: LineContext) -> list[Event]:
        for pattern, name in _MILESTONES:
            m = pattern.search(body)
            if m:
                return [self._milestone(name, m, ctx)]
        return []

    # -- pieces ---------------------------------------------------------------------
    def _iterations(self, body: str, matches: list[re.Match], ctx: LineContext) -> list[Event]:
        events: list[Event] = []
        if self.first_time("_announced"):
            events.append(self.make(RunConfig, ctx, framework=_style(body)))
        for i, m in enumerate(matches):
            start = 0 if i == 0 else m.start()
            end = matches[i + 1].start() if i + 1 < len(matches) else len(body)
            fields = parse_record(body[start:end])
            it, total = to_int(m.group(1)), to_int(m.group(2))
            nemo = _NEMO2.match(body) if i == 0 and body.startswith(_NEMO2_START) else None
            if nemo:  # numbered through the run as users count steps; done at the end of this epoch, at least
                epoch, per_epoch, it = (int(g) for g in nemo.groups())
                total = (epoch + 1) * (per_epoch + 1) - 1
            fields["iteration"] = it
            fields["train_iters"] = total
            events.append(self.make(Iteration, ctx, **fields))
            if it is not None:
                self.last_iteration = it
            if _has_nan(fields) and self.first_time("_nan_reported"):
                events.append(self.make(Failure, ctx, kind="nan",
                                        message=f"NaN at iteration {it}: {body.strip()[:200]}"))
        return events

    def _on_memory(self, body: str, ctx: LineContext) -> list[Event]:
        """One event a report: ranks printing at once write several on one line (BigScience's
        ``...| max reserved: 26762.0[Rank 3] (after 1 iterations) memory (MB) | ...``), each
        report's values running to the next one's tag."""
        reports = list(_MEMORY.finditer(body))
        events: list[Event] = []
        for k, m in enumerate(reports):
            end = reports[k + 1].start() if k + 1 < len(reports) else len(body)
            values: dict[str, Optional[float]] = {}
            for seg in body[m.end():end].split("|"):
                key, _, value = seg.partition(":")
                values[norm_key(key)] = to_float(value)
            events.append(self._memory(ctx.line, _memory_rank(m, ctx.rank), ctx.node, ctx.wall_time, m.group(2),
                                       *(values.get(key) for key in MEMORY_KEYS)))
        return events

    def _on_memory_tail(self, body: str, ctx: LineContext) -> list[Event]:
        """The rest of a report srun wrapped onto a line of its own, behind the rank's label
        (``... | max allocated: 45008.92 | res`` then ``0: erved: 42498.00 | max reserved: 42498.00``):
        its whole fields count, the cut one before them is left out (the report's own line read the rest)."""
        if _WHOLE_REPORT in body:
            return []  # a whole report: _on_memory's
        first, *rest = body.split("|")
        if not rest or not _MEMORY_TAIL_HEAD.match(first):
            return []
        values: dict[str, Optional[float]] = {}
        for seg in rest:
            key, colon, value = seg.partition(":")
            name, number = norm_key(key), to_float(value) if colon else None
            if name not in _MEMORY_KEYS or number is None:
                return []  # not a memory report's fields
            values[name] = number
        return [self._memory(ctx.line, ctx.rank, ctx.node, ctx.wall_time, "(wrapped)",
                             *(values.get(key) for key in MEMORY_KEYS))]

    def memory_into(self, rows: list[tuple], row: tuple, frame: tuple, wall: Optional[float]) -> None:
        """A memory report the compiled core read (``MemoryLines``; see
        :mod:`tuimon.engine.rows`): its tag's rank, its moment (``after N iterations``)
        and its four values, as :meth:`_on_memory` reads a line holding one report, into
        ``rows`` (a tuple of :class:`~.columns.MemoryRows`)."""
        tag, label, values = row
        rows.append((frame[0], frame[3] if tag is None else tag, frame[5], wall, label, *values))

    def _memory(self, line: int, rank: Optional[int], node: Optional[str], wall: Optional[float], label: str,
                allocated: Optional[float], max_allocated: Optional[float], reserved: Optional[float],
                max_reserved: Optional[float]) -> Memory:
        """One memory report's event (MB), ``label`` its moment (``after N iterations``)."""
        return Memory(file=self.file, line=line, rank=rank, node=node, wall_time=wall,
                      label=label, gpu_allocated_mb=allocated, gpu_max_allocated_mb=max_allocated,
                      gpu_reserved_mb=reserved, gpu_max_reserved_mb=max_reserved)

    def _milestone(self, name: str, m: re.Match, ctx: LineContext) -> Event:
        duration = wall = None
        if m.groups():
            arg = m.group(1)
            if "datetime" in m.re.pattern:
                wall = parse_iso(arg)
            else:
                duration = to_float(arg)
        return Milestone(file=self.file, line=ctx.line, rank=ctx.rank, node=ctx.node,
                         wall_time=wall if wall is not None else ctx.wall_time, name=name, duration_s=duration,
                         detail="megatron-initialized" if name == INIT_TIME else None)


_GROUP_1_2 = methodcaller("group", 1, 2)
# PyTorch Lightning's bar: "n/total [elapsed<remaining, key=value, ...]"; its pairs' keys may hold spaces
_PTL_BAR = lazy(r"(\d+)/(\d+) \[")
_PTL_PAIR = lazy(r"([A-Za-z_][A-Za-z_ ]*?)=([-+]?(?:\d[\d.]*(?:[eE][-+]?\d+)?|nan|inf))(?=[,\]]|$)")
_FIRST, _SECOND = itemgetter(0), itemgetter(1)


def _memory_rank(m: re.Match, default: Optional[int]) -> Optional[int]:
    """The rank of a memory line: the tag the pattern caught, else a tag elsewhere
    in the line (None if it is odd), else ``default``."""
    if m.group(1):
        return to_int(m.group(1))
    return rank_tag(m.string) if "[Rank" in m.string else default


def _has_nan(fields: dict) -> bool:
    if (fields.get(_NAN_COUNT) or 0) > 0:
        return True
    losses = fields.get("losses") or {}
    return any(v != v for v in losses.values())
