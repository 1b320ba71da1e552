"""Training scripts' own progress lines: a step and its loss on one line, in any
of the shapes hand-written loops print them::

    iter 100: loss 3.2456, time 123.45ms, mfu 35.12%                      (nanoGPT)
    step    1/74 | train loss 11.0113 | norm 15.43 | lr 8.57e-07 | (322.82 ms | 1624079 tok/s)   (llm.c)
    0: 2025-06-17 16:24:52 I [train.py:103] Batch 0 Loss: 11.61653, Speed: 4.88 samples/sec, lr: 0.0001
    [0] [1/10: 0/3750 (0%)] epoch=1.0000 step=1.0000 dt=0.3544 batch_acc=0.1172 batch_loss=0.0091
    completed step: 100, seconds: 1.234, TFLOP/s/device: 123.4, Tokens/s/device: 1234.5, loss: 2.345  (MaxText)
    Step 100 | loss:1.2345 lr:2e-05 tokens_per_second_per_gpu:1234.5      (torchtune)
    {"step": 10, "train/loss": 2.5, "lr": 0.001}                            (JSON lines)
    [2024-02-04 21:30:33] INFO [olmo.train:816, rank=0] [step=1/739328]   (OLMo: a header, then
        train/CrossEntropyLoss=11.07                                        its metrics a line each;
    [batch=10/4800]:  /  \t Train loss/train/total: 2.3456                  Composer's alike)
    Train: 3 [ 100/1251 (  8%)]  Loss: 6.789 (6.891)  Time: 0.345s, ...     (timm)
    epoch=1 dt=12.48 train_loss=0.5967 test_loss=0.1435 test_acc=95.56    (an epoch summary)

Each such line is a step: its number (``global_step``, ``num_updates``,
``step``, ``iteration``, ``iter``, ``batch``, else ``epoch``: the first of these
the line has), its training loss, and where given the step time, the learning
rate, samples a second and the TFLOPs a device.  A line that reports a
validation loss is an evaluation, not a step (an epoch summary excepted).

This parser is the fallback for runs no framework parser reads: it stays off in a
file where a parser whose own lines give the steps and their loss is on
(``STEPS_WITH_LOSS``), and passes over the lines other parsers read (Megatron's
iteration lines, Hugging Face's dicts, TorchTitan's and ezpz's steps, progress
bars).  Numbers it cannot read for sure are left out, never guessed: a time
without a unit is no step time.
"""
from __future__ import annotations

import re
from typing import Optional

from .base import LineContext, LineParser, Sample, compile_sniff
from .events import Event, RunConfig, Step, Throughput
from .numbers import to_float
from .patterns import lazy

_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
# "step=1", "step: 1", "step 1", '"step": 1', and a JSON or dict record's quoted number ('"loss": "2.5"')
_SEP = r"[\"']?\s*(?:[=:]\s*|\s+)[\"']?"
_STEP = lazy(r"(?<![\w.-])(global[_ ]step|num_updates|step|iteration|iter|batch|epoch)" + _SEP +
             r"\[?\s*(\d{1,12})(?:\.0+)?(?![.\d])(?:\s*/\s*(\d{1,12}))?", re.I)
_EPOCH_BATCH = lazy(r"(?<![\w.-])Train: (\d{1,6}) \[\s*(\d{1,12})/(\d{1,12})")
_STEP_KEYS = ("global_step", "global step", "num_updates", "step", "iteration", "iter", "batch", "epoch")
_LOSS = lazy(r"(?<![\w.-])((?:[a-z]+[_ /-])?loss(?:[_ /-](?:train|avg|mean))?)" + _SEP +
             r"(" + _NUMBER + r"|nan|inf)(?![\w.])", re.I)
_EVAL_WORDS = {"val", "valid", "validation", "eval", "test", "dev"}
_TIME = lazy(r"(?<![\w.-])((?:dt|time|step[_ ]time|iter(?:ation)?[_ ]time|batch[_ ]time|"
             r"time[_ ]per[_ ](?:step|iter(?:ation)?|batch)|elapsed[_ ]time[_ ]per[_ ]iteration)"
             r"(?:[_ ](?:ms|s|sec)| \((?:ms|s)\))?|seconds)" + _SEP +
             r"(\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)((?-i:[KM]))?\s*(ms|s|sec)?(?![\w.])", re.I)
