"""What a Lightning log call costs on every step, and what throttles it (issue 26 item 2).

A Callback logs a tiny 6-layer MLP's 13 gradient norms with ``pl_module.log`` in
``on_before_optimizer_step``, as ``benchmarks/unseen_programs/lightning_norm_callback.py`` does.
Variants, interleaved, each a fresh ``Trainer`` (``logger=False``, the default
``log_every_n_steps=50``, no progress bar): no logging; ``on_step=True``; ``on_step=False,
on_epoch=True``; gated ``if trainer.global_step % 50 == 0``; the norms alone, not logged.

Printed: each variant's median step time (ms) per repeat and over them. What it shows is read
from Lightning's source as well (``lightning/pytorch/core/module.py`` ``log``,
``trainer/connectors/logger_connector``): each call runs in full on every step (its checks,
``detach``, ``_ResultMetric.to(device)``, the result collection's update); ``on_step=False`` only
moves the value into the epoch's mean, still every step; ``log_every_n_steps`` gates
``log_metrics``, the logger's write, alone. Only gating the call itself removes its cost.
This is a measurement, not a test: the figures move with the machine's load.
"""

from __future__ import annotations

import logging
import os
import statistics
import sys
import time
import warnings

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

warnings.filterwarnings("ignore")
logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
torch.set_num_threads(1)

MODES = ("none", "on_step", "off_step", "gated", "norms_only")
mode = "none"


class Norms(L.Callback):
    def on_before_optimizer_step(self, trainer, pl_module, optimizer):  # type: ignore[no-untyped-def]
        if mode == "none" or (mode == "gated" and trainer.global_step % 50 != 0):
            return
        for name, p in pl_module.named_parameters():
            if p.grad is None:
                continue
            if mode == "norms_only":
                p.grad.norm()
            else:
                on_step = mode != "off_step"
                pl_module.log(f"grad/{name}", p.grad.norm(), on_step=on_step, on_epoch=not on_step)


class Clock(L.Callback):
    def __init__(self) -> None:
        self.steps_s: list[float] = []
        self.last: float | None = None

    def on_train_batch_end(self, *args: object) -> None:
        now = time.perf_counter()
        if self.last is not None:
            self.steps_s.append(now - self.last)
        self.last = now


class Net(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        for _ in range(6):
            layers += [nn.Linear(64, 64), nn.ReLU()]
        self.net = nn.Sequential(*layers, nn.Linear(64, 4))

    def training_step(self, batch, batch_idx):  # type: ignore[no-untyped-def]
        x, y = batch
        return nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self):  # type: ignore[no-untyped-def]
        return torch.optim.Adam(self.parameters(), lr=1e-3)


def main(repeats: int) -> None:
    global mode
    ds = TensorDataset(torch.randn(32 * 300, 64), torch.randint(0, 4, (32 * 300,)))
    medians: dict[str, list[float]] = {m: [] for m in MODES}
    for _ in range(repeats):
        for mode in MODES:
            clock = Clock()
            trainer = L.Trainer(max_epochs=1, accelerator="cpu", callbacks=[Norms(), clock],
                                logger=False, enable_checkpointing=False,
                                enable_model_summary=False, enable_progress_bar=False)  # fmt: skip
            trainer.fit(Net(), DataLoader(ds, batch_size=32))
            medians[mode].append(statistics.median(clock.steps_s[20:]))
    for m in MODES:
        each = " ".join(f"{v * 1e3:.2f}" for v in medians[m])
        print(f"{m:10s} {each} ms; median {statistics.median(medians[m]) * 1e3:.2f} ms")
    print("load", os.getloadavg())


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
