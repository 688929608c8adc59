"""Memory read often enough, and fitted after the first epoch, before a rise is called a leak.

Seen (unseen round 21, benchmarks/unseen_programs/stft_per_item_ctc.py): variable-length
utterances padded per batch, 3 epochs of 40 steps. malloc's heap grew while the data's sizes
were first met (+55 MiB in epoch 1, +10 in epoch 2, ~0 in epoch 3), read every 16th step: 8
readings, the first one at step 0, and a line through them read "[medium] Memory grows every
step". Now the step clock reads memory at every step up to ``MEMORY_READINGS`` readings, then
thins them (capture/stepclock, capture/session), and where the run has epochs behind its first
(``loader_starts``) the line is fitted after it (analysis/memory_cadence.fit_start): a leak
keeps its rate in every epoch, growth while every size is met for the first time does not.
"""

from __future__ import annotations

import dataclasses
import itertools

from gpu_notebook.analysis.memory_cadence import fit_start
from gpu_notebook.records import StepMemory
from gpu_notebook.rules.run_shape import MEMORY_R2, creeps
from tests.test_machine import _run
from tests.test_memcreep_levels_off import MIB, STEPS, _flagged, _noise, _rss_trend
from tests.test_run_shape_cells import run as run_cell

EPOCHS = (50, 100)  # 3 epochs of 50 steps: the iterators' first batches


def _with_memory(points: list[tuple[int, int]], starts: tuple[int, ...] = EPOCHS):
    run = _run([0.1] * STEPS, lambda t: 0.0, threads=1)
    memory = tuple(StepMemory(i, rss) for i, rss in points)
    steps = dataclasses.replace(run.steps, memory=memory, loader_starts=starts)
    return dataclasses.replace(run, steps=steps)


def _staircase(i: int, rises: dict[int, float]) -> int:
    """malloc's heap stepping up by ``rises[step]`` MiB where a new mix of sizes first came."""
    return 400 * MIB + int(sum(mib for at, mib in rises.items() if i >= at) * MIB) + _noise(i)


# Fragmentation that slows: 24 MiB over epoch 1, 8 MiB over epoch 2, 6 MiB over epoch 3, each
# epoch's rise in jumps at the batches that brought new sizes (no batch highs recorded: the
# padded length is near its longest from the first batches, as in stft_per_item_ctc).
SLOWING = {
    **{s: 4.0 for s in range(5, 50, 8)},
    **{s: 8 / 6 for s in range(53, 100, 8)},
    **{s: 1.0 for s in range(103, 150, 8)},
}


def test_fragmentation_that_slows_each_epoch_is_no_creep():
    points = [(i, _staircase(i, SLOWING)) for i in range(STEPS)]
    run = _with_memory(points)
    trend = _rss_trend(run)
    assert trend.first_step == EPOCHS[0]  # fitted after the first epoch
    assert trend.bytes_per_step * (trend.last_step - trend.first_step) < 16 * MIB
    assert not creeps(trend)
    assert not _flagged(run)
    # The same readings with no epoch known (a generator's loop): main's line from the first
    # tenth reads straight, grows past the level, and its later half keeps over half its rate.
    alone = _rss_trend(_with_memory(points, starts=()))
    assert alone.first_step == STEPS // 10
    assert alone.r2 >= MEMORY_R2 and alone.late_bytes_per_step is not None
    assert alone.late_bytes_per_step >= 0.5 * alone.bytes_per_step


# stft_per_item_ctc's RSS, MiB at each of its 120 steps (3 epochs of 40; profiled windows at
# steps 2-4 and 99-101), one captured run of five: +58 MiB over epoch 1, +10 over epoch 2,
# +2 over epoch 3 end to end, with a hump at steps 89-98 that the second window's gap cut off.
STFT_RUN = (
    [423, 433, 435, 438, 442, 447, 448, 451, 452, 452, 453, 454, 454, 454, 456, 463, 463, 463]
    + [464, 461, 463, 467, 467, 467, 467, 466, 470, 470, 474, 473, 476, 475, 478, 481, 481, 481]
    + [487, 487, 487, 481, 481, 481, 481, 481, 481, 481, 481, 481, 481, 482, 482, 483, 483, 483]
    + [484, 484, 485, 483, 485, 489, 489, 486, 486, 489, 487, 497, 497, 497, 487, 487, 488, 488]
    + [488, 488, 488, 490, 491, 492, 491, 490, 498, 498, 495, 501, 498, 495, 493, 495, 497, 506]
    + [506, 498, 498, 505, 505, 500, 500, 500, 504]
    + [500] * 21
)


def test_a_real_run_s_growth_that_stops_in_its_last_epoch_is_no_creep():
    run = _with_memory([(i, mib * MIB) for i, mib in enumerate(STFT_RUN)], starts=(40, 80))
    second = dataclasses.replace(run.window, first_step=99, warmup_steps=99)
    run = dataclasses.replace(run, more_windows=(second,))
    assert run.window_ranges == ((2, 3), (99, 3))
    trend = _rss_trend(run)
    assert trend.first_step == 40
    # After epoch 1 the readings still make a line that grows past the level and keeps half
    # its rate in its later half (the hump) ...
    assert trend.r2 >= MEMORY_R2 and trend.bytes_per_step * 79 > 16 * MIB
    assert trend.late_bytes_per_step is not None
    assert trend.late_bytes_per_step >= 0.5 * trend.bytes_per_step
    assert creeps(dataclasses.replace(trend, last_epoch_bytes_per_step=None))
    # ... but its last epoch, first readings to last, keeps under half of it.
    assert trend.last_epoch_bytes_per_step is not None
    assert trend.last_epoch_bytes_per_step < 0.5 * trend.bytes_per_step
    assert not _flagged(run)


