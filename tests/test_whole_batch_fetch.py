"""A loader whose dataset already builds each batch in one call is not "sample by sample".

Unseen round 20's batch_sampler_fetch: ``DataLoader(ds, sampler=BatchSampler(RandomSampler(ds),
64, False), batch_size=None)`` (torch's documented batched indexing) was told its batches are
"assembled sample by sample from memory" and advised exactly that loader. Two shapes: the cell
writes the BatchSampler-as-sampler loader (read from its text), and a dataset of the user's own
class with ``__getitems__`` behind a batching loader (read from the live, real DataLoader). A
TensorDataset at batch 4 is still per-sample assembly. Seeded step splits, no timing.
"""

from __future__ import annotations

import dataclasses

import torch
from torch.utils.data import BatchSampler, DataLoader, Dataset, RandomSampler, TensorDataset

from gpu_notebook.cell.live import live_facts
from gpu_notebook.records import Analysis, HostOverhead, PhaseBreakdown, StepPhases
from gpu_notebook.rules import cell_facts
from gpu_notebook.rules.input_pipeline import data_in_memory, in_memory_batches
from tests.scenarios import synthetic as syn

TINY_OPS = HostOverhead(40.0, 8.0, 0.3, 0.4, 30.0)

SAMPLER_CELL = """
import torch
from torch.utils.data import BatchSampler, DataLoader, Dataset, RandomSampler
class Table(Dataset):
    def __init__(self):
        self.x, self.y = torch.randn(2048, 32), torch.randn(2048, 1)
    def __len__(self):
        return len(self.x)
    def __getitem__(self, idx):
        return self.x[idx], self.y[idx]
ds = Table()
loader = DataLoader(ds, sampler=BatchSampler(RandomSampler(ds), 64, drop_last=False), batch_size=None)
for x, y in loader:
    loss = model(x).sum()
    loss.backward()
    opt.step()
"""
LIVE_CELL = """
for x, y in loader:
    loss = model(x).sum()
    loss.backward()
    opt.step()
"""
TENSOR_CELL = """
import torch
from torch.utils.data import DataLoader, TensorDataset
loader = DataLoader(TensorDataset(torch.randn(512, 16), torch.randn(512, 1)), batch_size=4)
for x, y in loader:
    loss = model(x).sum()
    loss.backward()
    opt.step()
"""


class Rows(Dataset):
    """A user's dataset that builds a batch in one indexing op (``__getitems__``)."""

    def __init__(self) -> None:
        self.x, self.y = torch.randn(256, 8), torch.randn(256, 1)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int):
        return self.x[i], self.y[i]

    def __getitems__(self, idx: list[int]):
        t = torch.tensor(idx)
        return [(self.x[t], self.y[t])]  # one "sample": the batch, collated by collate_fn

    @staticmethod
    def collate(items):
        return items[0]


def _tiny(data: float = 0.21, n: int = 12, step_us: float = 400.0) -> Analysis:
    """Steady steps of tiny ops, ``data`` of each in the loader: 84 us a batch, under a
    worker's handoff (the in-memory line)."""
    steps = tuple(
        StepPhases(
            i, i * step_us, step_us, {"data": data * step_us, "forward": (1 - data) * step_us}
        )
        for i in range(n)
    )
    split = PhaseBreakdown(
        source="hooks",
        steps=steps,
        total_us=step_us * n,
        phase_total_us={"data": data * step_us * n, "forward": (1 - data) * step_us * n},
        measured=("data", "forward", "backward", "optimizer", "other"),
    )
    return dataclasses.replace(syn.make_analysis(phase_split=split), host=TINY_OPS)


def _verdict(cell: str, facts):
    from gpu_notebook.report.build import decided
    from gpu_notebook.words.verdict import word_verdict

    return word_verdict(decided(syn.make_run(cell), _tiny(), facts))


