"""Issue 26: on the CPU a fused optimizer step trims the update, it does not remove it.

subset_eval_break (a 3-layer MLP, Adam, 6 tensors, 0.3 MB) was offered fused=True at 1.34x-1.40x
(the whole update's share, 27%, removed) and measured 1.23x: a fused CPU step keeps its fixed
cost, a call a tensor and one pass over the parameters, about a third of that update. The range
now rests on the part fusing removes, counted from the optimizer's own tensors and bytes, which
the step clock records. Mechanisms only: the real step clock over a real Adam, seeded step series,
and the cost model against kept fractions recorded on this machine (no timing here).
"""

from __future__ import annotations

import dataclasses
import time

import pytest

from gpu_notebook.analysis.analyze import with_run_figures
from gpu_notebook.analysis.fused_update import fused_cpu_kept
from gpu_notebook.analysis.verdict import amdahl_bound
from gpu_notebook.records import Finding, StepClockRecord
from gpu_notebook.rules import run_rules
from gpu_notebook.words import word_findings
from tests.scenarios import synthetic as syn
from tests.test_fix_bounds import ADAM_CELL, _run_share, _series

MLP_TENSORS, MLP_BYTES = 6, 299_016  # Linear(32,256), Linear(256,256), Linear(256,2), fp32


def test_the_step_clock_counts_the_tensors_and_bytes_the_optimizer_updates():
    import torch

    from gpu_notebook.capture.stepclock import StepClock

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 2))  # fmt: skip
    model[0].bias.requires_grad_(False)  # a frozen tensor is not updated: not counted
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(4, 32)
    clock = StepClock(time.perf_counter_ns())
    clock.install()
    try:
        for _ in range(3):
            opt.zero_grad()
            model(x).pow(2).mean().backward()
            opt.step()
    finally:
        clock.uninstall()
    record = clock.record()
    assert record.grad_tensors == MLP_TENSORS - 1
    assert record.grad_bytes == MLP_BYTES - 256 * 4


# Kept fractions (fused step's time / unfused step's, ``opt.step()`` alone, medians of 180 steps,
# torch CPU, one thread), recorded on this project's 2-core machine for the cost model's fit.
# Left out: six 10^6-element tensors (24 MB, past the caches) kept 0.28 where the model reads
# 0.40: for such models it under-reads the gain (analysis/fused_update.py).
RECORDED_KEPT = [
    ("Adam", [(256, 32), (256,), (256, 256), (256,), (2, 256), (2,)], 0.36),
    ("AdamW", [(256, 32), (256,), (256, 256), (256,), (2, 256), (2,)], 0.32),
    ("AdamW", [(64, 64), (128, 64), (128,), (64, 128), (64,), (64, 64), (64,)], 0.29),
    ("AdamW", [(4, 4)] * 60, 0.17),
    ("Adam", [(2,)], 0.74),
    ("Adam", [(2,)] * 2, 0.55),
    ("Adam", [(2,)] * 12, 0.27),
    ("Adam", [(4, 4)] * 60, 0.20),
    ("Adam", [(100, 1000)] * 6, 0.40),
    ("SGD", [(256, 32), (256,), (256, 256), (256,), (2, 256), (2,)], 0.53),
    ("SGD", [(4, 4)] * 60, 0.22),
]


@pytest.mark.parametrize(("cls", "shapes", "kept"), RECORDED_KEPT)
def test_the_cost_model_reads_the_recorded_kept_fractions(cls, shapes, kept):
    elements = [1 for _ in shapes]
    for i, shape in enumerate(shapes):
        for d in shape:
            elements[i] *= d
    model = fused_cpu_kept(cls, len(shapes), 4 * sum(elements))
    assert model is not None and model == pytest.approx(kept, abs=0.05)


def test_the_cost_model_keeps_more_of_fewer_tensors_and_nothing_uncounted():
    many, few = fused_cpu_kept("Adam", 60, 60 * 64), fused_cpu_kept("Adam", 2, 2 * 64)
    assert many is not None and few is not None and many < few
    # Momentum SGD does less a tensor unfused: fusing takes less of it away than of Adam's.
    sgd, adam = fused_cpu_kept("SGD", 6, MLP_BYTES), fused_cpu_kept("Adam", 6, MLP_BYTES)
    assert sgd is not None and adam is not None and sgd > adam
    assert fused_cpu_kept("Adam", None, MLP_BYTES) is None
    assert fused_cpu_kept("Rprop", 6, MLP_BYTES) is None


def _finding(record: StepClockRecord, *, gpu: bool = False) -> Finding:
    run = syn.make_run(ADAM_CELL, steps=record, gpus=[syn.gpu()] if gpu else ())
    analysis = with_run_figures(run, syn.make_analysis({"optimizer": 0.30}))
    found = {f.rule_id: f for f in word_findings(run_rules(run, analysis, syn.VERDICT))}
    return found["launch.unfused_optimizer"]


def _counted(tensors: int, size: int) -> StepClockRecord:
    return dataclasses.replace(_series(0.27), grad_tensors=tensors, grad_bytes=size)


