"""HF Trainer: a tiny BERT over a slow dataset, dataloader_num_workers left at 0."""

import os
import time

os.environ["HF_HUB_OFFLINE"] = "1"
import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments
from transformers.utils import logging as hf_logging

hf_logging.set_verbosity_error()
torch.set_num_threads(1)


class Slow(torch.utils.data.Dataset):
    def __len__(self):
        return 100_000

    def __getitem__(self, i):
        time.sleep(0.003)
        return {
            "input_ids": torch.randint(5, 60, (12,)),
            "attention_mask": torch.ones(12, dtype=torch.long),
            "labels": torch.tensor(i % 2),
        }


config = BertConfig(
    vocab_size=64,
    hidden_size=16,
    num_hidden_layers=1,
    num_attention_heads=2,
    intermediate_size=32,
    max_position_embeddings=16,
    num_labels=2,
)
args = TrainingArguments(
    output_dir="hf_out",  # the current folder: fix_ledger runs it in a temporary one
    per_device_train_batch_size=4,
    max_steps=120,
    report_to=[],
    use_cpu=True,
    save_strategy="no",
    disable_tqdm=True,
    logging_steps=1000,
)
Trainer(model=BertForSequenceClassification(config), args=args, train_dataset=Slow()).train()
