"""--try-fixes decides an undecided fix with added rounds: a fix whose interval holds both 1x and
its predicted gain is measured again (the script as it is beside it) until it is decided, the
budget runs out or the cap is reached; looks after the planned one are read at a corrected level.
Seeded series and a fake clock for the rule and the loop; a real script for the end to end."""

from __future__ import annotations

import json
import math
import os
import random
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_notebook.analysis.compare_samples import fix_outcome
from gpu_notebook.records import Report, SampleComparison, TryFixes
from gpu_notebook.tryfix import trials
from gpu_notebook.tryfix.plan import schedule
from gpu_notebook.tryfix.samples import compare_runs, t_quantile
from gpu_notebook.tryfix.sequential import MAX_ADDED_ROUNDS, added_level, decide
from gpu_notebook.tryfix.trials import RunResult, TrialSettings
from gpu_notebook.tryfix.trials import _compared as trials_compared
from gpu_notebook.views.tryfix_text import render_try_fixes, word_try_fixes
from gpu_notebook.views.wording import step_counting


def try_fixes(*args: object, **kwargs: object) -> TryFixes:
    """The trials as the command line shows them: their records worded by the views."""
    return word_try_fixes(trials.try_fixes(*args, **kwargs))  # type: ignore[arg-type]


# nanoGPT's fused AdamW in the quiet ledger at 5d124e9: predicted 1.07x-1.18x, five rounds of
# 60 steps read 1.07x (0.98x-1.16x) "no measurable effect"; its rounds:
NANOGPT_ROUNDS = (1.04, 1.04, 1.09, 1.07, 1.10)
NANOGPT_LOW = 1.07


def _run(rng: random.Random, mean_s: float, steps: int = 60, noise: float = 0.30) -> list[float]:
    """One run's steps whose mean is exactly ``mean_s`` (so a round's ratio is what is set);
    30% step noise: the pooled interval the ledger read for nanoGPT's rounds (0.98x-1.16x)."""
    raw = [1 + rng.gauss(0, noise) for _ in range(steps)]
    scale = mean_s * steps / sum(raw)
    return [x * scale for x in raw]


def _arms(ratios, seed: int = 0, base_s: float = 0.010):
    rng = random.Random(seed)
    base = [_run(rng, base_s) for _ in ratios]
    var = [_run(rng, base_s / r) for r in ratios]
    return base, var


# ---------------------------------------------------------------- the rule, seeded series


def test_the_t_quantile_is_student_s():
    for p, df, table in [
        (0.975, 4, 2.776),
        (0.95, 4, 2.132),
        (0.995, 5, 4.032),
        (0.975, 1, 12.706),
    ]:
        assert t_quantile(p, df) == pytest.approx(table, abs=1e-3)


def test_a_straddling_interval_that_holds_the_predicted_gain_is_undecided_not_no_effect():
    """The ledger's miss, replayed: the planned rounds cannot tell, and say so."""
    base, var = _arms(NANOGPT_ROUNDS)
    c = compare_runs(base, var, model_low=NANOGPT_LOW)
    assert c is not None and c.low < 1.0 < NANOGPT_LOW < c.high
    assert c.verdict == "undecided"
    # The same interval against a predicted 1.5x: the gain predicted is ruled out.
    assert compare_runs(base, var, model_low=1.5).verdict == "no measurable effect"


def test_a_small_real_gain_is_verified_by_the_added_rounds():
    base, var = _arms((*NANOGPT_ROUNDS, 1.06, 1.08, 1.05, 1.09, 1.07, 1.06))
    planned = decide(base[:5], var[:5], 5, NANOGPT_LOW)
    assert planned is not None and planned.verdict == "undecided" and planned.added_rounds == 0
    d = decide(base, var, 5, NANOGPT_LOW)
    assert d is not None and d.verdict == "verified"
    assert 1 <= d.added_rounds <= 3 and d.rounds == 5 + d.added_rounds
    assert d.level == pytest.approx(added_level()) and d.level > 0.99  # the corrected level
    assert d.low > 1.0 and d.low < d.speedup < d.high
    # It stopped at the first decided look: the rounds after it were not read.
    assert d.per_round == pytest.approx((*NANOGPT_ROUNDS, 1.06, 1.08, 1.05)[: d.rounds])
    assert decide(base, var, 5, NANOGPT_LOW) == d  # seeded: the same samples, the same verdict


def test_an_added_look_says_the_rounds_median_so_one_disturbed_round_does_not_move_it():
    # nanoGPT's rounds, then added rounds of which one ran its baseline on a busy machine (1.45x):
    # the figure is the rounds' median (their geometric mean reads 1.10x), inside the interval.
    ratios = (*NANOGPT_ROUNDS, 1.45, 1.06, 1.08, 1.05, 1.07, 1.06, 1.08)
    base, var = _arms(ratios)
    d = decide(base, var, 5, NANOGPT_LOW)
    assert d is not None and d.added_rounds >= 1 and d.level is not None
    assert d.speedup == pytest.approx(statistics.median(ratios[: d.rounds]))
    assert d.speedup < 1.08 and d.low <= d.speedup <= d.high


