"""A training loop written as an expression: a comprehension over the loader, a generator that
``sum`` consumes, ``map``/``starmap``/``reduce`` of a step function (``cell.expression_loops``).

The step clock counts their steps; the cell's reading must find the step loop too, so a read
in the step function is named, and a fix that cannot patch an expression says so, and where to
act, rather than patch the line that holds the whole loop. A comprehension that does not train
(``[x * 2 for x in range(10)]``) is no loop of the cell's. Real IPython, real CPU training."""

from __future__ import annotations

import gc

import pytest

from gpu_notebook.cell.scan import scan_source
from gpu_notebook.fixes import Patch, Refusal, apply_fix
from gpu_notebook.records import Report

SETUP = """\
import collections, functools, itertools
import torch, torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
torch.manual_seed(0)
loader = DataLoader(TensorDataset(torch.randn(256, 16), torch.randn(256, 1)), batch_size=16)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loss_fn = nn.MSELoss()
"""
STEP = """\
def train_step(batch):
    x, y = batch
    loss = loss_fn(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.item()
"""
READ_LINE = 7  # `return loss.item()` in STEP

# The loop's line is the cell's last: (the shape, the cell's last line).
SHAPES = {
    "list_comprehension": "losses = [train_step(b) for b in loader]",
    "generator_summed": "total = sum(train_step(b) for b in loader)",
    "list_of_map": "losses = list(map(train_step, loader))",
    "deque_of_map": "collections.deque(map(train_step, loader), maxlen=0)",
    "starmap": "for _ in itertools.starmap(lambda x, y: train_step((x, y)), loader):\n    pass",
    "reduce": "total = functools.reduce(lambda acc, b: acc + train_step(b), loader, 0.0)",
    "nested_clauses": "losses = [train_step(b) for epoch in range(2) for b in loader]",
}


def _cell(shape: str) -> str:
    return STEP + SHAPES[shape] + "\n"


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_the_step_functions_read_is_named_with_the_expression_as_its_step_loop(shape):
    # Main read no step loop in any of these: the read in train_step was not named.
    facts = scan_source(SETUP + _cell(shape))
    loop_line = len((SETUP + STEP).splitlines()) + 1
    (read,) = facts.syncs
    assert read.text == "return loss.item()", read
    assert read.step_loop_line == loop_line, read
    (step,) = facts.training_loops()
    assert step.line == loop_line and step.iterates[-1:] == ("loader",), step


def test_the_inner_clause_is_the_step_loop_and_the_outer_one_the_epoch_loop():
    facts = scan_source(SETUP + _cell("nested_clauses"))
    step_loops = [lp for lp in facts.loops if lp.innermost_training]
    assert [lp.iterates for lp in step_loops] == [("loader",)], facts.loops
    epoch, step = (lp for lp in facts.loops if lp.trains)
    assert not epoch.innermost_training and step.innermost_training, facts.loops


def test_a_comprehension_that_does_not_train_is_no_loop_of_the_cell():
    # Beside a training comprehension (the step loop, unseen on main), comprehensions that
    # build a list of numbers or of tensors, and one that runs the model without a backward,
    # stay expressions: not the step loop, not loops at all.
    cell = (
        SETUP
        + STEP
        + "xs = [x * 2 for x in range(10)]\n"
        + "ts = [torch.randn(4) for _ in range(3)]\n"
        + "losses = [train_step(b) for b in loader]\n"
        + "sizes = {len(b[0]) for b in loader}\n"
    )
    facts = scan_source(cell)
    loop_line = len((SETUP + STEP).splitlines()) + 3
    assert [lp.line for lp in facts.loops] == [loop_line], facts.loops
    assert [lp.line for lp in facts.training_loops()] == [loop_line]


def test_a_for_loop_beside_a_comprehension_keeps_its_own_step_and_its_fix():
    # The comprehension in the step (a list of parameter norms) is no loop of its own: the for
    # loop stays the step loop and the sync fix patches it, into a cell that parses.
    cell = (
        "for i, (x, y) in enumerate(loader):\n"
        "    loss = loss_fn(model(x), y)\n"
        "    loss.backward()\n"
        "    opt.step()\n"
        "    norms = [p.grad.norm() for p in model.parameters()]\n"
        "    print(loss.item())\n"
    )
    facts = scan_source(SETUP + cell)
    assert [lp.line for lp in facts.training_loops()] == [len(SETUP.splitlines()) + 1]
    patch = apply_fix("throttle_host_syncs", SETUP + cell)
    assert isinstance(patch, Patch), patch
    compile(patch.source_after, "<fixed>", "exec")


@pytest.mark.parametrize("shape", sorted(set(SHAPES) - {"starmap"}))
def test_the_sync_fix_declines_an_expression_loop_and_says_where_to_act(shape):
    cell = SETUP + _cell(shape)
    refused = apply_fix("throttle_host_syncs", cell)
    assert isinstance(refused, Refusal), refused.source_after
    assert "`return loss.item()` runs in `train_step`" in refused.reason, refused.reason
    loop_line = len((SETUP + STEP).splitlines()) + 1
    assert f"line {loop_line}: `{cell.splitlines()[loop_line - 1].strip()}`" in refused.reason


