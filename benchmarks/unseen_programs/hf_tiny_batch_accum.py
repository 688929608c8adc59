"""HF ``Trainer`` with ``per_device_train_batch_size=2`` and ``gradient_accumulation_steps=16``
(unseen round 21, frameworks): a plain ``nn.Module`` regressor (64-256-256-1 MLP) that returns
``{"loss": ...}``, an in-memory dataset of dict samples, 300 optimizer steps of 32 samples.

Class: an effective batch built from tiny micro-batches where one batch of 32 fits easily: each
micro-batch pays the Trainer's per-step machinery (collate, ``training_step``, backward, the
accumulation bookkeeping) for 2 samples. The fix keeps the optimizer step's 32 samples:
``per_device_train_batch_size=32, gradient_accumulation_steps=1`` (same maths up to the mean
over micro-batches). The product should call the run host-bound and fold the accumulation into
the micro-batch, never double the effective batch or the learning rate.

Seen 2026-12-07 on main f90c6ff (load 14-18): UNKNOWN (too busy, 84%); 32 samples a step
(right); no batch finding. By hand the fold (batch 32, no accumulation) gained nothing (0.91x,
CPU clock 4.0-4.6 s both): HF's per-optimizer-step work holds the step. A control in effect.
"""

import os

os.environ["HF_HUB_OFFLINE"] = "1"
import torch
from torch import nn
from transformers import Trainer, TrainingArguments
from transformers.utils import logging as hf_logging

hf_logging.set_verbosity_error()
torch.set_num_threads(1)
torch.manual_seed(0)


class Rows(torch.utils.data.Dataset):
    def __init__(self, n):
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, 64, generator=g)
        self.y = self.x[:, :4].sum(1, keepdim=True)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return {"x": self.x[i], "labels": self.y[i]}


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 1)
        )

    def forward(self, x, labels=None):
        out = self.net(x)
        return {"loss": nn.functional.mse_loss(out, labels), "logits": out}


args = TrainingArguments(
    output_dir="hf_out_u21b",
    per_device_train_batch_size=2,
    gradient_accumulation_steps=16,
    learning_rate=1e-3,
    max_steps=300,
    report_to=[],
    use_cpu=True,
    save_strategy="no",
    disable_tqdm=True,
    logging_steps=1000,
)
trainer = Trainer(model=Regressor(), args=args, train_dataset=Rows(2048))
trainer.train()
