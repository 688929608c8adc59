"""Steps counted where optimizers step more than once a batch, through the real capture:
Lightning's manual optimization (two optimizers stepped by hand in ``training_step``) and a
plain loop with two optimizers a batch.

Unseen round 13: ``automatic_optimization = False`` with two Adams counted 33 steps for 32
batches: learning the optimizers' cycle, the first batch's second optimizer ended a step of its
own (a 0.06 s "step" split off the first batch).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from gpu_notebook.records import Report

pytest.importorskip("lightning")

MANUAL = """
import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0); torch.set_num_threads(1)


class AE(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.automatic_optimization = False
        self.enc, self.dec, self.head = nn.Linear(32, 8), nn.Linear(8, 32), nn.Linear(8, 4)

    def training_step(self, batch, batch_idx):
        x, y = batch
        opt_ae, opt_head = self.optimizers()
        z = self.enc(x)
        rec = nn.functional.mse_loss(self.dec(z), x)
        opt_ae.zero_grad(); self.manual_backward(rec); opt_ae.step()
        cls = nn.functional.cross_entropy(self.head(z.detach()), y)
        opt_head.zero_grad(); self.manual_backward(cls); opt_head.step()

    def configure_optimizers(self):
        return [torch.optim.Adam([*self.enc.parameters(), *self.dec.parameters()]),
                torch.optim.SGD(self.head.parameters(), lr=0.1)]


loader = DataLoader(TensorDataset(torch.randn(384, 32), torch.randint(0, 4, (384,))), batch_size=16)
L.Trainer(max_epochs=1, accelerator="cpu", logger=False, enable_checkpointing=False,
          enable_progress_bar=False, enable_model_summary=False).fit(AE(), loader)
"""


def test_lightning_manual_optimization_with_two_optimizers_counts_one_step_a_batch(tmp_path):
    """24 batches, two optimizer steps each: 24 steps of 16 samples (fails on main: 25, the
    first batch split in two, one of its halves holding no batch)."""
    script = tmp_path / "manual.py"
    script.write_text(MANUAL)
    out = tmp_path / "r.json"
    cmd = [sys.executable, "-m", "gpu_notebook", "run", "-s", "4", "--json", str(out), "-q",
           str(script)]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True, timeout=600)
    run = Report.from_json(out.read_text()).run
    assert run.steps.anchor == "optimizer"
    assert run.steps.event_counts["optimizer"] == 48
    assert run.steps.step_count == 24
    assert {s.batch_size for s in run.steps.steps[1:]} == {16}