def test_a_null_effect_is_not_verified_by_looking_again():
    # Rounds that differ by 3% either way around 1x: no look finds a gain.
    rng = random.Random(3)
    ratios = [math.exp(rng.gauss(0, 0.03)) for _ in range(5 + MAX_ADDED_ROUNDS)]
    base, var = _arms(ratios, seed=4)
    d = decide(base, var, 5, NANOGPT_LOW)
    assert d is not None and d.verdict == "no measurable effect", d
    # Rounds that swing between 1.25x and 0.9x: the interval stays wide, and after the cap it
    # is still undecided.
    swing = [0.9 if i % 2 else 1.25 for i in range(5 + MAX_ADDED_ROUNDS)]
    base, var = _arms(swing, seed=5)
    d = decide(base, var, 5, NANOGPT_LOW)
    assert d is not None and d.verdict == "undecided" and d.added_rounds == MAX_ADDED_ROUNDS


def test_one_far_out_round_does_not_keep_a_fix_undecided_to_the_cap():
    """The added looks' interval is the rounds' 20% trimmed mean's: one far-out round (a baseline
    run slowed by half, 1.6x among nanoGPT's 1.04x-1.10x) is trimmed, not read as spread. Main's
    Student t interval over every round's log ratio held 1x at every look, undecided up to the
    cap (its report at 287301d; 1.43x there: 7 added rounds). Seeded."""
    for far in (1.43, 1.6):
        ratios = (far, *NANOGPT_ROUNDS[1:], 1.06, 1.08, 1.05, 1.07, 1.06, 1.08, 1.05, 1.07, 1.06)
        base, var = _arms(ratios, seed=1)
        d = decide(base, var, 5, NANOGPT_LOW)
        assert d is not None and d.verdict == "verified", d
        assert d.added_rounds <= 2 and 1.0 < d.low < d.speedup < 1.09, (far, d)


def test_repeated_looks_keep_false_verified_under_the_corrected_share():
    """Null fixes whose rounds differ by 4% (lognormal): over every added look, at most the
    2.5% one side the Bonferroni correction allows are called verified (seeded)."""
    false_after_planned = 0
    trials = 400
    for seed in range(trials):
        rng = random.Random(1000 + seed)
        ratios = [math.exp(rng.gauss(0, 0.04)) for _ in range(5 + MAX_ADDED_ROUNDS)]
        base = [[0.01] * 6 for _ in ratios]
        var = [[0.01 / r] * 6 for r in ratios]
        d = decide(base, var, 5, 1.07)
        assert d is not None
        false_after_planned += d.verdict == "verified" and d.added_rounds > 0
    assert false_after_planned <= 0.025 * trials


def test_the_notebook_before_after_says_undecided_as_try_fixes_does():
    """One before/after whose range holds both 1x and the predicted gain is undecided there too,
    in the same words; a tight one around 1x is no measurable effect."""
    wide = SampleComparison(1.07, 0.98, 1.16, "no measurable change", 60, 60, 1.07)
    tight = SampleComparison(1.0, 0.95, 1.06, "no measurable change", 60, 60, 1.0)
    assert fix_outcome(wide, NANOGPT_LOW) == "undecided"
    assert fix_outcome(tight, NANOGPT_LOW) == "no measurable effect"
    assert fix_outcome(wide, 1.5) == "no measurable effect"

    from gpu_notebook.records import Comparison
    from gpu_notebook.views.html_report import comparison_section
    from gpu_notebook.views.wording import describe_comparison, outcome_line

    c = Comparison("12:00", 0.010, 0.0093, 1.07, None, None, {}, {}, None, None,
                   fix_id="foreach_fused_optimizer", predicted_bound=1.18,
                   predicted_low=NANOGPT_LOW, samples=wide)  # fmt: skip
    line = outcome_line(c)
    assert line is not None and line.endswith(": undecided")
    assert any(s.startswith("Undecided:") for s in describe_comparison(c))
    assert "): undecided</div>" in comparison_section(c)


# ---------------------------------------------------------------- the loop, a fake clock

REPORT = Path(__file__).parent / "data/gpu/2026-12-04-nvidia-h200-cli/gpu_bound.report.json"


