"""``if x is not None:`` is a guard that holds every step once the value is set, not a gate
that skips steps: a device read under it is a per-step read.

Unseen round 16 (benchmarks/unseen_programs/hand_clip_item.py): a hand-written clip called every
step sums ``p.grad.norm().item() ** 2`` over the parameters under ``if p.grad is not None:``;
the GPU estimate counted its 40 reads a step, while no finding named them (the read was taken
as gated). Cell sources through the real scan; the report from the real rules."""

from __future__ import annotations

from gpu_notebook.cell.scan import CELL_LINE_OFFSET, scan_source
from gpu_notebook.rules.syncs import loop_lines

# The read in a function the step calls, under the guard inside the function's own loop.
HELPER_CELL = """\
def clip_by_hand(params, max_norm):
    total = 0.0
    for p in params:
        if p.grad is not None:
            total += p.grad.norm().item() ** 2
    total = total ** 0.5
    if total > max_norm:
        for p in params:
            if p.grad is not None:
                p.grad.mul_(max_norm / total)
    return total

for x, y in loader:
    loss = loss_fn(model(x), y)
    opt.zero_grad()
    loss.backward()
    norms.append(clip_by_hand(params, 1.0))
    opt.step()
"""

# A second shape: gradient norms logged in the step loop's own body, an auxiliary loss that may
# be None, and two real gates beside them (a period, a first-time test).
LOOP_CELL = """\
for step, (x, y) in enumerate(loader):
    loss = loss_fn(model(x), y)
    opt.zero_grad()
    loss.backward()
    for name, p in model.named_parameters():
        if p.grad is not None:
            grad_norms[name].append(p.grad.norm().item())
    opt.step()
    if aux_loss is not None:
        aux_history.append(aux_loss.item())
    if step % 50 == 0:
        print(loss.item())
    if best is None:
        best = loss.item()
"""


def _per_step_lines(cell: str) -> list[int]:
    facts = scan_source(cell, line_offset=CELL_LINE_OFFSET)
    return sorted(s.line - CELL_LINE_OFFSET for s in loop_lines(facts, facts.syncs))


def test_a_read_under_a_not_none_guard_in_a_called_function_runs_every_step():
    assert _per_step_lines(HELPER_CELL) == [5]  # main: [] (read as gated)


def test_a_not_none_guard_in_the_loop_is_no_gate_and_real_gates_stay():
    # The guarded reads (lines 7 and 10) run every step; `% 50` and `is None` still gate.
    assert _per_step_lines(LOOP_CELL) == [7, 10]  # main: []


def test_a_gradient_norm_read_by_hand_is_told_to_clip_grad_norm():
    """The read decides the clip: no patch, and the advice names ``clip_grad_norm_`` (on main:
    "compute it on the host before the batch goes to the device", which fits no gradient)."""
    import dataclasses

    from gpu_notebook.records import ProfileWindow
    from gpu_notebook.report.build import build_report
    from tests.scenarios import synthetic as syn
    from tests.test_periodic_blocks_nested import _steps

    run = syn.make_run(HELPER_CELL, steps=_steps(60, 1000, 0.0))
    run = dataclasses.replace(
        run, window=ProfileWindow("recorded", 2, 3, first_step=2, recorded_steps=3), first_line=2
    )
    read = next(f for f in build_report(run).findings if f.rule_id == "syncs.needed_read")
    assert read.line == 5 + CELL_LINE_OFFSET
    assert "gradient norm" in read.title and "clip_grad_norm_" in read.fix
    assert read.proposal is None
