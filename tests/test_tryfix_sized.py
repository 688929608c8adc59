"""Issue 26, the ledger's remaining misses: trial runs sized by the time their steps cover, and
"no measurable effect" only where the measurement leaves out the fix's model gain."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

from gpu_notebook.analysis.compare_samples import fix_outcome
from gpu_notebook.records import Comparison, Report, SampleComparison
from gpu_notebook.tryfix.plan import MAX_RUN_STEPS, RUN_STEPS_S, run_size
from gpu_notebook.tryfix.samples import compare_runs
from gpu_notebook.tryfix.sequential import decide, rounds_to_decide
from gpu_notebook.tryfix.trials import RunResult, TrialSettings, try_fixes
from gpu_notebook.views.tryfix_text import render_try_fixes, word_try_fixes

REPORT = Path(__file__).parent / "data/gpu/2026-12-04-nvidia-h200-cli/gpu_bound.report.json"

# ---------------------------------------------------------------- runs sized by time


def test_a_sub_millisecond_step_gets_more_measured_steps_than_a_50_ms_one():
    # plain_logging's 0.33 ms steps: 60 of them are 20 ms a run, shorter than a neighbour's
    # burst. Sized, its run's steps cover the time wanted; a 50 ms step's 60 already do.
    fast = run_size(60, 0.00033, budget_s=240, runs=15)
    slow = run_size(60, 0.050, budget_s=240, runs=15)
    assert slow.steps == 60 and slow.held_by == "asked"
    assert fast.steps > 60 * 20 and fast.held_by == "time"
    assert fast.steps * 0.00033 >= RUN_STEPS_S


def test_n_is_the_least_and_the_budget_holds_a_run_s_steps():
    assert run_size(5000, 0.00033, budget_s=240, runs=15).steps == 5000
    # A budget whose share a run is a third of a second sizes runs to that, never under N.
    held = run_size(60, 0.00033, budget_s=20, runs=15)
    assert held.held_by == "budget" and held.steps * 0.00033 < RUN_STEPS_S
    assert held.steps > 60
    assert run_size(60, 0.00033, budget_s=1, runs=15).steps == 60
    # An unknown step keeps N.
    assert run_size(60, None, budget_s=240, runs=15).steps == 60


def test_a_run_asks_no_more_steps_than_the_script_has_nor_the_cap():
    script = run_size(60, 0.00033, budget_s=240, runs=15, script_steps=500, warmup=5)
    assert script.steps == 495 and script.held_by == "script"
    assert run_size(60, 0.00033, budget_s=240, runs=15, script_steps=50, warmup=5).steps == 60
    cap = run_size(60, 1e-6, budget_s=240, runs=15)
    assert cap.steps == MAX_RUN_STEPS and cap.held_by == "cap"


class _StepRuns:
    """A runner whose runs take the steps asked, each ``step_s`` long (the fix's ``ratio``
    times faster), and ``wall_s`` on a clock it advances."""

    def __init__(self, step_s: float, ratio: float = 1.3, wall_s: float = 5.0):
        self.step_s, self.ratio, self.wall_s, self.now = step_s, ratio, wall_s, 0.0
        self.asked: list[int] = []
        self.rng = random.Random(0)

    def clock(self) -> float:
        return self.now

    def __call__(self, code, script, args, timeout_s, scratch, steps) -> RunResult:
        self.now += self.wall_s
        self.asked.append(steps)
        mean = self.step_s if code == script.resolve() else self.step_s / self.ratio
        steps_s = [mean * (1 + self.rng.gauss(0, 0.05)) for _ in range(steps)]
        return RunResult(steps_s=steps_s, stopped=True, wall_s=self.wall_s)


def _report(step_s: float = 0.032, script_steps: int = 100_000) -> Report:
    """The recorded report, its measured run's median step and step count set."""
    report = Report.from_json(REPORT.read_text())
    steps = dataclasses.replace(report.run.steps, step_count=script_steps)
    stats = dataclasses.replace(report.analysis.step_stats, median_s=step_s)
    return dataclasses.replace(
        report,
        run=dataclasses.replace(report.run, steps=steps),
        analysis=dataclasses.replace(report.analysis, step_stats=stats),
    )