def test_folded_micro_batches_are_read_per_step_as_the_runs_count_their_samples():
    # Issue 26: a bigger batch that folds 4 micro-batches into one (accumulation 4 -> 1) keeps
    # the samples of each optimizer step; read per the fix's factor, its 1.25x became "measured
    # 5.00x, its step takes 4x the samples". The runs' own sample counts decide.
    import dataclasses

    report = Report.from_json(REPORT.read_text())
    offered = next(f for f in report.findings if f.proposal and f.proposal.source_after)
    batch = dataclasses.replace(offered, fix_id="bigger_batch", fix_params={"factor": 4})
    report = dataclasses.replace(report, findings=(batch,))
    fake = _FakeRuns([1.25] * 20, samples=(64, 64))
    settings = TrialSettings(steps=30, budget_s=1000, rounds=3)
    tf = try_fixes(report, Path("/nonexistent/train.py"), [], settings, runner=fake,
                   clock=fake.clock)  # fmt: skip
    (t,) = tf.trials
    assert t.speedup == pytest.approx(1.25, rel=0.15) and "per sample" not in t.note
    # A batch that does grow is read per sample from the counts too (x2 here, not the factor).
    fake = _FakeRuns([0.6] * 20, samples=(64, 128))
    tf = try_fixes(report, Path("/nonexistent/train.py"), [], settings, runner=fake,
                   clock=fake.clock)  # fmt: skip
    (t,) = tf.trials
    assert t.speedup == pytest.approx(1.2, rel=0.15) and "2x the samples" in t.note


CHILD_SCRIPT = """import torch
from torch.utils.data import DataLoader, TensorDataset
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for i, (x, y) in enumerate(DataLoader(TensorDataset(torch.randn(400, 4), torch.randn(400, 1)), batch_size=8)):
    (model(x) - y).pow(2).mean().backward()
    if i % 2 == 1:
        opt.step(); opt.zero_grad()
"""


def test_the_trial_child_reads_the_samples_a_step_takes(tmp_path):
    # Two micro-batches of 8 per optimizer step: 16 samples a step, read by the step clock at
    # the end of the warm-up (before it goes lean).
    script, out = tmp_path / "t.py", tmp_path / "out.json"
    script.write_text(CHILD_SCRIPT)
    subprocess.run([sys.executable, "-m", "gpu_notebook.tryfix.child", str(out), "3", "5",
                    str(script), str(script)], check=True, timeout=300, capture_output=True)  # fmt: skip
    data = json.loads(out.read_text())
    assert data["stopped"] and len(data["steps_s"]) == 5
    assert data["samples_per_step"] == 16


class _FakeRuns:
    """A runner whose runs take ``wall_s`` on a clock it advances; the variant's round i runs at
    ``ratios[i]`` the baseline's step rate."""

    def __init__(self, ratios, wall_s: float = 10.0, samples: tuple[int, int] | None = None):
        self.ratios, self.wall_s, self.now = list(ratios), wall_s, 0.0
        self.samples = samples  # (the script's, the fix's) samples per step, when read
        self.order: list[str] = []
        self.rng = random.Random(0)

    def clock(self) -> float:
        return self.now

    def __call__(self, code, script, args, timeout_s, scratch, steps) -> RunResult:
        self.now += self.wall_s
        is_base = code == script.resolve()
        self.order.append("base" if is_base else "fix")
        i = sum(1 for arm in self.order if arm == self.order[-1]) - 1
        # The report's own step (REPORT: 31.7 ms): the first run sizes the runs as it did.
        mean = 0.032 if is_base else 0.032 / self.ratios[min(i, len(self.ratios) - 1)]
        n = None if self.samples is None else self.samples[0 if is_base else 1]
        return RunResult(steps_s=_run(self.rng, mean, steps=30), stopped=True,
                         wall_s=self.wall_s, samples_per_step=n)  # fmt: skip


def _trial(ratios, budget_s: float):
    report = Report.from_json(REPORT.read_text())
    fake = _FakeRuns(ratios)
    settings = TrialSettings(steps=30, budget_s=budget_s, rounds=3)
    tf = try_fixes(report, Path("/nonexistent/train.py"), [], settings, runner=fake,
                   clock=fake.clock)  # fmt: skip
    return tf, fake


def test_the_loop_adds_rounds_for_an_undecided_fix_until_it_is_decided():
    tf, fake = _trial((1.04, 1.10, 1.05, 1.07, 1.06, 1.08, 1.07, 1.06, 1.08), budget_s=1000)
    (t,) = tf.trials
    assert tf.rounds == 3 and t.verdict == "verified" and t.recommended
    assert t.added_rounds >= 1 and t.rounds == 3 + t.added_rounds
    # The planned schedule, then each added round both arms, the order reversed every other round.
    planned = ["base" if a == 0 else "fix" for a in schedule(1, 3)]
    added = [
        ["base", "fix"] if (3 + k) % 2 == 0 else ["fix", "base"] for k in range(t.added_rounds)
    ]
    assert fake.order == planned + [arm for pair in added for arm in pair]
    assert len(t.baseline_steps_s) == len(t.variant_steps_s) == t.rounds
    # The verdict replays from the samples the report carries.
    d = decide(t.baseline_steps_s, t.variant_steps_s, tf.rounds, t.predicted_model_low)
    assert d is not None and (d.verdict, d.speedup, d.added_rounds) == (
        t.verdict,
        t.speedup,
        t.added_rounds,
    )
    assert f"{t.added_rounds} added" in render_try_fixes(tf)


