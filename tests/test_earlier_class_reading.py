"""A class of an earlier cell the measured cell makes (``model = Lit()``) is read with the cell:
the framework calls its methods (``train_dataloader``, ``training_step``, ``forward``), the cell
never does, and a fix that edits it gives the patched class then the cell (cell.calls,
fixes.through_calls). An object made earlier keeps its class: the fix is a refusal with the
change."""

from __future__ import annotations

import pytest

from gpu_notebook.cell.calls import callees
from gpu_notebook.fixes import Patch, Refusal
from gpu_notebook.fixes.through_calls import apply_through_calls
from gpu_notebook.rules.restarted_workers import FIX as KEEP_WORKERS

IMPORTS = """\
import torch, lightning as L
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset
"""

# An earlier cell: the LightningModule whose train_dataloader starts two workers every epoch.
LIT = """\
class Lit(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(8, 1)

    def training_step(self, batch, i):
        x, y = batch
        return nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)

    def train_dataloader(self):
        data = TensorDataset(torch.randn(16, 8), torch.randn(16, 1))
        return DataLoader(data, batch_size=8, num_workers=2)
"""
TRAINER = (
    "trainer = L.Trainer(max_epochs=1, logger=False, enable_checkpointing=False, "
    'enable_progress_bar=False, enable_model_summary=False, accelerator="cpu")\n'
)
FIT = "model = Lit()\n" + TRAINER + "trainer.fit(model)\n"

# An earlier cell: a Lightning Callback whose hook copies every weight on every batch.
STATS = """\
class WeightStats(L.Callback):
    def __init__(self):
        self.snapshot = {}

    def on_train_batch_end(self, tr, module, outputs, batch, batch_idx):
        for name, p in module.named_parameters():
            self.snapshot[name] = p.detach().clone()
"""
FIT_STATS = FIT.replace("accelerator=", "callbacks=[WeightStats()], accelerator=")


@pytest.fixture(autouse=True)
def _namespace_left_as_found(ip):
    before = dict(ip.user_ns)
    yield
    for name in set(ip.user_ns) - set(before):
        del ip.user_ns[name]
    ip.user_ns.update(before)


def defined_in_a_cell(ip, code: str) -> int:
    """Run ``code`` as a notebook cell (numbered, as a kernel numbers it): its In[N]."""
    number = ip.execution_count
    result = ip.run_cell(code, store_history=True)
    assert result.success, result.error_in_exec
    return number


def trains_in_a_fresh_kernel(cells: str) -> dict:
    """``cells`` run as a fresh kernel runs them, one after the other: its namespace."""
    namespace: dict = {"__name__": "__main__"}
    exec(compile(cells, "<fresh kernel>", "exec"), namespace)
    assert namespace["trainer"].global_step > 0
    return namespace


def test_a_lightning_class_of_an_earlier_cell_gets_its_loader_kept_in_the_patched_class(ip):
    assert ip.run_cell(IMPORTS).success
    number = defined_in_a_cell(ip, LIT)
    origins = callees(FIT, ip.user_ns)
    assert [(o.function, o.cell_number, o.instance, o.made_here) for o in origins] == [
        ("Lit", number, "model", True)
    ]
    patch = apply_through_calls(KEEP_WORKERS, FIT, origins)
    assert isinstance(patch, Patch), patch
    patched = LIT.replace("num_workers=2)", "num_workers=2, persistent_workers=True)")
    assert patch.source_after == (
        "# gpucheck fix: Keep the loader's workers between epochs (persistent_workers=True)\n"
        + patched
        + "\n"
        + FIT
    )
    # A fresh kernel: the cells above it without the class; the patched cell defines it.
    ran = trains_in_a_fresh_kernel(IMPORTS + patch.source_after)
    assert ran["model"].train_dataloader().persistent_workers is True
    assert type(ran["model"]) is ran["Lit"]


def test_a_lightning_callback_of_an_earlier_cell_gets_its_hook_gated_in_the_patched_class(ip):
    assert ip.run_cell(IMPORTS).success
    defined_in_a_cell(ip, LIT)
    number = defined_in_a_cell(ip, STATS)
    origins = callees(FIT_STATS, ip.user_ns)
    assert [(o.function, o.cell_number, o.made_here) for o in origins] == [
        ("Lit", number - 1, True),
        ("WeightStats", number, True),
    ]
    hook = {"hooks": "WeightStats.on_train_batch_end", "framework": "lightning", "every": 2}
    patch = apply_through_calls("gate_callback_hook", FIT_STATS, origins, **hook)
    assert isinstance(patch, Patch), patch
    # Only the class the fix changes is defined again; Lit stays the earlier cell's.
    body = patch.source_after.split("\n", 1)[1]
    gated = STATS.replace(
        "batch_idx):\n", "batch_idx):\n        if tr.global_step % 2 != 0:\n            return\n"
    )
    assert body == gated + "\n" + FIT_STATS
    ran = trains_in_a_fresh_kernel(IMPORTS + LIT + patch.source_after)
    (stats,) = [c for c in ran["trainer"].callbacks if type(c).__name__ == "WeightStats"]
    assert type(stats) is ran["WeightStats"]


def test_an_object_made_in_an_earlier_cell_is_a_refusal_naming_its_cell(ip):
    assert ip.run_cell(IMPORTS).success
    number = defined_in_a_cell(ip, LIT)
    assert ip.run_cell("model = Lit()\n" + TRAINER).success
    body = "trainer.fit(model)\n"
    origins = callees(body, ip.user_ns)
    assert [(o.function, o.instance, o.made_here) for o in origins] == [("Lit", "model", False)]
    refusal = apply_through_calls(KEEP_WORKERS, body, origins)
    assert isinstance(refusal, Refusal)
    assert f"class `Lit` (In[{number}], line 1)" in refusal.reason
    assert "make `model` again" in refusal.reason
    assert (
        "+        return DataLoader(data, batch_size=8, num_workers=2, persistent_workers=True)"
        in (refusal.reason)
    )


PLAIN = """\
class Squares(Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        x = torch.full((8,), float(i))
        return x, x.sum(0, keepdim=True)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 1)

    def forward(self, x):
        return self.fc(x)


class Settings:
    def __init__(self):
        self.lr = 0.01
"""
PLAIN_LOOP = """\
settings = Settings()
model = Net()
loader = DataLoader(Squares(), batch_size=16)
opt = torch.optim.SGD(model.parameters(), lr=settings.lr)
for x, y in loader:
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
"""


def test_a_plain_torch_dataset_and_module_made_by_the_cell_are_read_a_helper_class_is_not(ip):
    assert ip.run_cell(IMPORTS).success
    number = defined_in_a_cell(ip, PLAIN)
    origins = callees(PLAIN_LOOP, ip.user_ns)
    assert [(o.function, o.cell_number, o.instance, o.made_here) for o in origins] == [
        ("Net", number, "model", True),
        ("Squares", number, "Squares", True),
    ]
    # Each read whole, from its own cell's lines.
    assert origins[1].text.startswith("class Squares(Dataset):\n")
    assert "def __getitem__(self, i):" in origins[1].text
