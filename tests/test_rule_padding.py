"""The padding rule (rules/padding.py): the reading of the first batches' real tokens (capture/
padding.py, through the real step clock), its finding and range, its fix where the cell shows it
reaches the loop's loader, and its refusal elsewhere."""

from __future__ import annotations

import dataclasses
import time
from collections import UserDict
from typing import Any

import pytest
import torch

from gpu_notebook.capture.padding import PADDING_BATCHES, PaddingReader
from gpu_notebook.capture.stepclock import StepClock
from gpu_notebook.fixes import Patch, Refusal, apply_fix
from gpu_notebook.records import PaddedBatch, PaddingReading
from gpu_notebook.rules.padding import FIX
from gpu_notebook.words.proposals import attach_fixes
from tests.scenarios import synthetic as syn
from tests.test_rules import ids, only, rules_for

# A plain loop whose collate pads each batch of 8 rows (5-20 tokens) to 64 columns.
CELL = """\
import random
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

MAX_LEN = 64
rnd = random.Random(0)
rows = [torch.tensor([rnd.randrange(1, 50) for _ in range(rnd.randint(5, 20))]) for _ in range(48)]


def collate(batch):
    return torch.stack([F.pad(x, (0, MAX_LEN - len(x)), value=0) for x in batch])


torch.manual_seed(0)
embed = torch.nn.Embedding(50, 8, padding_idx=0)
head = torch.nn.Linear(8, 2)
opt = torch.optim.SGD([*embed.parameters(), *head.parameters()], lr=0.1)
loader = DataLoader(rows, batch_size=8, collate_fn=collate)
widths = []
for ids in loader:
    widths.append(ids.shape[1])
    keep = (ids != 0).unsqueeze(-1).float()
    pooled = (embed(ids) * keep).sum(1) / keep.sum(1)
    loss = torch.nn.functional.cross_entropy(head(pooled), ids[:, 0] % 2)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def _reading(longest: int = 16, length: int = 64, pad: int | None = 0) -> PaddingReading:
    batch = PaddedBatch(8, length, longest, 8 * longest // 2, "batch[0]", pad)
    return PaddingReading((batch,) * PADDING_BATCHES, PADDING_BATCHES, 0)


def _run(reading: PaddingReading, cell: str = CELL):
    steps = dataclasses.replace(syn.steps_record(), padding=reading)
    return syn.make_run(cell, steps=steps)


ANALYSIS = syn.make_analysis({"forward": 0.3, "backward": 0.5, "optimizer": 0.2})


def _scope(source: str) -> dict[str, Any]:
    scope: dict[str, Any] = {}
    exec(compile(source, "<cell>", "exec"), scope)
    return scope


# ---- the reading


def test_the_reader_counts_real_tokens_from_a_mask_and_from_trailing_pad_ids() -> None:
    ids = torch.tensor([[5, 6, 7, 0, 0, 0, 0, 0, 0, 0], [5, 6, 7, 8, 9, 0, 0, 0, 0, 0]])
    mask = (ids != 0).long()
    reader = PaddingReader()
    reader.read({"input_ids": ids, "attention_mask": mask, "labels": torch.tensor([0, 1])})
    encoding = UserDict({"input_ids": ids, "attention_mask": mask})  # BatchEncoding's .data
    reader.read(encoding)
    reader.read((ids, torch.tensor([0, 1])))
    reader.read(torch.randn(2, 10))  # no token field: looked at, not read
    assert not reader.wants()  # four batches looked at: no more reads
    reader.read((ids,))
    record = reader.record()
    assert record is not None and record.reads == PADDING_BATCHES
    mask_read, encoding_read, ids_read = record.batches
    assert mask_read == PaddedBatch(2, 10, 5, 8, "attention_mask", None)
    assert encoding_read == mask_read
    assert ids_read == PaddedBatch(2, 10, 5, 8, "batch[0]", 0)


def test_a_batch_already_on_a_device_is_not_read() -> None:
    reader = PaddingReader()
    reader.read({"attention_mask": torch.ones(4, 32, dtype=torch.long, device="meta")})
    record = reader.record()
    assert record is not None and record.on_device == 1 and record.batches == ()


def test_the_step_clock_reads_the_first_batches_the_loop_receives() -> None:
    scope: dict[str, Any] = {}
    clock = StepClock(time.perf_counter_ns())
    clock.install()
    try:
        exec(compile(CELL, "<cell>", "exec"), scope)
    finally:
        clock.uninstall()
    padding = clock.record().padding
    assert padding is not None and padding.reads == PADDING_BATCHES
    assert [b.length for b in padding.batches] == [64] * PADDING_BATCHES
    assert all(b.pad_value == 0 and 5 <= b.longest <= 20 for b in padding.batches)
    assert scope["widths"] == [64] * 6  # nothing of the loop changed


def test_lightning_dict_batches_are_read_through_the_step_clock() -> None:
    pytest.importorskip("lightning")
    import logging

    import lightning as L
    from torch.utils.data import DataLoader

    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)

    def collate(rows: list[int]) -> dict[str, torch.Tensor]:
        mask = torch.zeros(len(rows), 32, dtype=torch.long)
        for i, n in enumerate(rows):
            mask[i, :n] = 1
        return {"input_ids": mask * 3, "attention_mask": mask}

    class Net(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(4, 2)

        def training_step(self, batch: Any, batch_idx: int) -> Any:
            return self.embed(batch["input_ids"]).mean()

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    trainer = L.Trainer(max_steps=6, accelerator="cpu", devices=1, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, num_sanity_val_steps=0)  # fmt: skip
    clock = StepClock(time.perf_counter_ns())
    clock.install()
    try:
        trainer.fit(Net(), DataLoader([3, 5, 4, 6] * 6, batch_size=4, collate_fn=collate))
    finally:
        clock.uninstall()
    padding = clock.record().padding
    assert padding is not None and padding.batches
    assert all(b == PaddedBatch(4, 32, 6, 18, "attention_mask") for b in padding.batches)


# ---- the finding


def test_padding_to_a_fixed_length_is_found_with_its_range_and_the_collate_patched() -> None:
    f = only(rules_for(_run(_reading()), ANALYSIS), "data.padding")
    assert f.fix_id == FIX.fix_id and f.fix_params == {"length": 64}
    # Forward+backward 80% of the step; a quarter of the columns kept: linear 1/(1-.8*.75),
    # the squares' 1/(1-.8*(1-1/16)).
    assert f.gain_low == pytest.approx(1 / (1 - 0.8 * 0.75))
    assert f.gain_bound == pytest.approx(1 / (1 - 0.8 * (1 - 1 / 16)))
    assert f.line == 12  # the collate's def (the %%gpucheck line is line 1)
    (fixed,) = attach_fixes([f], CELL)
    assert fixed.proposal is not None and fixed.proposal.source_after is not None
    after = fixed.proposal.source_after
    assert "longest = min(MAX_LEN, max(len(x) for x in batch))" in after
    assert "F.pad(x, (0, longest - len(x)), value=0)" in after
    # The patched cell trains on the same rows: each batch as wide as its longest, same loss.
    before, patched = _scope(CELL), _scope(after)
    assert set(before["widths"]) == {64}
    assert max(patched["widths"]) <= 20 and len(patched["widths"]) == 6
    assert patched["loss"].item() == pytest.approx(before["loss"].item(), rel=1e-5)


def test_the_high_end_reads_the_optimizers_share_over_the_run_not_the_windows() -> None:
    """A profiled window inflates an update's many small operators (13% of the padded
    transformer's window step; thread time put the patched step at 1/7): where the step clock
    timed the optimizer over the run, its least share there is what does not scale."""
    from gpu_notebook.records import RunPhase

    over_run = RunPhase(0.02, 40, 0.0002, 0.01, low_share=0.01, high_share=0.03)
    analysis = dataclasses.replace(ANALYSIS, run_optimizer=over_run)
    f = only(rules_for(_run(_reading()), analysis), "data.padding")
    assert f.gain_bound == pytest.approx(1 / (1 - 0.99 * (1 - 1 / 16)))
    assert f.gain_low == pytest.approx(1 / (1 - 0.8 * 0.75))  # the window's forward+backward


def test_the_low_end_keeps_the_steps_wait_for_a_core() -> None:
    """On a loaded machine the step's wait for a core need not shrink with its work (per-operator
    waits of a parallel op): the low end reads forward+backward's share of the wall time."""
    waited = dataclasses.replace(ANALYSIS.phases, waited_share=0.5)
    f = only(
        rules_for(_run(_reading()), dataclasses.replace(ANALYSIS, phases=waited)), "data.padding"
    )
    assert f.gain_low == pytest.approx(1 / (1 - 0.4 * 0.75))
    assert f.gain_bound == pytest.approx(1 / (1 - 0.8 * (1 - 1 / 16)))  # own time: may shrink


