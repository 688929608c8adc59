"""A fix trial compares like work: steps that do different work (LBFGS's 5-call and 1-call
steps, a varying accumulation) are read at one mix, so the share of each work a run happened to
do does not decide the verdict. Seeded step records, decisions only; one real LBFGS child run
for what the child counts (no timing asserted)."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_notebook.analysis.like_work import like_work
from gpu_notebook.tryfix.sequential import decide
from gpu_notebook.tryfix.trials import RunResult, TrialSettings, try_fixes

ONE, FIVE = (1, 0), (5, 0)  # (closure calls, loader reads) of LBFGS's two kinds of step
ONE_S, FIVE_S = 0.0017, 0.0044  # each work's step time (lbfgs_closure's medians)


def _run(rng: random.Random, five_share: float, gain: float = 1.0, steps: int = 60):
    """(step times, works): ``five_share`` of the steps call the closure 5 times, first (LBFGS
    before its line search settles), the rest once; each step's time +-5%, over ``gain``."""
    fives = round(five_share * steps)
    works = [FIVE] * fives + [ONE] * (steps - fives)
    times = [(FIVE_S if w == FIVE else ONE_S) * rng.uniform(0.95, 1.05) / gain for w in works]
    return times, works


# The share of 5-call steps in each round's runs: the two arms' mixes differ, round by round.
BASE_SHARES = (0.30, 0.55, 0.40, 0.60, 0.35)
FIX_SHARES = (0.55, 0.30, 0.60, 0.35, 0.50)


def _arms(seed: int, gain: float):
    rng = random.Random(seed)
    base = [_run(rng, s) for s in BASE_SHARES]
    fix = [_run(rng, s, gain) for s in FIX_SHARES]
    return base, fix


@pytest.mark.parametrize("seed", range(4))
def test_a_different_mix_of_work_at_the_same_time_per_work_is_no_measurable_effect(seed):
    base, fix = _arms(seed, gain=1.0)
    times = [t for t, _ in base + fix]
    alike = like_work(times, [w for _, w in base + fix])
    assert alike is not None
    d = decide(alike[:5], alike[5:], 5, None)
    assert d is not None and d.verdict == "no measurable effect"
    assert d.speedup == pytest.approx(1.0, abs=0.03)
    # Read as they come, the runs' mixes decide: rounds from 0.7x to 1.4x, no call made.
    plain = decide(times[:5], times[5:], 5, None)
    assert plain is not None and plain.verdict != "no measurable effect"
    assert min(plain.per_round) < 0.8 and max(plain.per_round) > 1.25


@pytest.mark.parametrize("seed", range(4))
def test_a_true_per_work_gain_is_verified_whatever_the_mix(seed):
    base, fix = _arms(seed, gain=1.3)
    alike = like_work([t for t, _ in base + fix], [w for _, w in base + fix])
    assert alike is not None
    d = decide(alike[:5], alike[5:], 5, 1.2)
    assert d is not None and d.verdict == "verified"
    assert d.speedup == pytest.approx(1.3, rel=0.04)
    assert all(r == pytest.approx(1.3, rel=0.06) for r in d.per_round)


def test_a_gain_on_one_work_reads_at_the_common_mix_s_throughput():
    # Only the 5-call steps get 1.5x faster: the figure is the time saved at the trial's mix
    # (half of each: (1.7 + 4.4) / (1.7 + 4.4 / 1.5) = 1.32x), not a per-step average.
    rng = random.Random(0)
    base = [_run(rng, 0.5) for _ in range(3)]
    fix = []
    for _ in range(3):
        t, w = _run(rng, 0.5)
        fix.append(([x / 1.5 if k == FIVE else x for x, k in zip(t, w, strict=True)], w))
    alike = like_work([t for t, _ in base + fix], [w for _, w in base + fix])
    assert alike is not None
    d = decide(alike[:3], alike[3:], 3, None)
    expected = (ONE_S + FIVE_S) / (ONE_S + FIVE_S / 1.5)
    assert d is not None and d.speedup == pytest.approx(expected, rel=0.03)


