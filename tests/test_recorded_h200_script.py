"""The first run on a real GPU: a plain input-bound script on an H200 host (16 cores, torch
2.11+cu130), recorded in tests/data/gpu/2026-12-04-nvidia-h200-script/ (``gpu_train.py.txt``: a
0-worker DataLoader whose per-sample CPU transform takes 93% of every step).

``run.report.json.gz`` is its ``gpucheck run`` report, ``try-fixes.report.json.gz`` its
``gpucheck run --try-fixes 30`` one, both as main wrote them at 16:25 UTC. The rules run again
on each recorded run and analysis (the figures the machine gave), so what the rules decide is
checked against real readings without a GPU.

What they said there: the workers fix, the one that delivers most (the kit's own input-bound
scenario measured x6.67 on that machine), was "[info] Small: may have no measurable effect
(0.91x-13.33x)" and ``--try-fixes`` tried nothing; and "[high] The CPUs are saturated preparing
data" asked for more cores while the cores were this process's own intra-op threads.
"""

from __future__ import annotations

import dataclasses
import gzip
from pathlib import Path

import pytest

from gpu_notebook.analysis.compare_samples import RUN_TO_RUN, measurable
from gpu_notebook.records import Finding, Report
from gpu_notebook.rules import cell_facts, run_rules
from gpu_notebook.tryfix.plan import offered_variants, unmeasurable
from gpu_notebook.words import word_findings
from gpu_notebook.words.proposals import attach_fixes

DATA = Path(__file__).parent / "data" / "gpu" / "2026-12-04-nvidia-h200-script"


def _recorded(name: str) -> Report:
    data = (DATA / name).read_bytes()
    return Report.from_json(gzip.decompress(data).decode() if name.endswith(".gz") else data)


def _ruled_again(report: Report) -> Report:
    """The recorded report with its findings made again from its own run and analysis."""
    run = report.run
    offset = run.first_line - 1
    facts = cell_facts(run.cell_source, None, line_offset=offset)
    found = run_rules(run, report.analysis, report.verdict, facts=facts, line_offset=offset)
    findings = attach_fixes(word_findings(found), run.cell_source)
    return dataclasses.replace(report, findings=findings)


def _by_rule(report: Report) -> dict[str, Finding]:
    return {f.rule_id: f for f in report.findings}


# The same script's third run (16:39, with --trace), kept in the kit's folder of CLI runs.
CLI_RUN = "../2026-12-04-nvidia-h200-cli/gpu_train.report.json"
# The same script on the H100 (2026-12-06), under --try-fixes 30 --try-budget 70.
H100_RUN = "../2026-12-06-nvidia-h100-cli/gpu_train.report.json"


@pytest.fixture(
    scope="module", params=["run.report.json.gz", "try-fixes.report.json.gz", CLI_RUN, H100_RUN]
)
def h200(request: pytest.FixtureRequest) -> Report:
    return _ruled_again(_recorded(request.param))


def test_a_range_from_the_noise_to_12x_is_uncertain_not_small(h200: Report) -> None:
    workers = _by_rule(h200)["input.loader_workers"]
    # The model's range: its low end within the 5% two runs differ by (the process used 15.8
    # of the 16 cores its session could count on), its high end far above it.
    assert workers.gain_low is not None and workers.gain_bound is not None
    assert workers.gain_low <= 1 + RUN_TO_RUN < 10 < workers.gain_bound
    assert measurable(workers)
    from gpu_notebook.analysis.compare_samples import uncertain  # (not on main before)

    assert uncertain(workers)
    # Uncertain keeps the rule's severity (93% of the step waits for data) and says so first.
    assert workers.severity == "high"
    assert workers.fix.startswith("Uncertain: ") and "Small" not in workers.fix
    lo, hi = workers.stated_low, workers.gain_bound  # never above the model's bound
    assert lo is not None and hi is not None
    assert f"{lo:.2f}x-{hi:.2f}x" in workers.fix and "--try-fixes" in workers.fix
    assert h200.findings[0] is workers  # the verdict's own fix comes first
    # Fixes bounded within the margin stay small (info, not tried): nothing a run could show.
    for rule in ("copies.pageable", "backend.tf32"):
        small = _by_rule(h200)[rule]
        assert small.gain_bound is not None and small.gain_bound <= 1 + RUN_TO_RUN
        assert small.severity == "info" and small.fix.startswith("Small: may have no measurable")
        assert not measurable(small) and not uncertain(small)


def test_try_fixes_tries_the_uncertain_workers_fix_first() -> None:
    recorded = _recorded("try-fixes.report.json.gz")
    tried = recorded.try_fixes
    assert tried is not None and tried.trials == ()  # what main did: nothing to try
    again = _ruled_again(recorded)
    variants = offered_variants(again)
    assert variants and variants[0].finding.rule_id == "input.loader_workers"
    assert "num_workers=12" in variants[0].source
    assert [f.rule_id for f in unmeasurable(again)] == ["copies.pageable", "backend.tf32"]


def test_busy_cores_that_are_this_process_s_own_threads_with_a_main_process_loader_defer() -> None:
    report = _recorded("run.report.json.gz")
    # The reading was right: while the steps ran the machine was ~all busy (61% is the whole
    # run's mean, with ~8 s of imports at one core), but this process held 15.8 of the 16 cores
    # (torch's 16 intra-op threads on per-sample tensors), no worker ran, the GPU idled.
    m = report.analysis.machine
    assert m is not None and m.loop_ours_cores is not None and m.loop_ours_cores > 15
    assert m.torch_threads == 16 and m.workers == 0
    assert report.findings[0].rule_id == "input.cpu_saturated"  # as main said
    # The loading is serial in one process: workers are the fix, not more cores per GPU.
    again = _by_rule(_ruled_again(report))
    assert "input.cpu_saturated" not in again
    workers = again["input.loader_workers"]
    assert any("torch ran 16 intra-op threads in it" in e for e in workers.evidence)
