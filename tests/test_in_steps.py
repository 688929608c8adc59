"""The report's sampler figures are the training steps', not the whole run's (imports, model
build, start-up): ``UtilizationStats.in_steps``.

On the recorded H100 CLI run (tests/data/gpu/2026-12-06-nvidia-h100-cli) the GPU-bound script's
NVML mean is 33% over its run and 94% inside its 120 steps (8.8-12.3 s of a 12.8 s run): read
without a GPU timeline, the whole run's mean made it host-bound. Its input-bound script kept
~16 cores busy inside its steps (1588%), 831% over the whole run.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from gpu_notebook.formatting import fmt_pct
from gpu_notebook.records import Report, Sample, SampleSeries
from gpu_notebook.views.text import render_text
from tests.test_recorded_no_gpu_clock import _half_unclocked_copy, _rebuilt, _unclocked_copy

DATA = Path(__file__).parent / "data" / "gpu"
H100_CLI = DATA / "2026-12-06-nvidia-h100-cli"
H200_CLI = DATA / "2026-12-04-nvidia-h200-cli"


def _span(report: Report) -> tuple[float, float]:
    steps = report.run.steps.steps
    return steps[0].start_s, steps[-1].start_s + steps[-1].duration_s


@pytest.mark.parametrize("folder", [H100_CLI, H200_CLI])
def test_a_gpu_bound_script_without_gpu_timestamps_reads_nvml_inside_its_steps(
    tmp_path: Path, folder: Path
) -> None:
    """Unclocked, the script's busy share is NVML's: over the whole run (start-up, model build
    and the CUDA context included) it read under 40% and host-bound; inside the steps past 80%,
    and the host waited on the GPU (it issued the steps faster than they ran): gpu-bound."""
    stem = "gpu_bound"
    trace = _unclocked_copy(folder / f"{stem}.trace.json.gz", tmp_path / "u.json.gz")
    report = _rebuilt(folder, stem, trace)
    g, u = report.analysis.gpu, report.analysis.utilization
    assert g is not None and g.window_us == 0.0 and g.unclocked_events > 100
    assert u.gpu_util_mean_pct is not None and u.gpu_util_mean_pct < 40
    steps = u.in_steps
    assert steps is not None and steps.read and steps.ticks >= 10
    assert steps.gpu_util_mean_pct is not None and steps.gpu_util_mean_pct > 80
    assert u.nvml_busy == pytest.approx(steps.gpu_util_mean_pct / 100)
    assert report.verdict.category == "gpu-bound", report.verdict
    assert any("inside the steps on NVML" in e for e in report.verdict.evidence)
    # the ticks read lie inside the steps: each tick's interval ends in them, and starts there
    start, end = _span(report)
    interval = report.run.samples.interval_s
    inside = [s for s in report.run.samples.samples if start <= s.t_s - interval and s.t_s <= end]
    assert len(inside) == steps.ticks


def test_a_gpu_bound_timeline_missing_half_its_kernels_is_judged_on_nvml_inside_the_steps(
    tmp_path: Path,
) -> None:
    """Half the script's kernels unclocked: the rest read 59% busy, a lower bound. Against the
    whole run's NVML (33%) that lower bound stood as the measure (host-bound); NVML inside the
    steps (94%) says the timeline is short of the GPU's work: gpu-bound."""
    stem = "gpu_bound"
    trace = _half_unclocked_copy(H100_CLI / f"{stem}.trace.json.gz", tmp_path / "half.json.gz")
    report = _rebuilt(H100_CLI, stem, trace)
    g = report.analysis.gpu
    assert g is not None and g.partial and g.busy_share < 0.8
    assert report.verdict.category == "gpu-bound", report.verdict


def _thinned(series: SampleSeries, start: float, end: float, keep: int) -> SampleSeries:
    """``series`` with only ``keep`` of its ticks inside the steps (the rest outside kept)."""
    inside = [s for s in series.samples if start <= s.t_s - series.interval_s and s.t_s <= end]
    dropped = {id(s) for s in inside[keep:]}
    samples: tuple[Sample, ...] = tuple(s for s in series.samples if id(s) not in dropped)
    return dataclasses.replace(series, samples=samples)


