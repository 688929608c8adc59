"""Host reads of device values in the methods a framework calls every training step: a
Lightning module's or callback's ``on_train_batch_end``, an HF ``TrainerCallback``'s
``on_step_end`` (cell/syncs.hook_reads). The cell holds no loop around them.

Unseen round 15 (benchmarks/unseen_programs/lightning_sched_dict_cpu.py): the module's
``on_train_batch_end`` appends ``outputs["loss"].detach().cpu()`` and
``outputs["pred"].cpu().numpy()`` every step; on the CPU neither records an operator, and the
GPU estimate said "assumes: the host runs ahead of the GPU (no per-step read of device
values)": on a GPU each waits for the step's kernels.
"""

from __future__ import annotations

from gpu_notebook.cell.scan import scan_source
from gpu_notebook.cell.syncs import untraced_hook_reads

LIGHTNING = """
import lightning as L
import torch
from torch import nn

class Regressor(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(4, 1)
        self.losses = []

    def training_step(self, batch, batch_idx):
        x, y = batch
        pred = self.net(x)
        return {"loss": nn.functional.mse_loss(pred, y), "pred": pred.detach()}

    def on_train_batch_end(self, outputs, batch, batch_idx):
        self.losses.append(outputs["loss"].detach().cpu())
        self.preds.append(outputs["pred"].cpu().numpy())

    def on_train_epoch_end(self):
        print(torch.stack(self.losses).mean().item())

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters())

L.Trainer(max_epochs=1).fit(Regressor(), loader)
"""

# A second shape: an HF TrainerCallback whose on_step_end reads every step by .tolist(), and a
# gated read (every 50 steps) beside it that is no per-step read; a helper class of no
# framework with the same method name reads nothing the framework calls.
HF_CALLBACK = """
from transformers import Trainer, TrainerCallback

class Spread(TrainerCallback):
    def __init__(self, model):
        self.model = model
        self.rows = []

    def on_step_end(self, args, state, control, **kwargs):
        w = self.model.classifier.weight
        self.rows.append(w.abs().amax(1).tolist())
        if state.global_step % 50 == 0:
            print(state.global_step, w.norm().item())

class Plain:
    def on_step_end(self, w):
        return w.cpu()

trainer = Trainer(model=model, args=args, train_dataset=ds, callbacks=[Spread(model)])
trainer.train()
"""


def _line(source: str, text: str) -> int:
    return next(i for i, line in enumerate(source.splitlines(), 1) if text in line)


def test_a_lightning_hooks_cpu_reads_are_per_step_reads_no_cpu_trace_records():
    facts = scan_source(LIGHTNING)
    lines = {(s.line, s.called_in) for s in facts.hook_reads}
    assert lines == {
        (_line(LIGHTNING, '"loss"].detach().cpu()'), "Regressor.on_train_batch_end"),
        (_line(LIGHTNING, '"pred"].cpu().numpy()'), "Regressor.on_train_batch_end"),
    }, facts.hook_reads
    # Two lines read by .cpu() alone: on the CPU no operator records either.
    assert untraced_hook_reads(facts.hook_reads) == 2
    # on_train_epoch_end runs once an epoch: its .item() is no step's.
    assert all("epoch" not in (s.called_in or "") for s in facts.hook_reads)


def test_an_hf_callbacks_ungated_read_counts_its_gated_one_does_not():
    facts = scan_source(HF_CALLBACK)
    assert [(s.line, s.kind, s.called_in) for s in facts.hook_reads] == [
        (_line(HF_CALLBACK, ".tolist()"), "tolist", "Spread.on_step_end")
    ]
    assert untraced_hook_reads(facts.hook_reads) == 1


def test_the_hooks_reads_are_named_once_a_line_with_no_patch():
    """The finding names the hook and each reading line once (``.cpu().numpy()`` is one line),
    at info on the CPU, with no fix to apply: the hook is the framework's to call."""
    from tests.scenarios import synthetic as syn
    from tests.test_rules import only, rules_for

    f = only(rules_for(syn.make_run(LIGHTNING), syn.make_analysis({})), "syncs.hook_read")
    assert f.severity == "info" and f.fix_id is None
    assert "Regressor.on_train_batch_end" in f.title
    named = [e for e in f.evidence if "which the framework calls every training step" in e]
    assert len(named) == 2, f.evidence
    assert f.line == _line(LIGHTNING, '"loss"].detach().cpu()') + 1  # the %%gpucheck line
    # A callback's read every 50 steps alone is no finding.
    gated = HF_CALLBACK.replace("        self.rows.append(w.abs().amax(1).tolist())\n", "")
    assert "syncs.hook_read" not in [
        g.rule_id for g in rules_for(syn.make_run(gated), syn.make_analysis({}))
    ]