_SCALE = {"K": 1e3, "M": 1e6}  # Nanotron's human-formatted numbers: "elapsed_time_per_iteration_ms: 1.23K"
# llm.c: "| (322.82 ms | 1624079 tok/s)" (train_gpt2.py), "| 322.82 ms | 42.1% bf16 MFU |" (train_gpt2.cu)
_BARE_MS = lazy(r"[(|]\s*(\d+(?:\.\d*)?)\s*ms\s*[|)]")
_MFU = lazy(r"\|\s*(\d+(?:\.\d*)?)%\s*(?:bf16|fp16|fp32|tf32)?\s*MFU\b")
# llm.c's train_gpt2.cu prints each step's loss and norm with their z-scores: "loss 7.011300 (+0.00z)| norm ..."
_LLMC_ZSCORE = lazy(r"\d \([-+](?:\d+\.\d+|nan|inf)z\)\| norm ")
# nanoGPT: "iter 100: loss 3.2456, time 123.45ms, mfu 35.12%" ("mfu -100.00%" before its estimate warms up)
_MFU_WORD = lazy(r"(?<![\w.-])mfu[ =:]\s*(-?\d+(?:\.\d*)?)%")
# the whole run's tokens a second: llm.c's "(322.82 ms | 1624079 tok/s)", build-nanogpt's "tok/sec: 45858.48",
# "tokens/sec: 9.8e4", "tokens_per_sec=..." (not a rate per GPU or per device: those say so)
_TOKS = lazy(r"(?<![\w.])(\d+(?:\.\d*)?)\s*tok/s\b|(?<![\w/])tok(?:ens)?(?:/s(?:ec)?|_per_sec(?:ond)?)"
             r"(?![\w/])\s*[:=]\s*(\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)")
_PER_STEP = lazy(r"(?<![\w.])(\d+(?:\.\d*)?)\s*(ms|s)/(?:it|iter|step)\b")  # "456.7 ms/it", "1.52s/it"
_LR = lazy(r"(?<![\w.-])(?:lr|learning[_ ]rate)" + _SEP + r"(" + _NUMBER + r")(?![\w.])", re.I)
_SAMPLES = lazy(r"(?:(\d+(?:\.\d*)?)\s*samples?/s(?:ec)?\b|samples_per_sec(?:ond)?" + _SEP +
                r"(\d+(?:\.\d*)?))", re.I)
_TFLOPS = lazy(r"(?<![\w.-])(?:TFLOP/s/device|(?:model_)?TFLOPs?(?:_per_gpu| per GPU)?)" + _SEP +
               r"(\d+(?:\.\d*)?)(?![\w.])", re.I)
_HEADER = lazy(r"\[(?:step|batch)=(\d{1,12})(?:/(\d{1,12}))?\]:?\s*$")
# a metric line under a header: OLMo "    train/CrossEntropyLoss=2.345", Composer "\t Train loss/train/total: 2.345"
_METRIC_LOSS = lazy(r"\s+((?:train[ /])?[\w/ ]*?loss[\w/]*)\s*[=:]\s*(" + _NUMBER + r"|nan|inf)\s*$", re.I)
_HEADER_REACH = 60  # lines a header's metrics may follow it by
# lines other parsers read, or progress bars whose postfix carries a loss
# DeepSpeed's pipeline engine's step line (parsers.deepspeed reads it, the compiled core too: see LEAVES)
_PIPELINE = lazy(r"\bsteps: \d+ loss: ")
_OTHERS = lazy(r"iteration[ =]+\d+/ *\d+ *\||\{'loss'|\[titan\]|\]\s*iter=\d|reduced_train_loss|"
               + _PIPELINE.pattern + r"|\d%\|")
# a text each alternative of _OTHERS holds, and a word each key of _STEP holds (in any case): a line
# without them needs no search (each costs 6-8 us a line: no literal starts them)
_OTHERS_NEEDLES = ("iteration", "{'loss'", "[titan]", "iter=", "reduced_train_loss", "steps: ", "%|")
_STEP_WORDS = ("step", "iter", "batch", "epoch", "num_updates")