def test_too_few_ticks_inside_the_steps_fall_back_to_the_whole_run_and_say_why(
    tmp_path: Path,
) -> None:
    """Two ticks inside the steps (a short loop, a slow sampler) do not read the loop: the whole
    run's NVML mean stands, and the evidence says it holds the start-up and why."""
    stem = "gpu_bound"
    recorded = Report.from_json((H100_CLI / f"{stem}.report.json").read_text())
    start, end = _span(recorded)
    series = _thinned(recorded.run.samples, start, end, keep=2)
    trace = _unclocked_copy(H100_CLI / f"{stem}.trace.json.gz", tmp_path / "u.json.gz")
    report = _rebuilt(H100_CLI, stem, trace, series)
    u = report.analysis.utilization
    assert u.in_steps is not None and u.in_steps.ticks == 2 and not u.in_steps.read
    assert u.in_steps.gpu_util_mean_pct is None and u.in_steps.ours_cores is None
    assert u.gpu_util_mean_pct is not None
    assert u.nvml_busy == pytest.approx(u.gpu_util_mean_pct / 100)
    said = [e for e in report.verdict.evidence if "on NVML" in e]
    assert said and "of the whole run" in said[0] and "start-up included" in said[0]
    assert "2 samples fell inside the steps, 3 needed" in said[0]
    text = render_text(report)
    assert "CPU over the whole run, start-up included (2 samples fell inside the steps" in text
    assert "over the whole run, start-up included (2 samples fell inside the steps" in text


def test_the_text_view_shows_the_cpu_inside_the_steps_the_what_if_reads() -> None:
    """The H100's input-bound script: 831% over the run, ~1588% inside its steps. The CPU line
    leads with the in-steps figure, labelled, and it is the one the what-if's host column
    starts from (one figure, read once: ``InSteps.ours_cores``)."""
    stem = "gpu_train"
    report = _rebuilt(H100_CLI, stem, H100_CLI / f"{stem}.trace.json.gz")
    u = report.analysis.utilization
    steps = u.in_steps
    assert steps is not None and steps.read and steps.ours_cores is not None
    assert 15.0 < steps.ours_cores <= 16.0
    assert u.process_cpu_mean_pct is not None and u.process_cpu_mean_pct < 900
    text = render_text(report)
    cpu = next(line for line in text.splitlines() if line.startswith("CPU"))
    assert cpu.startswith(
        f"CPU inside the steps: this process and its workers {fmt_pct(100 * steps.ours_cores)}"
    ), cpu
    assert f"start-up included: this process {fmt_pct(u.process_cpu_mean_pct)}" in cpu
    w = report.whatif
    assert w is not None and w.rank_busy_cores == steps.ours_cores
    nvml = next(line for line in text.splitlines() if line.startswith("GPU (NVML)"))
    assert "utilization inside the steps" in nvml and "start-up included: mean" in nvml


LOOP = """%%gpucheck -q -o rep
import time
m = mlp(32, 256); o = torch.optim.SGD(m.parameters(), lr=0.1)
x = torch.randn(64, 32)
end = time.perf_counter() + 2.0
while time.perf_counter() < end:
    m(x).sum().backward(); o.step(); o.zero_grad()
"""


def test_a_real_loop_reads_its_cpu_inside_its_steps(ip: Any) -> None:
    """A real CPU loop under %%gpucheck (two seconds of steps, however many the machine runs):
    the in-steps figures come from the ticks inside the steps, the quiet-host cores from the
    cores kept busy and the steps' wait for a core, and the text view says which it shows."""
    ip.run_cell(LOOP)
    rep: Report = ip.user_ns["rep"]
    steps = rep.analysis.utilization.in_steps
    assert steps is not None
    start, end = _span(rep)
    interval = rep.run.samples.interval_s
    inside = [s for s in rep.run.samples.samples if start <= s.t_s - interval and s.t_s <= end]
    assert steps.ticks == len(inside)
    cpu = next(line for line in render_text(rep).splitlines() if line.startswith("CPU"))
    if not steps.read:
        assert cpu.startswith("CPU over the whole run, start-up included"), cpu
        return
    assert steps.ours_cores is not None and steps.quiet_cores is not None
    assert cpu.startswith("CPU inside the steps: this process and its workers"), cpu
    timed = [s for s in rep.run.steps.steps if s.wait_s is not None]
    if steps.wait_share is None:
        assert not timed and steps.quiet_cores == steps.ours_cores
        return
    wait = sum(s.wait_s or 0.0 for s in timed) / sum(s.duration_s for s in timed)
    assert steps.wait_share == pytest.approx(min(1.0, wait))
    quiet = steps.ours_cores / (1 - steps.wait_share)
    assert steps.quiet_cores == pytest.approx(min(quiet, rep.run.env.cpu_count or quiet))
    assert steps.quiet_cores >= steps.ours_cores


