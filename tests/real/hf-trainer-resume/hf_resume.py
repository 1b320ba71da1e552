"""A real Hugging Face Trainer run, killed at a step and resumed from its last checkpoint (test data for
the time ledger: restart messages, work redone). argv: OUTDIR MAX_STEPS [crash_at|resume]."""
import sys

import torch
from torch.utils.data import Dataset
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments


class Tokens(Dataset):
    def __init__(self, n, seed):
        self.n, self.seed = n, seed

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(self.seed * 100003 + i)
        ids = torch.randint(0, 512, (256,), generator=g)
        return {"input_ids": ids, "labels": ids}


class Crash(TrainerCallback):
    def __init__(self, at):
        self.at = at

    def on_step_end(self, args, state, control, **kw):
        if self.at and state.global_step == self.at:
            raise RuntimeError(f"simulated node failure at step {state.global_step}")


out, steps, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
torch.manual_seed(0)
model = GPT2LMHeadModel(GPT2Config(vocab_size=512, n_positions=256, n_embd=384, n_layer=6, n_head=6))
args = TrainingArguments(output_dir=out, max_steps=steps, per_device_train_batch_size=32, learning_rate=5e-4,
                         warmup_steps=10, logging_steps=10, logging_first_step=True, save_steps=40,
                         eval_strategy="steps", eval_steps=50, per_device_eval_batch_size=64, bf16=True,
                         report_to=[], disable_tqdm=False, dataloader_num_workers=0, seed=0)
trainer = Trainer(model=model, args=args, train_dataset=Tokens(100000, 1), eval_dataset=Tokens(256, 2),
                  callbacks=[Crash(int(mode) if mode.isdigit() else 0)])
trainer.train(resume_from_checkpoint=True if mode == "resume" else None)