class ProgressParser(LineParser):
    name = "progress"
    READS = "hand-written loops' step lines (step/loss/lr/tok/s), llm.c, modded-nanogpt"
    framework = "custom"
    FALLBACK = True
    # a loss with a number, anywhere: cheap to confirm (no step searched for around it), and
    # waking is cheap too; a file whose framework parser wakes drops this one at once
    SNIFF = compile_sniff(r"[Ll]oss[^\n]{0,8}?[=: ]\s*[-+.\d]", r"\[step=\d+/\d+\][ \t]*\n",
                          r"\[batch=\d+/\d+\]:[ \t]*\n")
    ROUTES = ((r"\[step=\d+(?:/\d+)?\]\s*$", "_on_header"), (r"\[batch=\d+(?:/\d+)?\]:\s*$", "_on_header"),
              (r"loss", "_on_line"), (r"Loss", "_on_line"))
    ONCE_FLAGS = ("_announced", "_total_reported")
    # (DeepSpeed's pipeline lines are its, given nothing here: left, they are the compiled core's)
    LEAVES = {"_on_line": _PIPELINE}

    SAMPLES = (
        Sample("iter 100: loss 3.2456, time 123.45ms, mfu 35.12%", "step",
               {"step": 100, "loss": 3.2456, "elapsed_ms": 123.45}),
        Sample("iter 100: loss 3.2456, time 123.45ms, mfu 35.12%", "throughput", {"iteration": 100, "mfu": 35.12}),
        Sample("iter 0: loss 10.9876, time 9876.54ms, mfu -100.00%", "step", {"step": 0}),
        Sample("step    1/74 | train loss 11.0113 | norm 15.4319 | lr 8.57e-07 | (322.82 ms | 1624079 tok/s)", "step",
               {"step": 1, "loss": 11.0113, "lr": 8.57e-07, "elapsed_ms": 322.82}),
        Sample("step    1/74 | train loss 11.0113 | norm 15.4319 | lr 8.57e-07 | (322.82 ms | 1624079 tok/s)",
               "run_config", {"framework": "custom", "train_iters": 74}),
        Sample("step   10/74 | loss 7.011300 (+0.00z)| norm 5.4319 (-1.20z)| lr 8.57e-06 | 322.82 ms | 42.1% bf16 MFU | "
               "1624079 tok/s", "step", {"step": 10, "loss": 7.0113, "elapsed_ms": 322.82, "lr": 8.57e-06}),  # llm.c
        Sample("step   10/74 | loss 7.011300 (+0.00z)| norm 5.4319 (-1.20z)| lr 8.57e-06 | 322.82 ms | 42.1% bf16 MFU | "
               "1624079 tok/s", "throughput", {"iteration": 10, "mfu": 42.1, "tokens_per_sec": 1624079.0}),
        Sample("step    1/3 | loss 11.032358 (+nanz)| norm 22.1414 (+nanz)| lr 8.57e-07 | 2500.46 ms | 40.2% bf16 MFU | "
               "209676 tok/s", "run_config", {"framework": "llm.c", "train_iters": 3}),
        Sample("0: 2025-06-17 16:24:52 I [train.py:103] Batch 0 Loss: 11.61653, Speed: 4.88 samples/sec, "
               "lr: 0.000100", "step",
               {"step": 0, "loss": 11.61653, "samples_per_sec": 4.88, "lr": 0.0001, "elapsed_ms": None}),
        Sample("[2023-05-15 14:14:50,363][mlprof.trainers.pytorch.trainer][INFO] - [0] [1/10: 0/3750 (0%)] "
               "epoch=1.0000 step=1.0000 dt=0.3544 batch_acc=0.1172 batch_loss=0.0091 acc=0.0080 "
               "running_loss=0.0006", "step", {"step": 1, "loss": 0.0091, "elapsed_ms": 354.4}),
        Sample("completed step: 100, seconds: 1.234, TFLOP/s/device: 123.4, Tokens/s/device: 1234.5, "
               "total_weights: 4096, loss: 2.345", "throughput", {"iteration": 100, "tflops_reported": 123.4}),
        Sample("Step 100 | loss:1.2345 lr:2e-05 tokens_per_second_per_gpu:1234.5", "step",
               {"step": 100, "loss": 1.2345, "lr": 2e-05}),
        Sample("[2025-12-31 12:21:55,502783][I][examples/fsdp:340:fsdp_main] epoch=1 dt=12.487221 "
               "train_loss=0.596659 test_loss=0.143485 test_acc=95.563553 dt/mean=11.990577", "step",
               {"step": 1, "loss": 0.596659, "elapsed_ms": 12487.221}),
        Sample("Epoch 1 | iter 100 step 25 | loss train: 2.345, val: n/a | iter time: 123.45 ms (step)", "step",
               {"step": 25, "loss": 2.345, "elapsed_ms": 123.45}),
        Sample('{"step": 10, "train/loss": 2.5, "lr": 0.001, "step_time_s": 0.8}', "step",
               {"step": 10, "loss": 2.5, "lr": 0.001, "elapsed_ms": 800.0}),
        Sample('{"step": "10", "train/loss": "2.5", "lr": "0.001", "step_time_s": "0.8"}', "step",
               {"step": 10, "loss": 2.5, "lr": 0.001, "elapsed_ms": 800.0}),  # numbers written as strings
        Sample("step    50 | loss: 6.470154 | lr 6.0000e-04 | norm: 0.9832 | dt: 357.27ms | tok/sec: 45858.48",
               "throughput", {"iteration": 50, "tokens_per_sec": 45858.48}),  # build-nanogpt
        Sample("step 9, loss: 10.140941619873047, time: 357.51 ms, tokens/sec: 45828.66", "throughput",
               {"iteration": 9, "tokens_per_sec": 45828.66}),
        Sample("step 9, loss: 10.1, tokens/sec/gpu: 1200.5", "step", {"step": 9}),  # per GPU: no run rate
        Sample("step 3 loss 2.0 iter_time_ms 412.5", "step", {"step": 3, "elapsed_ms": 412.5}),
        Sample("Iter 120/5000 | Loss 3.21 | 1.23 it/s | 456.7 ms/it", "step",
               {"step": 120, "loss": 3.21, "elapsed_ms": 456.7}),
        Sample("2021-03-01 12:00:00 | INFO | train_inner | epoch 001:    100 / 1000 loss=9.2, ppl=588.1, "
               "wps=12345, ups=1.2, wpb=4096, bsz=8, num_updates=100, lr=0.0001, gnorm=1.2, train_wall=30",
               "step", {"step": 100, "loss": 9.2, "lr": 0.0001}),  # fairseq: the update count
        Sample("    train/CrossEntropyLoss=11.07", "step", {"step": 1, "loss": 11.07, "line": 2},
               context=("[2024-02-04 21:30:33] INFO     [olmo.train:816, rank=0] [step=1/739328]",)),  # OLMo
        Sample("    train/CrossEntropyLoss=2.5", "run_config", {"framework": "custom", "train_iters": 739328},
               context=("[2024-02-04 21:30:33] INFO     [olmo.train:816, rank=0] [step=1/739328]",
                        "    train/Perplexity=64,150")),
        Sample("    train/CrossEntropyLoss=2.5", None),  # no step header before it
        Sample("\t Train loss/train/total: 2.3456", "step", {"step": 10, "loss": 2.3456},
               context=("[batch=10/4800]:", "\t Train time/batch: 9", "\t Train time/train: 0.0411")),  # Composer
        Sample("\t Eval loss/eval/total: 2.5", None, context=("[batch=10/4800]:",)),
        Sample("[0428 10:37:12|INFO|nanotron]: iteration: 100 / 1000 | consumed_tokens: 1.31M | "
               "elapsed_time_per_iteration_ms: 1.23K | tokens_per_sec: 1.07M | global_batch_size: 512 | "
               "lm_loss: 5.23 | lr: 0.0003 | model_tflops_per_gpu: 45.2 | hardware_tflops_per_gpu: 50.1",
               "step", {"step": 100, "loss": 5.23, "elapsed_ms": 1230.0, "lr": 0.0003}),  # Nanotron
        Sample("[0428 10:37:12|INFO|nanotron]: iteration: 100 / 1000 | elapsed_time_per_iteration_ms: 1.23K | "
               "lm_loss: 5.23 | model_tflops_per_gpu: 45.2 | hardware_tflops_per_gpu: 50.1", "throughput",
               {"iteration": 100, "tflops_reported": 45.2}),
        Sample("Train: 3 [ 100/1251 (  8%)]  Loss: 6.789 (6.891)  Time: 0.345s,  742.31/s  (0.350s,  731.43/s)  "
               "LR: 1.000e-04  Data: 0.012 (0.015)", "step",
               {"step": 3 * 1252 + 100, "loss": 6.789, "elapsed_ms": 345.0, "lr": 1e-4}),  # timm
        Sample("step 250: train loss 2.3456, val loss 2.4567", None),  # an evaluation
        Sample("Batch 3 Loss: nan, lr: 0.0001", "step", {"step": 3, "loss": float("nan")}),
        Sample("step 7 | loss 2.1 | time 0.33", "step", {"step": 7, "loss": 2.1, "elapsed_ms": None}),  # no unit
        Sample("time per step: 1.5 s, loss: 2.0", None),  # no step number
        Sample(" iteration      100/    1000 | lm loss: 2.000000E+00 |", None),  # Megatron's
        Sample("Epoch 0:  47%|####7     | 7/15 [06:19<07:13, loss=11.50, v_num=1]", None),  # a bar
    )

    def __init__(self, file: str = "") -> None:
        super().__init__(file)
        self._announced = False
        self._total_reported = False
        self._header: Optional[tuple[int, Optional[int], int]] = None  # OLMo's "[step=N/M]": step, total, line

    def _on_header(self, body: str, ctx: LineContext) -> list[Event]:
        """OLMo and Composer (LLM Foundry) log a step as a header line ending in
        ``[step=N/M]`` or ``[batch=N/M]:`` and its metrics on the indented lines
        after it (``    train/CrossEntropyLoss=2.345``, ``\t Train loss/train/total: 2.345``)."""
        m = _HEADER.search(body)
        self._header = (int(m.group(1)), int(m.group(2)) if m.group(2) else None, ctx.line) if m else None
        return []

    def _on_line(self, body: str, ctx: LineContext) -> list[Event]:
        if len(body) > 4096 or (any(n in body for n in _OTHERS_NEEDLES) and _OTHERS.search(body)):
            return []
        step_key, step, total = step_of(body)
        if step is None:
            return self._on_metric(body, ctx)
        loss = _train_loss(body, eval_ok=step_key == "epoch")
        if loss is None or step_key is None:
            return []
        return self._step(ctx, step_key, step, total, loss, body)

    def _on_metric(self, body: str, ctx: LineContext) -> list[Event]:
        """An indented training-loss line just after a step header: that step's loss."""
        header = self._header
        if header is None or not body[:1].isspace() or ctx.line - header[2] > _HEADER_REACH:
            return []
        m = _METRIC_LOSS.match(body)
        if m is None or _is_eval(m.group(1)):
            return []
        loss = to_float(m.group(2))
        if loss is None:
            return []
        self._header = None  # one step a header: its first training loss
        return self._step(ctx, "step", header[0], header[1], loss, "")

    def _step(self, ctx: LineContext, step_key: str, step: int, total: Optional[int], loss: float,
              body: str) -> list[Event]:
        events: list[Event] = []
        if total is not None and step_key != "epoch" and self.first_time("_total_reported"):
            events.append(self.make(RunConfig, ctx, train_iters=total))
        m = _LR.search(body)
        samples = _SAMPLES.search(body) if "amples" in body or "AMPLES" in body else None
        events.append(self.make(Step, ctx, step=step, loss=loss, lr=to_float(m.group(1)) if m else None,
                                elapsed_ms=_step_ms(body),
                                samples_per_sec=to_float(samples.group(1) or samples.group(2)) if samples else None))
        m = _TFLOPS.search(body) if _has_any(body, "FLOP", "flop", "Flop") else None
        tflops = to_float(m.group(1)) if m else None
        mfu = _mfu_of(body)
        toks = _TOKS.search(body) if "tok" in body else None
        if tflops is not None or mfu is not None or toks:
            events.append(self.make(Throughput, ctx, iteration=step, tflops_reported=tflops, mfu=mfu,
                                    tokens_per_sec=to_float(toks.group(1) or toks.group(2)) if toks else None))
        llmc = self._announced is False and _LLMC_ZSCORE.search(body) is not None
        events = self.announce(events, ctx)
        if llmc and type(events[0]) is RunConfig:  # the first line names the run's trainer: llm.c's own shape
            events[0] = events[0]._replace(framework="llm.c")
        return events