def test_the_budget_stops_the_added_rounds_and_says_undecided():
    # 10 s a run: 6 planned runs (60 s), then 20 s an added round: 150 s leaves 4 of them.
    tf, fake = _trial([1.3, 0.8] * 10, budget_s=150)
    (t,) = tf.trials
    assert t.verdict == "undecided" and not t.recommended
    assert t.added_rounds == 4 and len(fake.order) == 6 + 2 * 4
    assert t.note.startswith(f"undecided: {t.rounds} rounds, interval ")
    assert "the budget ran out" in t.note
    assert any("still undecided" in n and "--try-budget" in n for n in tf.notes)
    assert "UNDECIDED" in render_try_fixes(tf)


# ---------------------------------------------------------------- end to end, a real script

# The fix (loader workers) is far faster in its first run and far slower in every later one:
# the script sleeps in its loop 20 ms a step in the trials' runs as it is, none in the fix's
# first run, 200 ms in its later ones (it reads its earlier runs from the log). The two planned
# rounds disagree (about 2.5x, then 0.15x), so the fix is undecided and rounds are added.
SWINGING = """
import os, sys, time, torch
from torch.utils.data import DataLoader, Dataset
torch.set_num_threads(1)
class Slow(Dataset):
    def __len__(self): return 100000
    def __getitem__(self, i):
        time.sleep(0.003)
        return torch.randn(8), torch.randn(1)
loader = DataLoader(Slow(), batch_size=4)
log_path = sys.argv[1]
earlier = open(log_path).read().split() if os.path.exists(log_path) else []
if not earlier:
    pause_s = 0.0  # the measured run: input-bound, so the workers fix is offered
elif loader.num_workers == 0:
    pause_s = 0.02
else:
    pause_s = 0.2 if any(w != "0" for w in earlier) else 0.0
with open(log_path, "a") as log:
    log.write(f"{loader.num_workers}\\n")
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for i, (x, y) in enumerate(loader):
    time.sleep(pause_s)
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
    if i == 40:
        break
"""


