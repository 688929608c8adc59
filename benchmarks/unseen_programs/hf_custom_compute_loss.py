"""HF Trainer subclass with a custom ``compute_loss`` (class-weighted cross-entropy) on a
tokenizer-free dataset (unseen round 15): a plain ``nn.Module`` (not a PreTrainedModel) over
float features, a Dataset returning dicts ``{"features", "labels"}``,
``remove_unused_columns=False``, ``dataloader_num_workers=0``, batch 32, 150 steps.
``compute_loss`` builds the class-weight tensor with ``torch.tensor(self.class_weights,
device=...)`` on every call.

Class: the loss of an HF Trainer in the user's override, a tensor made from a Python list
every step. Written before the first run: the per-step ``torch.tensor(list, device=...)`` is a
small host-to-device copy on a GPU (cheap, not a sync that matters); the forward in
``compute_loss`` is the forward. The product should count 150 steps, place the model's time in
forward/backward (not the framework's), say the Trainer's own overhead honestly for so small
a model, and not blame ``compute_loss`` as the framework's.

Seen 2026-12-06 (main 525b292, load 19, 93% waiting): UNKNOWN, too busy to judge (right), 150
steps (right), phases forward 25% / backward 49% / optimizer 19% / other 5% (the Trainer's own
share small, right), hot lines name ``logits = model(**inputs)`` in ``compute_loss`` as forward
(right), no fused offer (the Trainer already runs ``_fused_adamw_``: right), no word on the
per-step ``torch.tensor(list, device=...)`` (right: a small copy, no read). My premise held.
15 s of user CPU plain.
"""

import os

os.environ["HF_HUB_OFFLINE"] = "1"

import torch
from torch import nn
from transformers import Trainer, TrainingArguments
from transformers.utils import logging as hf_logging

hf_logging.set_verbosity_error()


class Features(torch.utils.data.Dataset):
    def __init__(self, n: int) -> None:
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, 96, generator=g)
        score = self.x[:, :6].sum(1)
        self.y = torch.bucketize(score, torch.tensor([-2.0, 0.5, 3.0]))

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i):
        return {"features": self.x[i], "labels": self.y[i]}


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Linear(96, 384),
            nn.ReLU(),
            nn.Dropout(0.1),
            nn.Linear(384, 384),
            nn.ReLU(),
            nn.Linear(384, 4),
        )

    def forward(self, features, labels=None):
        return self.body(features)


class WeightedTrainer(Trainer):
    class_weights = (2.0, 1.0, 1.0, 3.0)  # a list as run (ruff RUF012)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        labels = inputs.pop("labels")
        logits = model(**inputs)
        weight = torch.tensor(self.class_weights, device=logits.device)
        loss = nn.functional.cross_entropy(logits, labels, weight=weight)
        return (loss, logits) if return_outputs else loss


if __name__ == "__main__":
    torch.manual_seed(0)
    args = TrainingArguments(
        output_dir="hf_out_wl",
        per_device_train_batch_size=32,
        max_steps=150,
        learning_rate=1e-3,
        dataloader_num_workers=0,
        remove_unused_columns=False,
        report_to=[],
        save_strategy="no",
        logging_steps=50,
        disable_tqdm=True,
        use_cpu=not torch.cuda.is_available(),
    )
    trainer = WeightedTrainer(model=Classifier(), args=args, train_dataset=Features(4800))
    trainer.train()
