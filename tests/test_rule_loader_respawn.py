"""Issue 26 (unseen round 9): the patch of input.remade_loader, a DataLoader with workers built
anew every epoch.

``for epoch in range(25): loader = DataLoader(ds, ..., num_workers=2)`` starts two worker
processes every epoch; the run stalled every 20 steps (each epoch's first batch), 63% of its
time in those stalls. input.remade_loader names it with no patch; the loader moved above the
loop with persistent_workers=True measured 2.27x. Mechanisms: which loaders can move, the
finding's fix on a seeded run shape, the patch, and a real small run of the patched loop whose
loader starts its workers once.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from gpu_notebook.cell.scan import scan_source
from gpu_notebook.fixes.catalog import apply_fix
from gpu_notebook.fixes.records import Patch, Refusal
from gpu_notebook.records import RunShape, StallPattern
from gpu_notebook.rules import RULE_FIXES, run_rules
from gpu_notebook.rules.input_pipeline import rebuilt_loaders
from gpu_notebook.words import word_findings as words
from tests.scenarios import synthetic as syn

CELL = """\
for epoch in range(3):
    loader = DataLoader(ds, batch_size=4, shuffle=True, num_workers=2)
    for x, y in loader:
        loss = model(x).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def _built(cell: str) -> list[bool]:
    facts = scan_source(cell)
    assert facts.tree is not None
    return [b.movable for b in rebuilt_loaders(facts.tree, facts.loaders)]


def test_a_loader_assigned_in_the_epoch_loop_is_rebuilt_every_epoch():
    assert _built(CELL) == [True]
    # Its arguments read the epoch: found, not movable (no patch).
    assert _built(CELL.replace("DataLoader(ds,", "DataLoader(parts[epoch],")) == [False]


@pytest.mark.parametrize(
    "cell",
    [
        CELL.replace("num_workers=2)", "num_workers=2, persistent_workers=True)"),
        # Built once above the loop: nothing to move.
        "loader = DataLoader(ds, num_workers=2)\n"
        + CELL.replace(
            "    loader = DataLoader(ds, batch_size=4, shuffle=True, num_workers=2)\n", ""
        ),
    ],
)
def test_a_loader_built_once_or_persistent_is_not_rebuilt(cell):
    assert _built(cell) == []


def _finding(cell: str, *, phase: str = "data", share: float = 0.3):
    run = syn.make_run(cell)
    stalls = StallPattern((20, 40, 60), 3, 20, 0.2, 0.6, share, phase, 0.9)
    shape = RunShape(60, 2.0, 0.01, 0.012, 1.2, 0.01, 0.01, 0.0, stalls=stalls)
    analysis = dataclasses.replace(syn.make_analysis({"data": 0.4, "forward": 0.3}), shape=shape)
    found = {f.rule_id: f for f in words(run_rules(run, analysis, syn.VERDICT))}
    return found.get("input.remade_loader")


def test_a_loader_assigned_in_the_epoch_loop_gets_the_patch():
    f = _finding(CELL)
    assert f is not None and f.fix_id == "persistent_loader"
    assert f.gain_bound == pytest.approx(1 / (1 - 0.3))
    assert f.line == 3  # the DataLoader line, under the cell's %%gpucheck line
    assert f.fix.startswith("Build the loader once") and "persistent_workers=True" in f.fix
    assert _finding(CELL.replace(", num_workers=2", "")) is None


def test_stalls_in_making_the_iterator_are_the_start_up_those_of_the_model_are_not():
    # iter(loader) forks the workers before the first batch is asked for: its time is the
    # step's rest ("other"), most of the stall under load (workers_respawn at load 16-19:
    # 54-59% "other", and the finding read info, unbounded). The model's phases are not the
    # loader's start-up.
    f = _finding(CELL, phase="other")
    assert f is not None and f.severity == "high" and f.gain_bound == pytest.approx(1 / 0.7)
    g = _finding(CELL, phase="backward")
    assert g is not None and g.severity == "info" and g.gain_bound is None


def test_a_loader_that_reads_the_epoch_gets_words_but_no_patch():
    f = _finding(CELL.replace("DataLoader(ds,", "DataLoader(parts[epoch],"))
    assert f is not None and f.fix_id is None
    assert f.fix.startswith("No patch")


def test_the_patch_builds_the_loader_once_with_persistent_workers():
    patch = apply_fix(RULE_FIXES["persistent_loader"], CELL)
    assert isinstance(patch, Patch), patch
    body = patch.source_after.splitlines()[1:]
    assert body[0] == (
        "loader = DataLoader(ds, batch_size=4, shuffle=True, num_workers=2, persistent_workers=True)"
    )
    assert body[1] == "for epoch in range(3):"
    assert "    loader = DataLoader" not in patch.source_after
    refused = apply_fix(
        RULE_FIXES["persistent_loader"], CELL.replace("DataLoader(ds,", "DataLoader(parts[epoch],")
    )
    assert isinstance(refused, Refusal)


def test_the_patched_loop_starts_its_workers_once():
    """A real run of both cells (2 workers, 3 epochs): the original loop makes a worker
    iterator each epoch; the patched one makes one and keeps it."""
    from torch.utils.data import DataLoader, TensorDataset

    def iterators(source: str) -> int:
        made: list[int] = []

        class Counting(DataLoader):
            def _get_iterator(self):
                made.append(1)
                return super()._get_iterator()

        model = torch.nn.Linear(3, 1)
        ns = {
            "DataLoader": Counting,
            "ds": TensorDataset(torch.randn(8, 3), torch.randn(8)),
            "model": model,
            "opt": torch.optim.SGD(model.parameters(), lr=0.1),
        }
        exec(source, ns)
        return len(made)

    patch = apply_fix(RULE_FIXES["persistent_loader"], CELL)
    assert isinstance(patch, Patch)
    assert iterators(CELL) == 3
    assert iterators(patch.source_after) == 1


def test_the_bound_reads_the_stalls_by_wall_time_where_own_time_reads_less():
    """The workers' start waits for cores on a busy machine while the loop sleeps on their
    queue: own time read 42% of the run in the stalls ("up to 1.74x"), wall time 84%, and the
    fix measured 2.27x at load 15. The bound takes the larger."""
    from gpu_notebook.records import OwnTime

    run = syn.make_run(CELL)
    wall = StallPattern((20, 40), 2, 20, 0.2, 0.6, 0.84, "data", 0.6)
    own = StallPattern((20, 40), 2, 20, 0.1, 0.3, 0.42, "data", 0.6)
    shape = RunShape(60, 2.0, 0.01, 0.012, 1.2, 0.01, 0.01, 0.0, stalls=wall)
    shape = dataclasses.replace(shape, own=OwnTime(0.005, 0.005, 0.005, 1.0, None, own, 0.5))
    analysis = dataclasses.replace(syn.make_analysis({"data": 0.4, "forward": 0.3}), shape=shape)
    found = {f.rule_id: f for f in words(run_rules(run, analysis, syn.VERDICT))}
    assert found["input.remade_loader"].gain_bound == pytest.approx(1 / (1 - 0.84))
