"""Memory that rises only where a larger batch than any before arrives is the allocator's, no leak.

Seen (unseen round 21, benchmarks/unseen_programs/stft_per_item_ctc.py): variable-length
utterances padded to each batch's longest, three epochs, 112 steps. RSS rose as longer batches
first arrived and was still rising in the run's later half (0.65 of the line's rate: a shuffled
run still meets new longest batches there), so the later-half check (test_memcreep_levels_off)
kept "[medium] Memory grows every step"; by hand the script plateaus after epoch 3. The step
clock now keeps the steps whose batch set a new largest size (capture/batch_highs.py), and a
creep must also grow between those steps (MemoryTrend.between_highs_bytes_per_step): a leak
grows every step, the allocator only when it meets a bigger batch.
"""

from __future__ import annotations

import dataclasses
from collections import UserDict

import torch

from gpu_notebook.analysis.run_trend import run_shape
from gpu_notebook.capture.batch_highs import HIGHS_KEPT, BatchHighs
from gpu_notebook.records import BatchHighsReading, StepMemory
from gpu_notebook.report.build import build_report
from gpu_notebook.rules.run_shape import MEMORY_LATE_SHARE, MEMORY_R2, creeps
from tests.test_machine import _run
from tests.test_run_shape_cells import run as run_cell

MIB = 2**20
STEPS = 150
HIGHS = (10, 25, 45, 70, 100, 135)  # new longest batches, still coming in the later half


def _with(points, highs: BatchHighsReading | None):
    run = _run([0.1] * STEPS, lambda t: 0.0, threads=1)
    memory = tuple(StepMemory(i, rss) for i, rss in points)
    steps = dataclasses.replace(run.steps, memory=memory, batch_highs=highs)
    return dataclasses.replace(run, steps=steps)


def _rss(run):
    shape = run_shape(run)
    assert shape is not None
    return next(m for m in shape.memory if m.kind == "rss")


def _flagged(run) -> bool:
    return any(f.rule_id == "run.memory_creep" for f in build_report(run).findings)


def _wobble(i: int) -> int:
    return ((i * 7919) % 5) * 64 * 1024


def _allocator(leak_bytes_per_step: int = 0):
    return [
        (
            i,
            400 * MIB
            + sum(6 * MIB for h in HIGHS if i >= h)
            + i * leak_bytes_per_step
            + _wobble(i),
        )
        for i in range(0, STEPS, 2)
    ]


def _reading(steps=HIGHS, complete=True) -> BatchHighsReading:
    return BatchHighsReading(steps=(0, *steps), reads=STEPS, sized=STEPS, complete=complete)


def test_growth_only_at_new_largest_batches_is_no_creep():
    points = _allocator()
    # Without the batches' sizes: the line reads straight and its later half keeps growing,
    # so main (and a run whose batches hold no plain tensor) flags it.
    unsized = _rss(_with(points, None))
    assert unsized.r2 >= MEMORY_R2 and unsized.late_bytes_per_step is not None
    assert unsized.late_bytes_per_step >= MEMORY_LATE_SHARE * unsized.bytes_per_step
    assert unsized.between_highs_bytes_per_step is None and creeps(unsized)
    assert _flagged(_with(points, None))
    # With them: between the new highs nothing grew.
    sized = _rss(_with(points, _reading()))
    assert sized.between_highs_bytes_per_step is not None
    assert abs(sized.between_highs_bytes_per_step) < 0.1 * sized.bytes_per_step
    assert not creeps(sized)
    assert not _flagged(_with(points, _reading()))


def test_a_leak_beside_growing_batches_is_still_a_creep():
    run = _with(_allocator(leak_bytes_per_step=300 * 1024), _reading())
    trend = _rss(run)
    assert trend.between_highs_bytes_per_step is not None
    assert trend.between_highs_bytes_per_step >= MEMORY_LATE_SHARE * trend.bytes_per_step
    assert creeps(trend) and _flagged(run)


def test_batches_that_grow_all_run_long_or_highs_past_the_bound_say_nothing():
    points = _allocator()
    # A curriculum that lengthens every few steps: few stretches without a high are left.
    every = tuple(range(1, STEPS, 3))
    assert _rss(_with(points, _reading(every))).between_highs_bytes_per_step is None
    # Highs that outran the bound were not all kept: no stretch is known to hold none.
    assert _rss(_with(points, _reading(complete=False))).between_highs_bytes_per_step is None


def test_the_reader_sizes_plain_tensors_of_every_batch_shape():
    class Encoding(UserDict):  # Hugging Face's BatchEncoding keeps its fields in .data
        pass

    class Record:  # a batch object of the user's: its attributes are never read
        @property
        def data(self):
            raise AssertionError("read a property of the user's")

    class Sub(torch.Tensor):
        pass

    reader = BatchHighs()
    batches = [
        torch.zeros(4, 10),  # 40
        (torch.zeros(4, 10), torch.zeros(4)),  # 44: a new high
        [torch.zeros(4, 10), "ids"],  # 40
        {"input_ids": torch.zeros(4, 20, dtype=torch.long), "labels": torch.zeros(4)},  # 84
        Encoding(input_ids=torch.zeros(4, 21), attention_mask=torch.zeros(4, 21)),  # 168
        torch.zeros(4, 100).as_subclass(Sub),  # a subclass: not read
        ("no", "tensors"),
        Record(),
        {"x": torch.zeros(4, 42)},  # 168: not 1% over
        {"x": torch.zeros(4, 43)},  # 172
    ]
    for step, batch in enumerate(batches):
        reader.read(step, batch)
    got = reader.record()
    assert got is not None
    assert got.steps == (0, 1, 3, 4, 9)
    assert (got.reads, got.sized, got.complete) == (10, 7, True)
    assert BatchHighs().record() is None  # no batch sized: nothing said

    bounded = BatchHighs()
    for step in range(HIGHS_KEPT + 10):
        bounded.read(step, torch.zeros(int(100 * 1.02**step)))
    kept = bounded.record()
    assert kept is not None and len(kept.steps) == HIGHS_KEPT and not kept.complete


PADDED = """
lengths = [8 + (i * 37) % 50 for i in range(48)]
class Utterances(Dataset):
    def __len__(self):
        return len(lengths)
    def __getitem__(self, i):
        return torch.randn(lengths[i]), torch.randn(1)
def pad(items):
    n = max(len(x) for x, _ in items)
    return (torch.stack([nn.functional.pad(x, (0, n - len(x))) for x, _ in items]),
            torch.stack([y for _, y in items]))
model = nn.Linear(1, 1); opt = torch.optim.SGD(model.parameters(), lr=0.01)
loader = DataLoader(Utterances(), batch_size=4, collate_fn=pad, shuffle=False)
for epoch in range(2):
    for x, y in loader:
        loss = ((model(x.mean(1, keepdim=True)) - y) ** 2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
"""


def test_a_real_cell_keeps_the_steps_whose_padded_batch_was_the_longest_yet(ip):
    rep = run_cell(ip, PADDED)
    highs = rep.run.steps.batch_highs
    assert highs is not None and highs.complete
    assert highs.reads == highs.sized == 24  # two epochs of 12 batches
    lengths = [8 + (i * 37) % 50 for i in range(48)]
    sizes = [4 * max(lengths[b * 4 : b * 4 + 4]) + 4 for b in range(12)] * 2
    expected, largest = [], 0
    for step, size in enumerate(sizes):
        if size > largest * 1.01:
            expected.append(step)
            largest = size
    assert highs.steps == tuple(expected)
    assert expected[-1] < 12  # the second epoch brings no new high
