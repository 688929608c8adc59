"""The gate of the ``self.log`` calls of a LightningModule's ``training_step``
(fixes/codemods_framework ``gate_training_log``): source in, patched source out; the refusals
that name the line and what to write; and, run by real Lightning, the logger's rows unchanged at
the steps it writes."""

from __future__ import annotations

import csv
import re
from pathlib import Path
from typing import Any

import pytest

from gpu_notebook.fixes import Patch, Refusal, apply_fix

CELL = """\
import lightning as L
import torch
from torch import nn


class Net(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(4, 2)

    def training_step(self, batch, batch_idx):
        x, y = batch
        out = self.net(x)
        loss = nn.functional.cross_entropy(out, y)
        metrics = {"loss": loss, "acc": (out.argmax(1) == y).float().mean()}
        # the step's metrics
        self.log_dict(metrics, on_step=True, prog_bar=True)
        self.log("w", self.net.weight.norm())
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


trainer = L.Trainer(max_epochs=1, log_every_n_steps=1)
trainer.fit(Net(), None)
"""

GATED = """\
# gpucheck fix: Run training_step's self.log calls every N steps \
(Net.training_step's log calls every 50 steps, log_every_n_steps=50)
import lightning as L
import torch
from torch import nn


class Net(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(4, 2)

    def training_step(self, batch, batch_idx):
        x, y = batch
        out = self.net(x)
        loss = nn.functional.cross_entropy(out, y)
        metrics = {"loss": loss, "acc": (out.argmax(1) == y).float().mean()}
        # the step's metrics
        if (self.global_step + 1) % 50 == 0:
            self.log_dict(metrics, on_step=True, prog_bar=True)
        if (self.global_step + 1) % 50 == 0:
            self.log("w", self.net.weight.norm())
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


trainer = L.Trainer(max_epochs=1, log_every_n_steps=50)
trainer.fit(Net(), None)
"""


def _gate(source: str, **params: Any) -> Patch | Refusal:
    return apply_fix("gate_training_log", source, **params)


def _refused(source: str) -> str:
    result = _gate(source)
    assert isinstance(result, Refusal), result.diff
    return result.reason


def test_the_training_steps_log_calls_are_gated_and_the_trainer_writes_at_their_period() -> None:
    result = _gate(CELL)
    assert isinstance(result, Patch), result
    assert result.source_after == GATED


def test_the_trainers_own_period_is_kept_where_it_writes_rarely() -> None:
    # A model bound to a name first; log_every_n_steps=10: the gate follows it, the Trainer
    # is left as it is.
    cell = CELL.replace("log_every_n_steps=1)", "log_every_n_steps=10)").replace(
        "trainer.fit(Net(), None)", "model = Net()\ntrainer.fit(model, None)"
    )
    result = _gate(cell)
    assert isinstance(result, Patch), result
    assert result.source_after.count("if (self.global_step + 1) % 10 == 0:") == 2
    assert "log_every_n_steps=10)" in result.source_after


def test_absent_log_every_n_steps_gates_at_lightnings_default() -> None:
    result = _gate(CELL.replace("L.Trainer(max_epochs=1, log_every_n_steps=1)", "L.Trainer()"))
    assert isinstance(result, Patch), result
    assert "if (self.global_step + 1) % 50 == 0:" in result.source_after
    assert "log_every_n_steps" not in result.source_after


@pytest.mark.parametrize(
    ("old", "new", "said"),
    [
        ('self.log("w", self.net.weight.norm())',
         'self.log("w", self.net.weight.norm(), on_epoch=True)',
         "line 18 logs with on_epoch=True: the epoch's aggregate needs every step's value"),
        ('self.log("w", self.net.weight.norm())', 'self.log("w", self.acc(out, y))',
         "line 18: its arguments call self.acc(...)"),
        ('self.log("w", self.net.weight.norm())', 'self.log("w", (w := self.net.weight.sum()))',
         "line 18: its arguments bind w (:=)"),
        ('self.log("w", self.net.weight.norm())',
         'for name, p in self.named_parameters():\n            self.log(name, p.norm())',
         "line 19: self.log runs inside a loop (line 18)"),
        ('self.log("w", self.net.weight.norm())',
         'if batch_idx:\n            self.log("w", self.net.weight.norm())',
         "line 19: self.log is not a statement of training_step's own body"),
    ],
)  # fmt: skip
def test_a_call_a_gate_would_change_beyond_frequency_is_left_with_its_line(
    old: str, new: str, said: str
) -> None:
    # The log_dict call is still gated; the other is left, its line and reason in the title.
    result = _gate(CELL.replace(old, new))
    assert isinstance(result, Patch), result
    assert "left as they were: " + said in result.source_after.splitlines()[0]
    assert "under `if (self.global_step + 1) % 50 == 0:`" in result.source_after.splitlines()[0]
    _header, *lines = result.source_after.splitlines()
    assert sum(line.endswith("% 50 == 0:") for line in lines) == 1


