"""Hugging Face transformers: Trainer.train on a 2-layer BERT built from a tiny config in code
(no downloads) and a synthetic classification dataset.

NORMALISE: the Trainer's final log line reports wall-clock figures (train_runtime,
train_samples_per_second, train_steps_per_second); their values are replaced.
"""

CELLS = [
    """
import os, random, numpy as np, torch
os.environ["HF_HUB_OFFLINE"] = "1"
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments
from transformers.utils import logging as hf_logging
hf_logging.set_verbosity_error()
torch.manual_seed(0); random.seed(0); np.random.seed(0)

class Synthetic(torch.utils.data.Dataset):
    def __init__(self, n):
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(5, 60, (n, 12), generator=g)
        self.labels = (self.ids[:, 0] > 30).long()
    def __len__(self): return len(self.ids)
    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "attention_mask": torch.ones(12, dtype=torch.long),
                "labels": self.labels[i]}

config = BertConfig(vocab_size=64, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=32, max_position_embeddings=16, num_labels=2)
model = BertForSequenceClassification(config)
dataset = Synthetic(96)
args = TrainingArguments(output_dir="hf_out", per_device_train_batch_size=8, max_steps=12,
                         learning_rate=5e-4, logging_steps=4, report_to=[], use_cpu=True,
                         save_strategy="no", disable_tqdm=True, seed=0, dataloader_num_workers=0)
trainer = Trainer(model=model, args=args, train_dataset=dataset)
""",
    """
_result = trainer.train()
print(_result.global_step, round(_result.training_loss, 5))
""",
]
MEASURED = 1
TIMEOUT_S = 240
NORMALISE = [
    (r"'(train_runtime|train_samples_per_second|train_steps_per_second)': '?[\d.e+-]+'?", r"'\1': <num>"),
]
