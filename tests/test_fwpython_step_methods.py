"""The user's own Python work inside the methods a framework calls every step, named at its
lines (cell.framework_step_methods, rules/python_work._method_work): a LightningModule's
``training_step`` that tokenises strings, a Lightning Callback's ``on_train_batch_end`` EMA loop
over the parameters, an HF Trainer subclass's ``compute_loss`` that tokenises, a
TrainerCallback's ``on_step_end``. On main none of them was named (the rule read only a plain
loop's body). Real Lightning and transformers under real %%gpucheck runs on the CPU: the
assertions are on which lines are named, in which method, with which advice, and that no
framework frame is the user's, never on a timing."""

from __future__ import annotations

import pytest

from gpu_notebook.cell.scan import scan_source
from gpu_notebook.rules.common import SUGGEST
from gpu_notebook.rules.python_work import body_work, method_work
from gpu_notebook.rules.syncs import lines_share


def measured(ip, body: str):
    """One real ``%%gpucheck`` run of ``body``, the stacks sampled over the whole cell: the
    lines' share is the sampler's (the framework's own work shares their stretch), and three
    steps' window catches a handful of samples."""
    ip.user_ns.pop("rep", None)
    assert ip.run_cell(f"%%gpucheck -q -o rep -i 0.05 --lines all\n{body}").success
    return ip.user_ns["rep"]


pytest.importorskip("lightning")
pytest.importorskip("transformers")

RULE = "python_work.loop_body"

SETUP = """\
import random, torch, lightning as L
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from transformers import Trainer, TrainerCallback, TrainingArguments
torch.set_num_threads(1)
random.seed(0)
words = [f"w{i}" for i in range(2000)]
vocab = {w: i + 1 for i, w in enumerate(words)}
texts = [{"text": " ".join(random.choice(words) for _ in range(600)).upper(), "label": i % 4}
         for i in range(8 * 60)]
"""

# Strings tokenised in training_step: Lightning runs it inside the optimizer's closure.
LIGHTNING = """\
class Lit(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.emb = nn.EmbeddingBag(len(vocab) + 1, 8, mode="mean", padding_idx=0)
        self.head = nn.Linear(8, 4)
    def training_step(self, batch, i):
        tokens = [t.lower().replace(",", " ").split() for t in batch["text"]]
        ids = [[vocab.get(w, 0) for w in toks] for toks in tokens]
        x = torch.tensor(ids)
        return nn.functional.cross_entropy(self.head(self.emb(x)), batch["label"])
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)
trainer = L.Trainer(max_epochs=1, logger=False, enable_checkpointing=False,
                    enable_progress_bar=False, enable_model_summary=False, accelerator="cpu")
trainer.fit(Lit(), DataLoader(texts, batch_size=8))
"""

# The same tokenising in an HF Trainer subclass's compute_loss.
HF = """\
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.EmbeddingBag(len(vocab) + 1, 8, mode="mean", padding_idx=0)
        self.head = nn.Linear(8, 4)
    def forward(self, input_ids, labels):
        return {"loss": nn.functional.cross_entropy(self.head(self.emb(input_ids)), labels)}
class TokenisingTrainer(Trainer):
    def compute_loss(self, model, inputs, return_outputs=False, **kwargs):
        tokens = [t.lower().replace(",", " ").split() for t in inputs["text"]]
        ids = [[vocab.get(w, 0) for w in toks] for toks in tokens]
        input_ids = torch.tensor(ids)
        out = model(input_ids=input_ids, labels=inputs["labels"])
        return (out["loss"], out) if return_outputs else out["loss"]
def collate(rows):
    return {"text": [r["text"] for r in rows], "labels": torch.tensor([r["label"] for r in rows])}
args = TrainingArguments("/tmp/fwpython_hf_out", per_device_train_batch_size=8,
                         num_train_epochs=1, report_to=[], save_strategy="no",
                         logging_strategy="no", use_cpu=True, remove_unused_columns=False,
                         disable_tqdm=True)
TokenisingTrainer(model=Net(), args=args, train_dataset=texts, data_collator=collate).train()
"""


@pytest.fixture(scope="module")
def shell(ip):
    assert ip.run_cell(SETUP).success
    return ip


def _framework_lines(finding, cell: str) -> None:
    # The named lines are the cell's own, never a line of Lightning's or transformers' files.
    assert all("site-packages" not in e for e in finding.evidence)
    assert cell.splitlines()[finding.line - 2].strip().startswith("tokens = ")


def _named(rep, cell: str) -> list:
    """The finding on ``cell``'s method work, or none where the readings that gate it were
    under its line: the sampler's share of the method's lines (a busy machine's sampler may
    catch a handful of samples there: the fresh-clone CI of d72cf12 with both cores busy read
    none) or the traced stretch's high end. The mechanism either way, never the machine's
    load: where the readings reach the line, the finding must be there."""
    found = [f for f in rep.findings if f.rule_id == RULE]
    work = method_work(scan_source(cell, line_offset=1))  # the magic is the cell's line 1
    assert work is not None  # the cell's reading finds the method's work, load or not
    sampled = lines_share(rep.analysis, work[0])
    measured = rep.analysis.loop_python
    reached = (
        sampled is not None
        and measured is not None
        and bool(measured.steps)
        and min(sampled, measured.high_share) >= SUGGEST
    )
    assert bool(found) == reached, (sampled, measured)
    return found


