"""HF Trainer finished in 2 steps (unseen, oldopen): max_steps=2, a slow dataset, no workers. Class: a run shorter than warm-up + the profiled window. The product should say clearly how many steps it saw, that the window did not catch them (or that it did), and give a verdict only from what it measured. Seen 2026-12-05 15:19 (load 20): "CPU-ONLY: A GPU would
help this loop" from the two warm-up steps' hook timings, the window's "not-reached" line apart
under the phases (8 and 3 steps: a window of 3 and 1 steps, said). Since: the verdict's first
evidence line says the run ended within the warm-up and rests on those steps, confidence low.
Its workers fix was offered "[high] up to 1.84x" from the two steps, and --try-fixes spent a run
to say "not measured". Since 2026-12-06 (shortrun): "Not sized: the run has 2 step(s) ..." at
info with no range, and the trial says "not measurable on a run this short" without a run."""

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
    max_steps=2,
    report_to=[],
    use_cpu=True,
    save_strategy="no",
    disable_tqdm=True,
    logging_steps=1000,
)
Trainer(model=BertForSequenceClassification(config), args=args, train_dataset=Slow()).train()
