"""Work once an epoch from a statement beside the step loop, not a loop: one batch of a second
loader scored each epoch (unseen round 18's val_batch_grad_on: ``xb, yb = next(iter(val_loader))``
then ``val_loss = crit(model(xb), yb)`` after each epoch's 16 steps, 17% of the run by hand,
read as "Every 16 steps a step stalls" with no line). Recorded step times with planted stalls
(tests/test_epoch_stalls.py's) and cell sources: the line is checked against the plant."""

from __future__ import annotations

import pytest

from gpu_notebook.cell.blocks import epoch_blocks
from gpu_notebook.cell.scan import CELL_LINE_OFFSET, scan_source
from gpu_notebook.report.build import build_report
from tests.test_epoch_stalls import EPOCH, LOOKS, N, _run, _steps

HEAD = """\
for epoch in range(30):
    model.train()
    for x, y in train:
        loss = loss_fn(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
"""
ONE_BATCH = (
    HEAD
    + """\
    xb, yb = next(iter(val_loader))
    val_loss = loss_fn(model(xb), yb)
    print(epoch, val_loss.item())
"""
)
UNDER_NO_GRAD = (
    HEAD
    + """\
    with torch.no_grad():
        xb, yb = next(val_iter)
        acc = (model(xb).argmax(1) == yb).float().mean()
    print(epoch, acc.item())
"""
)
BEHIND_IF = (
    HEAD
    + """\
    if epoch > 0:
        try:
            writer.add_scalar("val", loss_fn(model(fixed_x), fixed_y).item(), epoch)
        except ValueError:
            pass
"""
)
LINE = 10 + CELL_LINE_OFFSET  # ONE_BATCH's scoring statement


@pytest.mark.parametrize(
    "cell, line",
    [(ONE_BATCH, 10), (UNDER_NO_GRAD, 11), (BEHIND_IF, 11)],
    ids=["one-batch", "no-grad", "if-try"],
)
def test_a_model_call_once_an_epoch_outside_any_loop_is_validation_at_its_line(cell, line):
    blocks = epoch_blocks(scan_source(cell, line_offset=CELL_LINE_OFFSET).tree)
    at = line + CELL_LINE_OFFSET
    assert [(b.line, b.work, b.per_epoch) for b in blocks] == [(at, "validation", True)]


def test_the_stall_finding_names_the_statement():
    report = build_report(_run(_steps(N, set(range(EPOCH, N, EPOCH)), 30.0, LOOKS), ONE_BATCH))
    stall = next(f for f in report.findings if f.rule_id == "run.periodic_stall")
    assert stall.title.startswith(f"Every {EPOCH} steps") and "validation" in stall.title
    assert stall.line == LINE
    assert any(
        f"line {LINE}: `val_loss = loss_fn(model(xb), yb)`" in e and "once an epoch" in e
        for e in stall.evidence
    )


NOT_VALIDATION = [
    # A second loss the epoch trains on (a consistency term once an epoch): it trains.
    HEAD + "    extra = loss_fn(model(xb), yb)\n    extra.backward()\n    opt.step()\n",
    HEAD + "    extra_loss = loss_fn(model(xb), yb); extra_loss.backward()\n",
    # No model call: a schedule, a save of the weights, a print of a loss.
    HEAD + "    sched.step()\n    torch.save(model.state_dict(), 'w.pt')\n    print(loss.item())\n",
    # A model call in a function the epoch defines runs where it is called, not here.
    HEAD + "    def score():\n        return model(xb)\n",
]


@pytest.mark.parametrize(
    "cell", NOT_VALIDATION, ids=["trains", "trains-one-line", "no-model", "def"]
)
def test_statements_that_train_or_call_no_model_are_no_epoch_work(cell):
    assert epoch_blocks(scan_source(cell, line_offset=CELL_LINE_OFFSET).tree) == []
