"""A host-bound CPU step whose overhead is mostly the cell's own Python outside the model says
so, not "the ops are too small" (unseen round 8, save_every_step).

torch.save of model and Adam state every step: the trace read the save as "unattributed" (Python
outside any operator, outside the model) 42-48% of a step whose host overhead was 58%, and the
verdict sent the user to bigger batches and torch.compile, neither of which touches the save.
Seeded step splits here, no timing.
"""

from __future__ import annotations

import dataclasses

from gpu_notebook.records import Analysis, HostOverhead
from tests.scenarios import synthetic as syn

CPU = ("data", "forward", "backward", "optimizer", "sync", "other", "unattributed")
# 86 ops of 6 us a step, Python between them 57%: host_bound() holds (the save's case).
SAVE_HOST = HostOverhead(86.0, 6.0, 0.57, 0.01, 30.0)


def _analysis(shares: dict[str, float]) -> Analysis:
    split = syn.phases(shares, measured=CPU)
    return dataclasses.replace(syn.make_analysis(phase_split=split), host=SAVE_HOST)


def test_python_outside_the_model_as_most_of_the_overhead_is_the_cells_own_host_work() -> None:
    verdict = syn.verdict(
        syn.make_run(""),
        _analysis({"unattributed": 0.45, "backward": 0.2, "optimizer": 0.25}),
    )
    assert verdict.category == "host-bound"
    assert "own Python" in verdict.headline and "45%" in verdict.headline
    assert "too small" not in verdict.headline
    assert "torch.compile" not in verdict.more_gpus


def test_the_same_overhead_inside_the_model_still_reads_as_ops_too_small() -> None:
    verdict = syn.verdict(
        syn.make_run(""),
        _analysis({"unattributed": 0.05, "backward": 0.4, "optimizer": 0.2}),
    )
    assert verdict.category == "host-bound"
    assert "too small" in verdict.headline


def test_operators_outside_the_model_are_not_the_cells_python() -> None:
    """A frozen teacher's no_grad forward reads "other" (operators, not Python): a faster
    device shortens it, so it never reads as the cell's own Python."""
    verdict = syn.verdict(
        syn.make_run(""),
        _analysis({"other": 0.9, "backward": 0.03, "optimizer": 0.03}),
    )
    assert "own Python" not in verdict.headline
