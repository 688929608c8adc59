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

import itertools

from tests.test_run_shape_cells import run as run_cell

GROWN_LIST = """
model = nn.Linear(32, 8); opt = torch.optim.SGD(model.parameters(), lr=0.01)
kept = []
for step in range(140):
    x = torch.randn(64, 32)
    loss = model(x).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
    kept.append(torch.ones(64 * 1024))  # 256 KB a step, never let go
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
    rep = run_cell(ip, GROWN_LIST)
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