def test_the_chart_draws_the_reports_in_steps_figures_and_says_which_they_are(
    tmp_path: Path,
) -> None:
    """The utilization chart runs over the whole cell (start-up included: the H100 GPU-bound
    script's NVML mean 33% there); the report reads 94% inside the steps. The chart draws the
    report's figures across the steps, labelled as the report's, at the same values the text
    view prints; with too few samples inside the steps, none (the report reads the whole run)."""
    from bokeh.core.validation import check_integrity

    from gpu_notebook.views.charts import utilization_figure

    stem = "gpu_bound"
    report = _rebuilt(H100_CLI, stem, H100_CLI / f"{stem}.trace.json.gz")
    steps = report.analysis.utilization.in_steps
    assert steps is not None and steps.read and steps.gpu_util_mean_pct is not None
    assert steps.ours_cores is not None
    fig: Any = utilization_figure(report)
    labels = [item.label["value"] for item in fig.legend[0].items]
    gpu = f"GPU utilization inside the steps: mean {fmt_pct(steps.gpu_util_mean_pct)}"
    cpu = f"CPU inside the steps: median {fmt_pct(100 * steps.ours_cores)}"
    assert f"{gpu} (the report's figure)" in labels, labels
    assert f"{cpu} (the report's figure)" in labels, labels
    text = render_text(report)
    assert f"utilization inside the steps {fmt_pct(steps.gpu_util_mean_pct)}" in text
    drawn = {
        r.data_source.data["y"][0]
        for r in fig.renderers
        if "y" in r.data_source.data and len(r.data_source.data["y"]) == 1
    }
    assert steps.gpu_util_mean_pct in drawn and 100 * steps.ours_cores in drawn
    assert check_integrity(list(fig.references())).error == []
    start, end = _span(report)
    thin = _thinned(report.run.samples, start, end, keep=2)
    few: Any = utilization_figure(
        _rebuilt(H100_CLI, stem, H100_CLI / f"{stem}.trace.json.gz", thin)
    )
    assert not any("inside the steps" in item.label["value"] for item in few.legend[0].items)


@pytest.mark.parametrize("folder", [H100_CLI, H200_CLI])
def test_the_machines_loop_figures_are_the_in_steps_record(folder: Path) -> None:
    """The loop's CPU figures the rules read (``MachineFacts.loop_*``: workers' capacity, the
    session's cores) are the in-steps record's, read once, not a second selection of ticks:
    the input-bound script's cores inside its steps read 15.90 there (the steady steps' ticks)
    beside the 15.88 the report and the what-if show. Too few ticks inside: none of them."""
    stem = "gpu_train"
    report = _rebuilt(folder, stem, folder / f"{stem}.trace.json.gz")
    m, steps = report.analysis.machine, report.analysis.utilization.in_steps
    assert m is not None and steps is not None and steps.read
    assert m.loop_ours_cores == steps.ours_cores
    assert m.loop_others_cores == steps.others_cores and m.loop_run_wait == steps.run_wait
    assert steps.others_cores is not None and steps.run_wait is not None
    start, end = _span(report)
    thin = _thinned(report.run.samples, start, end, keep=2)
    few = _rebuilt(folder, stem, folder / f"{stem}.trace.json.gz", thin)
    assert few.analysis.utilization.in_steps is not None
    assert not few.analysis.utilization.in_steps.read
    assert few.analysis.machine is not None and few.analysis.machine.loop_ours_cores is None
