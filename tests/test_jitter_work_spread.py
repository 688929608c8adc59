"""Jitter is uneven times of like work, never uneven work.

Steps of one run may do different work the same in every run: an epoch's short last batch (an
HF Trainer run of tiny epochs, 32 then 16 samples a step: "[low] Step times are uneven, p90
1.9x" on a quiet machine), LBFGS's 5- and 1-call steps, accumulation cycles of varying length.
The run's jitter is read with each step against the median of its own kind of work
(``analysis.work_spread``). The decisions are checked on synthetic step records (planted times,
no clock); a real loop under the real step clock only proves the work is there to read.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from gpu_notebook.analysis.run_trend import run_shape
from gpu_notebook.records import ProfileWindow, Run, StepClockRecord, StepTiming
from gpu_notebook.report.build import build_report
from tests.scenarios import synthetic as syn


def _wobble(i: int) -> float:
    """A deterministic +-4% wobble (a healthy run is never perfectly flat)."""
    return 1.0 + 0.04 * (((i * 7919) % 17) / 8.0 - 1.0)


def _record(work: list[tuple[float, int, int, int]]) -> StepClockRecord:
    """Timed steps from (milliseconds, batch size, closure calls, loader reads) each."""
    rows, t = [], 0.0
    for i, (ms, batch, closures, reads) in enumerate(work):
        dur = ms / 1e3
        rows.append(
            StepTiming(i, t, dur, 0.0, dur * 0.4, dur * 0.4, dur * 0.2, 1, 1, batch,
                       closure_calls=closures, loader_reads=reads)
        )  # fmt: skip
        t += dur
    return StepClockRecord("optimizer", len(rows), tuple(rows))


def _run(work: list[tuple[float, int, int, int]]) -> Run:
    run = syn.make_run("", steps=_record(work))
    window = ProfileWindow("recorded", 2, 3, first_step=2, recorded_steps=3)
    return dataclasses.replace(run, window=window, first_line=2)


def _rules(run: Run) -> set[str]:
    return {f.rule_id for f in build_report(run).findings}


def _tiny_epochs(n: int = 201, slow: np.ndarray | None = None) -> list[tuple[float, int, int, int]]:
    """Epochs of two batches, 32 then 16 samples (48 samples, batch 32), the run starting and
    ending on a short one: a 16-sample step takes half the time of a 32-sample one."""
    out = []
    for i in range(n):
        batch = 16 if i % 2 == 0 else 32
        ms = (10.0 if batch == 32 else 5.0) * _wobble(i)
        if slow is not None and slow[i]:
            ms *= 2.0
        out.append((ms, batch, 0, 1))
    return out


def test_an_epoch_s_short_batch_is_uneven_work_not_jitter():
    run = _run(_tiny_epochs())
    assert "run.jitter" not in _rules(run)
    shape = run_shape(run)
    assert shape is not None
    # The run's own p90/median mixes the two batch sizes (10 ms over 5 ms); within each size
    # the steps are steady.
    assert shape.p90_s / shape.median_s >= 1.5
    assert shape.work_kinds == 2
    assert shape.jitter < 1.2, shape.jitter
    assert (shape.above_median_share or 0.0) < 0.05, shape.above_median_share


def test_lbfgs_s_five_and_one_call_steps_are_uneven_work_not_jitter():
    # A seeded mix: 40% of the steps call the closure 5 times (14 ms), the rest once (6 ms),
    # under the stall level (3x the median) so nothing else explains the spread.
    five = np.random.default_rng(5).random(300) < 0.4
    work = [(14.0 if f else 6.0) * _wobble(i) for i, f in enumerate(five)]
    run = _run([(ms, 64, 5 if f else 1, 0) for ms, f in zip(work, five, strict=True)])
    assert "run.jitter" not in _rules(run)
    shape = run_shape(run)
    assert shape is not None and shape.stalls is None
    assert shape.p90_s / shape.median_s >= 1.5
    assert shape.work_kinds == 2 and shape.jitter < 1.2, shape.jitter


def test_uneven_times_of_like_work_are_still_jitter():
    # One work throughout: 3 steps in 10 take 2x (seeded, not periodic).
    slow = np.random.default_rng(3).random(300) < 0.3
    same = _run([((20.0 if s else 10.0) * _wobble(i), 32, 0, 1) for i, s in enumerate(slow)])
    shape = run_shape(same)
    assert shape is not None and shape.work_kinds == 1 and shape.jitter >= 1.5
    # One work: the figure is the run's plain p90/median.
    assert abs(shape.jitter - shape.p90_s / shape.median_s) < 1e-9
    assert "run.jitter" in _rules(same)
    # Two kinds of work (32 and 16 samples), each with the same uneven times: still jitter,
    # and said as read within like work.
    mixed = _run(_tiny_epochs(301, np.random.default_rng(3).random(301) < 0.3))
    shape = run_shape(mixed)
    assert shape is not None and shape.work_kinds == 2 and shape.jitter >= 1.5
    finding = next(f for f in build_report(mixed).findings if f.rule_id == "run.jitter")
    assert any("like work (2 kinds" in e for e in finding.evidence), finding.evidence


def test_a_kind_of_work_too_rare_for_a_median_is_left_out_not_read_as_jitter():
    # A plain loop's last short batch of each of 4 epochs (fewer than MIN_LIKE steps): left out;
    # the full batches are read on their own.
    from gpu_notebook.analysis.work_spread import MIN_LIKE

    short = {40, 81, 122, 163}
    assert len(short) < MIN_LIKE
    run = _run([(3.0 if i in short else 10.0 * _wobble(i), 8 if i in short else 32, 0, 1)
                for i in range(200)])  # fmt: skip
    shape = run_shape(run)
    assert shape is not None and shape.work_kinds == 1 and shape.jitter < 1.2
    # Every step of its own batch size (dynamic batching): no kind to read, no jitter said.
    scattered = _run([(10.0 * (1 + (i % 7) / 3), 8 + i, 0, 1) for i in range(200)])
    shape = run_shape(scattered)
    assert shape is not None and shape.p90_s / shape.median_s >= 1.5
    assert shape.work_kinds == 0 and shape.above_median_share is None
    assert "run.jitter" not in _rules(scattered)


def test_the_job_view_reads_the_same_within_work_figure():
    from gpu_notebook.report.job import jitters, rank_shape

    shape = run_shape(_run(_tiny_epochs()))
    rank = rank_shape(shape)
    assert shape is not None and rank is not None
    assert rank.jitter == float(f"{shape.jitter:.4g}") and not jitters(rank)


def test_a_real_loop_s_steps_carry_the_work_that_tells_their_kinds_apart():
    """A real loop of tiny epochs (48 samples, batch 32: 32 then 16) under the real step clock:
    its steps keep their batch sizes, and they are two kinds of work. Counts, no timing."""
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    from gpu_notebook.analysis.work_spread import work_of, work_spread
    from gpu_notebook.capture.stepclock import StepClock

    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(TensorDataset(torch.randn(48, 8), torch.randn(48, 1)), batch_size=32)
    clock = StepClock(time.perf_counter_ns())
    clock.install()
    try:
        for _ in range(12):
            for x, y in loader:
                torch.nn.functional.mse_loss(model(x), y).backward()
                opt.step()
                opt.zero_grad()
    finally:
        clock.uninstall()
    steps = clock.record().steps[2:]
    assert {s.batch_size for s in steps} == {32, 16}, [s.batch_size for s in steps]
    # The loader's reads are counted too (an epoch's first step also reads the last one's end).
    assert all(s.loader_reads is not None for s in steps)
    assert len({work_of(s) for s in steps}) == 2
    assert work_spread(steps).kinds == 2
