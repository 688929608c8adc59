"""HF Trainer with a custom ``TrainerCallback`` that computes weight metrics every step (unseen,
helper fwunseen): ``WeightNorms.on_step_end`` takes the norm and a 95th-percentile of every
parameter of a tiny GPT-2 and keeps them in a list; the Trainer's own logging is rare
(``logging_steps=500``, ``report_to=[]``, ``disable_tqdm=True``).

Class: per-step work in a user callback that the HF Trainer's ``CallbackHandler`` calls, beside
model code that lives in ``transformers/models/gpt2`` (the attention and MLP: training work).
A practitioner knows: compute the metrics every N steps (``if state.global_step % 50 == 0:`` in
the hook) or in ``on_log``. The product should name the callback's hook
(``WeightNorms.on_step_end``, its share), offer the gate there, never ``logging_steps`` (500
already) and never count GPT-2's forward/backward as framework overhead.

Seen 2026-12-06 (helper fwunseen; by hand, the loop thread's CPU clock: removing the callback
1.46x, 1.35-1.49, load 10-16). On main bce4bf9: "[info] HF Trainer callbacks: 27% ...
CallbackHandler.on_step_end ... Nothing to turn down in the logging settings". Since 7ee9426
(load 21): "[high] HF: your callback's hook runs its work on every step (24% ...
WeightNorms.on_step_end (line 42, 24%)): ... `if state.global_step % 50 == 0:`", up to 1.29x
(low against the CPU clock's 1.46x); GPT-2's frames never counted. Since 9bc6c84 (helper
cbgate) the finding offers the gate as a patch: --try-fixes 30 (load 27-32) 1.47x, verified.
"""

import os

os.environ["HF_HUB_OFFLINE"] = "1"
import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments
from transformers.utils import logging as hf_logging

hf_logging.set_verbosity_error()
torch.set_num_threads(1)
torch.manual_seed(0)


class Tokens(torch.utils.data.Dataset):
    def __init__(self, n):
        self.ids = torch.randint(0, 128, (n, 32))

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


class WeightNorms(TrainerCallback):
    def __init__(self, model):
        self.model = model
        self.history = []

    def on_step_end(self, args, state, control, **kwargs):
        row = {}
        for name, p in self.model.named_parameters():
            w = p.detach().float().flatten()
            row[name] = (float(w.norm()), float(torch.quantile(w[:4096], 0.95)))
        self.history.append(row)


config = GPT2Config(vocab_size=128, n_positions=32, n_embd=32, n_layer=2, n_head=2)
model = GPT2LMHeadModel(config)
args = TrainingArguments(
    output_dir="hf_out",
    per_device_train_batch_size=8,
    max_steps=300,
    report_to=[],
    use_cpu=True,
    save_strategy="no",
    disable_tqdm=True,
    logging_steps=500,
)
trainer = Trainer(
    model=model,
    args=args,
    train_dataset=Tokens(4096),
    callbacks=[WeightNorms(model)],
)
trainer.train()
