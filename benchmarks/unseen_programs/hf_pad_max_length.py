"""HF Trainer with a custom ``compute_loss`` (class weights, label smoothing) and a ``data_collator``
that pads every batch to 256 tokens where the texts are 12-48 long (unseen round 12).

Class: compute spent on padding. Measured by hand (thread time, one torch thread, the same BERT,
batches of 16, 5 rounds): 225.7 ms a step padded to 256, 21.7 ms padded to the batch's longest
(10.4x), load 15-17. The product should say the attention mask is mostly zeros (the share of
real tokens) and offer padding to the longest in the batch (``padding=True`` /
``DataCollatorWithPadding``), bounded by that share.

Seen 2026-12-06 (load 18-26): too busy to judge (96% of the steps' time waiting for a core),
30 steps; no word of the padding. Open: nothing reads the batch's attention mask (the step
clock sees each batch; a pad share read there on the first batches would be the evidence).
"""

import os
import random
import tempfile

os.environ["HF_HUB_OFFLINE"] = "1"
import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments
from transformers.utils import logging as hf_logging

hf_logging.set_verbosity_error()
MAX_LEN = 256


class Reviews(torch.utils.data.Dataset):
    def __init__(self, n: int) -> None:
        rnd = random.Random(0)
        self.rows = [[rnd.randrange(5, 3000) for _ in range(rnd.randint(12, 48))] for _ in range(n)]
        self.labels = [rnd.randrange(3) for _ in range(n)]

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int):
        return {"input_ids": self.rows[i], "labels": self.labels[i]}


def collate(batch):
    ids = torch.zeros(len(batch), MAX_LEN, dtype=torch.long)
    mask = torch.zeros(len(batch), MAX_LEN, dtype=torch.long)
    for j, ex in enumerate(batch):
        n = min(len(ex["input_ids"]), MAX_LEN)
        ids[j, :n] = torch.tensor(ex["input_ids"][:n])
        mask[j, :n] = 1
    return {
        "input_ids": ids,
        "attention_mask": mask,
        "labels": torch.tensor([ex["labels"] for ex in batch]),
    }


class WeightedTrainer(Trainer):
    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        labels = inputs.pop("labels")
        outputs = model(**inputs)
        weight = torch.tensor([1.0, 2.0, 4.0])
        loss = torch.nn.functional.cross_entropy(
            outputs.logits, labels, weight=weight, label_smoothing=0.1
        )
        return (loss, outputs) if return_outputs else loss


config = BertConfig(
    vocab_size=3000,
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=128,
    max_position_embeddings=MAX_LEN,
    num_labels=3,
)
args = TrainingArguments(
    output_dir=tempfile.mkdtemp(),
    per_device_train_batch_size=16,
    max_steps=30,
    report_to=[],
    use_cpu=True,
    save_strategy="no",
    disable_tqdm=True,
    logging_steps=1000,
)
WeightedTrainer(
    model=BertForSequenceClassification(config),
    args=args,
    train_dataset=Reviews(4000),
    data_collator=collate,
).train()
