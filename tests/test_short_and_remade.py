"""Two shapes of a run the loop's own code sets (issue 26, unseen, oldopen).

A DataLoader with workers made anew every epoch starts its workers again each epoch;
``persistent_workers=True`` on such a loader does nothing, so the finding names building it once.
A run that ends inside the profiler's warm-up (an HF Trainer with ``max_steps=2``) has no
profiled step: its verdict says it rests on the first steps' timings alone. Mechanisms only: a
real shell, the cell's facts, a hand-built run shape (no timing asserted).
"""

from __future__ import annotations

import dataclasses

import pytest

from gpu_notebook.cell.loops import remade_loaders
from gpu_notebook.records import RunSegment, RunShape, StallPattern
from gpu_notebook.rules import cell_facts
from gpu_notebook.rules.input_pipeline import remade_loader
from gpu_notebook.words import word_findings
from tests.scenarios import synthetic as syn

PER_EPOCH = """
ds = torch.utils.data.TensorDataset(torch.randn(64, 8), torch.randn(64, 1))
for epoch in range(3):
    loader = DataLoader(ds, batch_size=16, num_workers=2)
    for x, y in loader:
        loss = model(x).sum()
        opt.zero_grad(); loss.backward(); opt.step()
"""
ONCE = """
ds = torch.utils.data.TensorDataset(torch.randn(64, 8), torch.randn(64, 1))
loader = DataLoader(ds, batch_size=16, num_workers=2, persistent_workers=True)
for epoch in range(3):
    for x, y in loader:
        loss = model(x).sum()
        opt.zero_grad(); loss.backward(); opt.step()
"""
IN_A_FUNCTION = """
def batches():
    yield from DataLoader(ds, batch_size=16, num_workers=2)
for epoch in range(3):
    for x, y in batches():
        loss = model(x).sum()
        opt.zero_grad(); loss.backward(); opt.step()
"""


def test_a_loader_made_in_the_epoch_loop_or_by_a_function_it_calls_is_made_anew() -> None:
    facts = cell_facts(PER_EPOCH, None)
    assert facts.tree is not None
    (at,) = remade_loaders(facts.tree, facts.loaders)
    assert (at.call.line, at.outer_line, at.step_line, at.function) == (5, 4, 6, None)
    facts = cell_facts(IN_A_FUNCTION, None)
    assert facts.tree is not None
    (at,) = remade_loaders(facts.tree, facts.loaders)
    assert (at.call.line, at.outer_line, at.function) == (4, 5, "batches")
    once = cell_facts(ONCE, None)
    assert once.tree is not None and not list(remade_loaders(once.tree, once.loaders))


def _shape(stalls: StallPattern | None) -> RunShape:
    seg = RunSegment(first_step=2, last_step=4, median_s=0.01, total_s=0.03)
    return RunShape(
        steps=48, total_s=1.0, median_s=0.01, p90_s=0.012, jitter=1.2, first_median_s=0.01,
        last_median_s=0.01, slope_s_per_step=0.0, segments=(seg,) * 10, windows=(seg,),
        window_median_s=0.01, window_covers=0.9, represents=True, stalls=stalls,
    )  # fmt: skip


def test_the_stalls_at_the_loaders_period_bound_it_and_the_patch_moves_it() -> None:
    stalls = StallPattern((4, 8, 12), 11, 4, 0.05, 0.3, 0.3, "data")
    analysis = dataclasses.replace(syn.make_analysis(), shape=_shape(stalls))
    run = syn.make_run(PER_EPOCH)
    (f,) = word_findings([remade_loader(run, analysis, cell_facts(PER_EPOCH, None))])  # type: ignore[list-item]
    # Assigned in the epoch loop from names it does not set: the patch moves it above the loop
    # (rules/input_pipeline.persistent_loader; unseen round 9).
    assert f.severity == "high" and f.line == 5 and f.fix_id == "persistent_loader"
    assert f.gain_bound == pytest.approx(1 / (1 - 0.3))
    assert "persistent_workers=True" in f.fix and "before line 4" in f.fix
    # Unread cost: said at info, unbounded; a loader without workers starts nothing.
    quiet = dataclasses.replace(analysis, shape=_shape(None))
    g = remade_loader(run, quiet, cell_facts(PER_EPOCH, None))
    assert g is not None and g.severity == "info" and g.gain_bound is None
    no_workers = PER_EPOCH.replace("num_workers=2", "num_workers=0")
    assert remade_loader(syn.make_run(no_workers), analysis, cell_facts(no_workers, None)) is None


SHORT = """
import torch
from torch import nn
torch.manual_seed(0)
model = nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(16, 8)
for _ in range({n}):
    loss = model(x).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
"""


