"""A ``log`` that takes a logarithm is no logging call (cell/names.logs_with).

Unseen round 17 (benchmarks/unseen_programs/clip_logit_scale.py): a CLIP loop clamps its learnable
temperature every step, ``model.logit_scale.clamp_(0, math.log(100))``, and the report said
"[low] The loop logs on every step ... line 51: `model.logit_scale.clamp_(0, math.log(100))`"
with "Log every 10 steps" as the fix: ``math.log`` was read as a tracker's ``log`` (wandb.log,
self.log). The same reading made ``torch.log(p)`` of a batch value a per-step device read
("log-tensor") and ``p.log()`` a logging call."""

from __future__ import annotations

from pathlib import Path

from gpu_notebook.cell.scan import scan_source
from gpu_notebook.fixes import Patch, apply_fix

UNSEEN = Path(__file__).resolve().parents[1] / "benchmarks" / "unseen_programs"


def test_a_clamp_bounded_by_math_log_is_not_logging():
    facts = scan_source((UNSEEN / "clip_logit_scale.py").read_text())
    assert [line.text for line in facts.logging] == []
    assert not any("clamp_" in line.text for line in facts.syncs)


NLL_BY_HAND = """\
import numpy as np
import torch
import wandb
for step, (x, y) in enumerate(loader):
    p = model(x).softmax(-1)
    loss = -torch.log(p[torch.arange(len(y)), y]).mean()
    ent = -(p * p.log()).sum(-1).mean()
    opt.zero_grad()
    (loss - 0.01 * ent).backward()
    opt.step()
    scale = np.log(step + 1)
    wandb.log({"loss": loss, "scale": scale})
"""


def test_torch_numpy_and_tensor_logarithms_are_neither_logs_nor_reads():
    facts = scan_source(NLL_BY_HAND)
    # The one logging call is the tracker's, and it reads the loss tensor: a read a step.
    assert [(s.line, s.kind) for s in facts.syncs] == [(12, "log-tensor")]
    assert [(s.line, s.kind) for s in facts.logging] == []
    patched = apply_fix("log_every_n", NLL_BY_HAND, every=10)
    assert isinstance(patched, Patch), patched
    assert "if step % 10 == 0:\n        wandb.log(" in patched.source_after
    assert "    loss = -torch.log(p[" in patched.source_after  # ungated, as before


def test_a_tracker_log_is_still_logging():
    cell = NLL_BY_HAND.replace('wandb.log({"loss": loss, "scale": scale})', 'run.log({"s": 1})')
    facts = scan_source(cell)
    assert [(s.line, s.kind) for s in facts.logging] == [(12, "tracker")]
    assert facts.syncs == ()
