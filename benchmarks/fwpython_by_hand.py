"""By hand: the user's per-step Python inside framework methods, removed and timed
(rules/python_work's framework path checked, cell/framework_step_methods).

Three shapes, each with and without its per-step work:
- lightning_tokenise: a LightningModule's ``training_step`` tokenises strings before the model,
  against the same batches tokenised once before ``fit`` (what a Dataset/collate_fn with
  workers, or ``prepare_data``, removes from the loop's thread);
- lightning_ema: a Lightning Callback's ``on_train_batch_end`` updates an EMA copy parameter by
  parameter, against none and against every 10 steps;
- hf_tokenise: an HF Trainer subclass's ``compute_loss`` tokenises, against pre-tokenised.
Each run's steps timed on the process CPU clock between consecutive batch starts (a callback
reads it; the first 5 steps left out), variants interleaved, medians of ROUNDS pairs.
Run: ``python benchmarks/fwpython_by_hand.py [rounds]``; the share printed is 1 - without/with.
"""

from __future__ import annotations

import logging
import os
import random
import statistics
import sys
import time
import warnings

import torch
from torch import nn
from torch.utils.data import DataLoader

torch.set_num_threads(1)
warnings.filterwarnings("ignore")
logging.getLogger("lightning").setLevel(logging.ERROR)
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import lightning as L  # noqa: E402
from transformers import Trainer, TrainerCallback, TrainingArguments  # noqa: E402

SKIP = 5
random.seed(0)
WORDS = [f"w{i}" for i in range(2000)]
VOCAB = {w: i + 1 for i, w in enumerate(WORDS)}
TEXTS = [" ".join(random.choice(WORDS) for _ in range(300)).upper() for _ in range(32 * 40)]


def ids_of(texts: list[str]) -> torch.Tensor:
    tokens = [t.lower().replace(",", " ").split() for t in texts]
    return torch.tensor([[VOCAB.get(w, 0) for w in toks] for toks in tokens])


def _per_step(marks: list[float]) -> float:
    gaps = [b - a for a, b in zip(marks[SKIP:], marks[SKIP + 1 :], strict=False)]
    return statistics.median(gaps)


class _Clock(L.Callback):
    def __init__(self) -> None:
        self.marks: list[float] = []

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):  # type: ignore[no-untyped-def]
        self.marks.append(time.process_time())


class _Lit(L.LightningModule):
    def __init__(self, tokenise: bool, width: int = 64, depth: int = 0) -> None:
        super().__init__()
        self.tokenise = tokenise
        self.emb = nn.EmbeddingBag(len(VOCAB) + 1, width, mode="mean", padding_idx=0)
        self.body = nn.Sequential(*[nn.Linear(width, width) for _ in range(depth)])
        self.head = nn.Linear(width, 4)

    def training_step(self, batch, i):  # type: ignore[no-untyped-def]
        x = ids_of(batch["text"]) if self.tokenise else batch["ids"]
        return nn.functional.cross_entropy(self.head(self.body(self.emb(x))), batch["label"])

    def configure_optimizers(self):  # type: ignore[no-untyped-def]
        return torch.optim.Adam(self.parameters(), lr=1e-3)


class _EMA(L.Callback):
    def __init__(self, every: int) -> None:
        self.every, self.shadow = every, None

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):  # type: ignore[no-untyped-def]
        if self.every == 0 or trainer.global_step % self.every:
            return
        if self.shadow is None:
            self.shadow = [p.detach().clone() for p in pl_module.parameters()]
        decay = 0.999**self.every
        with torch.no_grad():
            for s, p in zip(self.shadow, pl_module.parameters(), strict=True):
                s.mul_(decay).add_(p.detach(), alpha=1 - decay)


def _fit(module: L.LightningModule, rows: list[dict], callbacks: list[L.Callback]) -> float:
    clock = _Clock()
    trainer = L.Trainer(max_epochs=1, logger=False, enable_checkpointing=False,
                        callbacks=[clock, *callbacks], enable_progress_bar=False,
                        enable_model_summary=False, accelerator="cpu")  # fmt: skip
    trainer.fit(module, DataLoader(rows, batch_size=32))
    return _per_step(clock.marks)


