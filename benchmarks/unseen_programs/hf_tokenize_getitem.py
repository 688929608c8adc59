"""HF ``Trainer`` over a Dataset that calls the tokenizer in ``__getitem__`` (unseen round 23):
4096 raw texts of 20-60 words, a fast ``PreTrainedTokenizerFast`` (a word-level vocabulary of
2000 words, built here: no download) called once per item with ``truncation=True,
max_length=64``, ``DataCollatorWithPadding``, ``dataloader_num_workers=0`` (the default); a
plain ``nn.Module`` bag-of-embeddings classifier returning ``{"loss"}``, batch 32, 300 steps.

Class: per-item tokenization every epoch in the loop's thread. Each call pays the tokenizer's
Python wrapper (argument checks, a ``BatchEncoding``, one encode) for one text, where one
batched call encodes all texts at once (the Rust side loops). The fix: tokenize the whole list
once in ``__init__`` (``self.enc = tok(texts, truncation=True, max_length=64)``) and return its
rows in ``__getitem__``.
Seen 2026-12-07 on main e9b71ba: UNKNOWN (too busy, 91%); the data wait [info] names line 66 in
``Texts.__getitem__`` and "cache items", no bound. By hand 1.36x (CPU clock, medians of 3). Open.
"""

import os

os.environ["HF_HUB_OFFLINE"] = "1"

import random

import torch
import torch.nn.functional as F
from tokenizers import Tokenizer, models, pre_tokenizers
from torch import nn
from transformers import (
    DataCollatorWithPadding,
    PreTrainedTokenizerFast,
    Trainer,
    TrainingArguments,
)
from transformers.utils import logging as hf_logging

hf_logging.set_verbosity_error()
torch.set_num_threads(1)
torch.manual_seed(0)
random.seed(0)

WORDS = [f"w{i}" for i in range(2000)]
vocab = {"[PAD]": 0, "[UNK]": 1, **{w: i + 2 for i, w in enumerate(WORDS)}}
raw = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
raw.pre_tokenizer = pre_tokenizers.Whitespace()
tok = PreTrainedTokenizerFast(
    tokenizer_object=raw,
    unk_token="[UNK]",
    pad_token="[PAD]",
    model_input_names=["input_ids", "attention_mask"],
)


class Texts(torch.utils.data.Dataset):
    def __init__(self, n: int) -> None:
        self.labels = [random.randrange(4) for _ in range(n)]
        self.texts = [
            " ".join(
                [
                    f"w{lab * 10 + random.randrange(10)}",
                    *random.choices(WORDS, k=random.randint(20, 60)),
                ]
            )
            for lab in self.labels
        ]

    def __len__(self):
        return len(self.texts)

    def __getitem__(self, i):
        item = dict(tok(self.texts[i], truncation=True, max_length=64))
        item["labels"] = self.labels[i]
        return item


class BagClassifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(len(vocab), 64, padding_idx=0)
        self.head = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 4))

    def forward(self, input_ids, attention_mask, labels=None):
        m = attention_mask.unsqueeze(-1).float()
        h = (self.emb(input_ids) * m).sum(1) / m.sum(1)
        logits = self.head(h)
        return {"loss": F.cross_entropy(logits, labels), "logits": logits}


args = TrainingArguments(
    output_dir="hf_out_u23",
    per_device_train_batch_size=32,
    learning_rate=1e-3,
    max_steps=300,
    report_to=[],
    use_cpu=True,
    save_strategy="no",
    disable_tqdm=True,
    logging_steps=1000,
)
trainer = Trainer(
    model=BagClassifier(),
    args=args,
    train_dataset=Texts(4096),
    data_collator=DataCollatorWithPadding(tok),
)
print(trainer.train().training_loss)
