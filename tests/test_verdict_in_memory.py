"""Tiny batches assembled from memory feeding tiny ops: one host-bound answer, either side of 20%.

A batch of four collated from an in-memory TensorDataset is per-sample Python, the same overhead
as the tiny ops it feeds; its share sat at the input-bound line and the verdict flipped between
runs of one cell (issue 22). Seeded step splits here, no timing.
"""

from __future__ import annotations

import dataclasses

import pytest

from gpu_notebook.records import Analysis, HostOverhead, PhaseBreakdown, StepPhases
from gpu_notebook.rules import cell_facts
from gpu_notebook.rules.input_pipeline import data_in_memory
from gpu_notebook.views.html_report import verdict_section
from gpu_notebook.views.text import render_text
from gpu_notebook.words.input_pipeline import no_worker_gain
from tests.scenarios import synthetic as syn

TINY_OPS = HostOverhead(40.0, 8.0, 0.3, 0.4, 30.0)  # many ops of 8 us: host_bound() holds
IN_MEMORY = "the dataset is a TensorDataset: its samples are views of tensors already in memory"

TENSOR_CELL = """
import torch
from torch.utils.data import DataLoader, TensorDataset
loader = DataLoader(TensorDataset(torch.randn(512, 16), torch.randn(512, 1)), batch_size=4)
for x, y in loader:
    loss = model(x).sum()
    loss.backward()
    opt.step()
"""
SLEEPY_CELL = """
import time, torch
from torch.utils.data import DataLoader, Dataset
class Sleepy(Dataset):
    def __len__(self):
        return 256
    def __getitem__(self, i):
        time.sleep(0.001)
        return torch.randn(16), torch.randn(1)
loader = DataLoader(Sleepy(), batch_size=16)
for x, y in loader:
    loss = model(x).sum()
    loss.backward()
    opt.step()
"""


def _split(data: float, n: int = 12, step_us: float = 2_000.0) -> PhaseBreakdown:
    """Steady steps with ``data`` of each in the loader (a tight range: the point decides)."""
    steps = tuple(
        StepPhases(
            i, i * step_us, step_us, {"data": data * step_us, "forward": (1 - data) * step_us}
        )
        for i in range(n)
    )
    return PhaseBreakdown(
        source="hooks",
        steps=steps,
        total_us=step_us * n,
        phase_total_us={"data": data * step_us * n, "forward": (1 - data) * step_us * n},
        measured=("data", "forward", "backward", "optimizer", "other"),
    )


def _tiny(data: float) -> Analysis:
    return dataclasses.replace(syn.make_analysis(phase_split=_split(data)), host=TINY_OPS)


@pytest.mark.parametrize("data", [0.03, 0.12, 0.18, 0.21, 0.26])
def test_in_memory_batches_of_tiny_ops_are_host_bound_either_side_of_the_line(data: float) -> None:
    verdict = syn.verdict(syn.make_run(""), _tiny(data), data_in_memory=IN_MEMORY)
    assert verdict.category == "host-bound"
    assert verdict.data_as_host == pytest.approx(data)
    assert "sample by sample from memory" in verdict.headline
    assert verdict.more_gpus.startswith("No")
    assert any("counted as host work" in e and "TensorDataset" in e for e in verdict.evidence)


def test_without_in_memory_evidence_the_same_wait_past_the_line_stays_input_bound() -> None:
    verdict = syn.verdict(syn.make_run(""), _tiny(0.26))
    assert verdict.category == "input-bound"
    assert verdict.data_as_host is None


def test_a_wait_that_is_not_in_memory_assembly_stays_input_bound_at_90_percent() -> None:
    verdict = syn.verdict(syn.make_run(""), _tiny(0.9), data_in_memory=None)
    assert verdict.category == "input-bound"


