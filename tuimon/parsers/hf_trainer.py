"""Hugging Face ``Trainer``: the dict it prints every ``logging_steps``
(``{'loss': 2.9859, 'grad_norm': 0.97, 'learning_rate': 4.17e-05, 'epoch': 0.16}``),
the one it prints when training ends (``{'train_runtime': 583.4,
'train_samples_per_second': 5.3, 'train_steps_per_second': 0.17, 'train_loss': 2.7,
'epoch': 1.0}``) and the tqdm bar that counts its steps
(`` 19%|█▊        | 18/97 [01:50<08:31,  6.39s/it]``).

The dicts carry no step number and no step time: those come from the training
bar (the first bar of the run: evaluation bars, with other totals, are passed
over).  A logged dict is a :class:`~parsers.events.Step` at the bar's step, with
the bar's time a step; the closing dict is the run's throughput and its end.
"""
from __future__ import annotations

from typing import Optional

from .base import LineContext, LineParser, Sample, compile_sniff
from .events import Checkpoint, Evaluation, Event, Exit, RunConfig, Step, Throughput, frozen_map
from .numbers import to_float
from .patterns import lazy

# 'key': value, for values that are numbers, bare (transformers 4: 'loss': 2.9859) or quoted as
# transformers 5 and ms-swift print them ('loss': '10.96'); other strings and lists are passed over
_PAIR = lazy(r"'([A-Za-z_/]+)': ('?)([-+]?(?:\d[\d.]*(?:[eE][-+]?\d+)?|inf|nan))\2(?=[,}])")
# n/total [elapsed<remaining, rate]: the last one of a line holds its latest state
_SAVING = lazy(r"Saving model checkpoint to (\S*?checkpoint-(\d{1,18})\b\S*)")
# the header of a run: "  Total optimization steps = 471", "  Instantaneous batch size per device = 8",
# "  Total train batch size (w. parallel, distributed & accumulation) = 64"
# (after transformers' own logging prefix where a script sets it: "[INFO|trainer.py:1149] 2021-05-25 06:30:55,250 >>"
# in its examples until 2021, "2023-06-01 10:00:00 - INFO - transformers.trainer - " after)
_HEADER = lazy(r"(?:^|>> |\.trainer - )\s*(Total optimization steps|Instantaneous batch size per device|"
               r"Total train batch size(?: \(w\. parallel, distributed & accumulation\))?) = ([\d,]{1,24})\s*$")
_HEADER_FIELD = {"Total optimization steps": "train_iters", "Instantaneous batch size per device": "micro_batch"}
# Unsloth's own banner for the Trainer it patches (its versions word it apart): "==((====))==  Unsloth ... |
# Num GPUs = 1" (later "Num GPUs used = 1"), "Total batch size = 8 | Total steps = 60" (later "Total batch
# size (2 x 4 x 1) = 8"), "Trainable parameters = 83,886,080 of 8,114,147,328 (1.03% trained)": the
# trainable count alone (LoRA's adapters) is no model size
_UNSLOTH = lazy(r"(Num GPUs(?: used)?|Total steps|Total batch size(?: \([\dx ]{1,40}\))?|"
                r"Batch size per device|Trainable parameters = [\d,]{1,24} of)(?: =)? ?([\d,]{1,24})\b")
_UNSLOTH_FIELD = {"Num GPUs": "world_size", "Num GPUs used": "world_size", "Total steps": "train_iters",
                  "Batch size per device": "micro_batch"}
# the closing report's block: "  eval_loss               =     2.1941"
_EVAL_METRIC = lazy(r"^\s*(eval_\w{1,40})\s+=\s+([-+]?\d[\d.]*(?:[eE][-+]?\d+)?|nan|inf)\s*$")
# what an evaluation dict holds that is no figure of the model
_EVAL_COST = ("eval_runtime", "eval_samples_per_second", "eval_steps_per_second")
# ms-swift's own progress in its dicts
_SWIFT_STEP = lazy(r"'global_step/max_steps': '(\d{1,12})/(\d{1,12})'")
_SWIFT_SPEED = lazy(r"'train_speed\(iter/s\)': '?([\d.]+(?:[eE][-+]?\d+)?)'?")
_BAR = lazy(r"(\d+)/(\d+) \[[\d:]+<[\d:?]+, *([\d.]+|\?)(s/it|it/s)")


