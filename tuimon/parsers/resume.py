"""A run going on from a checkpoint: the line each framework prints as it loads its training
state, read into :class:`~.events.Resume` (the iteration the checkpoint holds).  Always on: a
restart is told by the framework that restarts, whatever else the file holds.

Written from the frameworks' own print statements:

* Megatron-LM / Megatron-DeepSpeed (``checkpointing.py``): `` loading checkpoint from DIR at
  iteration N`` then ``  successfully loaded checkpoint from DIR [ t 0/1, p 0/1 ] at iteration N``
  (older: ``... from DIR at iteration N``); ``loading release checkpoint`` is a model's weights
  (no iteration: no resume);
* torchtitan (``components/checkpoint.py``): ``Loading the checkpoint from DIR/step-N.``; step 0
  is the model alone (an initial load, no resume);
* DeepSpeed (``runtime/engine.py``, its checkpoint engines): ``rank: 0 loading checkpoint:
  DIR/global_stepN/mp_rank_00_model_states.pt``, ``[Torch] Loading checkpoint from
  DIR/global_stepN/...``;
* the Hugging Face Trainer: ``  Continuing training from global step N``;
* a script's own word, before it resumes (the scripts around the Trainer's ``get_last_checkpoint``,
  NeMo's exp_manager): ``Resuming training from checkpoint: PATH``, where PATH names its step
  (``checkpoint-1200``, ``step=1200``, ``step-1200``, ``global_step1200``, Megatron's ``iter_0001200``).
  Lightning's ``Restoring states from the checkpoint path at`` is not read: it also restores the best
  checkpoint for a test after training, which is no restart.
"""
from __future__ import annotations

from typing import Optional

from .base import LineContext, LineParser, Sample
from .events import Event, Resume
from .patterns import lazy

_MEGATRON = lazy(r"(?:loading|loaded) checkpoint from (\S+)(?: \[[^\]]{0,80}\])? at iteration (\d{1,12})\b")
_TITAN = lazy(r"Loading the checkpoint from (\S*?step-(\d{1,12}))\.?\s*$")
_DEEPSPEED = lazy(r"[Ll]oading checkpoint(?::| from) (\S*?global_step(\d{1,12})\S*)")
_TRAINER = lazy(r"Continuing training from global step (\d{1,12})\b")
_SCRIPT = lazy(r"[Rr]esuming (?:training )?from (?:the )?checkpoint:? +(\S+)")
# a checkpoint's step in its path: the last of these in it
_PATH_STEP = lazy(r"(?:checkpoint-|step[=_-]|global_step|iter_)(\d{1,12})(?!\d)")


class ResumeParser(LineParser):
    name = "resume"
    READS = "a run going on from a checkpoint: Megatron, torchtitan, DeepSpeed, the Hugging Face Trainer"
    SNIFF = None  # any framework's restart
    # literal triggers: the engines' literal scan passes every other line by
    ROUTES = ((r"oading checkpoint", "_on_loading"), (r"oaded checkpoint from ", "_on_loading"),
              (r"Loading the checkpoint from ", "_on_titan"), (r"Continuing training from global step ", "_on_trainer"),
              (r"esuming training from ", "_on_script"), (r"esuming from checkpoint", "_on_script"),
              (r"esuming from the checkpoint", "_on_script"))

    SAMPLES = (
        Sample(" loading checkpoint from /ckpt/gpt3 at iteration 2000", "resume",
               {"iteration": 2000, "path": "/ckpt/gpt3"}),
        Sample("  successfully loaded checkpoint from /ckpt/gpt3 [ t 0/2, p 0/1 ] at iteration 2000", "resume",
               {"iteration": 2000, "path": "/ckpt/gpt3"}),
        Sample(" loading release checkpoint from /models/llama", None),
        Sample("[rank0]:[titan] 2026-04-30 00:18:42,885 - root - INFO - Loading the checkpoint from "
               "/runs/kimi/checkpoint/step-12500.", "resume",
               {"iteration": 12500, "path": "/runs/kimi/checkpoint/step-12500"}),
        Sample("[titan] 2025-01-01 10:00:00,000 - root - INFO - Loading the checkpoint from ./outputs/checkpoint/step-0.",
               None),
        Sample("[2024-03-01 10:00:00,000] [INFO] [engine.py:2890:_load_checkpoint] rank: 0 loading checkpoint: "
               "/ckpt/global_step1200/mp_rank_00_model_states.pt", "resume",
               {"iteration": 1200, "path": "/ckpt/global_step1200/mp_rank_00_model_states.pt"}),
        Sample("[2024-03-01 10:00:00,000] [INFO] [torch_checkpoint_engine.py:27:load] [Torch] Loading checkpoint from "
               "/ckpt/global_step1200/zero_pp_rank_0_mp_rank_00_optim_states.pt...", "resume",
               {"iteration": 1200, "path": "/ckpt/global_step1200/zero_pp_rank_0_mp_rank_00_optim_states.pt..."}),
        Sample("[INFO|trainer.py:2237] 2024-05-01 10:00:00,000 >>   Continuing training from global step 120", "resume",
               {"iteration": 120}),
        Sample("  Continuing training from global step 0", None),
        Sample("Resuming training from checkpoint: /scratch/out/checkpoint-1200", "resume",
               {"iteration": 1200, "path": "/scratch/out/checkpoint-1200"}),
        Sample("[NeMo I 2024-05-01 10:00:00 exp_manager:394] Resuming training from checkpoint: "
               "/results/checkpoints/megatron_gpt--val_loss=2.10-step=3000-consumed_samples=96000.0-last.ckpt",
               "resume", {"iteration": 3000}),
        Sample("Resuming from checkpoint /ckpt/iter_0001500", "resume", {"iteration": 1500}),
        Sample("Resuming training from checkpoint: runs/last.pt", None),  # no step in its name: not placed
        Sample("Resuming training from scratch", None),
    )

    def _resume(self, ctx: LineContext, iteration: str, path: Optional[str]) -> list[Event]:
        n = int(iteration)
        if n <= 0:  # step 0: a model's weights, nothing trained yet
            return []
        return [self.make(Resume, ctx, iteration=n, path=path[:300] if path else None)]

    def _on_loading(self, body: str, ctx: LineContext) -> list[Event]:
        m = _MEGATRON.search(body)
        if m:
            return self._resume(ctx, m.group(2), m.group(1))
        m = _DEEPSPEED.search(body)
        return self._resume(ctx, m.group(2), m.group(1)) if m else []

    def _on_titan(self, body: str, ctx: LineContext) -> list[Event]:
        m = _TITAN.search(body)
        return self._resume(ctx, m.group(2), m.group(1)) if m else []

    def _on_trainer(self, body: str, ctx: LineContext) -> list[Event]:
        m = _TRAINER.search(body)
        return self._resume(ctx, m.group(1), None) if m else []

    def _on_script(self, body: str, ctx: LineContext) -> list[Event]:
        m = _SCRIPT.search(body)
        if not m:
            return []
        steps = _PATH_STEP.findall(m.group(1))
        return self._resume(ctx, steps[-1], m.group(1)) if steps else []
