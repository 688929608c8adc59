"""A no_grad block that writes parameters in place is part of the step, not validation
(cell/names.updates_in_place).

Unseen round 17 (benchmarks/unseen_programs/kg_negative_python.py): TransE renormalises its entity
embeddings after every update, ``with torch.no_grad(): model.ent.weight.div_(...norm(...))``; the
report said "[info] Validation runs inside every training step" at that line and its patch put
the renormalisation under ``if step % 10 == 0:``, which changes the training (the constraint
holds on one step in ten). Only the optimizers' own in-place methods (``add_``, ``mul_``,
``clamp_``...) made a block an update; ``div_``, ``renorm_``, ``nn.init.normal_`` did not."""

from __future__ import annotations

from pathlib import Path

from gpu_notebook.cell.scan import scan_source
from gpu_notebook.fixes import Patch, apply_fix

UNSEEN = Path(__file__).resolve().parents[1] / "benchmarks" / "unseen_programs"


def test_an_embedding_renormalised_every_step_is_no_validation():
    facts = scan_source((UNSEEN / "kg_negative_python.py").read_text())
    assert [(s.line, s.kind) for s in facts.validation] == []


MAX_NORM_AND_VALIDATION = """\
import torch
from torch import nn
for step, (x, y) in enumerate(loader):
    loss = loss_fn(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.Linear):
                m.weight.renorm_(2, 0, 3.0)
    with torch.no_grad():
        dead = model.emb.weight.norm(dim=1) < 1e-3
        nn.init.normal_(model.emb.weight[dead])
    with torch.no_grad():
        val_loss = loss_fn(model(xv), yv)
"""


def test_max_norm_and_reinit_blocks_stay_while_validation_is_gated():
    facts = scan_source(MAX_NORM_AND_VALIDATION)
    assert [(s.line, s.kind) for s in facts.validation] == [(15, "no_grad")]
    patched = apply_fix("validate_every_n", MAX_NORM_AND_VALIDATION, every=10)
    assert isinstance(patched, Patch), patched
    after = patched.source_after
    assert "if step % 10 == 0:\n        with torch.no_grad():\n            val_loss" in after
    assert "\n    with torch.no_grad():\n        for m in model.modules():" in after
    assert "\n    with torch.no_grad():\n        dead = " in after
