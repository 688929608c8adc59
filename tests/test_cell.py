"""The one reading of the cell (gpu_notebook/cell): the rules' facts and the fixes' codemods use
the same words, so what a rule counts is what its fix acts on (issue 23)."""

from __future__ import annotations

from gpu_notebook.cell.scan import scan_source
from gpu_notebook.fixes import Patch, apply_fix

TRACKER_CELL = """\
for step, (x, y) in enumerate(loader):
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()
    tracker.log_dict({"lr": 0.1})
"""


def test_a_per_step_log_dict_is_logging_for_the_rule_and_for_its_fix():
    facts = scan_source(TRACKER_CELL)
    assert [(line.kind, line.gated) for line in facts.logging] == [("tracker", False)]
    patched = apply_fix("log_every_n", TRACKER_CELL, every=10)
    assert isinstance(patched, Patch), patched
    assert "if step % 10 == 0:\n        tracker.log_dict" in patched.source_after


MUON_CELL = """\
import torch
opt = torch.optim.Muon(model.parameters(), lr=0.02)
for x, y in loader:
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
"""


def test_an_optimizer_class_known_to_the_fixes_is_known_to_the_rules():
    import libcst as cst

    from gpu_notebook.fixes.cst_tools import optimizer_names

    assert [o.cls for o in scan_source(MUON_CELL).optimizers] == ["Muon"]
    assert optimizer_names(cst.parse_module(MUON_CELL)) == {"opt"}
