"""HF ``Trainer`` with ``skip_memory_metrics=False`` (unseen round 22): a plain ``nn.Module``
classifier (128-512-512-10 MLP) returning ``{"loss": ...}``, an in-memory dataset of dict
samples, batch 64, 400 optimizer steps.

Class: a background thread of the process that busy-polls in Python while the loop trains.
``skip_memory_metrics=False`` (to get ``train_mem_cpu_peaked_delta`` in the metrics) starts
transformers' ``TrainerMemoryTracker.peak_monitor_func`` for the whole of ``train()``: a ``while
True`` loop reading the RSS with no sleep ("can't sleep or will not catch the peak right"). It
holds the GIL for a switch interval at a time, so the loop thread waits for the interpreter
between its operators. The fix: ``skip_memory_metrics=True`` (the default), or read the peak
once (``resource.getrusage(...).ru_maxrss``) after training. The same class: a user's own
``threading.Thread`` that polls GPU/RSS in a ``while running:`` loop with no sleep.
Seen 2026-12-07 on main 343a714: UNKNOWN (too busy, 69% waiting "other programs held the
CPU"), "the machine, not your code" twice; the spinning thread unnamed. By hand
skip_memory_metrics=True 2.31x of train()'s wall time (medians of 3 pairs). Fixed by
own_threads_spin (capture/analysis/rules/words): host.spinning_thread [high] names the thread
(its CPU read per thread, 0.99x the loop thread's own), up to 2.20x at load 19, the patch
skip_memory_metrics=True at line 67; the verdict's wait "this program's own thread ... held
about 58% of it, other programs the rest".
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
        self.x = torch.randn(n, 128, generator=g)
        self.y = (self.x[:, :10] * 3).argmax(1)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return {"x": self.x[i], "labels": self.y[i]}


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(128, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)
        )

    def forward(self, x, labels=None):
        out = self.net(x)
        return {"loss": nn.functional.cross_entropy(out, labels), "logits": out}


args = TrainingArguments(
    output_dir="hf_out_u22",
    per_device_train_batch_size=64,
    learning_rate=1e-3,
    max_steps=400,
    report_to=[],
    use_cpu=True,
    save_strategy="no",
    disable_tqdm=True,
    logging_steps=1000,
    skip_memory_metrics=False,
)
trainer = Trainer(model=Classifier(), args=args, train_dataset=Rows(8192))
metrics = trainer.train().metrics
print("peak cpu delta", metrics.get("train_mem_cpu_peaked_delta"))
