"""One DataLoader with workers and no persistent_workers, iterated again every epoch
(rules/restarted_workers.py), real runs.

Seen (unseen round 21, lightning_workers_nonpersistent): Lightning's Trainer iterates the one
loader ``train_dataloader`` returns once per epoch; each pass forks its 2 workers again. On main
the tool said "Every 6 steps a step stalls" with no cause and no fix: ``input.remade_loader``
speaks only for a loader the cell makes anew in its epoch loop. The shapes here: a plain epoch
loop over a loader built once, and Lightning's; the negatives: the same loader with
``persistent_workers=True``, and one made anew each epoch (remade_loader's, not this rule's).
"""

from __future__ import annotations

from gpu_notebook.fixes import Patch, apply_fix
from gpu_notebook.records import Report
from gpu_notebook.rules import FAMILIES, restarted_workers
from gpu_notebook.rules.restarted_workers import FIX

RULE = "input.restarted_workers"

PLAIN = """\
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
data = TensorDataset(torch.randn(256, 32), torch.randint(0, 4, (256,)))
loader = DataLoader(data, batch_size=32, shuffle=True, num_workers=2)
for epoch in range(5):
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
"""

LIGHTNING = """\
import warnings
import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
warnings.filterwarnings("ignore")
torch.manual_seed(0)
class Net(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(32, 4)
    def train_dataloader(self):
        data = TensorDataset(torch.randn(512, 32), torch.randint(0, 4, (512,)))
        return DataLoader(data, batch_size=32, shuffle=True, num_workers=2)
    def training_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.cross_entropy(self.net(x), y)
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)
trainer = L.Trainer(max_epochs=5, limit_train_batches=6, accelerator="cpu", logger=False,
                    enable_checkpointing=False, enable_progress_bar=False,
                    enable_model_summary=False)
trainer.fit(Net())
"""


def _run(ip, body: str) -> Report:
    ip.user_ns.pop("rep", None)
    result = ip.run_cell(f"%%gpucheck -q -o rep\n{body}")
    assert result.success, result.error_in_exec
    return ip.user_ns["rep"]


def _ours(rep: Report) -> list:
    return [f for f in rep.findings if f.rule_id == RULE]


def test_the_rule_module_is_found():
    assert restarted_workers in FAMILIES


def test_a_loader_built_once_and_iterated_every_epoch_keeps_its_workers(ip):
    rep = _run(ip, PLAIN)
    assert len(rep.run.steps.loader_starts) >= 3  # one start an epoch, after the warm-up
    (f,) = _ours(rep)
    assert f.line == 9  # the DataLoader(...) line, counted under the %%gpucheck line
    assert "2 worker process(es) and no persistent_workers" in f.evidence[0]
    assert f.gain_bound is not None and f.gain_bound > 1.0
    assert f.fix_id == FIX.fix_id and "persistent_workers=True" in f.fix
    assert not [g for g in rep.findings if g.rule_id == "input.remade_loader"]
    patched = apply_fix(FIX, PLAIN)
    assert isinstance(patched, Patch)
    assert "num_workers=2, persistent_workers=True)" in patched.source_after


def test_lightnings_train_dataloader_gets_persistent_workers(ip):
    rep = _run(ip, LIGHTNING)
    (f,) = _ours(rep)
    patched = apply_fix(FIX, LIGHTNING)
    assert isinstance(patched, Patch)
    assert "num_workers=2, persistent_workers=True)" in patched.source_after
    assert f.line is not None and "DataLoader(" in LIGHTNING.splitlines()[f.line - 2]
    # Asked for a new loader every epoch, Lightning drops the old one with its workers:
    # persistent_workers would keep nothing, so nothing is said.
    reloaded = LIGHTNING.replace(
        "max_epochs=5,", "max_epochs=5, reload_dataloaders_every_n_epochs=1,"
    )
    assert reloaded != LIGHTNING
    assert not _ours(_run(ip, reloaded))


def test_persistent_or_remade_loaders_are_not_this_rules(ip):
    kept = PLAIN.replace("num_workers=2)", "num_workers=2, persistent_workers=True)")
    assert not _ours(_run(ip, kept))
    lines = PLAIN.splitlines()
    loader = lines.pop(7)
    lines.insert(8, "    " + loader)  # made anew inside the epoch loop
    remade = "\n".join(lines) + "\n"
    assert not _ours(_run(ip, remade))