def _tried(step_s: float, measured_step_s: float = 0.032, budget_s: float = 600):
    report = _report(measured_step_s)
    fake = _StepRuns(step_s)
    settings = TrialSettings(steps=30, budget_s=budget_s, rounds=3)
    tf = try_fixes(report, Path("/nonexistent/train.py"), [], settings, runner=fake,
                   clock=fake.clock)  # fmt: skip
    return word_try_fixes(tf), fake


def test_the_first_run_sizes_the_runs_from_its_own_step_and_is_not_compared():
    # The measured run's step (32 ms, profiled) asks 32 steps; the script's own plain step is
    # 0.33 ms: the first run is a pilot, and every compared run has the sized steps.
    tf, fake = _tried(0.00033)
    (t,) = tf.trials
    assert fake.asked[0] < 60 and tf.steps > 20 * fake.asked[0]
    assert set(fake.asked[1:]) == {tf.steps}
    assert all(len(run) == tf.steps for run in t.baseline_steps_s + t.variant_steps_s)
    assert len(t.baseline_steps_s) == t.rounds and len(fake.asked) == 1 + 2 * t.rounds
    said = " ".join(tf.notes)
    assert f"each run measured {tf.steps} steps (--try-fixes 30 is the least)" in said
    assert "sized them and is not compared" in said
    assert f"+ {tf.steps} steps a run" in render_try_fixes(tf)


def test_a_slow_step_keeps_the_steps_asked_and_its_first_run_is_compared():
    tf, fake = _tried(0.050, measured_step_s=0.050)
    (t,) = tf.trials
    assert set(fake.asked) == {30} and tf.steps == 30
    assert len(fake.asked) == 2 * t.rounds  # the first baseline run is round 1's
    assert any(n.startswith("each run measured the 30 steps asked") for n in tf.notes)


# ---------------------------------------------------------------- what "no effect" means

# gru_python_steps' fused update on the loaded ledger (2026-12-06 01:30): model 1.08x-1.10x,
# measured 0.99x (0.90x-1.09x) over 4 rounds, said "no measurable effect"; quiet: 1.08x verified.
GRU_MODEL_LOW = 1.08
GRU_ROUNDS = (1.06, 0.77, 0.96, 1.03)


def test_an_interval_that_meets_the_model_s_range_is_undecided_one_that_leaves_it_out_is_not():
    meets = SampleComparison(0.99, 0.90, 1.09, "no measurable change", 240, 240, 0.99)
    leaves = SampleComparison(0.97, 0.90, 1.04, "no measurable change", 240, 240, 0.97)
    assert fix_outcome(meets, GRU_MODEL_LOW) == "undecided"
    assert fix_outcome(leaves, GRU_MODEL_LOW) == "no measurable effect"
    # An "up to" range (no least gain) is left out where every gain a run can show is.
    assert fix_outcome(leaves, None) == "no measurable effect"


def _arms(ratios, seed: int = 0, noise: float = 0.1):
    rng = random.Random(seed)

    def run(mean: float) -> list[float]:
        raw = [1 + rng.gauss(0, noise) for _ in range(60)]
        return [x * mean * 60 / sum(raw) for x in raw]

    return [run(0.01) for _ in ratios], [run(0.01 / r) for r in ratios]


def test_rounds_that_differ_by_more_than_the_gain_do_not_say_no_effect():
    base, var = _arms(GRU_ROUNDS)
    c = compare_runs(base, var, model_low=GRU_MODEL_LOW)
    assert c is not None and c.high >= GRU_MODEL_LOW and c.verdict == "undecided"
    # Even against a gain the steps' interval leaves out, the rounds' own interval (one round
    # at 0.77x) does not: the runs differ by more than that.
    assert compare_runs(base, var, model_low=1.105).verdict == "undecided"
    # Rounds that agree, at 1x, leave the gain out: no measurable effect.
    base, var = _arms((1.0, 0.99, 1.01, 1.0))
    assert compare_runs(base, var, model_low=GRU_MODEL_LOW).verdict == "no measurable effect"


