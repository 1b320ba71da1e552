"""Evaluations, as every family prints them: a validation or test figure at a step.

* Megatron (LM, Core, DeepSpeed, NeoX)::

      validation loss at iteration 100 | lm loss value: 7.692623E+00 | lm loss PPL: 2.192116E+03 |
      validation loss at iteration 10 on test set | lm loss value: ...
      validation loss at the end of training for test data | lm loss value: ...
      validation results at iteration 100 | lm_loss value: 2.84E+00 | lm_loss_ppl value: 1.72E+01 |   (NeoX)

  metrics ``val lm loss`` and ``val lm loss PPL`` (``test ...`` for a test set);
* NeMo 2's progress line (``... | global_step: 50 | ... | val_loss: 1.619``: told again on
  every line until the next evaluation, so only a new value is one) and Lightning's
  checkpoint callback (``Epoch 0, global step 49: 'val_loss' reached 1.61900 (best ...)``);
* torchtitan's ``validate step: 14000  loss:  3.3315`` (``validation loss``);
* hand-written loops: ``step:125/1390 val_loss:3.8 train_time:...`` (modded-nanogpt),
  ``step 250: train loss 2.34, val loss 2.45`` (nanoGPT), ``val loss 3.28`` (llm.c),
  ``epoch=1 ... test_loss=0.14 test_acc=95.56``: every ``val``/``valid``/``validation``/
  ``eval``/``test``/``dev`` loss, perplexity or accuracy of the line, at its step;
* llm.c's ``main.log`` (``s:0 tel:10.968871``: ``val loss``; ``s:0 eval:0.29``: HellaSwag).

Hugging Face's ``{'eval_loss': ...}`` dicts are :class:`parsers.hf_trainer.HFTrainerParser`'s
(they need its step), MLPerf's ``eval_accuracy`` :class:`parsers.mlperf.MLPerfParser`'s.
"""
from __future__ import annotations

import re
from typing import Optional

from .base import LineContext, LineParser, Sample
from .common import strip_ansi
from .events import Evaluation, Event, frozen_map
from .numbers import to_float
from .patterns import lazy
from .progress import step_of

_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
# Megatron "validation loss at ..."; GPT-NeoX "{chart_name} results at {prefix} | lm_loss value: ... |", its chart
# "validation", "test", "valid" or "validation/{dataset}", its prefix "iteration N" or "the end of training for val data"
_MEGATRON = lazy(r"(?:validation loss|(validation|test|valid)(?:/[\w.-]{1,60})? results) at "
                 r"(?:iteration (\d{1,12})(?: on ([\w -]{1,60}?))?|the end of training for (\w+) data)\s*\|(.*)")
_MEGATRON_PAIR = lazy(r"\s*([^|:]{1,80}?) (value|PPL)\s*:\s*(" + _NUMBER + r"|nan|inf)\s*(?=\||$)")
_NEMO_STEP = lazy(r"\|\s*global_step: (\d{1,12})\b")
_NEMO_VAL = lazy(r"\|\s*(val_loss): (" + _NUMBER + r"|nan|inf)\s*(?:\||$)")
_LIGHTNING = lazy(r"global step (\d{1,12}): '([\w/]{1,64})' reached (" + _NUMBER + r"|nan|inf)")
_TITAN = lazy(r"validate step: *(\d{1,12}) +loss: *(" + _NUMBER + r"|nan|inf)")
_LLMC = lazy(r"^s:(\d{1,12}) (tel|eval):(" + _NUMBER + r"|nan|inf)\s*$")
_LLMC_NAMES = {"tel": "val loss", "eval": "hellaswag acc"}
_HELLASWAG = lazy(r"^HellaSwag: \d{1,12}/\d{1,12} = (" + _NUMBER + r")\s*$")
# a held-out figure: a set word, then at most two more words, then what is measured
_EVAL_KV = lazy(r"(?<![\w.-])['\"]?((?:val|valid|validation|eval|test|dev)(?:[_ /-][A-Za-z]{1,20}){0,2}?"
                r"[_ /-](?:loss|ppl|perplexity|acc|accuracy|bpb))['\"]?\s*(?:[:=]\s*|\s+)"
                r"(" + _NUMBER + r"|nan|inf)(?![\w.])", re.I)