def pairs(body: str) -> list[tuple[str, str]]:
    """The ``(key, number text)`` of a metrics dict's numeric pairs, quoted or not, in order."""
    return [(key, value) for key, _, value in _PAIR.findall(body)]


#: where a run's step time comes from when it is the progress bar's
TQDM_RATE = "tqdm's smoothed rate (its it/s or s/it)"
#: ... and where the Trainer's closing dict said its run time: that over its steps
TRAINER_RUNTIME = "the Trainer's train_runtime over its steps (its closing dict)"
SWIFT_RATE = "ms-swift's train_speed(iter/s) (steps over the time since the start), differenced between its dicts"


class HFTrainerParser(LineParser):
    name = "hf-trainer"
    READS = "Hugging Face Trainer's metric dicts and progress"
    framework = "hf-trainer"
    STEPS_WITH_LOSS = True
    SNIFF = compile_sniff(r"\{'loss': ", r"\{'train_runtime': ", r"Total optimization steps = ", r"Unsloth")
    ROUTES = ((r"\{'(?:loss|train_runtime)': ", "_on_dict"), (r"(?:s/it|it/s)\]", "_on_bar"),
              (r"Saving model checkpoint to ", "_on_saving"), (r"Total optimization steps = ", "_on_header"),
              (r"Instantaneous batch size per device = ", "_on_header"), (r"Total train batch size ", "_on_header"),
              (r"Num GPUs", "_on_unsloth"), (r"Total steps = ", "_on_unsloth"), (r"Total batch size ", "_on_unsloth"),
              (r"Trainable parameters = ", "_on_unsloth"),
              (r"\{'eval_", "_on_eval"), (r"eval_\w+ +=  ", "_on_eval_metric"))
    ONCE_FLAGS = ("_announced", "_rate_said", "_swift_said")
    # with the compiled core, a metrics dict whose values it reads as to_float does is read there
    # and handed to dict_into in its place (tuimon.engine.rows)
    COLUMNS = {"_on_dict": "hf-dict"}

    SAMPLES = (
        Sample("0: {'loss': 2.9859, 'grad_norm': 0.9704080820083618, 'learning_rate': 4.175257731958763e-05, "
               "'epoch': 0.16}", "step",
               {"rank": 0, "step": 16, "loss": 2.9859, "lr": 4.175257731958763e-05, "elapsed_ms": 6390.0},
               context=(" 16%|█▋        | 16/97 [01:38<08:17,  6.39s/it]",)),
        Sample("  9%|9         | 9/100 [00:05<00:50,  1.80it/s]", "step", {"step": 9, "elapsed_ms": 555.556},
               context=("  Total optimization steps = 100",)),  # the training's bar (the header's length)
        Sample("  9%|9         | 9/100 [00:05<00:50,  1.80it/s]", None),  # no header: the dicts give the steps
        Sample("100%|██████████| 3/3 [00:00<00:00, 822.36it/s]", None,
               context=("  Total optimization steps = 524",)),  # a dataset's map, not the training's
        Sample("{'loss': 2.847, 'grad_norm': 3.82, 'learning_rate': 5e-05, 'epoch': 0.1, "
               "'num_input_tokens_seen': 24576}", "run_config", {"framework": "hf-trainer", "train_iters": None}),
        Sample("{'loss': 2.847, 'grad_norm': 3.82, 'learning_rate': 5e-05, 'epoch': 0.1}", "step",
               {"step": 10, "elapsed_ms": 555.556},
               context=(" 10%|#         | 10/100 [00:05<00:50,  1.80it/s]",
                        " 50%|#####     | 5/10 [00:01<00:01,  4.50it/s]")),  # an evaluation bar: not the run's
        Sample("{'train_runtime': 583.4412, 'train_samples_per_second': 5.323, 'train_steps_per_second': 0.166, "
               "'train_loss': 2.712, 'epoch': 1.0}", "throughput",
               {"iteration": 97, "samples_per_sec": 5.323, "iteration_time_s": 6.014858},  # 583.4412 s / 97
               context=("100%|██████████| 97/97 [09:43<00:00,  6.02s/it]",)),
        Sample("{'train_runtime': 583.4412, 'train_samples_per_second': 5.323, 'train_steps_per_second': 0.166, "
               "'train_loss': 2.712, 'epoch': 1.0}", "exit", {"iteration": 97},
               context=("100%|██████████| 97/97 [09:43<00:00,  6.02s/it]",)),
        Sample(" 19%|█▊        | 18/97 [01:50<08:31,  6.39s/it]", "step", {"step": 18, "elapsed_ms": 6390.0},
               context=("  Total optimization steps = 97",
                        " 18%|█▊        | 17/97 [01:44<08:31,  6.40s/it]")),  # the bar moved on: a step
        Sample(" 19%|█▊        | 18/97 [01:50<08:31,  6.39s/it]", None,
               context=("  Total optimization steps = 97",
                        " 19%|█▊        | 18/97 [01:50<08:31,  6.40s/it]")),  # the same step again
        Sample(" 19%|█▊        | 18/97 [01:50<08:31,  6.39s/it]", "run_config", {"step_time_source": TQDM_RATE},
               context=("  Total optimization steps = 97",)),
        Sample("Saving model checkpoint to /scratch/out/checkpoint-500", "checkpoint",
               {"iteration": 500, "path": "/scratch/out/checkpoint-500", "save_ms": None}),
        Sample("{'loss': 'n/a', 'epoch': 0.1}", None),
        Sample("{'eval_loss': 1.6778849363327026, 'eval_accuracy': 0.6173228346456693, 'eval_runtime': 13.2043, "
               "'eval_samples_per_second': 0.227, 'eval_steps_per_second': 0.076, 'epoch': 1.0}", "eval",
               {"iteration": 97, "metrics": {"eval_loss": 1.6778849363327026, "eval_accuracy": 0.6173228346456693}},
               context=("100%|██████████| 97/97 [09:43<00:00,  6.02s/it]",)),
        Sample("  eval_loss               =     2.1941", "eval", {"iteration": None, "metrics": {"eval_loss": 2.1941}}),
        Sample("  eval_runtime            =  0:00:13.20", None),
        Sample("  Total optimization steps = 1,471", "run_config", {"framework": "hf-trainer", "train_iters": 1471}),
        Sample("  Total train batch size (w. parallel, distributed & accumulation) = 64", "run_config",
               {"global_batch": 64}),
        Sample("  Instantaneous batch size per device = 8", "run_config", {"micro_batch": 8}),
        Sample("[INFO|trainer.py:1149] 2021-05-25 06:30:55,250 >>   Total optimization steps = 4", "run_config",
               {"train_iters": 4}),
        Sample("2023-06-01 10:00:00,000 - INFO - transformers.trainer -   Total optimization steps = 500", "run_config",
               {"train_iters": 500}),
        Sample("==((====))==  Unsloth - 2x faster free finetuning | Num GPUs = 1", "run_config", {"world_size": 1}),
        Sample("\\        /    Total batch size = 8 | Total steps = 60", "run_config",
               {"global_batch": 8, "train_iters": 60}),
        Sample(' "-____-"     Number of trainable parameters = 83,886,080', None),  # LoRA's adapters: no model size
        Sample("\\        /    Data Parallel GPUs = 1 | Total batch size (2 x 4 x 1) = 8", "run_config",
               {"global_batch": 8}),
        Sample(' "-____-"     Trainable parameters = 83,886,080 of 8,114,147,328 (1.03% trained)', "run_config",
               {"total_params": 8114147328}),
        Sample("{'train_runtime': 300.5, 'train_samples_per_second': 99.8, 'train_steps_per_second': 1.567, "
               "'train_loss': 2.9, 'epoch': 3.0}", "exit", {"iteration": 471},
               context=("  Total optimization steps = 471",)),  # no bar (tqdm off): the planned steps ran
        # transformers 5 (and ms-swift) print every number quoted
        Sample("{'loss': '10.96', 'grad_norm': '0.3923', 'learning_rate': '0.000135', 'epoch': '0.0125'}", "step",
               {"step": 10, "loss": 10.96, "lr": 0.000135, "elapsed_ms": 126.743},
               context=("\r  2%|▎         | 9/400 [00:01<00:50,  7.80it/s]\r  2%|▎         | 10/400 [00:01<00:49,  "
                        "7.89it/s]",)),
        Sample("{'train_runtime': '50.68', 'train_samples_per_second': '126.3', 'train_steps_per_second': '7.892', "
               "'train_loss': '10.85', 'epoch': '0.5'}", "throughput",
               {"iteration": 400, "samples_per_sec": 126.3, "iteration_time_s": 0.1267},
               context=("100%|██████████| 400/400 [00:50<00:00,  7.89it/s]",)),
        Sample("{'loss': '2.5, 'epoch': 1}", None),  # a quote that does not close: no number
        # ms-swift: the step, the run's length and a mean rate in the dict itself
        Sample("{'loss': 1.56617603, 'grad_norm': 12.8125, 'learning_rate': 9.92e-06, 'token_acc': 0.61519274, "
               "'epoch': 0.11, 'global_step/max_steps': '10/94', 'percentage': '10.64%', 'elapsed_time': '20s', "
               "'remaining_time': '2m 52s', 'memory(GiB)': 5.64, 'train_speed(iter/s)': 0.485796}", "step",
               {"step": 10, "loss": 1.56617603, "elapsed_ms": 2058.477}),  # 10 steps at 0.485796 it/s: the mean
        Sample("{'loss': 1.44893646, 'epoch': 0.96, 'global_step/max_steps': '90/94', 'train_speed(iter/s)': "
               "0.520707}", "step", {"step": 90, "elapsed_ms": 1903.214},  # (90 / 0.520707 - 10 / 0.485796) / 80
               context=("{'loss': 1.56617603, 'epoch': 0.11, 'global_step/max_steps': '10/94', "
                        "'train_speed(iter/s)': 0.485796}",)),
        Sample("{'loss': 1.56617603, 'epoch': 0.11, 'global_step/max_steps': '10/94', 'train_speed(iter/s)': "
               "0.485796}", "run_config", {"framework": "hf-trainer", "train_iters": 94}),
    )

    def __init__(self, file: str = "") -> None:
        super().__init__(file)
        self._announced = False
        self._rate_said = False
        self._swift_said = False
        self._total: Optional[int] = None  # of the run's bar (its first)
        self._step: Optional[int] = None
        self._step_s: Optional[float] = None
        self._planned: Optional[int] = None  # the header's total optimization steps
        self._swift_at: Optional[tuple[int, float]] = None  # ms-swift: the last dict's step and seconds since the start

    def _on_bar(self, body: str, ctx: LineContext) -> list[Event]:
        """The training bar's latest state: a step (its number, tqdm's smoothed time a step) each
        time it moves on, so a run whose dicts are rare (a large logging_steps) still shows its
        progress and rate; the dict logged at a step fills in that step's loss (the store keeps one
        point a step)."""
        found = _BAR.findall(body)
        if not found:
            return []
        step, total, rate, unit = found[-1]
        if self._total is None:
            self._total = int(total)
        if int(total) != self._total or len(step) > 18:
            return []
        moved = self._step is None or int(step) > self._step
        self._step = int(step)
        value = to_float(rate) if rate != "?" else None
        if value is not None and value > 0:
            self._step_s = value if unit == "s/it" else 1.0 / value
        # a step of its own only where the header says this bar is the training's (a script's other bars,
        # a dataset's map, come first at times; without the header, the logged dicts give the steps)
        if not moved or self._step == 0 or self._planned != self._total:
            return []
        said: dict = {"framework": self.framework, "train_iters": self._total} if self.first_time("_announced") else {}
        said.update(self._rate_source())
        step = self.make(Step, ctx, step=self._step, elapsed_ms=self._elapsed_ms())
        return [self.make(RunConfig, ctx, **said), step] if said else [step]

    def _rate_source(self) -> dict:
        """Where a step's time comes from, said once a source, where it is no figure the log prints a
        step: tqdm's smoothed rate, or ms-swift's steps over the time since the start."""
        if self._step_s is None:
            return {}
        flag, source = ("_swift_said", SWIFT_RATE) if self._swift_at is not None else ("_rate_said", TQDM_RATE)
        return {"step_time_source": source} if self.first_time(flag) else {}

    def _elapsed_ms(self) -> Optional[float]:
        return round(self._step_s * 1000.0, 3) if self._step_s else None

    def _on_header(self, body: str, ctx: LineContext) -> list[Event]:
        m = _HEADER.search(body)
        if not m:
            return []
        value = int(m.group(2).replace(",", ""))
        name = _HEADER_FIELD.get(m.group(1), "global_batch")
        if name == "train_iters":
            self._plan(value)
        self.first_time("_announced")
        return [self.make(RunConfig, ctx, framework=self.framework, **{name: value})]

    def _plan(self, steps: int) -> None:
        """The steps a header says the run will take: the training's bar is the one of this length."""
        self._planned = steps
        if self._total != steps:
            self._total, self._step = steps, None

    def _on_unsloth(self, body: str, ctx: LineContext) -> list[Event]:
        """Unsloth's banner lines (see ``_UNSLOTH``): the GPUs, the planned steps, the batch, the model's size."""
        fields: dict = {}
        for key, value in _UNSLOTH.findall(body):
            number = int(value.replace(",", ""))
            if key.startswith("Trainable parameters"):
                fields["total_params"] = number  # "... of N": the whole model's
            elif key.startswith("Total batch size"):
                fields["global_batch"] = number
            else:
                fields[_UNSLOTH_FIELD[key]] = number
        if not fields:
            return []
        if "train_iters" in fields:
            self._plan(fields["train_iters"])
        self.first_time("_announced")
        return [self.make(RunConfig, ctx, framework=self.framework, **fields)]

    def _on_saving(self, body: str, ctx: LineContext) -> list[Event]:
        m = _SAVING.search(body)
        if not m:
            return []
        return [self.make(Checkpoint, ctx, iteration=int(m.group(2)), path=m.group(1)[:300])]

    def _on_eval(self, body: str, ctx: LineContext) -> list[Event]:
        """``{'eval_loss': ..., 'eval_accuracy': ..., 'eval_runtime': ..., 'epoch': 1.0}``, at the bar's step."""
        metrics = {key: value for key, text in pairs(body)
                   if key.startswith("eval_") and key not in _EVAL_COST and (value := to_float(text)) is not None}
        return [self.make(Evaluation, ctx, iteration=self._step, metrics=frozen_map(metrics))] if metrics else []

    def _on_eval_metric(self, body: str, ctx: LineContext) -> list[Event]:
        """A line of the closing ``***** eval metrics *****`` block."""
        m = _EVAL_METRIC.match(body)
        if not m or m.group(1) in _EVAL_COST:
            return []
        value = to_float(m.group(2))
        return [] if value is None else [self.make(Evaluation, ctx, iteration=None, metrics=frozen_map({m.group(1): value}))]

    def _on_dict(self, body: str, ctx: LineContext) -> list[Event]:
        swift = _SWIFT_STEP.search(body) if "global_step/max_steps" in body else None
        if swift is not None:
            # ms-swift says each logged step and the run's length in the dict itself ('global_step/max_steps':
            # '5/94'), and its rate as steps over the time since the start ('train_speed(iter/s)': 0.4615): the
            # time at a step is its number over that rate, a step's time the difference from the last dict's
            step, self._planned = int(swift.group(1)), int(swift.group(2))
            speed = _SWIFT_SPEED.search(body)
            rate = to_float(speed.group(1)) if speed else None
            if rate and rate > 0 and step > 0:
                since_start = step / rate
                last = self._swift_at
                if last is not None and step > last[0] and since_start > last[1]:
                    self._step_s = (since_start - last[1]) / (step - last[0])
                else:
                    self._step_s = since_start / step
                self._swift_at = (step, since_start)
            self._step = step
        return self._dict({key: to_float(value) for key, value in pairs(body)}, ctx)

    def dict_into(self, rows: list[tuple], pairs: dict[str, Optional[float]], frame: tuple,
                  wall: Optional[float]) -> Optional[list[Event]]:
        """A metrics dict the compiled core read, into ``rows`` (None) where its event is a
        row's (a step's loss: a tuple of :class:`~.columns.StepRows`), else its events (the run's end;
        the first step, which says the framework; the first that says where its step time
        comes from)."""
        if pairs.get("loss") is None or not self._rows_only():
            return self._dict(pairs, self.context_of(frame, wall))
        rows.append(self._dict_row(pairs, frame, wall))
        return None

    def dict_rows(self, values: list[dict], frames: list[tuple], walls: list, _iterations: list
                  ) -> Optional[list[tuple]]:
        """The rows of many such dicts at once (``dict_into``'s), where none can make events (each
        a step's loss, the framework and the step time's source said); else None."""
        if not self._rows_only() or any(pairs.get("loss") is None for pairs in values):
            return None
        return [self._dict_row(pairs, frame, wall) for pairs, frame, wall in zip(values, frames, walls)]

    def _rows_only(self) -> bool:
        """Whether a dict with a loss makes a row alone now: nothing is left to say first."""
        return self.reported("_announced") and (
            self._step_s is None or self.reported("_swift_said" if self._swift_at is not None else "_rate_said"))

    def _dict_row(self, pairs: dict[str, Optional[float]], frame: tuple, wall: Optional[float]) -> tuple:
        """A dict's row of :class:`~.columns.StepRows` (a step's loss, at the step the bar gave)."""
        return (frame[0], frame[3], frame[5], wall, self._step, pairs["loss"], pairs.get("learning_rate"),
                self._elapsed_ms(), None, None, None, None, None, None)

    def _dict(self, pairs: dict[str, Optional[float]], ctx: LineContext) -> list[Event]:
        events: list[Event] = []
        if "train_runtime" in pairs and "loss" not in pairs:
            steps_per_s = pairs.get("train_steps_per_second")
            done = next((n for n in (self._step, self._total, self._planned) if n is not None), None)
            runtime = pairs.get("train_runtime")
            # its steps over its run time (train_steps_per_second is that, rounded to 3 decimals: 0.165 for 60 in
            # 364.4972 s reads 6.061 s a step where it took 6.075)
            step_s = runtime / done if runtime and done else 1.0 / steps_per_s if steps_per_s else None
            events.append(self.make(Throughput, ctx, iteration=self._step,
                                    samples_per_sec=pairs.get("train_samples_per_second"),
                                    iteration_time_s=round(step_s, 6) if step_s else None))
            events.append(self.make(Exit, ctx, iteration=done))
        elif pairs.get("loss") is not None:
            events.append(self.make(Step, ctx, step=self._step, loss=pairs["loss"], lr=pairs.get("learning_rate"),
                                    elapsed_ms=self._elapsed_ms()))
        said: dict = {}
        if events and self.first_time("_announced"):
            said = {"framework": self.framework, "train_iters": self._total if self._total is not None else self._planned}
        if any(type(ev) is Step for ev in events):
            said.update(self._rate_source())
        if said:
            events.insert(0, self.make(RunConfig, ctx, **said))
        return events