def _mfu_of(body: str) -> Optional[float]:
    """The MFU a line reports, in percent (llm.c's ``| 42.1% bf16 MFU |``, nanoGPT's ``mfu 35.12%``);
    None before nanoGPT's estimate exists (it prints -100.00%)."""
    m = _MFU.search(body) if "MFU" in body else None
    if m is None and "mfu" in body:
        m = _MFU_WORD.search(body)
    value = to_float(m.group(1)) if m else None
    return value if value is not None and value >= 0 else None


def _has_any(body: str, *needles: str) -> bool:
    """A literal test before a regex that starts with a number: ``re`` tries such a regex at
    every position of the line and runs through each digit run it meets (20 us a line of
    numbers for the samples/s pattern alone); the literal it needs is found at C speed."""
    return any(n in body for n in needles)


def step_of(body: str) -> tuple[Optional[str], Optional[int], Optional[int]]:
    """(key, number, total) of the line's step: the first key of ``_STEP_KEYS`` it has."""
    best: Optional[tuple[int, str, int, Optional[int]]] = None
    # (re.I folds more than lower() outside ASCII: U+017F is an s to it)
    low = body.lower() if body.isascii() else None
    for m in _STEP.finditer(body) if low is None or any(w in low for w in _STEP_WORDS) else ():
        key = m.group(1).lower().replace(" ", "_")
        rank = _STEP_KEYS.index(key) if key in _STEP_KEYS else len(_STEP_KEYS)
        if best is None or rank < best[0]:
            best = (rank, key, int(m.group(2)), int(m.group(3)) if m.group(3) else None)
    if best is None:
        batch = _EPOCH_BATCH.search(body) if "Train: " in body else None
        if batch is None:
            return None, None, None
        # timm: "Train: 3 [ 100/1251 (  8%)]", a batch of an epoch of 1251 + 1: counted on across epochs
        return "batch", int(batch.group(1)) * (int(batch.group(3)) + 1) + int(batch.group(2)), None
    return best[1], best[2], best[3]


