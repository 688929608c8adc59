"""HF Trainer with ``gradient_checkpointing=True`` on a small BERT that has memory to spare,
evaluating every 10 steps (unseen round 13): 4 layers, hidden 128, sequences of 64 tokens,
batch 16, 20 steps, an eval set of 64 samples.

Class: recompute paid for memory nobody needs, set by a TrainingArguments keyword. Written
before the first run: the product should name the keyword's line and offer
``gradient_checkpointing=False`` with a bound from the recompute's share.

Seen 2026-12-06 (main 3f68e8f, load 15-17, 91% wait): UNKNOWN (too busy); "[medium] Activation
checkpointing recomputes the forward while memory has room (1.39x-1.41x)" at line 37 (the
``TrainingArguments(`` line), the patch setting ``gradient_checkpointing=False`` (right), but the
advice said "Call the checkpointed function directly at line 37": no such function there. Fixed
(f422b3d): "Set gradient_checkpointing=False in the TrainingArguments at line 37". Also "[low]
logging_steps=10 now ... (up to 1.05x)". By hand: benchmarks/README round 13.
"""

import os

os.environ["HF_HUB_OFFLINE"] = "1"
import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments
from transformers.utils import logging as hf_logging

hf_logging.set_verbosity_error()
torch.manual_seed(0)


class Tokens(torch.utils.data.Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(5, 1000, (n, 64), generator=g)
        self.y = (self.ids[:, 0] > 500).long()

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return {
            "input_ids": self.ids[i],
            "attention_mask": torch.ones(64, dtype=torch.long),
            "labels": self.y[i],
        }


if __name__ == "__main__":
    cfg = BertConfig(
        vocab_size=1000,
        hidden_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=512,
        max_position_embeddings=64,
        num_labels=2,
    )
    model = BertForSequenceClassification(cfg)
    args = TrainingArguments(
        output_dir="/tmp/hf_grad_ckpt_out",
        per_device_train_batch_size=16,
        per_device_eval_batch_size=32,
        max_steps=20,
        gradient_checkpointing=True,
        eval_strategy="steps",
        eval_steps=10,
        logging_steps=10,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
    )
    trainer = Trainer(
        model=model, args=args, train_dataset=Tokens(640, 0), eval_dataset=Tokens(64, 1)
    )
    out = trainer.train()
    print(f"train_runtime {out.metrics['train_runtime']:.2f}s")