@pytest.mark.parametrize(
    "reading",
    [
        _reading(longest=56),  # most of each batch is real: not worth a word
        _reading(longest=60, pad=7),  # ids ending in a shared token over 4 columns only
    ],
)
def test_no_finding_where_padding_costs_little_or_is_not_shown(reading) -> None:
    assert "data.padding" not in ids(rules_for(_run(reading), ANALYSIS))


def test_no_finding_without_a_reading() -> None:
    assert "data.padding" not in ids(rules_for(syn.make_run(CELL), ANALYSIS))


# ---- the fix's reach


TOKENIZER_IN_COLLATE = """\
def collate(batch):
    return tokenizer([t for t, _ in batch], padding="max_length", max_length=64,
                     truncation=True, return_tensors="pt")

loader = DataLoader(data, batch_size=8, collate_fn=collate)
"""


def test_a_tokenizer_in_the_loaders_collate_pads_to_the_longest() -> None:
    patched = apply_fix(FIX, TOKENIZER_IN_COLLATE, length=64)
    assert isinstance(patched, Patch)
    assert 'padding="longest", max_length=64' in patched.source_after


def test_a_collator_given_to_the_trainer_pads_to_the_longest() -> None:
    cell = (
        'collator = DataCollatorWithPadding(tok, padding="max_length", max_length=64)\n'
        "Trainer(model=model, args=args, train_dataset=ds, data_collator=collator).train()\n"
    )
    patched = apply_fix(FIX, cell, length=64)
    assert isinstance(patched, Patch)
    assert 'DataCollatorWithPadding(tok, padding="longest", max_length=64)' in patched.source_after


