"""Work once an epoch from a loop beside the step loop (a validation pass each epoch), where the
capture's own look at the run every 64 steps left every other epoch's stall out as ours.

Recorded step times with planted stalls and a planted listener (``ours_s``), and cell sources:
the period and the line are checked against the plant, never against timing (unseen round 9's
``val_grad_earlystop``: "Every 64 steps a step stalls", no line, for a validation every 32)."""

from __future__ import annotations

import dataclasses

from gpu_notebook.analysis.run_trend import run_shape
from gpu_notebook.capture.session import RETIME_EVERY_STEPS
from gpu_notebook.cell.blocks import epoch_blocks
from gpu_notebook.cell.scan import CELL_LINE_OFFSET, scan_source
from gpu_notebook.records import ProfileWindow, Run, StepClockRecord, StepTiming
from gpu_notebook.report.build import build_report
from tests.scenarios import synthetic as syn

EPOCH = 32  # batches an epoch: the first step of each epoch holds the validation pass

VAL_CELL = """\
for epoch in range(30):
    model.train()
    for x, y in train:
        loss = loss_fn(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    vloss = 0.0
    for x, y in val:
        vloss += loss_fn(model(x), y).item()
    print(epoch, vloss)
"""
VAL_LINE = 10 + CELL_LINE_OFFSET  # `for x, y in val:`


def _steps(n: int, stalled: set[int], stall_ms: float, ours: set[int]) -> StepClockRecord:
    """``n`` steps of ~3 ms (a deterministic wobble), ``stall_ms`` more at ``stalled``; the
    steps of ``ours`` carry our listener's 0.2 ms; every step its wait for a core (none)."""
    rows, t = [], 0.0
    for i in range(n):
        base = 3e-3 * (1.0 + 0.04 * (((i * 7919) % 17) / 8.0 - 1.0))
        dur = base + (stall_ms / 1e3 if i in stalled else 0.0)
        own = 2e-4 if i in ours else 0.0
        part = 0.3 * base
        timing = StepTiming(i, t, dur + own, 3e-4, part, part, part, 1, 1, 64)
        rows.append(dataclasses.replace(timing, ours_s=own, wait_s=0.0, cpu_s=dur + own))
        t += dur + own
    return StepClockRecord("optimizer", n, tuple(rows))


def _run(steps: StepClockRecord, cell: str = VAL_CELL) -> Run:
    run = syn.make_run(cell, steps=steps)
    window = ProfileWindow("recorded", 2, 3, first_step=2, recorded_steps=3)
    return dataclasses.replace(run, window=window, first_line=2)


N = 22 * EPOCH
LOOKS = set(range(0, N, RETIME_EVERY_STEPS))  # the capture's look at the run: a step of ours


def test_stalls_each_epoch_keep_their_period_through_the_steps_left_out_as_ours():
    assert RETIME_EVERY_STEPS % EPOCH == 0, "the case under test: every other epoch is ours"
    run = _run(_steps(N, set(range(EPOCH, N, EPOCH)), 30.0, LOOKS))
    shape = run_shape(run)
    assert shape is not None and shape.own is not None and shape.own.stalls is not None
    stalls = shape.own.stalls
    assert stalls.period_steps == EPOCH  # main: 64, the stalls our look did not hide
    # The epochs our look fell in stalled too (their time less ours): counted, not left out.
    assert set(range(EPOCH, N, EPOCH)) <= set(stalls.steps)
    assert stalls.count == N // EPOCH - 1


def test_a_period_the_steps_of_ours_do_not_stall_at_stays_its_own():
    # Work every 64 steps off our look's steps (32, 96, ...): the steps between, ours, ran at
    # the median: no evidence of a finer period, and none is read.
    run = _run(_steps(N, set(range(EPOCH, N, 2 * EPOCH)), 30.0, LOOKS))
    shape = run_shape(run)
    assert shape is not None and shape.own is not None and shape.own.stalls is not None
    assert shape.own.stalls.period_steps == 2 * EPOCH
    assert shape.own.stalls.count == len(range(EPOCH, N, 2 * EPOCH))


def test_the_stall_finding_names_the_validation_loop_in_the_epoch_loop():
    report = build_report(_run(_steps(N, set(range(EPOCH, N, EPOCH)), 30.0, LOOKS)))
    stall = next(f for f in report.findings if f.rule_id == "run.periodic_stall")
    assert stall.title.startswith(f"Every {EPOCH} steps") and "validation" in stall.title
    assert stall.line == VAL_LINE
    assert any(f"line {VAL_LINE}: `for x, y in val:`" in e and "once an epoch" in e
               for e in stall.evidence)  # fmt: skip
    assert stall.fix.startswith("Make validation cheaper or rarer")


def test_epoch_blocks_are_the_loops_beside_the_step_loop_that_do_not_train():
    facts = scan_source(VAL_CELL, line_offset=CELL_LINE_OFFSET)
    blocks = epoch_blocks(facts.tree)
    assert [(b.line, b.work, b.per_epoch) for b in blocks] == [(VAL_LINE, "validation", True)]
    # A step loop with no epoch loop around it runs no work once an epoch.
    flat = scan_source(
        "for x, y in train:\n    loss_fn(model(x), y).backward()\n    opt.step()\n",
        line_offset=CELL_LINE_OFFSET,
    )
    assert epoch_blocks(flat.tree) == []


def test_one_epoch_s_step_of_ours_read_under_the_cut_still_keeps_the_epoch_period():
    # Under load one of our look's epoch steps read under the cut (its time went to a wait):
    # the other holes on the schedule stalled, as the schedule's own slots must (0.6 of them).
    stalled = set(range(EPOCH, N, EPOCH)) - {4 * EPOCH}
    shape = run_shape(_run(_steps(N, stalled, 30.0, LOOKS)))
    assert shape is not None and shape.own is not None and shape.own.stalls is not None
    assert shape.own.stalls.period_steps == EPOCH
    assert 4 * EPOCH not in shape.own.stalls.steps