def lightning_tokenise(on: bool) -> float:
    torch.manual_seed(0)
    labels = [i % 4 for i in range(len(TEXTS))]
    if on:
        rows = [{"text": t, "label": y} for t, y in zip(TEXTS, labels, strict=True)]
    else:  # tokenised once before training (padding: every text has 300 words)
        rows = [{"ids": ids_of([t])[0], "label": y} for t, y in zip(TEXTS, labels, strict=True)]
    return _fit(_Lit(on), rows, [])


def lightning_ema(every: int) -> float:
    torch.manual_seed(0)
    rows = [{"ids": torch.randint(1, 2000, (300,)), "label": i % 4} for i in range(32 * 40)]
    return _fit(_Lit(False, width=64, depth=24), rows, [_EMA(every)])


class _HFClock(TrainerCallback):
    def __init__(self) -> None:
        self.marks: list[float] = []

    def on_step_begin(self, args, state, control, **kwargs):  # type: ignore[no-untyped-def]
        self.marks.append(time.process_time())


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.EmbeddingBag(len(VOCAB) + 1, 64, mode="mean", padding_idx=0)
        self.head = nn.Linear(64, 4)

    def forward(self, input_ids, labels):  # type: ignore[no-untyped-def]
        return {"loss": nn.functional.cross_entropy(self.head(self.emb(input_ids)), labels)}


class _TokenisingTrainer(Trainer):
    def compute_loss(self, model, inputs, return_outputs=False, **kwargs):  # type: ignore[no-untyped-def]
        ids = inputs["input_ids"] if "input_ids" in inputs else ids_of(inputs["text"])
        out = model(input_ids=ids, labels=inputs["labels"])
        return (out["loss"], out) if return_outputs else out["loss"]


def _collate(rows: list[dict]) -> dict:
    out = {"labels": torch.tensor([r["labels"] for r in rows])}
    if "ids" in rows[0]:
        out["input_ids"] = torch.stack([r["ids"] for r in rows])
    else:
        out["text"] = [r["text"] for r in rows]  # type: ignore[assignment]
    return out


def hf_tokenise(on: bool) -> float:
    torch.manual_seed(0)
    if on:
        rows = [{"text": t, "labels": i % 4} for i, t in enumerate(TEXTS)]
    else:
        rows = [{"ids": ids_of([t])[0], "labels": i % 4} for i, t in enumerate(TEXTS)]
    args = TrainingArguments("/tmp/fwpython_by_hand", per_device_train_batch_size=32,
                             num_train_epochs=1, report_to=[], save_strategy="no",
                             logging_strategy="no", use_cpu=True, remove_unused_columns=False,
                             disable_tqdm=True)  # fmt: skip
    clock = _HFClock()
    _TokenisingTrainer(model=_Net(), args=args, train_dataset=rows, data_collator=_collate,
                       callbacks=[clock]).train()  # fmt: skip
    return _per_step(clock.marks)


def main(rounds: int) -> None:
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    shapes = {
        "lightning_tokenise": (lambda: lightning_tokenise(True), lambda: lightning_tokenise(False)),
        "lightning_ema": (lambda: lightning_ema(1), lambda: lightning_ema(0)),
        "lightning_ema_every10": (lambda: lightning_ema(1), lambda: lightning_ema(10)),
        "hf_tokenise": (lambda: hf_tokenise(True), lambda: hf_tokenise(False)),
    }
    for name, (with_work, without) in shapes.items():
        pairs = []
        for _ in range(rounds):
            a, b = with_work(), without()
            pairs.append((a, b))
        ratios = [a / b for a, b in pairs]
        share = [1 - b / a for a, b in pairs]
        print(
            f"{name}: with {statistics.median(a for a, _ in pairs) * 1e3:.2f} ms/step, without "
            f"{statistics.median(b for _, b in pairs) * 1e3:.2f} ms/step; gain "
            f"{statistics.median(ratios):.2f}x (pairs {', '.join(f'{r:.2f}' for r in ratios)}), "
            f"share {statistics.median(share):.0%}; load {os.getloadavg()[0]:.1f}"
        )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