def test_in_memory_data_without_tiny_ops_is_not_called_host_bound() -> None:
    analysis = syn.make_analysis(phase_split=_split(0.3))  # no host figures: ops not tiny
    verdict = syn.verdict(syn.make_run(""), analysis, data_in_memory=IN_MEMORY)
    assert verdict.category == "input-bound" and verdict.data_as_host is None


def test_a_host_sync_past_its_line_stays_sync_bound_beside_in_memory_data() -> None:
    split = _split(0.12)
    steps = tuple(
        dataclasses.replace(st, phase_us={**st.phase_us, "sync": 0.3 * st.duration_us})
        for st in split.steps
    )
    split = dataclasses.replace(
        split,
        steps=steps,
        phase_total_us={**split.phase_total_us, "sync": 0.3 * split.total_us},
        measured=(*split.measured, "sync"),
    )
    analysis = dataclasses.replace(syn.make_analysis(phase_split=split), host=TINY_OPS)
    verdict = syn.verdict(syn.make_run(""), analysis, data_in_memory=IN_MEMORY)
    assert verdict.category == "sync-bound" and verdict.data_as_host is None


def test_the_rules_know_an_in_memory_dataset_and_not_a_sleepy_one() -> None:
    analysis = _tiny(0.21)
    tensor = syn.make_run(TENSOR_CELL)
    why = data_in_memory(tensor, analysis, cell_facts(TENSOR_CELL, None))
    assert why is not None and "TensorDataset" in no_worker_gain(why)
    # A Sleepy dataset's 1 ms a sample is a real wait: 16 ms a batch, workers would hide it.
    sleepy = syn.make_analysis(phase_split=_split(0.9, step_us=18_000.0))
    assert data_in_memory(syn.make_run(SLEEPY_CELL), sleepy, cell_facts(SLEEPY_CELL, None)) is None


def test_the_text_report_says_the_data_wait_is_counted_as_host_work() -> None:
    verdict = syn.verdict(syn.make_run(""), _tiny(0.21), data_in_memory=IN_MEMORY)
    report = dataclasses.replace(syn.make_report(TENSOR_CELL, step_median_s=0.002), verdict=verdict)
    text = render_text(report)
    assert "HOST-BOUND" in text
    assert "Data wait 21% of the step is counted as host work" in text
    assert "Data wait 21% of the step is counted as host work" in verdict_section(report)


# lr_finder_runs' figures (unseen round 8): the model side's overhead under the half line, the
# loader's per-sample indexing beside it (10 points of its small operators are the loader's).
NEAR_LINE = HostOverhead(173.0, 1.0, 0.24, 0.22, 30.0, data_small_share=0.10)


@pytest.mark.parametrize("data", [0.18, 0.22, 0.26])
def test_in_memory_assembly_counts_as_overhead_where_the_model_side_alone_is_under_the_line(
    data: float,
) -> None:
    """24% between operators + 22% small ones read the same program either side of the host
    line from run to run; counted with its in-memory data wait (less the loader's own small
    operators, counted once) it is host-bound in every run, its data wait host work."""
    analysis = dataclasses.replace(syn.make_analysis(phase_split=_split(data)), host=NEAR_LINE)
    verdict = syn.verdict(syn.make_run(""), analysis, data_in_memory=IN_MEMORY)
    assert verdict.category == "host-bound"
    assert verdict.data_as_host == pytest.approx(data)
    assert any("assembly from memory counted as overhead" in e for e in verdict.evidence)


def test_the_same_overhead_with_a_real_wait_or_unplaced_operators_is_judged_as_before() -> None:
    analysis = dataclasses.replace(syn.make_analysis(phase_split=_split(0.26)), host=NEAR_LINE)
    assert syn.verdict(syn.make_run(""), analysis).category == "input-bound"
    unplaced = dataclasses.replace(NEAR_LINE, data_small_share=None)
    analysis = dataclasses.replace(analysis, host=unplaced)
    assert (
        syn.verdict(syn.make_run(""), analysis, data_in_memory=IN_MEMORY).category == "input-bound"
    )