def test_a_run_that_ends_in_the_warm_up_says_its_verdict_rests_on_its_first_steps(ip) -> None:
    ip.run_cell(f"%%gpucheck -q -o rep -w 3\n{SHORT.format(n=2)}")
    rep = ip.user_ns["rep"]
    assert rep.run.window.status == "not-reached"
    assert rep.verdict.confidence == "low"
    assert rep.verdict.evidence[0].startswith("the run ended after 2 step(s), within the profiler")
    ip.run_cell(f"%%gpucheck -q -o rep -w 3\n{SHORT.format(n=12)}")
    rep = ip.user_ns["rep"]
    assert rep.run.window.status != "not-reached"
    assert not any(e.startswith("the run ended after") for e in rep.verdict.evidence)


# ------------------------------------------------- a per-step fix on a run too short to size it

TRAIN = """\
model = Net(); opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
loader = DataLoader(ds, batch_size=32)
for x, y in loader:
    loss = loss_fn(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
"""


def _workers(steps: int, status: str) -> object:
    """The workers finding on a run of ``steps`` steps (the profiler's warm-up 2) whose steps
    waited 40% for data: as the report holds it, worded."""
    from gpu_notebook.records import ProfileWindow
    from gpu_notebook.rules import run_rules
    from gpu_notebook.words import word_findings

    run = syn.make_run(TRAIN, cpu_count=8, steps=syn.steps_record(steps))
    run = dataclasses.replace(run, window=ProfileWindow(status, 2, 3))  # type: ignore[arg-type]
    found = word_findings(run_rules(run, syn.make_analysis({"data": 0.40}), syn.VERDICT))
    return next(f for f in found if f.rule_id == "input.loader_workers")


def test_a_per_step_fix_on_a_run_too_short_to_size_it_says_so_and_gives_no_range() -> None:
    """Unseen hf_trainer_2_steps (``max_steps=2``): the run ended within the profiler's warm-up,
    yet its two steps' data wait offered workers at [high] "up to 1.84x", which no trial of
    warm-up and timed steps could measure. The fix is kept, unsized, at info, and says why; the
    same loop run long enough is sized as before."""
    short = _workers(2, "not-reached")
    assert short.fix_id == "dataloader_workers" and short.severity == "info"
    assert short.gain_bound is None and short.gain_low is None and short.bound_low is None
    assert short.fix.startswith("Not sized: the run has 2 step(s), too few to size a per-step gain")
    assert any(
        e.startswith("the run has 2 step(s), all within the profiler's warm-up of 2: a per-step "
                     "gain needs 5 steps past the warm-up to be sized")
        for e in short.evidence
    )  # fmt: skip
    # Past the warm-up but fewer than the steps a bound needs: unsized too.
    assert _workers(6, "recorded").gain_bound is None
    sized = _workers(12, "recorded")
    assert sized.severity == "high" and sized.gain_bound is not None
    assert not sized.fix.startswith("Not sized")


def test_try_fixes_says_a_fix_is_not_measurable_on_a_run_this_short_and_runs_nothing() -> None:
    """The trial of a 2-step run: every run would end inside its warm-up of 5. No run is spent,
    no fix is said failed or undecided (main: "not measured: the script as it is ran no step
    the step clock could time", after a run); each is "not measurable on a run this short"."""
    from pathlib import Path

    from gpu_notebook.records import Report
    from gpu_notebook.tryfix.trials import RunResult, TrialSettings, try_fixes
    from gpu_notebook.views.tryfix_text import word_try_fixes

    recorded = Path(__file__).parent / "data/gpu/2026-12-04-nvidia-h200-cli/gpu_bound.report.json"
    report = Report.from_json(recorded.read_text())
    assert any(f.proposal and f.proposal.source_after for f in report.findings)
    short = dataclasses.replace(
        report, run=dataclasses.replace(report.run, steps=syn.steps_record(2))
    )
    runs: list[Path] = []

    def runner(code, script, args, timeout_s, scratch, steps) -> RunResult:  # type: ignore[no-untyped-def]
        runs.append(code)
        return RunResult(steps_s=[0.01] * 30, stopped=True, wall_s=1.0)

    settings = TrialSettings(steps=30, budget_s=100)
    tf = word_try_fixes(try_fixes(short, Path("/nonexistent/t.py"), [], settings, runner=runner))
    assert runs == [] and tf.trials == ()
    said = [n for n in tf.notes if "not measurable on a run this short" in n]
    assert said and all("the run has 2 step(s)" in n and "warm-up of 5" in n for n in said)
    # A script that ends on its own inside the first run's warm-up (the report's run was long):
    # said the same, from the steps that run counted, after that one run.
    runs.clear()

    def ends(code, script, args, timeout_s, scratch, steps) -> RunResult:  # type: ignore[no-untyped-def]
        runs.append(code)
        return RunResult(steps_s=[], stopped=False, wall_s=1.0, steps_seen=3)

    tf = word_try_fixes(try_fixes(report, Path("/nonexistent/t.py"), [], settings, runner=ends))
    assert len(runs) == 1 and tf.trials == ()
    assert any("not measurable on a run this short: the run has 3 step(s)" in n for n in tf.notes)