@pytest.mark.parametrize(
    ("old", "new", "said"),
    [
        ("trainer.fit(Net(), None)", "trainer.fit(make(), None)",
         "line 26 fits what make(...) makes, no class this cell defines"),
        ("trainer.fit(Net(), None)", "trainer.fit(nets[0], None)",
         "line 26: the module it fits is not made in this cell by its class's call"),
        ("        return torch.optim.SGD",
         "        self.automatic_optimization = False\n        return torch.optim.SGD",
         "line 22 sets automatic_optimization=False"),
        ("L.Trainer(max_epochs=1, log_every_n_steps=1)",
         'L.Trainer(callbacks=[L.pytorch.callbacks.ModelCheckpoint(monitor="loss")])',
         "line 25 monitors 'loss' (monitor=)"),
        ("log_every_n_steps=1)", "log_every_n_steps=every)",
         "line 25: log_every_n_steps is not a number here"),
        ("def training_step(self, batch, batch_idx):",
         "def training_step(self, batch, batch_idx):\n        pass\n\n    "
         "def training_step(self, batch, batch_idx):",
         "defines training_step 2 times"),
    ],
)  # fmt: skip
def test_a_module_no_gate_can_reach_is_refused_with_where_to_act(
    old: str, new: str, said: str
) -> None:
    cell = CELL.replace(old, new)
    assert cell != CELL
    assert said in _refused(cell)


def test_a_monitored_key_that_validation_logs_does_not_refuse() -> None:
    cell = CELL.replace(
        "L.Trainer(max_epochs=1, log_every_n_steps=1)",
        'L.Trainer(callbacks=[L.pytorch.callbacks.EarlyStopping(monitor="val_loss")])',
    ).replace(
        "    def configure_optimizers(self):",
        "    def validation_step(self, batch, batch_idx):\n"
        '        self.log("val_loss", 0.0)\n\n'
        "    def configure_optimizers(self):",
    )
    result = _gate(cell)
    assert isinstance(result, Patch), result
    assert 'self.log("val_loss", 0.0)\n' in result.source_after  # validation's left as it is


def _rows(source: str, tmp_path: Path, name: str) -> list[dict[str, str]]:
    """Run ``source``'s module under a real Lightning Trainer with a CSVLogger; its rows."""
    torch = pytest.importorskip("torch")
    lightning = pytest.importorskip("lightning")
    namespace: dict[str, Any] = {}
    exec(compile(source.split("\n\ntrainer = ")[0], "<cell>", "exec"), namespace)
    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(96, 4), torch.randint(0, 2, (96,)))
    every = int(re.findall(r"log_every_n_steps=(\d+)", source)[0])
    trainer = lightning.Trainer(
        max_epochs=2, accelerator="cpu", log_every_n_steps=every,
        logger=lightning.pytorch.loggers.CSVLogger(tmp_path, name=name),
        enable_checkpointing=False, enable_model_summary=False, enable_progress_bar=False,
    )  # fmt: skip
    torch.manual_seed(1)
    trainer.fit(namespace["Net"](), torch.utils.data.DataLoader(data, batch_size=4))
    [written] = list((tmp_path / name).rglob("metrics.csv"))
    with written.open() as f:
        return list(csv.DictReader(f))


def test_the_logger_writes_the_same_rows_at_the_steps_it_writes(tmp_path: Path) -> None:
    # log_every_n_steps=10, 48 steps over two epochs: the gated calls run on the very steps
    # Lightning's should_update_logs writes, so every row is the same, value for value.
    cell = CELL.replace("log_every_n_steps=1)", "log_every_n_steps=10)")
    patched = _gate(cell)
    assert isinstance(patched, Patch)
    before = _rows(cell, tmp_path, "before")
    after = _rows(patched.source_after, tmp_path, "after")
    assert [r["step"] for r in before] == ["9", "19", "29", "39"]
    assert after == before


def test_a_trainer_writing_every_step_writes_every_nth_row_as_it_was(tmp_path: Path) -> None:
    # log_every_n_steps=1 raised with the gate to 4: the logger writes steps 3, 7, ... each
    # row the one it wrote there before.
    patched = _gate(CELL, every=4)
    assert isinstance(patched, Patch)
    assert "log_every_n_steps=4)" in patched.source_after
    before = _rows(CELL, tmp_path, "before")
    after = _rows(patched.source_after, tmp_path, "after")
    assert len(before) == 48
    assert after == [row for row in before if (int(row["step"]) + 1) % 4 == 0]
    assert len(after) == 12
