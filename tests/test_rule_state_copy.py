"""A copy of the model's whole state taken in the step loop (a keep-the-best snapshot, a
rollback copy) is per-step host work read like a checkpoint save: found in its every form, said
with its share, gated by the every-N fix where it runs every step, advised where a batch's value
picks the steps (unseen round 11, best_state_deepcopy: no finding named it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_notebook.cell.scan import scan_source
from gpu_notebook.fixes.catalog import apply_fix
from gpu_notebook.fixes.records import Patch
from gpu_notebook.records import Report

TRAIN = """\
import copy
import torch
torch.manual_seed(0)
model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
best_loss = float("inf")
for step in range(6):
    loss = model(torch.randn(3, 4)).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


@pytest.mark.parametrize(
    "copy_line",
    [
        "    best = copy.deepcopy(model.state_dict())\n",
        "    best = copy.deepcopy(model)\n",
        "    best = {k: v.detach().clone() for k, v in model.state_dict().items()}\n",
        "    best = {k: v.cpu() for k, v in model.state_dict().items()}\n",
        "    best = [p.detach().cpu() for p in model.parameters()]\n",
        "    best = []\n    for p in model.parameters():\n        best.append(p.clone())\n",
    ],
)
def test_every_form_of_a_whole_state_copy_in_the_step_is_a_fact(copy_line):
    facts = scan_source(TRAIN + copy_line)
    (found,) = facts.state_copies
    assert found.step_loop_line == 7 and not found.gated
    assert found.line == len((TRAIN + copy_line).splitlines())


def test_a_copy_picked_by_a_value_is_gated_and_one_on_a_period_is_none():
    picked = TRAIN + (
        "    if loss.item() < best_loss:\n"
        "        best_loss = loss.item()\n"
        "        best = copy.deepcopy(model.state_dict())\n"
    )
    (found,) = scan_source(picked).state_copies
    assert found.gated
    periodic = TRAIN + "    if step % 5 == 0:\n        best = copy.deepcopy(model.state_dict())\n"
    assert scan_source(periodic).state_copies == ()
    # A working copy the step trains or calls (MAML's inner loop) is no snapshot.
    working = (
        TRAIN + "    fast = copy.deepcopy(model)\n    fast(torch.randn(3, 4)).sum().backward()\n"
    )
    assert scan_source(working).state_copies == ()
    # A batch's own dict of tensors copied is no model state.
    batch = TRAIN + '    kept = {k: v.clone() for k, v in {"loss": loss}.items()}\n'
    assert scan_source(batch).state_copies == ()


def test_the_every_n_fix_gates_a_copy_taken_every_step():
    source = TRAIN + "    last = copy.deepcopy(model.state_dict())\n"
    patch = apply_fix("log_every_n", source, every=2)
    assert isinstance(patch, Patch), patch
    assert "    if step % 2 == 0:\n        last = copy.deepcopy(model.state_dict())" in (
        patch.source_after or ""
    )
    namespace: dict[str, object] = {}
    exec(compile(patch.source_after or "", "<patched>", "exec"), namespace)
    assert set(namespace["last"]) == {"weight", "bias"}  # type: ignore[call-overload]


def test_a_best_state_deepcopy_is_named_with_its_advice_and_no_gate(ip):
    """The unseen program through the magic: the copy under `if loss.item() < best_loss:` is
    named with its line; no patch gates it (a stale best), the advice is the validation loss."""
    program = (
        Path(__file__).resolve().parents[1] / "benchmarks/unseen_programs/best_state_deepcopy.py"
    )
    body = program.read_text().replace("range(100)", "range(40)")
    ip.user_ns.pop("rep", None)
    ip.run_cell(f"%%gpucheck -q -o rep\n{body}")
    report: Report = ip.user_ns["rep"]
    (copying,) = [f for f in report.findings if f.rule_id == "checkpoint.state_copy"]
    line = 1 + body.splitlines().index("        best_state = copy.deepcopy(model.state_dict())")
    assert copying.line == line + 1  # the %%gpucheck line is the cell's first
    assert copying.fix_id is None and copying.proposal is None
    assert "a test of a value picks" in copying.evidence[0]
    assert "copy.deepcopy(model.state_dict())" in " ".join(copying.evidence)
    assert "validation loss" in copying.fix