def _train_loss(body: str, eval_ok: bool) -> Optional[float]:
    """The first training loss of the line; None when it has none, or reports a
    validation loss (an evaluation) and ``eval_ok`` is false."""
    found = None
    for m in _LOSS.finditer(body):
        if _is_eval(m.group(1)):
            if not eval_ok:
                return None
            continue
        if found is None:
            found = to_float(m.group(2))
    return found


def _is_eval(key: str) -> bool:
    """Whether a loss's key names an evaluation: its first word, or a path part."""
    words = re.split(r"[_ /-]", key.lower())
    return words[0] in _EVAL_WORDS or any(w in ("eval", "val", "validation") for w in words[1:])


def _step_ms(body: str) -> Optional[float]:
    """The step time in ms, when the line says its unit (or its key does)."""
    for m in _TIME.finditer(body):
        key, value, unit = m.group(1).lower(), to_float(m.group(2)), (m.group(4) or "").lower()
        if value is None:
            continue
        value *= _SCALE.get((m.group(3) or "").upper(), 1.0)
        if not unit:  # the key may say it: "time_ms", "step_time_s", "elapsed time per iteration (ms)"
            unit = "s" if key in ("dt", "seconds") else re.split(r"[_ (]", key.rstrip(")"))[-1]
        if unit == "ms":
            return value
        if unit in ("s", "sec"):
            return value * 1000.0
    per = _PER_STEP.search(body) if "s/" in body else None
    if per:
        value = to_float(per.group(1))
        return None if value is None else value if per.group(2) == "ms" else value * 1000.0
    bare = _BARE_MS.search(body)
    return to_float(bare.group(1)) if bare else None
