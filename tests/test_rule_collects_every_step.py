"""Whole-process housekeeping on every step (rules/housekeeping.collects_every_step): unseen
round 19's gc_collect_every_step (``gc.collect()`` at the end of each step "to free memory":
99% of the hot lines' samples, read as per-operator overhead with a bigger batch and
torch.compile offered, no finding naming it). Measured by a real %%gpucheck run on the CPU; the
cell's other shapes (``torch.cuda.empty_cache()``, a collection every N steps, one after the
loop) read against it, and the patch gates the call."""

from __future__ import annotations

import ast

import pytest

from gpu_notebook.cell.scan import scan_source
from gpu_notebook.fixes import Patch, apply_fix
from gpu_notebook.rules.housekeeping import CollectsEveryStep, collects_every_step
from tests.cells import measured

RULE = "housekeeping.every_step"

CELL = """\
import gc
import torch
from torch import nn
model = nn.Linear(16, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(8, 16), torch.randint(0, 2, (8,))
for step in range(30):
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    del loss
    gc.collect()
"""

COLLECT = "    gc.collect()\n"


@pytest.fixture(scope="module")
def rep(ip):
    return measured(ip, CELL)


def test_a_collection_every_step_is_named_and_gated(rep):
    findings = [f for f in rep.findings if f.rule_id == RULE]
    assert len(findings) == 1
    f = findings[0]
    assert f.line == 14  # the cell's line 14: the magic is its first
    assert "garbage" in f.title and "gc.collect()" in f.fix
    assert any("`gc.collect()`" in e for e in f.evidence)
    said = collects_every_step(rep.run, rep.analysis, scan_source(CELL))
    assert said is not None and isinstance(said.said, CollectsEveryStep) and said.said.gc
    # It is no logging: the per-step logging rule does not count it.
    assert not [g for g in rep.findings if g.rule_id == "logging.every_step"]
    if f.fix_id is not None:  # offered where the host time holding it was measured
        assert f.fix_id == "log_every_n"


def test_the_patch_gates_the_collection():
    facts = scan_source(CELL)
    (line,) = facts.collects
    assert line.kind == "collect" and not line.gated and line.step_loop_line == 7
    assert not facts.logging and not facts.saves
    patched = apply_fix("log_every_n", CELL, every=10)
    assert isinstance(patched, Patch), patched
    assert "if step % 10 == 0:\n        gc.collect()" in patched.source_after
    ast.parse(patched.source_after)


@pytest.mark.parametrize(
    ("collect", "found"),
    [
        ("    torch.cuda.empty_cache()\n", True),
        ("    if step % 10 == 0:\n        gc.collect()\n", False),
        ("", False),
    ],
    ids=["empty-cache", "every-10-steps", "none"],
)
def test_other_shapes(rep, collect, found):
    f = collects_every_step(rep.run, rep.analysis, scan_source(CELL.replace(COLLECT, collect)))
    assert (f is not None) == found
    if f is not None:
        assert isinstance(f.said, CollectsEveryStep) and not f.said.gc


def test_a_collection_after_the_loop_is_not_per_step(rep):
    cell = CELL.replace(COLLECT, "") + "gc.collect()\n"
    assert collects_every_step(rep.run, rep.analysis, scan_source(cell)) is None