def test_a_dataset_padded_before_batching_is_a_refusal_that_names_the_line() -> None:
    cell = (
        'enc = tokenizer(texts, padding="max_length", max_length=64, return_tensors="pt")\n'
        "loader = DataLoader(TensorDataset(enc['input_ids']), batch_size=8)\n"
    )
    refused = apply_fix(FIX, cell, length=64)
    assert isinstance(refused, Refusal)
    assert "line 1" in refused.reason and "DataCollatorWithPadding" in refused.reason


def test_a_collate_no_loader_is_given_is_not_patched() -> None:
    cell = CELL.replace("collate_fn=collate", "collate_fn=None")
    assert isinstance(apply_fix(FIX, cell, length=64), Refusal)


def test_a_collate_padding_to_another_length_is_not_patched() -> None:
    # The batches read were 128 wide: this collate's 64 is not what the loop got.
    assert isinstance(apply_fix(FIX, CELL, length=128), Refusal)


@pytest.mark.parametrize(
    ("collate", "kept"),
    [
        # the length as a parameter's default: the loader calls collate(batch)
        (
            "def collate(batch, max_len=MAX_LEN):\n"
            "    return torch.stack([F.pad(x, (0, max_len - len(x)), value=0) for x in batch])\n",
            "longest = min(max_len, max(len(x) for x in batch))",
        ),
        # the number itself
        (
            "def collate(batch):\n"
            "    out = torch.zeros(len(batch), 64, dtype=torch.long)\n"
            "    for i, x in enumerate(batch):\n"
            "        out[i, : len(x)] = x\n"
            "    return out\n",
            "longest = min(64, max(len(x) for i, x in enumerate(batch)))",
        ),
    ],
)
def test_a_collate_padding_by_a_parameter_or_a_number_is_patched_and_trains(collate, kept):
    cell = CELL.replace(
        "def collate(batch):\n"
        "    return torch.stack([F.pad(x, (0, MAX_LEN - len(x)), value=0) for x in batch])\n",
        collate,
    )
    patched = apply_fix(FIX, cell, length=64)
    assert isinstance(patched, Patch), patched
    assert kept in patched.source_after
    before, after = _scope(cell), _scope(patched.source_after)
    assert set(before["widths"]) == {64} and max(after["widths"]) <= 20
    assert after["loss"].item() == pytest.approx(before["loss"].item(), rel=1e-5)