def test_the_tiny_ops_finding_follows_the_verdict_on_in_memory_batches() -> None:
    from gpu_notebook.rules.launch import tiny_ops

    split = dataclasses.replace(_split(0.22), source="trace")
    analysis = dataclasses.replace(syn.make_analysis(phase_split=split), host=NEAR_LINE)
    run = syn.make_run(TENSOR_CELL)
    assert tiny_ops(run, analysis, cell_facts(TENSOR_CELL, None)) is not None
    assert tiny_ops(run, dataclasses.replace(analysis, host=dataclasses.replace(
        NEAR_LINE, data_small_share=None)), cell_facts(TENSOR_CELL, None)) is None  # fmt: skip


HELD_CELL = """
import torch
from torch.utils.data import DataLoader, Dataset
class Held(Dataset):
    def __init__(self):
        self.x, self.y = torch.randn(2048, 32), torch.randn(2048, 1)
    def __len__(self):
        return len(self.x)
    def __getitem__(self, i):
        return self.x[i] * 0.5, self.y[i]
loader = DataLoader(Held(), batch_size=8, num_workers=0)
for x, y in loader:
    loss = model(x).sum()
    loss.backward()
    opt.step()
"""


def _held(batch_s: float, wait: float) -> Analysis:
    """A run of tiny ops whose 40 steps' data wait reads ``batch_s`` a step (each step less
    its wait) and 30% of the step, the steps waiting ``wait`` of their wall time for a core,
    the data phase 30% of that wall time (the wait spread over the phases)."""
    from gpu_notebook.records import RunPhase

    own_step_s = batch_s / 0.3
    whole = RunPhase(
        0.3, 40, batch_s, own_step_s, 0.28, 0.32, wait_share=wait, wall_share=0.3
    )  # fmt: skip
    return dataclasses.replace(_tiny(0.3), run_data=whole)


def _decided(run, analysis: Analysis):
    """The verdict as the report builds it: the rules' in-memory reading and the batch line's
    reach beside it."""
    from gpu_notebook.report.build import decided

    return decided(run, analysis, cell_facts(run.cell_source, None))


@pytest.mark.parametrize("batch_s", [0.0004, 0.0007])
def test_batches_either_side_of_the_in_memory_line_with_the_wait_anywhere_are_too_busy(
    batch_s: float,
) -> None:
    # A custom Dataset over tensors in memory, no workers: a batch of 0.4 ms reads as in-memory
    # assembly (host-bound), 0.7 ms as a data wait (input-bound at 30%). With 80% of the steps'
    # wall time waiting for a core, all of it in the data wait or none of it puts a batch from
    # 0 ms to 2-3.5 ms: the 0.5 ms line lies inside, and the verdict is the machine's.
    from gpu_notebook.words.verdict import word_verdict

    run = syn.make_run(HELD_CELL)
    verdict = word_verdict(_decided(run, _held(batch_s, 0.8)))
    wait = verdict.core_wait
    assert verdict.category == "unknown" and wait is not None and not wait.judged, verdict
    assert wait.phase == "batch" and wait.low <= wait.line < wait.high
    assert {wait.found, wait.other} == {"host-bound", "input-bound"}
    assert wait.found == ("host-bound" if batch_s <= 0.0005 else "input-bound")
    assert any("0.5 ms line" in line for line in verdict.evidence), verdict.evidence
    # The steps mostly ran: the line decides as read.
    light = _decided(run, _held(batch_s, 0.2))
    assert light.category == wait.found and light.core_wait is None


def test_a_dataset_known_to_be_in_memory_is_host_work_at_any_load() -> None:
    run = syn.make_run(TENSOR_CELL)
    verdict = _decided(run, _held(0.0007, 0.8))
    assert verdict.category == "host-bound" and verdict.data_as_host is not None
