"""Training in child processes: each child's steps counted, timed and split into phases there,
read by the parent; invisible to the children (capture/children.py)."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys

import torch

from gpu_notebook.capture.stepclock import StepClock
from gpu_notebook.records import ChildProcessSteps
from tests import spawn_no_torch, spawn_targets
from tests.verdicts import judged_as

_SPAWN = multiprocessing.get_context("spawn")


def _run(target: object, *args: object, clock: StepClock | None = None) -> int | None:
    p = _SPAWN.Process(target=target, args=args)
    p.start()
    p.join()
    return p.exitcode


def test_each_spawned_child_times_its_steps_phases_as_the_step_clock_does():
    """A child's DataLoader wait and backward are timed there: at least the waits the child's
    code makes (lower bounds, whatever the machine's load), never more than the span."""
    clock = StepClock(0)
    clock.install()
    try:
        p = _SPAWN.Process(target=spawn_targets.train_in_phases, args=(0, 6, 0.02, 0.03))
        p.start()
        p.join()
    finally:
        clock.uninstall()
    assert p.exitcode == 0
    (child,) = clock.record().children
    assert (child.pid, child.parent_pid, child.started, child.steps) == (
        p.pid,
        os.getpid(),
        "spawned",
        6,
    )
    # From the first step's end: 5 batches fetched and 5 backwards done in the span.
    assert child.data_s >= 5 * 0.02
    assert child.backward_s >= 5 * 0.03
    assert child.optimizer_s > 0
    assert child.data_s + child.backward_s + child.optimizer_s <= child.span_s
    (note,) = clock.child_notes()
    assert f"pid {p.pid}: 6 in " in note and "backward " in note and "data " in note, note
    assert "bound by " in note, note


def test_a_forked_child_times_its_phases_too():
    model = torch.nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    clock = StepClock(0)
    clock.install()
    try:
        pid = os.fork()
        if pid == 0:
            try:
                spawn_targets.train_in_phases(0, 4, 0.01, 0.02)
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        opt.step()
    finally:
        clock.uninstall()
    (child,) = clock.record().children
    assert (child.pid, child.started, child.steps) == (pid, "forked", 4)
    assert child.data_s >= 3 * 0.01 and child.backward_s >= 3 * 0.02


def test_a_childs_backward_taken_by_autograd_grad_is_backward():
    """torch.autograd.grad (and torch.func.grad, which calls it) is a backward pass in a child
    as in this process's step clock (issue 26): its time was left to forward and the rest."""
    clock = StepClock(0)
    clock.install()
    try:
        p = _SPAWN.Process(target=spawn_targets.train_with_autograd_grad, args=(0, 5, 0.03))
        p.start()
        p.join()
    finally:
        clock.uninstall()
    assert p.exitcode == 0
    (child,) = clock.record().children
    assert child.steps == 5
    # From the first step's end: 4 passes of at least 30 ms each (a lower bound).
    assert child.backward_s >= 4 * 0.03
    assert child.data_s + child.backward_s + child.optimizer_s <= child.span_s


def test_a_childs_closure_step_is_forward_and_backward_not_the_update():
    """LBFGS in a child: forward and backward run in the closure, inside step(). The update
    is step() less the closure's calls, as in this process's step clock: the closure's forward
    is forward and the rest (it was the optimizer's: only the backward timed was taken off)."""
    clock = StepClock(0)
    clock.install()
    try:
        p = _SPAWN.Process(target=spawn_targets.train_with_closure, args=(0, 5, 0.04, 0.02))
        p.start()
        p.join()
    finally:
        clock.uninstall()
    assert p.exitcode == 0
    (child,) = clock.record().children
    assert child.steps == 5
    # From the first step's end: 4 steps, each calling the closure at least once (lower bounds).
    assert child.backward_s >= 4 * 0.02
    forward_and_rest = child.span_s - child.data_s - child.backward_s - child.optimizer_s
    assert forward_and_rest >= 4 * 0.04, child
    assert child.optimizer_s > 0


def test_a_child_is_said_bound_by_its_largest_phase():
    from gpu_notebook.capture.stepclock import _child_words

    row = ChildProcessSteps(
        pid=7, parent_pid=1, started="spawned", steps=11, span_s=1.0, data_s=0.6,
        backward_s=0.2, optimizer_s=0.05,
    )  # fmt: skip
    words = _child_words(row, here=1)
    assert words.startswith("pid 7: 11 in 1.00 s (100.0 ms a step; data 60%, backward 20%")
    assert words.endswith("forward and the rest 15%, optimizer 5%: bound by data)")
    assert "pid 7 (a grandchild, under pid 1): 11" in _child_words(row, here=3)


def test_grandchildren_spawned_or_forked_by_a_spawned_child_are_counted_under_it():
    clock = StepClock(0)
    clock.install()
    try:
        p = _SPAWN.Process(target=spawn_targets.spawn_a_trainer, args=(0, 3))
        p.start()
        p.join()
    finally:
        clock.uninstall()
    assert p.exitcode == 0
    rows = {(c.parent_pid == p.pid, c.started, c.steps) for c in clock.record().children}
    assert rows == {(False, "spawned", 5), (True, "spawned", 3), (True, "forked", 4)}
    notes = " ".join(clock.child_notes())
    assert f"(a grandchild, under pid {p.pid})" in notes, notes


def test_a_spawned_child_that_never_imports_torch_has_the_meta_path_of_a_plain_run(tmp_path):
    def finders(out: str) -> dict[str, object]:
        assert _run(spawn_no_torch.meta_path_to, out) == 0
        with open(out, encoding="utf-8") as f:
            return dict(json.load(f))

    plain = finders(str(tmp_path / "plain.json"))
    clock = StepClock(0)
    clock.install()
    try:
        measured = finders(str(tmp_path / "measured.json"))
    finally:
        clock.uninstall()
    assert plain["torch"] is False
    assert measured == plain


_CLAIM_RACE = """
import os, struct, sys
from gpu_notebook.capture import children
claimers, rounds, shared = 8, int(sys.argv[1]), 0
for _ in range(rounds):
    fd = children.new_table()
    go_r, go_w = os.pipe()
    pids = []
    for k in range(claimers):
        pid = os.fork()
        if pid == 0:
            os.close(go_w)
            os.read(go_r, 1)  # all start claiming at once
            children.claim_slot(fd, 5 + k * children.SLOTS)
            os._exit(0)
        pids.append(pid)
    os.close(go_r)
    os.write(go_w, b"x" * claimers)
    os.close(go_w)
    for pid in pids:
        os.waitpid(pid, 0)
    data = os.pread(fd, children.TABLE_BYTES, 0)
    os.close(fd)
    pids = [struct.unpack_from("q", data, s * children.SLOT.size)[0] for s in range(children.SLOTS)]
    shared += sorted(p for p in pids if p) != [5 + k * children.SLOTS for k in range(claimers)]
print(shared)
"""


def test_children_whose_pids_are_equal_modulo_the_table_never_share_a_slot():
    """Forced collisions: eight processes claim at once, with pids equal modulo the table's
    size; every claim gets a slot of its own, in every round (unguarded, about one round in
    twenty had two claims in one slot on a 2-core machine). Raced in a small interpreter
    without torch, where a fork is cheap."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run(
        [sys.executable, "-c", _CLAIM_RACE, "300"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": root},
        check=True,
    )
    assert out.stdout.strip() == "0", out.stdout + out.stderr


def test_the_verdict_is_the_childrens_when_this_process_ran_no_training_step(ip):
    """The cell's own loop is an evaluation over a DataLoader: its steps are not the training,
    the children's phases make the verdict (their data wait: input-bound)."""
    cell = (
        "%%gpucheck -q -o rep -w 1 -s 2 --lines off\n"
        "import torch.multiprocessing as mp\n"
        "from tests import spawn_targets\n"
        "mp.spawn(spawn_targets.train_in_phases, args=(6, 0.05, 0.0), nprocs=2)\n"
        "m = torch.nn.Linear(4, 1)\n"
        "loader = torch.utils.data.DataLoader(torch.randn(32, 4), batch_size=4)\n"
        "with torch.no_grad():\n"
        "    for x in loader:\n"
        "        m(x)\n"
    )
    result = ip.run_cell(cell)
    assert result.success, result.error_in_exec
    rep = ip.user_ns["rep"]
    assert rep.run.steps.event_counts.get("optimizer", 0) == 0
    assert [c.steps for c in rep.run.steps.children] == [6, 6]
    if judged_as(rep, "input-bound"):
        assert rep.verdict.headline.startswith("The training ran in 2 child process(es)")
    assert "12 optimizer step(s) ran in child processes" in " ".join(rep.verdict.evidence)
    assert "inference" not in " ".join(f.rule_id for f in rep.findings)
