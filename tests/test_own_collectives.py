"""A collective of the user's own every step (a loss reduced for a log) is named at its line.

Unseen round 14 (benchmarks/unseen_programs/ddp_allreduce_log.py): rank 0 waited in collectives
75% of its steps, 82% of its samples on the loop's logging ``dist.all_reduce``, and the only
advice was DDP's (overlap the gradient all-reduce with backward). The facts find the loop's own
collectives through whatever name ``torch.distributed`` is bound to; the rule names them where
collectives take a tenth of the step or more.
"""

from __future__ import annotations

import pytest

from gpu_notebook.cell.scan import scan_source
from gpu_notebook.rules import run_rules
from gpu_notebook.words import word_findings
from tests.scenarios import synthetic as syn

LOOP = """import torch
import torch.distributed as dist
for step, (x, y) in enumerate(loader):
    loss = loss_fn(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    logged = loss.detach().clone()
    dist.all_reduce(logged)
    if step % 20 == 0:
        print(logged.item())
"""


def lines(source: str) -> list[tuple[int, bool]]:
    return [(c.line, c.gated) for c in scan_source(source).collectives]


def test_the_loops_own_collective_is_found_through_each_name_the_module_goes_by():
    assert lines(LOOP) == [(9, False)]
    aliases = [
        ("from torch import distributed as d", "d.all_reduce(logged)"),
        ("from torch.distributed import all_reduce as ar", "ar(logged)"),
        ("import torch", "torch.distributed.all_gather(out, logged)"),
        ("import torch.distributed as dist", "dist.barrier()"),
    ]
    for imported, call in aliases:
        source = LOOP.replace("import torch.distributed as dist", imported).replace(
            "dist.all_reduce(logged)", call
        )
        assert lines(source) == [(9, False)], (imported, call)


def test_gated_collectives_are_said_gated_and_gradient_exchanges_and_others_are_left_out():
    gated = LOOP.replace("    dist.all_reduce(logged)\n    if step % 20 == 0:\n",
                         "    if step % 20 == 0:\n        dist.all_reduce(logged)\n")  # fmt: skip
    assert lines(gated) == [(10, True)]
    by_hand = LOOP.replace(
        "    logged = loss.detach().clone()\n    dist.all_reduce(logged)\n",
        "    for p in model.parameters():\n        dist.all_reduce(p.grad)\n",
    )
    assert lines(by_hand) == []
    flat = LOOP.replace("dist.all_reduce(logged)", "dist.all_reduce(flat_grads.grad)")
    assert lines(flat) == []
    # Not torch.distributed's: a method of the user's own object, or the module's name unbound.
    assert lines(LOOP.replace("dist.all_reduce(logged)", "meter.all_reduce(logged)")) == []
    assert (
        lines(LOOP.replace("import torch.distributed as dist", "import dist_utils as dist")) == []
    )
    # After the training loop: once, not a step's.
    after = LOOP.replace("    dist.all_reduce(logged)\n", "") + "dist.all_reduce(logged)\n"
    assert lines(after) == []


def findings(source: str, comm: float):
    run = syn.make_run(source)
    return word_findings(run_rules(run, syn.make_analysis({"comm": comm}), syn.VERDICT))


def test_the_rule_names_the_line_where_collectives_take_a_tenth_of_the_step():
    found = [f for f in findings(LOOP, 0.75) if f.rule_id == "distributed.own_collectives"]
    assert len(found) == 1
    f = found[0]
    # The run's cell lines count the magic's line (%%gpucheck): the loop's line 9 is the 10th.
    assert f.severity == "high" and f.line == 10 and f.fix_id is None
    assert f.phase_share == pytest.approx(0.75) and f.gain_bound == pytest.approx(4.0)
    text = " ".join([f.title, *f.evidence, f.fix])
    assert "dist.all_reduce(logged)" in text and "every rank" in text
    assert not [f for f in findings(LOOP, 0.05) if f.rule_id == "distributed.own_collectives"]
    gated = LOOP.replace("    dist.all_reduce(logged)\n    if step % 20 == 0:\n",
                         "    if step % 20 == 0:\n        dist.all_reduce(logged)\n")  # fmt: skip
    assert not [f for f in findings(gated, 0.75) if f.rule_id == "distributed.own_collectives"]