class EvalParser(LineParser):
    name = "evals"
    READS = ("evaluations: Megatron/NeMo/NeoX validation loss and PPL, HF eval_*, torchtitan, MLPerf, "
             "llm.c, hand-written loops")
    SNIFF = None  # every family evaluates; each route is a literal the block must hold
    ROUTES = (
        (r"validation loss at ", "_on_megatron"), (r" results at ", "_on_megatron"),
        (r"\| val_loss: ", "_on_nemo"),
        (r"' reached ", "_on_lightning"),
        (r"validate step:", "_on_titan"),
        (r" tel:", "_on_llmc"), (r" eval:", "_on_llmc"), (r"HellaSwag: ", "_on_hellaswag"),
        (r"val_loss", "_on_line"), (r"val loss", "_on_line"), (r"Val loss", "_on_line"), (r"val/loss", "_on_line"),
        (r"valid_loss", "_on_line"), (r"validation_loss", "_on_line"), (r"Validation loss", "_on_line"),
        (r"test_loss", "_on_line"), (r"test loss", "_on_line"), (r"Test loss", "_on_line"),
        (r"val_acc", "_on_line"), (r"test_acc", "_on_line"), (r"val_ppl", "_on_line"),
        (r"eval_loss", "_on_line"), (r"eval/loss", "_on_line"), (r"dev_loss", "_on_line"),
    )

    SAMPLES = (
        Sample(" validation loss at iteration 100 | lm loss value: 7.692623E+00 | lm loss PPL: 2.192116E+03 | ",
               "eval", {"iteration": 100, "metrics": {"val lm loss": 7.692623, "val lm loss PPL": 2192.116}}),
        Sample("0: validation loss at iteration 10 on test set | lm loss value: 9.625707E+00 | lm loss PPL: "
               "1.514926E+04 |", "eval",
               {"rank": 0, "iteration": 10, "metrics": {"test lm loss": 9.625707, "test lm loss PPL": 15149.26}}),
        Sample(" validation loss at iteration 500 on 160-sample draw from validation set | lm loss value: "
               "6.340290E+00 | lm loss PPL: 5.669605E+02 | ", "eval",
               {"iteration": 500, "metrics": {"val lm loss": 6.34029, "val lm loss PPL": 566.9605}}),
        Sample(" validation loss at the end of training for test data | lm loss value: 1.007254E+01 | "
               "lm loss PPL: 2.368372E+04 | ", "eval",
               {"iteration": None, "metrics": {"test lm loss": 10.07254, "test lm loss PPL": 23683.72}}),
        # GPT-NeoX's evaluate_and_print_results
        Sample(" validation results at iteration 1000 | lm_loss value: 2.846069E+00 | lm_loss_ppl value: "
               "1.721814E+01 | ", "eval",
               {"iteration": 1000, "metrics": {"val lm_loss": 2.846069, "val lm_loss_ppl": 17.21814}}),
        Sample(" test results at the end of training for test data | lm_loss value: 2.9E+00 | ", "eval",
               {"iteration": None, "metrics": {"test lm_loss": 2.9}}),
        Sample(" validation/pile_val results at iteration 20 | lm_loss value: 3.0E+00 | ", "eval",
               {"iteration": 20, "metrics": {"val lm_loss": 3.0}}),
        Sample("benchmark results at iteration 20 | score value: 3.0 |", None),
        Sample("Training epoch 0, iteration 50/99 | lr: 3e-05 | global_batch_size: 4 | global_step: 50 | "
               "reduced_train_loss: 1.257 | train_step_timing in s: 0.685 | consumed_samples: 204 | val_loss: 1.619",
               "eval", {"iteration": 50, "metrics": {"val_loss": 1.619}}),
        Sample("Training epoch 0, iteration 51/99 | lr: 3e-05 | global_step: 51 | reduced_train_loss: 1.257 | "
               "val_loss: 1.619", None,
               context=("Training epoch 0, iteration 50/99 | lr: 3e-05 | global_step: 50 | reduced_train_loss: 1.2 | "
                        "val_loss: 1.619",)),  # the same evaluation, told again
        Sample("Epoch 0, global step 49: 'val_loss' reached 1.61900 (best 1.61900), saving model to "
               "'/results/checkpoints/megatron_gpt--val_loss=1.619-step=49.ckpt' as top 5", "eval",
               {"iteration": 49, "metrics": {"val_loss": 1.619}}),
        Sample("Epoch 0, global step 49: 'val_loss' was not in top 5", None),
        Sample("[rank0]:[titan] 2026-04-30 03:00:01,000 - root - INFO - validate step: 14000  loss:  3.3315  "
               "memory: 30.1GiB(95.0%)  tps: 6,995", "eval",
               {"rank": 0, "iteration": 14000, "metrics": {"validation loss": 3.3315}}),
        Sample("step:125/1390 val_loss:3.8123 train_time:18321ms step_avg:148.95ms", "eval",
               {"iteration": 125, "metrics": {"val_loss": 3.8123}}),
        Sample("step 250: train loss 2.3456, val loss 2.4567", "eval",
               {"iteration": 250, "metrics": {"val loss": 2.4567}}),
        Sample("val loss 3.282571", "eval", {"iteration": None, "metrics": {"val loss": 3.282571}}),
        Sample("s:0 tel:10.968871", "eval", {"iteration": 0, "metrics": {"val loss": 10.968871}}),
        Sample("HellaSwag: 3151/10042 = 0.313782", "eval", {"iteration": None, "metrics": {"hellaswag acc": 0.313782}}),
        Sample("evaluating HellaSwag: 770/837", None),
        Sample("s:250 eval:0.2934", "eval", {"iteration": 250, "metrics": {"hellaswag acc": 0.2934}}),
        Sample("[2025-12-31 12:21:55,502783][I][examples/fsdp:340:fsdp_main] epoch=1 dt=12.487221 "
               "train_loss=0.596659 test_loss=0.143485 test_acc=95.563553 dt/mean=11.990577", "eval",
               {"iteration": 1, "metrics": {"test_loss": 0.143485, "test_acc": 95.563553}}),
        Sample("Epoch 3: 100%|##########| 50/50 [00:10<00:00, v_num=1, val_loss=2.340, train_loss=2.1]", "eval",
               {"metrics": {"val_loss": 2.34}}),
        Sample("val_loss: nan at step 10", "eval", {"metrics": {"val_loss": float("nan")}}),
        Sample("the val_loss callback is registered", None),
        Sample("{'eval_loss': 1.6778849363327026, 'eval_runtime': 13.2043, 'epoch': 1.0}", None),  # HF's
    )

    def __init__(self, file: str = "") -> None:
        super().__init__(file)
        self._nemo_last: Optional[float] = None  # the val_loss NeMo's progress lines repeat

    def _eval(self, ctx: LineContext, iteration: Optional[int], metrics: dict[str, float]) -> list[Event]:
        if not metrics:
            return []
        return [self.make(Evaluation, ctx, iteration=iteration, metrics=frozen_map(metrics))]

    def _on_megatron(self, body: str, ctx: LineContext) -> list[Event]:
        m = _MEGATRON.search(body)
        if not m:
            return []
        split = (m.group(3) or m.group(4) or m.group(1) or "validation").lower()
        prefix = "test" if "test" in split else "val"
        metrics = {}
        for name, what, value in _MEGATRON_PAIR.findall(m.group(5)):
            number = to_float(value)
            if number is not None:
                metrics[f"{prefix} {name.strip()}" + (" PPL" if what == "PPL" else "")] = number
        return self._eval(ctx, int(m.group(2)) if m.group(2) else None, metrics)

    def _on_nemo(self, body: str, ctx: LineContext) -> list[Event]:
        step, m = _NEMO_STEP.search(body), _NEMO_VAL.search(body)
        value = to_float(m.group(2)) if m else None
        if value is None or step is None:
            return self._on_line(body, ctx) if m is None else []
        if self._nemo_last is not None and (value == self._nemo_last or value != value == self._nemo_last):
            return []
        self._nemo_last = value
        return self._eval(ctx, int(step.group(1)), {"val_loss": value})

    def _on_lightning(self, body: str, ctx: LineContext) -> list[Event]:
        m = _LIGHTNING.search(body)
        if not m or not _is_eval_name(m.group(2)):
            return []
        value = to_float(m.group(3))
        if value is None:
            return []
        self._nemo_last = value  # the progress lines after it tell it again
        return self._eval(ctx, int(m.group(1)), {m.group(2): value})

    def _on_titan(self, body: str, ctx: LineContext) -> list[Event]:
        text = strip_ansi(body)
        m = _TITAN.search(text)
        value = to_float(m.group(2)) if m else None
        if m is None or value is None:
            return []
        return self._eval(ctx, int(m.group(1)), {"validation loss": value})

    def _on_llmc(self, body: str, ctx: LineContext) -> list[Event]:
        m = _LLMC.match(body)
        value = to_float(m.group(3)) if m else None
        if m is None or value is None:
            return []
        return self._eval(ctx, int(m.group(1)), {_LLMC_NAMES[m.group(2)]: value})

    def _on_hellaswag(self, body: str, ctx: LineContext) -> list[Event]:
        """llm.c's stdout: printf0("HellaSwag: %d/%d = %f\\n", ...), the accuracy its main.log
        writes as ``s:N eval:`` (the step is the main.log's; stdout does not say it)."""
        m = _HELLASWAG.match(body)
        value = to_float(m.group(1)) if m else None
        if m is None or value is None:
            return []
        return self._eval(ctx, None, {_LLMC_NAMES["eval"]: value})

    def _on_line(self, body: str, ctx: LineContext) -> list[Event]:
        if len(body) > 4096 or body.lstrip().startswith("{'") or "validation loss at " in body or \
                ("| val_loss: " in body and "global_step: " in body):
            return []  # a Hugging Face dict, Megatron's record or NeMo's progress line: their own routes
        text = strip_ansi(body)
        metrics: dict[str, float] = {}
        for name, value in _EVAL_KV.findall(text):
            number = to_float(value)
            if number is not None and name not in metrics:
                metrics[name] = number
        if not metrics:
            return []
        _, step, _ = step_of(text)
        return self._eval(ctx, step, metrics)


def _is_eval_name(name: str) -> bool:
    first = re.split(r"[_ /-]", name.lower())[0]
    return first in ("val", "valid", "validation", "eval", "test", "dev")