def test_on_the_cpu_the_range_rests_on_the_part_of_the_update_fusing_removes():
    record = _counted(MLP_TENSORS, MLP_BYTES)
    f = _finding(record)
    kept = fused_cpu_kept("Adam", MLP_TENSORS, MLP_BYTES)
    assert kept == pytest.approx(0.36, abs=0.01)
    # The update's share is what the step clock read; the bound is what fusing takes of it.
    assert f.phase_share == pytest.approx(_run_share(record))
    # Its high end takes as much again outside the update (``outside_part``: Adam's
    # temporaries cost the forward and backward their caches); its low end the update's own.
    assert f.gain_bound == pytest.approx(amdahl_bound(_run_share(record) * 2 * (1 - kept)))
    assert f.gain_low is not None and f.gain_low <= f.gain_bound
    # subset_eval_break's case: 27% of the step, 6 tensors: measured 1.23x, over the 1.20x
    # the update's own part gives; inside the range now.
    assert f.gain_low < 1.23 < f.gain_bound
    assert amdahl_bound(_run_share(record) * (1 - kept)) < 1.23
    assert any("keeps 36% of the update's time" in e and "6 tensors, 0.3 MB" in e
               for e in f.evidence)  # fmt: skip
    # The same share over 60 small tensors: fusing takes most of it.
    many = _finding(_counted(60, 60 * 64))
    assert many.gain_bound is not None and many.gain_bound > f.gain_bound


# Kept fractions against an optimizer made with foreach=True (fused step / foreach step,
# ``opt.step()`` alone, one thread, interleaved; benchmarks/heads_step_parts.py --only fit,
# load 22-25). Within 0.08: AdamW's 10 x 128 read 0.37 where Adam's read 0.28.
HEADS = [(128, 32), (128,)] + [(1, 128), (1,)] * 48  # heads_modulelist's 98 tensors
RECORDED_FOREACH_KEPT = [
    ("Adam", HEADS, 0.32),
    ("Adam", [(128,)], 0.32),
    ("Adam", [(128,)] * 10, 0.28),
    ("Adam", [(128,)] * 60, 0.29),
    ("Adam", [(50_000,)] * 6, 0.35),
    ("AdamW", HEADS, 0.27),
    ("AdamW", [(128,)], 0.35),
    ("AdamW", [(128,)] * 10, 0.37),
    ("AdamW", [(128,)] * 60, 0.26),
    ("AdamW", [(50_000,)] * 6, 0.31),
]


@pytest.mark.parametrize(("cls", "shapes", "kept"), RECORDED_FOREACH_KEPT)
def test_against_a_foreach_step_the_cost_model_reads_its_recorded_kept_fractions(cls, shapes, kept):
    elements = [1 for _ in shapes]
    for i, shape in enumerate(shapes):
        for d in shape:
            elements[i] *= d
    model = fused_cpu_kept(cls, len(shapes), 4 * sum(elements), foreach=True)
    assert model is not None and model == pytest.approx(kept, abs=0.08)


FOREACH_CELL = ADAM_CELL.replace(
    "Adam(model.parameters())", "Adam(model.parameters(), foreach=True)"
)


def test_a_foreach_users_fused_gain_is_read_against_the_foreach_step():
    """Issue 26: a fused CPU step keeps 17% of heads_modulelist's for-loop update (98 small
    tensors) but 27-32% of its foreach one: the for-loop's costs read a foreach user's gain as a
    for-loop user's (kept 20%). On main both cells got the same bound."""
    record = _counted(98, 41_664)
    loop = _finding(record)
    run = syn.make_run(FOREACH_CELL, steps=record)
    analysis = with_run_figures(run, syn.make_analysis({"optimizer": 0.30}))
    found = {f.rule_id: f for f in word_findings(run_rules(run, analysis, syn.VERDICT))}
    each = found["launch.unfused_optimizer"]
    assert each.fix_id == loop.fix_id == "foreach_fused_optimizer"
    assert each.gain_bound is not None and loop.gain_bound is not None
    assert each.gain_bound < loop.gain_bound
    kept_loop, kept_each = (
        fused_cpu_kept("Adam", 98, 41_664),
        fused_cpu_kept("Adam", 98, 41_664, foreach=True),
    )
    assert kept_loop is not None and kept_each is not None and kept_each > kept_loop
    # (Each high end: the update's own part and as much again outside it, ``outside_part``.)
    share = _run_share(record)
    assert loop.gain_bound == pytest.approx(amdahl_bound(share * 2 * (1 - kept_loop)))
    assert each.gain_bound == pytest.approx(amdahl_bound(share * 2 * (1 - kept_each)))


def test_on_a_gpu_or_uncounted_the_whole_update_bounds_the_fix():
    record = _counted(MLP_TENSORS, MLP_BYTES)
    share = _run_share(record)
    assert _finding(record, gpu=True).gain_bound == pytest.approx(amdahl_bound(share))
    uncounted = _finding(_series(0.27))
    assert uncounted.gain_bound == pytest.approx(amdahl_bound(_run_share(_series(0.27))))
    assert any("if the update took no time" in e for e in uncounted.evidence)


def _spread(share: float) -> StepClockRecord:
    """A one-tensor update (a fused step keeps 74% of it) whose share of each step is 0.2x or
    1.8x ``share``, seeded: its run-wide interval is wide, its point ``share``."""
    import random

    rng = random.Random(8)
    record = _series(share)
    rows = tuple(
        dataclasses.replace(s, optimizer_s=s.duration_s * share * rng.choice((0.2, 1.8)))
        for s in record.steps
    )
    return dataclasses.replace(record, steps=rows, grad_tensors=1, grad_bytes=8)


@pytest.mark.parametrize("share", [0.19, 0.20])
def test_a_bound_at_the_five_percent_line_is_small_whichever_side_its_point_falls(share):
    """lr_finder_runs' fused SGD: 1.050x-1.056x by the point over four runs, tried in some
    (measured 0.94x, 0.92x) and small in others. Judged over its share's interval, both small."""
    from gpu_notebook.analysis.compare_samples import measurable

    f = _finding(_spread(share))
    assert f.gain_bound is not None and f.gain_bound > 1.05  # the point alone: measurable
    assert f.bound_low is not None and f.bound_low < 1.05
    assert not measurable(f)
    assert f.severity == "info" and "Small" in f.fix