def test_lightning_training_step_tokenising_is_named_in_its_method(shell):
    rep = measured(shell, LIGHTNING)
    found = _named(rep, LIGHTNING)
    if not found:
        return
    (f,) = found
    assert f.line == 8  # `tokens = ...` (the magic is the cell's line 1)
    assert "Lit.training_step" in f.title and any("Lightning calls" in e for e in f.evidence)
    assert "LightningDataModule" in f.fix and "num_workers" in f.fix and f.fix_id is None
    assert any("line(s) 8, 9, 10" in e for e in f.evidence)
    assert any("the framework's frames not counted" in e for e in f.evidence)
    _framework_lines(f, LIGHTNING)
    assert f.gain_bound is not None and (f.gain_low is None or f.gain_low <= f.gain_bound)


def test_hf_compute_loss_tokenising_is_named_in_its_method(shell):
    rep = measured(shell, HF)
    found = _named(rep, HF)
    if not found:
        return
    (f,) = found
    assert f.line == 11
    assert "TokenisingTrainer.compute_loss" in f.title
    assert "dataloader_num_workers" in f.fix and "map(batched=True)" in f.fix
    _framework_lines(f, HF)


METHODS = {
    "lightning-callback-ema": (
        "class EMA(L.Callback):\n"
        "    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):\n"
        "        if self.shadow is None:\n"
        "            self.shadow = [p.detach().clone() for p in pl_module.parameters()]\n"
        "        with torch.no_grad():\n"
        "            for s, p in zip(self.shadow, pl_module.parameters()):\n"
        "                s.mul_(0.999).add_(p, alpha=0.001)\n"
        "        pl_module.log('ema', 1.0)\n",
        ("EMA.on_train_batch_end", "ema", [6]),
    ),
    "lightning-module-hook": (
        "class Lit(pl.LightningModule):\n"
        "    def on_train_batch_start(self, batch, i):\n"
        "        batch['x'] = augment(batch['x'].numpy())\n"
        "    def training_step(self, batch, i):\n"
        "        return self.net(batch['x']).sum()\n",
        ("Lit.on_train_batch_start", "host", [3]),
    ),
    "hf-callback": (
        "class Norms(TrainerCallback):\n"
        "    def on_step_end(self, args, state, control, model=None, **kw):\n"
        "        self.history.append(json.dumps({k: 1 for k in range(100)}))\n"
        "        if state.global_step % 50 == 0:\n"
        "            print(state.global_step)\n",
        ("Norms.on_step_end", "host", [3]),
    ),
    "hf-training-step": (
        "class Base(Trainer):\n    pass\n"
        "class MyTrainer(Base):\n"
        "    def training_step(self, model, inputs, num_items_in_batch=None):\n"
        "        inputs['pixel_values'] = torch.stack([aug(im) for im in inputs['images']])\n"
        "        return super().training_step(model, inputs, num_items_in_batch)\n",
        ("MyTrainer.training_step", "input", [5]),
    ),
    # A helper method of the class the step calls is the user's work, not the model.
    "lightning-helper-method": (
        "class Lit(L.LightningModule):\n"
        "    def encode(self, texts):\n        return torch.tensor([len(t) for t in texts])\n"
        "    def training_step(self, batch, i):\n"
        "        x = self.encode(batch['text'])\n"
        "        return self.net(x).sum()\n",
        ("Lit.training_step", "input", [5]),
    ),
    # Only logging, a gated block, or nothing before the model: nothing named.
    "only-logging": (
        "class Lit(L.LightningModule):\n"
        "    def training_step(self, batch, i):\n"
        "        self.log('n', len(batch))\n"
        "        return self.net(batch).sum()\n"
        "    def on_train_batch_end(self, outputs, batch, i):\n"
        "        if i % 100 == 0:\n"
        "            self.slow_eval()\n",
        None,
    ),
    # A class of the same method names that derives from no framework class: not a hook.
    "not-a-framework": (
        "class Runner:\n"
        "    def training_step(self, batch):\n"
        "        x = torch.tensor([len(t) for t in batch])\n"
        "        return self.net(x)\n",
        None,
    ),
}


@pytest.mark.parametrize("name", list(METHODS))
def test_per_step_methods_of_every_framework_shape(name):
    source, want = METHODS[name]
    facts = scan_source(source, line_offset=0)
    assert body_work(facts) is None  # no plain loop: the loop is the framework's
    got = method_work(facts)
    if want is None:
        assert got is None
        return
    qualname, kind, lines = want
    assert got is not None and got[3] is not None
    assert (got[3].qualname, got[1], [s.line for s in got[0]]) == (qualname, kind, lines)
    assert got[2]  # shared: the framework's own per-step work runs in the same stretch


def test_a_closures_python_before_its_first_model_operator_is_not_its_forward():
    # Lightning runs training_step inside the optimizer's closure: a closure [0, 100) whose
    # first model operator starts at 40 and whose backward at 70 has its forward from 40 (main
    # painted [0, 70): the tokenising before the model read as the model's forward).
    import numpy as np

    from gpu_notebook.analysis.phases import _forward_in_closures

    closures = (np.array([0, 200]), np.array([100, 300]))
    backward = (np.array([70, 260]), np.array([95, 290]))
    starts, ends = _forward_in_closures(closures, backward, np.array([40, 210]))
    assert starts.tolist() == [40, 210] and ends.tolist() == [70, 260]
    # No model operator inside a closure: its forward starts where it starts, as before.
    starts, _ = _forward_in_closures(closures, backward, np.array([150]))
    assert starts.tolist() == [0, 200]
