"""HF Trainer over a 48-example dataset for 15 epochs of batch 32 (unseen round 18): 2 steps an
epoch (32 + 16), so every second step begins an epoch (a fresh DataLoader iterator, epoch
callbacks, the sampler reshuffled); a tiny BERT built from a config (no download).

Class: a framework loop whose epochs are 1-2 steps long. Written before the first run: 30 steps
(15 epochs x 2), batch 32 with a short last batch; most of the wall time outside the steps
(Trainer set-up and epoch boundaries), said as such; no batch-size advice beyond the dataset's
48 examples.

Seen 2026-12-06 (main c63e0fa, load 3-6): CPU-ONLY (medium), 30 steps (right); most of the
time before the first step (imports, said); but "192 samples/s (batch 16)": every step read as
batch 16 while every other one is 32 (HF's own train_samples_per_second 244). Not fixed: the
step clock counts a one-ahead reader's (accelerate's DataLoaderShard) epoch-first step as the
batch read ahead (the 16), and the epoch's last step (no read) carries it; a plain-torch
one-ahead generator over the same loader reads the same (benchmarks/README, round 18).
"""

import os

os.environ["HF_HUB_OFFLINE"] = "1"
import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments
from transformers.utils import logging as hf_logging

hf_logging.set_verbosity_error()
torch.set_num_threads(1)
torch.manual_seed(0)


class Pairs(torch.utils.data.Dataset):
    def __init__(self) -> None:
        self.ids = torch.randint(5, 500, (48, 48))
        self.labels = (self.ids[:, 0] % 3).long()

    def __len__(self):
        return 48

    def __getitem__(self, i):
        return {
            "input_ids": self.ids[i],
            "attention_mask": torch.ones(48, dtype=torch.long),
            "labels": self.labels[i],
        }


config = BertConfig(
    vocab_size=512,
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=128,
    max_position_embeddings=64,
    num_labels=3,
)
args = TrainingArguments(
    output_dir="hf_out",
    per_device_train_batch_size=32,
    num_train_epochs=15,
    report_to=[],
    use_cpu=True,
    save_strategy="no",
    disable_tqdm=True,
    logging_steps=1000,
)
Trainer(model=BertForSequenceClassification(config), args=args, train_dataset=Pairs()).train()