def test_rounds_needed_grow_with_the_spread_and_none_tell_a_gain_at_1x():
    wide = rounds_to_decide(GRU_ROUNDS, GRU_MODEL_LOW)
    tight = rounds_to_decide((1.04, 1.10, 1.05, 1.07, 1.06), GRU_MODEL_LOW)
    assert wide is not None and tight is not None
    assert wide.spread > wide.gain and tight.spread < tight.gain
    assert wide.rounds is not None and tight.rounds is not None and wide.rounds > tight.rounds
    # Rounds as spread as those, as many as it says: the added looks decide.
    base, var = _arms([(1.04, 1.10, 1.05, 1.07, 1.06)[i % 5] for i in range(tight.rounds)])
    assert decide(base, var, 3, GRU_MODEL_LOW).verdict != "undecided"  # type: ignore[union-attr]
    nothing = rounds_to_decide(GRU_ROUNDS, 1.0)
    assert nothing is not None and nothing.rounds is None
    assert rounds_to_decide((1.0, 1.1), GRU_MODEL_LOW) is None  # no spread from 2 rounds


class _Rounds(_StepRuns):
    """Round i's fix runs at ``ratios[i]`` the script's rate (the script's step: the report's)."""

    def __init__(self, ratios):
        super().__init__(0.032, wall_s=10.0)
        self.ratios, self.fix_runs = list(ratios), 0

    def __call__(self, code, script, args, timeout_s, scratch, steps) -> RunResult:
        if code != script.resolve():
            self.ratio = self.ratios[min(self.fix_runs, len(self.ratios) - 1)]
            self.fix_runs += 1
        return super().__call__(code, script, args, timeout_s, scratch, steps)


def test_an_undecided_fix_gets_rounds_while_the_budget_lasts_and_says_what_it_would_need():
    report = _report()
    f = next(f for f in report.findings if f.proposal and f.proposal.source_after)
    f = dataclasses.replace(f, gain_low=GRU_MODEL_LOW, gain_bound=1.10)
    report = dataclasses.replace(report, findings=(f,))
    fake = _Rounds(GRU_ROUNDS * 5)
    settings = TrialSettings(steps=30, budget_s=120, rounds=4)
    tf = word_try_fixes(try_fixes(report, Path("/nonexistent/train.py"), [], settings,
                                  runner=fake, clock=fake.clock))  # fmt: skip
    (t,) = tf.trials
    assert t.verdict == "undecided" and t.added_rounds >= 1
    assert t.predicted_model_low == GRU_MODEL_LOW
    assert "the machine's noise over the trial is larger than the fix's gain" in t.note
    assert "rounds in all would decide it at this spread" in t.note


# ---------------------------------------------------------------- the notebook's before/after


def test_the_notebook_before_after_reads_the_model_s_low_end_as_try_fixes_does():
    from gpu_notebook.views.wording import outcome_line

    meets = SampleComparison(0.99, 0.90, 1.09, "no measurable change", 240, 240, 0.99)
    # The stated range (widened by the run's margin) starts at 0.93x, the model's at 1.08x.
    c = Comparison("12:00", 0.010, 0.010, 0.99, None, None, {}, {}, None, None,
                   fix_id="foreach_fused_optimizer", predicted_bound=1.29, predicted_low=0.93,
                   predicted_model_bound=1.10, predicted_model_low=GRU_MODEL_LOW,
                   samples=meets)  # fmt: skip
    line = outcome_line(c)
    assert line is not None and line.endswith(": undecided")
    leaves = dataclasses.replace(c, samples=dataclasses.replace(meets, high=1.04))
    line = outcome_line(leaves)
    assert line is not None and line.endswith(": no measurable effect")