def test_a_for_loop_over_a_map_of_the_step_is_the_step_loop_and_its_fix_runs():
    # `for loss in map(step, loader):` runs the step once per pass: the for is the step loop,
    # its body's print runs every step (main: no step loop, the print unread), and the logging
    # fix gates it on a counter it adds; the patched cell runs (real torch).
    cell = (
        "def step(b):\n"
        "    loss = loss_fn(model(b[0]), b[1])\n"
        "    opt.zero_grad(); loss.backward(); opt.step()\n"
        "    return loss.detach()\n"
        "seen = []\n"
        "for loss in map(step, loader):\n"
        "    seen.append(1)\n"
        '    print(f"loss {loss.item():.3f}")\n'
    )
    facts = scan_source(SETUP + cell)
    loop_line = len(SETUP.splitlines()) + 6
    assert [lp.line for lp in facts.training_loops()] == [loop_line], facts.loops
    (read,) = facts.syncs
    assert read.text.startswith("print(") and read.step_loop_line == loop_line, read
    patch = apply_fix("throttle_host_syncs", SETUP + cell)
    assert isinstance(patch, Patch), patch
    assert (
        "for batch_idx, loss in enumerate(map(step, loader)):\n"
        "    seen.append(1)\n"
        "    if batch_idx % 10 == 0:\n"
        '        print(f"loss {loss.item():.3f}")\n'
    ) in patch.source_after, patch.source_after
    namespace: dict[str, object] = {}
    exec(compile(patch.source_after, "<fixed>", "exec"), namespace)
    assert namespace["seen"] == [1] * 16


@pytest.mark.parametrize("fix_id", ["log_every_n", "throttle_host_syncs", "autocast"])
def test_a_loop_fix_patches_no_line_that_holds_the_whole_comprehension(fix_id):
    # A for loop around the comprehension runs once an epoch; the print in the comprehension
    # runs every step. Gating the comprehension's line would gate the training itself: declined,
    # naming the expression and the for loop to write instead.
    cell = (
        SETUP
        + "def step(b):\n"
        + "    loss = loss_fn(model(b[0]), b[1])\n"
        + "    opt.zero_grad(); loss.backward(); opt.step()\n"
        + "    return loss.detach()\n"
        + "for epoch in range(2):\n"
        + "    losses = [print(step(b)) for b in loader]\n"
    )
    refused = apply_fix(fix_id, cell)
    assert isinstance(refused, Refusal), refused.source_after
    line = len(cell.splitlines())
    assert f"the training loop is an expression (line {line}: " in refused.reason, refused.reason
    assert "`for ... in loader:`" in refused.reason, refused.reason


# ------------------------------------------------------------------ the magic, a real run


@pytest.fixture(autouse=True)
def _namespace_left_as_found(ip):
    before = dict(ip.user_ns)
    yield
    for name in set(ip.user_ns) - set(before):
        del ip.user_ns[name]
    ip.user_ns.update(before)


def _measured(ip, body: str) -> Report:
    ip.user_ns.pop("rep", None)
    gc.collect()
    ip.run_cell(f"%%gpucheck -q -o rep\n{body}")
    rep = ip.user_ns["rep"]
    assert isinstance(rep, Report)
    return rep


@pytest.mark.parametrize("shape", ["list_comprehension", "list_of_map"])
def test_the_magic_names_the_step_functions_read_in_an_expression_loop(ip, capsys, shape):
    assert ip.run_cell(SETUP).success
    rep = _measured(ip, _cell(shape))
    assert rep.run.steps.step_count == 16
    reads = next(f for f in rep.findings if f.rule_id == "syncs.per_step")
    said = " | ".join(reads.evidence)
    # The magic's line is the cell's first: STEP's read is on the cell's line READ_LINE + 1.
    assert f"line {READ_LINE + 1}: `return loss.item()`" in said, said


def test_a_read_in_the_comprehensions_element_is_a_per_step_read_the_fix_leaves():
    cell = (
        SETUP
        + "def step(b):\n"
        + "    loss = loss_fn(model(b[0]), b[1])\n"
        + "    opt.zero_grad(); loss.backward(); opt.step()\n"
        + "    return loss.detach()\n"
        + "losses = [step(b).item() for b in loader]\n"
    )
    line = len(cell.splitlines())
    (read,) = scan_source(cell).syncs
    assert (read.line, read.step_loop_line, read.gated) == (line, line, False), read
    refused = apply_fix("throttle_host_syncs", cell)
    assert isinstance(refused, Refusal), refused.source_after
    assert f"the training loop is an expression (line {line}: " in refused.reason


def test_the_epoch_loops_forward_beside_a_comprehension_step_is_once_an_epoch():
    # The line holding the step loop is the step's, not the epoch's: the model call after it
    # runs once an epoch (validation), and its line is named.
    from gpu_notebook.cell.blocks import epoch_blocks

    cell = (
        SETUP
        + "for epoch in range(2):\n"
        + "    losses = [loss_fn(model(x), y).backward() for x, y in loader]\n"
        + "    val = model(torch.randn(4, 16))\n"
    )
    facts = scan_source(cell)
    assert [lp.line for lp in facts.training_loops()] == [len(cell.splitlines()) - 1]
    (block,) = epoch_blocks(facts.tree)
    assert (block.line, block.work, block.per_epoch) == (len(cell.splitlines()), "validation", True)