def test_steps_of_one_work_or_uncounted_work_are_compared_as_they_are():
    rng = random.Random(1)
    runs = [_run(rng, 0.0) for _ in range(4)]
    assert like_work([t for t, _ in runs], [w for _, w in runs]) is None  # one work: alike
    mixed = [_run(rng, 0.5) for _ in range(4)]
    times = [t for t, _ in mixed]
    assert like_work(times, [w for _, w in mixed[:3]] + [None]) is None  # a run not counted
    holed = [list(w) for _, w in mixed]
    holed[2][7] = None
    assert like_work(times, holed) is None  # a step not counted


def test_arms_that_do_work_of_other_kinds_are_compared_as_they_are():
    # A fix that folds 4 micro-batches into one batch: its steps read 1 batch, the script's 4.
    # No work is common to every run: each run's whole throughput is what is compared.
    times = [[0.01] * 20, [0.01] * 20, [0.004] * 20, [0.004] * 20]
    works = [[(0, 4)] * 20, [(0, 4)] * 20, [(0, 1)] * 20, [(0, 1)] * 20]
    assert like_work(times, works) is None
    # A rare odd step (3 closure calls once a run) does not stop the like-work reading.
    rng = random.Random(2)
    runs = [_run(rng, 0.5) for _ in range(4)]
    works2 = [[*w[:-1], (3, 0)] for _, w in runs]
    alike = like_work([t for t, _ in runs], works2)
    assert alike is not None and [len(r) for r in alike] == [60] * 4


def test_a_change_that_moves_the_mix_in_every_run_is_read_on_its_throughput():
    # A validation pass (9 loader reads in its step) every 5th step, made every 20th by the fix:
    # every run of the fix holds fewer such steps than every run of the script. The work it
    # saved is its gain: the runs are compared as they are, not at one mix (which reads 1x).
    def run(every: int) -> tuple[list[float], list[tuple[int, int]]]:
        works = [(0, 9) if i % every == 0 else (0, 1) for i in range(60)]
        return [0.02 if w == (0, 9) else 0.002 for w in works], works

    base, fix = [run(5) for _ in range(3)], [run(20) for _ in range(3)]
    times, works = [t for t, _ in base + fix], [w for _, w in base + fix]
    assert like_work(times, works, arms=[0, 0, 0, 1, 1, 1]) is None
    d = decide(times[:3], times[3:], 3, None)
    assert d is not None and d.verdict == "verified" and d.speedup > 1.5
    # Read at one mix, the saving is gone: what the arms' separation guards against.
    alike = like_work(times, works)
    assert alike is not None
    assert decide(alike[:3], alike[3:], 3, None).speedup == pytest.approx(1.0, abs=0.01)


class _MixedRuns:
    """A fake runner: every run is LBFGS-shaped, its share of 5-call steps drawn per run; the
    fix's steps take the script's time per work over ``gain``."""

    def __init__(self, seed: int, gain: float):
        self.rng, self.now, self.gain = random.Random(seed), 0.0, gain

    def clock(self) -> float:
        return self.now

    def __call__(self, code, script, args, timeout_s, scratch, steps) -> RunResult:
        self.now += 10.0
        is_base = code == script.resolve()
        share = self.rng.choice((0.25, 0.6))
        times, works = _run(self.rng, share, 1.0 if is_base else self.gain, steps=40)
        return RunResult(steps_s=times, stopped=True, wall_s=10.0, waits_s=[0.0] * 40,
                         processes=0, works=list(works))  # fmt: skip