def test_growth_only_in_the_first_epoch_is_no_creep():
    # A per-item cache filled while epoch 1 meets each item (0.5 MiB a step), then reused.
    points = [(i, 400 * MIB + int(min(i, 50) * 0.5 * MIB) + _noise(i)) for i in range(STEPS)]
    run = _with_memory(points)
    trend = _rss_trend(run)
    assert trend.first_step == EPOCHS[0]
    assert abs(trend.bytes_per_step) < 0.01 * MIB
    assert not _flagged(run)


def test_a_leak_is_a_creep_at_its_rate_after_the_first_epoch():
    # 300 KB kept a step (losses kept with their graphs) over a first epoch whose cache also
    # fills (0.5 MiB a step): the line after it reads the leak's own rate.
    leak = 300 * 1024
    points = [
        (i, 400 * MIB + int(min(i, 50) * 0.5 * MIB) + i * leak + _noise(i)) for i in range(STEPS)
    ]
    run = _with_memory(points)
    trend = _rss_trend(run)
    assert trend.first_step == EPOCHS[0]
    assert 0.9 * leak < trend.bytes_per_step < 1.1 * leak
    assert creeps(trend)
    assert _flagged(run)
    assert trend.last_epoch_bytes_per_step is not None
    assert trend.last_epoch_bytes_per_step > 0.8 * leak
    # A leak read in the 8 MiB blocks an allocator takes (a staircase whose steps never stop).
    chunks = [(i, 400 * MIB + (i * leak) // (8 * MIB) * 8 * MIB) for i in range(STEPS)]
    assert _flagged(_with_memory(chunks))
    # ... and read the old way, every 16th step with no epoch known, still a creep.
    sparse = [p for p in points if p[0] % 16 == 0]
    assert _flagged(_with_memory(sparse, starts=()))


def test_the_fit_starts_after_the_first_epoch_only_with_enough_run_behind_it():
    points = [(i, 0) for i in range(0, 120)]
    assert fit_start(points, (40, 80)) == 40
    assert fit_start(points, (0, 40, 80)) == 40  # the first iterator's start is no bound
    assert fit_start(points, ()) == 12  # one epoch, or none known: the first tenth
    assert fit_start(points, (80,)) == 12  # an epoch and a half: too little after the first
    assert fit_start(points, (5, 10)) == 12  # short epochs: the first tenth is further on
    # Eight readings (every 16th step of 120): too few after the first epoch to fit alone.
    assert fit_start(points[::16], (40, 80)) == 0


# The kept pages are mapped for themselves: a tensor's 256 KB would come from the heap's free
# space where earlier cells of a long-lived kernel freed some (glibc raises its mmap threshold
# after large frees), and the process's size would not grow with the leak until that is used:
# after test_rules and test_phases in one shell, this run read no creep.
GROWN_LIST = """
import mmap
model = nn.Linear(32, 8); opt = torch.optim.SGD(model.parameters(), lr=0.01)
kept = []
for step in range(140):
    x = torch.randn(64, 32)
    loss = model(x).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
    page = mmap.mmap(-1, 256 * 1024)
    page.write(b"x" * (256 * 1024))
    kept.append(page)  # 256 KB a step, never let go
"""

PADDED_EPOCHS = """
class Utterances(Dataset):
    def __len__(self):
        return 96
    def __getitem__(self, i):
        return torch.randn(200 + (i * 7919) % 1800, 32)

def pad(items):
    return nn.utils.rnn.pad_sequence(items, batch_first=True)

loader = DataLoader(Utterances(), batch_size=4, shuffle=True, collate_fn=pad)
net = nn.Linear(32, 8); sgd = torch.optim.SGD(net.parameters(), lr=0.01)
for epoch in range(4):
    for x in loader:
        loss = net(x).pow(2).mean()
        sgd.zero_grad(); loss.backward(); sgd.step()
"""


def test_a_real_leak_read_through_thinned_readings_is_a_creep(ip, monkeypatch):
    # Readings bounded at 32: read every step, then every 2nd, 4th, 8th as the cell runs on.
    import gpu_notebook.capture.session as session_mod

    monkeypatch.setattr(session_mod, "MEMORY_READINGS", 32)
    try:
        rep = run_cell(ip, GROWN_LIST)
    finally:
        for page in ip.user_ns.pop("kept", []):
            page.close()
    memory = rep.run.steps.memory
    assert 16 <= len(memory) < 32
    gaps = {b.index - a.index for a, b in itertools.pairwise(memory)}
    assert gaps == {8}  # thinned to one reading in 8 for the whole run, as one cadence
    assert "run.memory_creep" in {f.rule_id for f in rep.findings}


def test_a_real_padded_loader_over_epochs_is_read_every_step_and_no_creep(ip):
    rep = run_cell(ip, PADDED_EPOCHS)
    steps = rep.run.steps
    assert len(steps.loader_starts) >= 3
    # One reading a step (a 96-step cell is under MEMORY_READINGS).
    assert [m.index for m in steps.memory] == list(range(steps.step_count))
    assert "run.memory_creep" not in {f.rule_id for f in rep.findings}
