"""Gradient clipping on every micro-batch of a gradient accumulation
(rules/clip_accum.clip_per_micro_batch): unseen round 17's accum_bf16_clip_micro clipped after
every backward while AdamW stepped every 4th batch, and no finding named it. Real %%gpucheck
runs on the CPU (the step clock's backward and optimizer counts are the evidence), in two
shapes: the step gated in the batch loop, and a micro-batch loop inside the step loop; the
cells that clip once a step, or step every batch, have none."""

from __future__ import annotations

import pytest

from gpu_notebook.cell.scan import scan_source
from gpu_notebook.rules.clip_accum import clip_per_micro_batch
from tests.cells import measured

RULE = "grads.clip_per_micro_batch"

SETUP = """\
import torch
from torch import nn
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))
opt = torch.optim.SGD(model.parameters(), lr=1e-2)
data = [(torch.randn(16, 32), torch.randn(16, 1)) for _ in range(24)]
"""
GATED = (
    SETUP
    + """\
for i, (x, y) in enumerate(data):
    loss = nn.functional.mse_loss(model(x), y) / 4
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    if (i + 1) % 4 == 0:
        opt.step()
        opt.zero_grad()
"""
)
INNER = (
    SETUP
    + """\
for step in range(6):
    for x, y in data[step * 4 : step * 4 + 4]:
        nn.functional.mse_loss(model(x), y).backward()
        nn.utils.clip_grad_value_(model.parameters(), 0.5)
    opt.step()
    opt.zero_grad()
"""
)
ONCE = GATED.replace(
    "    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n    if (i + 1) % 4 == 0:\n",
    "    if (i + 1) % 4 == 0:\n        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n",
)
EVERY_BATCH = (
    SETUP
    + """\
use_amp = False
for x, y in data:
    nn.functional.mse_loss(model(x), y).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    if use_amp:
        scaler.step(opt)
    else:
        opt.step()
    opt.zero_grad()
"""
)


@pytest.mark.parametrize(
    "cell, clip, step",
    [(GATED, 10, 12), (INNER, 10, 11)],
    ids=["gated-step", "micro-batch-loop"],
)
def test_the_clip_on_every_micro_batch_is_named_with_the_measured_counts(ip, cell, clip, step):
    rep = measured(ip, cell)
    timed = [s for s in rep.run.steps.steps if s.timed]
    backward, optimizer = sum(s.backward_calls for s in timed), len(timed)
    assert optimizer > 0 and backward >= 3 * optimizer  # 4 micro-batches a step
    findings = [f for f in rep.findings if f.rule_id == RULE]
    assert len(findings) == 1
    f = findings[0]
    assert f.line == clip + 1 and f.severity == "low" and f.gain_bound is None  # + the magic
    assert any(
        f"line {step + 1}:" in e and f"{backward} backward passes in {optimizer} timed" in e
        for e in f.evidence
    )
    said = clip_per_micro_batch(rep.run, rep.analysis, scan_source(cell)).said
    assert (said.clip.line, said.step.line) == (clip, step)


def test_no_finding_where_the_clip_is_once_a_step_or_the_optimizer_steps_every_batch(ip):
    rep = measured(ip, GATED)  # a run that accumulated: 24 backward passes, 6 steps
    assert clip_per_micro_batch(rep.run, rep.analysis, scan_source(ONCE)) is None
    every = measured(ip, EVERY_BATCH)  # the step gated by `if use_amp:`, every batch all the same
    timed = [s for s in every.run.steps.steps if s.timed]
    assert timed and all(s.backward_calls == 1 for s in timed)
    assert RULE not in [f.rule_id for f in every.findings]