def test_a_batch_sampler_as_the_sampler_with_batch_size_none_is_read_as_whole_batches() -> None:
    facts = cell_facts(SAMPLER_CELL, None)
    assert [c.unbatched for c in facts.loaders] == [True]
    why = data_in_memory(syn.make_run(SAMPLER_CELL), _tiny(), facts)
    assert why is not None and why.whole_batches  # workers still would not pay
    # Nothing per-sample to remove: no "index whole batches" finding for the loader it advised.
    assert in_memory_batches(syn.make_run(SAMPLER_CELL), _tiny(), facts) is None
    verdict = _verdict(SAMPLER_CELL, facts)
    assert verdict.category == "host-bound"
    assert "sample by sample" not in verdict.headline and "in one call" in verdict.headline
    assert "Index whole batches" not in verdict.more_gpus
    assert "already indexed whole" in verdict.more_gpus


def test_a_users_dataset_with_getitems_read_from_the_live_loader() -> None:
    ds = Rows()
    loader = DataLoader(ds, batch_size=16, shuffle=True, collate_fn=Rows.collate)
    x, _y = next(iter(loader))  # the real loader does hand __getitems__ the batch
    assert x.shape == (16, 8)
    facts = cell_facts(LIVE_CELL, {"loader": loader, "torch": torch})
    live = facts.live.loader("loader")
    assert live is not None and live.whole_batch_fetch
    run = syn.make_run(LIVE_CELL)
    why = data_in_memory(run, _tiny(), facts)
    assert why is not None and why.whole_batches
    assert in_memory_batches(run, _tiny(), facts) is None
    assert "sample by sample" not in _verdict(LIVE_CELL, facts).headline


def test_per_sample_loaders_are_still_read_as_assembled_sample_by_sample() -> None:
    facts = cell_facts(TENSOR_CELL, None)
    why = data_in_memory(syn.make_run(TENSOR_CELL), _tiny(), facts)
    assert why is not None and not why.whole_batches
    assert in_memory_batches(syn.make_run(TENSOR_CELL), _tiny(), facts) is not None
    verdict = _verdict(TENSOR_CELL, facts)
    assert "sample by sample from memory" in verdict.headline
    assert "Index whole batches" in verdict.more_gpus
    # Live objects of the same shapes: a BatchSampler passed as batch_sampler= (auto-collation
    # on: __getitem__ per index) and a plain TensorDataset are not whole-batch fetches.
    ds = TensorDataset(torch.randn(64, 4))
    per_index = DataLoader(ds, batch_sampler=BatchSampler(RandomSampler(ds), 8, drop_last=False))
    whole = DataLoader(ds, sampler=BatchSampler(RandomSampler(ds), 8, False), batch_size=None)
    read = live_facts({"a": per_index, "b": whole, "torch": torch}, ["a", "b"], made_before=True)
    assert [ld.whole_batch_fetch for ld in read.loaders] == [False, True]


def test_the_text_report_does_not_say_sample_by_sample_for_whole_batches() -> None:
    from gpu_notebook.views.text import render_text

    verdict = _verdict(SAMPLER_CELL, cell_facts(SAMPLER_CELL, None))
    report = dataclasses.replace(
        syn.make_report(SAMPLER_CELL, step_median_s=0.0004), verdict=verdict
    )
    text = render_text(report)
    assert "Data wait 21% of the step is counted as host work" in text
    assert "sample by sample" not in text


def test_a_bigger_batch_refuses_a_loader_that_does_not_batch() -> None:
    """`gpucheck run --try-fixes` on batch_sampler_fetch patched `batch_size=None` into
    `batch_size=None * 2` (a TypeError, "BROKE THE SCRIPT"): the sampler makes the batches,
    so the patch refuses and names it, whether the sampler is written inline or by name."""
    from gpu_notebook.fixes import Refusal, apply_fix

    for sampler in ("BatchSampler(RandomSampler(ds), 64, drop_last=False)", "bs"):
        source = SAMPLER_CELL.replace(
            "loader = DataLoader(ds, sampler=BatchSampler(RandomSampler(ds), 64, drop_last=False)",
            f"bs = BatchSampler(RandomSampler(ds), 64, drop_last=False)\n"
            f"loader = DataLoader(ds, sampler={sampler}",
        )
        result = apply_fix("bigger_batch", source, factor=2)
        assert isinstance(result, Refusal), result
        assert "batch_size=None" in result.reason and f"sampler={sampler}" in result.reason
    # A loader that batches is still patched.
    assert not isinstance(apply_fix("bigger_batch", TENSOR_CELL, factor=2), Refusal)