def _trial(fake: _MixedRuns):
    import dataclasses

    from gpu_notebook.records import Report

    report = Report.from_json(REPORT.read_text())
    offered = next(f for f in report.findings if f.proposal and f.proposal.source_after)
    offered = dataclasses.replace(offered, fix_id="log_every_n", gain_low=None, gain_bound=1.3)
    report = dataclasses.replace(report, findings=(offered,))
    settings = TrialSettings(steps=40, budget_s=1000, rounds=5)
    tf = try_fixes(report, Path("/nonexistent/train.py"), [], settings, runner=fake,
                   clock=fake.clock)  # fmt: skip
    (t,) = tf.trials
    return tf, t


@pytest.mark.parametrize("seed", range(3))
def test_a_fix_trial_on_runs_of_mixed_work_reads_the_work_not_the_mix(seed):
    tf, t = _trial(_MixedRuns(seed, gain=1.0))
    assert t.verdict == "no measurable effect", (t.per_round, t.speedup_low, t.speedup_high)
    # What the report carries is what was compared: the verdict replays from it.
    d = decide(t.baseline_steps_s, t.variant_steps_s, tf.rounds, t.predicted_model_low)
    assert d is not None and (d.verdict, d.speedup) == (t.verdict, t.speedup)
    _tf, gained = _trial(_MixedRuns(seed, gain=1.3))
    assert gained.verdict == "verified" and gained.speedup == pytest.approx(1.3, rel=0.05)


REPORT = Path(__file__).parent / "data/gpu/2026-12-04-nvidia-h200-cli/gpu_bound.report.json"
LBFGS = Path(__file__).parents[1] / "benchmarks" / "ledger_programs" / "lbfgs_closure.py"


def test_the_trial_child_counts_each_lbfgs_step_s_closure_calls(tmp_path):
    # The child went lean at its warm-up's count of the first anchor's steps: LBFGS's first
    # step's 5 backward calls. Its closure was then no longer wrapped and every step read 0
    # calls; the anchor's own warm-up is where it goes lean now.
    out = tmp_path / "out.json"
    subprocess.run([sys.executable, "-m", "gpu_notebook.tryfix.child", str(out), "5", "55",
                    str(LBFGS), str(LBFGS)], check=True, timeout=300, capture_output=True)  # fmt: skip
    data = json.loads(out.read_text())
    assert data["stopped"] and data["anchor"] == "optimizer"
    works = data["works"]
    assert len(works) == len(data["steps_s"]) == 55
    calls = [w[0] for w in works]
    assert all(c >= 1 for c in calls) and {1, 5} <= set(calls), calls


def _with_steps(report, times, works):
    """``report`` with its step clock's steps replaced by these (lean: only their time and
    work), every step past the warm-up."""
    import dataclasses

    from gpu_notebook.records import StepTiming

    warm = report.run.window.warmup_steps
    steps = tuple(
        StepTiming(i, 0.01 * i, t, 0.0, 0.0, 0.0, 0.0, timed=False, wait_s=None,
                   closure_calls=w[0], loader_reads=w[1])
        for i, (t, w) in enumerate(zip([0.01] * warm + [*times], [ONE] * warm + [*works], strict=True))
    )  # fmt: skip
    run = dataclasses.replace(report.run, steps=dataclasses.replace(report.run.steps, steps=steps))
    return dataclasses.replace(report, run=run)


def test_the_notebook_s_before_after_reads_a_different_mix_of_work_as_no_change():
    # The same class in the notebook: a patched LBFGS cell whose run did more 5-call steps.
    from gpu_notebook.records import Report
    from gpu_notebook.report.compare import measured_samples

    report = Report.from_json(REPORT.read_text())
    rng = random.Random(3)
    before = _with_steps(report, *_run(rng, 0.3, steps=120))
    after = _with_steps(report, *_run(rng, 0.6, steps=120))
    c = measured_samples(before, after)
    assert c is not None and c.outcome == "no measurable change"
    assert c.speedup == pytest.approx(1.0, abs=0.03)
    faster = _with_steps(report, *_run(rng, 0.6, gain=1.3, steps=120))
    c = measured_samples(before, faster)
    assert c is not None and c.outcome == "faster" and c.speedup == pytest.approx(1.3, rel=0.05)