def test_try_fixes_adds_rounds_for_an_undecided_fix_end_to_end(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SWINGING)
    out = tmp_path / "r.json"
    res = subprocess.run(
        [sys.executable, "-m", "gpu_notebook", "run", "--no-profile", "--json", str(out),
         "--try-fixes", "6", "--try-rounds", "2", "--try-budget", "400", str(script),
         str(tmp_path / "runs.log")],
        capture_output=True, text=True, timeout=900, cwd=tmp_path,
        env=dict(os.environ, TMPDIR=str(tmp_path)),
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    data = json.loads(out.read_text())
    tf = data["try_fixes"]
    t = next(t for t in tf["trials"] if t["fix_id"] == "dataloader_workers")
    assert tf["rounds"] == 2 and t["verdict"] != "verified"
    # Added rounds happened for it, and the report carries their runs.
    assert t["added_rounds"] >= 1 and t["rounds"] == 2 + t["added_rounds"]
    assert len(t["baseline_steps_s"]) == len(t["variant_steps_s"]) == t["rounds"]
    # The runs the script logged: the measured run, the planned schedule, then the added rounds
    # (the fix's loader has workers): as many fix runs as its rounds.
    seen = (tmp_path / "runs.log").read_text().split()
    planned = schedule(len(tf["trials"]), 2)
    assert seen[0] == "0" and len(seen) > 1 + len(planned)
    assert sum(w != "0" for w in seen) == t["rounds"]
    # The verdict is the one its samples give, replayed.
    d = decide(t["baseline_steps_s"], t["variant_steps_s"], 2, t["predicted_model_low"])
    assert d is not None and (d.verdict, d.added_rounds) == (t["verdict"], t["added_rounds"])
    assert "added" in res.stderr  # the text report says the rounds were added


def test_a_bigger_batch_is_read_per_sample_not_per_step():
    # x8 batch whose step takes 4x as long: twice the samples/s. On main its step times were
    # compared as they are: "measured 0.25x: SLOWER" (a GAN's x8 batch: 0.16x).
    import dataclasses

    report = Report.from_json(REPORT.read_text())
    offered = next(f for f in report.findings if f.proposal and f.proposal.source_after)
    batch = dataclasses.replace(offered, fix_id="bigger_batch", fix_params={"factor": 8})
    report = dataclasses.replace(report, findings=(batch,))
    fake = _FakeRuns([0.25] * 20)
    settings = TrialSettings(steps=30, budget_s=1000, rounds=3)
    tf = try_fixes(report, Path("/nonexistent/train.py"), [], settings, runner=fake,
                   clock=fake.clock)  # fmt: skip
    (t,) = tf.trials
    assert t.verdict == "verified" and t.speedup == pytest.approx(2.0, rel=0.15)
    assert "per sample" in t.note


# ---------------------------------------------------------------- own times on a busy machine


def _preempted_run(rng: random.Random, own_s: float, steps: int = 40) -> tuple[list, list]:
    """(wall times, waits): ``own_s`` of the code's own time a step (+-5%); one step in five
    held up 4-13 ms by a time slice, its thread's wait for a core read as the step clock does."""
    walls, waits = [], []
    for _ in range(steps):
        wait = rng.uniform(0.004, 0.013) if rng.random() < 0.2 else rng.uniform(0.0, 1e-5)
        walls.append(own_s * rng.uniform(0.95, 1.05) + wait)
        waits.append(wait)
    return walls, waits


class _BusyRuns:
    """The script as it is takes 0.8 ms of its own a step, the fix 0.5 ms (1.6x), both on a
    busy machine; the fix's runs have ``fix_processes`` processes below them (its workers)."""

    def __init__(self, seed: int, fix_processes: int = 0, waits_read: bool = True):
        self.rng, self.now = random.Random(seed), 0.0
        self.fix_processes, self.waits_read = fix_processes, waits_read

    def clock(self) -> float:
        return self.now

    def __call__(self, code, script, args, timeout_s, scratch, steps) -> RunResult:
        self.now += 10.0
        is_base = code == script.resolve()
        walls, waits = _preempted_run(self.rng, 0.0008 if is_base else 0.0005)
        return RunResult(steps_s=walls, stopped=True, wall_s=10.0,
                         waits_s=waits if self.waits_read else [None] * len(walls),
                         processes=0 if is_base else self.fix_processes)  # fmt: skip


def _busy_trial(fake: _BusyRuns, fix_id: str = "fused_optimizer"):
    import dataclasses

    report = Report.from_json(REPORT.read_text())
    offered = next(f for f in report.findings if f.proposal and f.proposal.source_after)
    report = dataclasses.replace(report, findings=(dataclasses.replace(offered, fix_id=fix_id),))
    settings = TrialSettings(steps=40, budget_s=1000, rounds=3)
    tf = try_fixes(report, Path("/nonexistent/train.py"), [], settings, runner=fake,
                   clock=fake.clock)  # fmt: skip
    (t,) = tf.trials
    return tf, t


@pytest.mark.parametrize("seed", range(6))
def test_time_slices_on_sub_millisecond_steps_do_not_decide_a_fix_trial(seed):
    # Issue 26, as the notebook's before/after (tests/test_compare): a fix that made the code's
    # own step 1.6x faster, every run on a busy machine. Wall times' verdict swung with where the
    # slices fell; each step's own time reads the fix each time, and the report says so.
    tf, t = _busy_trial(_BusyRuns(seed))
    assert t.own_time and t.verdict == "verified"
    assert t.speedup == pytest.approx(1.6, rel=0.06)
    # What the report carries is what was compared: the verdict replays from it.
    assert max(max(run) for run in t.baseline_steps_s) < 0.001
    d = decide(t.baseline_steps_s, t.variant_steps_s, tf.rounds, t.predicted_model_low)
    assert d is not None and (d.verdict, d.speedup) == (t.verdict, t.speedup)
    assert step_counting(True)[0] in render_try_fixes(tf)


def test_a_fix_that_adds_processes_is_measured_on_wall_times():
    # Workers' CPU makes the loop thread wait for a core: that wait is the fix's cost.
    tf, t = _busy_trial(_BusyRuns(1, fix_processes=2), fix_id="dataloader_workers")
    assert not t.own_time
    assert max(max(run) for run in t.variant_steps_s) > 0.004  # the slices were compared
    assert "waited for a core" not in render_try_fixes(tf)


def test_runs_whose_steps_carry_no_wait_are_measured_on_wall_times():
    _tf, t = _busy_trial(_BusyRuns(1, waits_read=False))
    assert not t.own_time and max(max(run) for run in t.baseline_steps_s) > 0.004


def test_the_notebook_and_try_fixes_count_steps_by_one_rule():
    # The same two runs, read by the before/after and by a fix trial: the same times compared.
    from gpu_notebook.analysis.interference import counted_step_times

    rng = random.Random(7)
    runs = [_preempted_run(rng, 0.0008), _preempted_run(rng, 0.0005)]
    walls, waits = [w for w, _ in runs], [x for _, x in runs]
    times, own = counted_step_times(walls, waits, [0, 0])
    assert own and times[0][0] == pytest.approx(walls[0][0] - waits[0][0])
    assert counted_step_times(walls, waits, [0, 2]) == (tuple(map(tuple, walls)), False)
    assert counted_step_times(walls, waits, [0, None])[1] is False  # processes not known
    assert counted_step_times(walls, [waits[0], None], [0, 0])[1] is False
    a = RunResult(steps_s=walls[0], waits_s=waits[0], processes=0)
    b = RunResult(steps_s=walls[1], waits_s=waits[1], processes=0)
    assert trials_compared([a], [b]) == (times[:1], times[1:], True)


def test_the_trial_child_reports_each_step_s_wait_and_its_processes(tmp_path):
    script, out = tmp_path / "t.py", tmp_path / "out.json"
    script.write_text(CHILD_SCRIPT.replace("batch_size=8", "batch_size=8, num_workers=2"))
    subprocess.run([sys.executable, "-m", "gpu_notebook.tryfix.child", str(out), "3", "5",
                    str(script), str(script)], check=True, timeout=300, capture_output=True)  # fmt: skip
    data = json.loads(out.read_text())
    assert data["stopped"] and len(data["waits_s"]) == len(data["steps_s"]) == 5
    assert all(w is None or w >= 0 for w in data["waits_s"])
    assert data["processes"] == 2  # the loader's two workers


def test_a_fix_offered_without_a_patch_is_said_not_tried_and_why():
    # issue 26 (unseen round 3): `num_workers=4 if cuda else 0`, a [high] workers finding whose
    # patch was declined, was neither tried nor named under "Fixes tried": the report went
    # silent on its most important fix.
    import dataclasses

    report = Report.from_json(REPORT.read_text())
    offered = next(f for f in report.findings if f.proposal and f.proposal.source_after)
    refused = dataclasses.replace(
        offered.proposal, source_after=None, diff=None, refusal="num_workers is not a literal"
    )
    report = dataclasses.replace(report, findings=(dataclasses.replace(offered, proposal=refused),))
    settings = TrialSettings(steps=30, budget_s=1000, rounds=3)
    tf = try_fixes(report, Path("/nonexistent/train.py"), [], settings, runner=_FakeRuns([1.0]))
    assert tf.trials == ()
    assert (
        f"not tried: {offered.title} (no patch of the script: num_workers is not a literal)"
        in tf.notes
    )


# ---------------------------------------------------------------- runs stopped at their limit


class _LimitedRuns(_FakeRuns):
    """The fix's runs follow ``fix_runs`` in turn: "warm-up" (stopped at its limit before its
    warm-up ended), "steps" (stopped in its timed steps), "ok" (runs at the baseline's rate x
    1.3); each run records the limit it was given."""

    def __init__(self, fix_runs):
        super().__init__([1.3])
        self.fix_runs = list(fix_runs)
        self.limits: list[float] = []

    def __call__(self, code, script, args, timeout_s, scratch, steps) -> RunResult:
        if code == script.resolve():
            return super().__call__(code, script, args, timeout_s, scratch, steps)
        self.limits.append(timeout_s)
        kind = self.fix_runs.pop(0) if self.fix_runs else "ok"
        if kind == "ok":
            return super().__call__(code, script, args, timeout_s, scratch, steps)
        self.order.append("fix")
        self.now += timeout_s
        # "long warm-up": stopped in its timed steps, its warm-up having ended at 80% of its limit
        warm = 0.8 * timeout_s if kind == "long warm-up" else None
        return RunResult(timed_out=True, warmed=kind != "warm-up", wall_s=timeout_s, warm_s=warm,
                         limit_s=timeout_s)  # fmt: skip


def _limited(fix_runs, budget_s: float = 2000):
    report = Report.from_json(REPORT.read_text())
    fake = _LimitedRuns(fix_runs)
    settings = TrialSettings(steps=30, budget_s=budget_s, rounds=3)
    tf = try_fixes(report, Path("/nonexistent/train.py"), [], settings, runner=fake,
                   clock=fake.clock)  # fmt: skip
    (t,) = tf.trials
    return t, fake


def test_a_fix_stopped_in_its_warm_up_runs_once_more_with_the_budget_left_then_is_measured():
    # A compiled model's first steps on a busy machine took past the 60 s limit (tiny_attention:
    # "broke the script" with no error). Its warm-up gets what is left of the budget once.
    t, fake = _limited(["warm-up"])
    assert fake.limits[0] == 60.0 and fake.limits[1] > 60.0
    assert t.verdict == "verified" and t.speedup == pytest.approx(1.3, rel=0.15)
    assert not t.error_lines


def test_a_fix_whose_warm_up_never_ends_is_not_measured_never_broken():
    t, fake = _limited(["warm-up", "warm-up"])
    assert t.verdict == "not measured" and not t.recommended and not t.error_lines
    assert "warm-up" in t.note and "--try-budget" in t.note
    assert len(fake.limits) == 2  # tried twice, then left out of every round


def test_a_fix_stopped_in_its_timed_steps_is_not_measured_never_slower_nor_broken():
    # issue 26 (H100 of 2026-12-06: the workers fix read "slower" from a run stopped at its
    # 60 s limit; the fix ledger's hf_trainer torch_compile "stopped" read "slower"): a stopped
    # run is no sample of the fix. "slower" comes only from measured steps.
    t, fake = _limited(["steps"])
    assert t.verdict == "not measured" and not t.recommended and not t.error_lines
    assert t.speedup is None and t.variant_steps_s == ()
    assert "timed steps" in t.note and "60 s limit" in t.note and "no measurement" in t.note
    assert len(fake.limits) == 1  # not run again


def test_a_fix_whose_warm_up_took_most_of_its_limit_runs_once_more_then_is_measured():
    # issue 26 (the fix ledger at load 16): hf_trainer's compiled model ended its warm-up late
    # in its 60 s limit and was stopped in its timed steps: "not measured", its steps never given
    # the time the script's had. Its warm-up, not its steps, used the limit: it runs once more,
    # its timed steps given the usual limit after a warm-up as long as that one.
    t, fake = _limited(["long warm-up"])
    assert fake.limits[0] == 60.0
    assert fake.limits[1] == pytest.approx(0.8 * 60.0 + 60.0)
    assert t.verdict == "verified" and t.speedup == pytest.approx(1.3, rel=0.15)
    assert not t.error_lines
    # Stopped again so: not measured, the reason said (never slower, never broken).
    t, fake = _limited(["long warm-up", "long warm-up"])
    assert t.verdict == "not measured" and t.speedup is None and not t.error_lines
    assert "timed steps" in t.note
    assert len(fake.limits) == 2


def _budget_trial(fix_runs, budget_s: float):
    report = Report.from_json(REPORT.read_text())
    fake = _LimitedRuns(fix_runs)
    settings = TrialSettings(steps=30, budget_s=budget_s, rounds=2)
    raw = trials.try_fixes(report, Path("/nonexistent/train.py"), [], settings, runner=fake,
                           clock=fake.clock)  # fmt: skip
    return raw, word_try_fixes(raw), fake


def test_a_fix_run_stopped_by_the_budget_s_end_is_not_measured_and_says_the_budget():
    # The H100 of 2026-12-06 (--try-budget 70): the first run took ~10 s, the fix's run was
    # given the ~60 s left (under the usual 60 s limit) and stopped there: "only 0 run(s) of the
    # fix finished". Now: the budget's end, said, and its run's record says so.
    raw, tf, fake = _budget_trial(["steps"], budget_s=69)
    (t,) = tf.trials
    assert fake.limits[0] < trials.MIN_RUN_TIMEOUT_S
    assert t.verdict == "not measured" and t.speedup is None
    assert "budget ran out during a run of it" in t.note and "--try-budget" in t.note
    fix_runs = [r for r in raw.runs if r.arm]
    assert fix_runs and fix_runs[0].budget_limited and fix_runs[0].ended == "killed"
    assert fix_runs[0].limit_s == fake.limits[0]


def test_a_fix_run_the_budget_cannot_hold_is_not_started_and_is_said_short_of_budget():
    # A fix whose first run took 50 s (its workers' start-up, say) is not run again with 25 s
    # left: the trial says the budget could not hold its next run, with what a run takes.
    class _LongFix(_LimitedRuns):
        def __call__(self, code, script, args, timeout_s, scratch, steps) -> RunResult:
            r = super().__call__(code, script, args, timeout_s, scratch, steps)
            if code != script.resolve():
                self.now += 40.0
                r.wall_s += 40.0
            return r

    report = Report.from_json(REPORT.read_text())
    fake = _LongFix([])
    settings = TrialSettings(steps=30, budget_s=100, rounds=2)
    raw = trials.try_fixes(report, Path("/nonexistent/train.py"), [], settings, runner=fake,
                           clock=fake.clock)  # fmt: skip
    (t,) = word_try_fixes(raw).trials
    assert t.verdict == "not measured"
    assert "could not hold another" in t.note and "--try-budget" in t.note
    assert fake.now <= 100  # no run was started that the budget could not hold
    assert [r.ended for r in raw.runs if r.arm] == ["stopped"]


def test_the_trial_child_marks_the_end_of_its_warm_up(tmp_path):
    from gpu_notebook.tryfix.child import warm_marker

    script = tmp_path / "t.py"
    script.write_text(CHILD_SCRIPT)
    for warmup, marked in ((3, True), (400, False)):  # 25 optimizer steps in all
        out = tmp_path / f"out{warmup}.json"
        subprocess.run([sys.executable, "-m", "gpu_notebook.tryfix.child", str(out), str(warmup),
                        "5", str(script), str(script)], check=True, timeout=300,
                       capture_output=True)  # fmt: skip
        assert os.path.exists(warm_marker(str(out))) is marked
        if marked:
            assert os.stat(warm_marker(str(out))).st_mode & 0o777 == 0o600


def _two_round_trial(seed: int):
    # Two planned rounds and a budget with no room for a third: no spread of whole runs.
    import dataclasses

    fake = _BusyRuns(seed)
    report = Report.from_json(REPORT.read_text())
    offered = next(f for f in report.findings if f.proposal and f.proposal.source_after)
    report = dataclasses.replace(
        report, findings=(dataclasses.replace(offered, fix_id="fused_optimizer"),)
    )
    settings = TrialSettings(steps=40, budget_s=60, rounds=2)
    tf = try_fixes(report, Path("/nonexistent/train.py"), [], settings, runner=fake,
                   clock=fake.clock)  # fmt: skip
    (t,) = tf.trials
    return tf, t


def test_a_trial_whose_arms_are_too_busy_to_judge_is_decided_by_its_rounds_only():
    """As the notebook's before/after (tests/test_compare): runs whose steps mostly waited for a
    core (here 60-70% of their time) are the machine's more than the code's. Interleaved, the
    rounds' own spread can still decide (3 rounds: verified, the wait said); two rounds give no
    such spread, so the steps alone make no call: undecided, the reason said."""
    tf, t = _two_round_trial(1)
    assert t.rounds == 2 and t.added_rounds == 0
    assert t.verdict == "undecided" and not t.recommended
    said = render_try_fixes(tf)
    assert "too busy to judge" in said and "quieter machine" in said
    # The pure look on the same steps: busy, no call; not busy, the steps' call stands.
    assert decide(t.baseline_steps_s, t.variant_steps_s, 2, None, busy=True).verdict == (  # type: ignore[union-attr]
        "undecided"
    )
    assert decide(t.baseline_steps_s, t.variant_steps_s, 2, None).verdict == "verified"  # type: ignore[union-attr]
    tf3, t3 = _busy_trial(_BusyRuns(1))
    assert t3.verdict == "verified" and "rounds' own spread decides" in render_try_fixes(tf3)


class _BusyThenQuiet:
    """Each arm's first two runs on a busy machine (their steps wait ~68% for a core), the rest
    quiet; the fix's third run no faster than the script (an odd round), its others 1.6x."""

    def __init__(self) -> None:
        self.rng, self.now, self.made = random.Random(3), 0.0, {True: 0, False: 0}

    def clock(self) -> float:
        return self.now

    def __call__(self, code, script, args, timeout_s, scratch, steps) -> RunResult:
        self.now += 10.0
        is_base = code == script.resolve()
        k = self.made[is_base]
        self.made[is_base] += 1
        own = 0.0008 if is_base or k == 2 else 0.0005
        if k < 2:
            walls, waits = _preempted_run(self.rng, own)
        else:
            walls, waits = [own * self.rng.uniform(0.95, 1.05) for _ in range(40)], [0.0] * 40
        return RunResult(steps_s=walls, stopped=True, wall_s=10.0, waits_s=waits, processes=0)


def test_a_trial_busy_at_its_planned_look_and_quiet_after_reads_the_rounds_it_ran():
    # Issue 26 (tests/test_tryfix_frameworks' Lightning trial under load): the planned look read
    # the first runs too busy (undecided) and rounds were added; the verdict then judged
    # busyness over every run (quiet by the median), decided at the planned look and said
    # "2 rounds" over 4 runs of steps a side. The planned look reads the same runs each time.
    import dataclasses

    report = Report.from_json(REPORT.read_text())
    offered = next(f for f in report.findings if f.proposal and f.proposal.source_after)
    report = dataclasses.replace(
        report, findings=(dataclasses.replace(offered, fix_id="fused_optimizer"),)
    )
    fake = _BusyThenQuiet()
    settings = TrialSettings(steps=40, budget_s=1000, rounds=2)
    tf = try_fixes(report, Path("/nonexistent/train.py"), [], settings, runner=fake,
                   clock=fake.clock)  # fmt: skip
    (t,) = tf.trials
    assert t.added_rounds >= 1 and t.rounds == tf.rounds + t.added_rounds
    assert len(t.baseline_steps_s) == t.rounds == len(t.variant_steps_s)
    busy = "too busy to judge" in render_try_fixes(tf)
    d = decide(t.baseline_steps_s, t.variant_steps_s, tf.rounds, t.predicted_model_low, busy=busy)
    assert d is not None and (d.verdict, d.rounds) == (t.verdict, t.rounds)
