"""Before/after as distributions: seeded, deterministic, and honest about the machine's load."""

from __future__ import annotations

import numpy as np
import pytest

from gpu_notebook.analysis.compare_samples import compare_samples, fix_outcome
from gpu_notebook.views.wording import sample_notes


def _steps(mean_s: float, n: int = 60, spread: float = 0.1, seed: int = 1) -> list[float]:
    rng = np.random.default_rng(seed)
    return list(mean_s * (1 + spread * rng.standard_normal(n)).clip(0.5, None))


def test_a_real_gain_is_faster_with_a_range_around_it():
    c = compare_samples(_steps(0.020), _steps(0.010, seed=2))
    assert c is not None and c.outcome == "faster" and fix_outcome(c) == "verified"
    assert c.low < c.speedup < c.high and c.low > 1.6 and c.high < 2.5


def test_the_same_code_twice_is_no_measurable_change():
    c = compare_samples(_steps(0.010), _steps(0.010, seed=2))
    assert c is not None and c.outcome == "no measurable change"
    assert fix_outcome(c) == "no measurable effect" and c.low < 1.0 < c.high


def test_a_slower_run_is_slower():
    c = compare_samples(_steps(0.010), _steps(0.014, seed=2))
    assert c is not None and c.outcome == "slower" and fix_outcome(c) == "slower"


def test_the_range_is_deterministic_for_the_same_steps():
    a, b = _steps(0.02), _steps(0.015, seed=3)
    assert compare_samples(a, b) == compare_samples(a, b)


def test_too_few_steps_compare_nothing():
    assert compare_samples([0.01, 0.01], _steps(0.01)) is None


def test_a_machine_that_got_quieter_is_not_a_gain():
    # Same code; the baseline ran while other processes used 1.5 cores and was slower for it.
    before = _steps(0.015)
    after = _steps(0.010, seed=2)
    c = compare_samples(before, after, before_load_cores=[1.5] * 60, after_load_cores=[0.0] * 60)
    assert c is not None and c.outcome == "no measurable change" and c.load_changed
    assert c.plain_speedup > 1.3
    assert c.load_note == "same-direction"
    assert any("load changed" in n and "cannot be told" in n for n in sample_notes(c))


def test_steps_under_similar_load_are_compared_when_both_runs_have_them():
    # Half of the baseline ran under load (slow): the quiet halves show the code is unchanged.
    quiet = _steps(0.010, n=40)
    before = quiet + _steps(0.020, n=40, seed=4)
    before_load = [0.0] * 40 + [1.5] * 40
    after = _steps(0.010, n=80, seed=5)
    c = compare_samples(before, after, before_load_cores=before_load, after_load_cores=[0.0] * 80)
    assert c is not None and c.load_matched and c.outcome == "no measurable change"
    assert c.plain_speedup > 1.3 and 0.9 < c.speedup < 1.1


def test_a_gain_against_a_busier_machine_is_kept():
    c = compare_samples(
        _steps(0.020),
        _steps(0.010, seed=2),
        before_load_cores=[0.0] * 60,
        after_load_cores=[1.0] * 60,
    )
    assert c is not None and c.outcome == "faster" and c.load_changed


def test_batch_sizes_turn_step_times_into_throughput():
    # Twice the batch in a step 1.5x as long: 1.33x the samples per second.
    c = compare_samples(_steps(0.010), _steps(0.015, seed=2), before_batch=32, after_batch=64)
    assert c is not None and 1.2 < c.speedup < 1.5


def test_a_burst_of_load_over_a_stretch_of_steps_does_not_carry_the_figure():
    """Another process took the cores for 6 of the 60 steps before (each 3x as long): the
    before/after reads what the rest of the runs read (the mean step alone: 1.5x for 1.25x),
    and its range holds the figure."""
    before, after = _steps(0.0125), _steps(0.010, seed=2)
    quiet = compare_samples(before, after)
    for start in (0, 20, 27, 54):
        burst = [s * 3 if start <= i < start + 6 else s for i, s in enumerate(before)]
        c = compare_samples(burst, after)
        assert c is not None and quiet is not None
        assert abs(c.speedup / quiet.speedup - 1) < 0.03, (start, c.speedup, quiet.speedup)
        assert c.low <= c.speedup <= c.high


def test_a_loader_s_two_kinds_of_steps_read_as_the_run_s_throughput():
    # Most steps instant, one in four waits for a batch: the figure is the mean's (1.6x), not
    # the median step's (10x), whichever part of the run a fifth holds.
    before = [0.004] * 60
    after = [0.0004, 0.0004, 0.0004, 0.009] * 15
    c = compare_samples(before, after)
    assert c is not None
    assert c.speedup == pytest.approx(0.004 / ((3 * 0.0004 + 0.009) / 4))
