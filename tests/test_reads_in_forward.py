"""Host reads of device values inside the functions a training step calls (the model's
``forward``, a submodule's, a helper of the cell), through the real ``gpucheck run``.

Unseen round 13: ``lengths.cpu()`` for ``pack_padded_sequence`` in ``Net.forward``, of lengths
the loop had moved to the device, was no sync finding, and the GPU estimate said "the host runs
ahead of the GPU (no per-step read of device values)": on a GPU it is a copy and a wait a step.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from gpu_notebook.records import Report

PACKED = """
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_sequence
from torch.utils.data import DataLoader

device = "cpu"
torch.manual_seed(0); torch.set_num_threads(1)
seqs = [torch.randn(int(k), 8) for k in torch.randint(3, 12, (96,))]
items = [(s, int(i % 3)) for i, s in enumerate(seqs)]


def collate(batch):
    xs, ys = zip(*batch)
    lengths = torch.tensor([len(s) for s in xs])
    return pad_sequence(list(xs), batch_first=True), lengths, torch.tensor(ys)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(8, 16, batch_first=True)
        self.fc = nn.Linear(16, 3)

    def forward(self, x, lengths):
        packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        _, (h, _) = self.lstm(packed)
        return self.fc(h[-1])


model = Net().to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, lengths, y in DataLoader(items, batch_size=8, collate_fn=collate):
    x, lengths, y = x.to(device), lengths.to(device), y.to(device)
    loss = nn.functional.cross_entropy(model(x, lengths), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""
MOVE = "    x, lengths, y = x.to(device), lengths.to(device), y.to(device)\n"
READ = "        packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)"

# A second shape: a trainer class's loop calls ``self.net`` (made in its ``__init__``), whose
# forward calls a submodule of another class, whose forward calls a helper of the module that
# reads a count with ``.item()`` to size a Python slice.
NESTED = """
import torch
from torch import nn

torch.manual_seed(0); torch.set_num_threads(1)


def kept(h, mask):
    n = mask.sum().item()
    return h[:, : max(1, int(n))]


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(16, 16)

    def forward(self, h):
        return kept(self.lin(h), h[0] > 0)


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(16, 16)
        self.block = Block()

    def forward(self, x):
        return self.block(self.inp(x)).mean(1)


class Trainer:
    def __init__(self):
        self.net = Encoder()
        self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1)

    def fit(self, steps):
        for _ in range(steps):
            x = torch.randn(8, 16)
            loss = self.net(x).pow(2).mean()
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()


Trainer().fit(24)
"""


def _report(tmp_path: Path, source: str) -> Report:
    script = tmp_path / "train.py"
    script.write_text(source)
    out = tmp_path / "r.json"
    cmd = [sys.executable, "-m", "gpu_notebook", "run", "-s", "4", "--json", str(out), "-q",
           str(script)]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True, timeout=300)
    return Report.from_json(out.read_text())


def _line_of(source: str, text: str) -> int:
    return source.splitlines().index(text.rstrip("\n")) + 1


def test_a_forward_that_copies_device_lengths_back_is_a_read_with_keep_them_on_the_cpu(tmp_path):
    """The read is said at its line in ``Net.forward``, as needed (no gate offered: the pack
    needs CPU lengths every step), and the advice is not to move the lengths (the line that
    moves them named); the GPU estimate counts it as a read a step (fails on main: no finding,
    0 reads, 'the host runs ahead')."""
    report = _report(tmp_path, PACKED)
    (read,) = [f for f in report.findings if f.rule_id == "syncs.needed_read"]
    assert read.line == _line_of(PACKED, READ)
    assert "Net.forward" in read.title
    assert f"do not move it on line {_line_of(PACKED, MOVE)}" in read.fix
    assert read.fix_id is None and read.proposal is None  # a refusal: the read is needed
    assert not [f for f in report.findings if f.rule_id == "syncs.per_step"]
    est = report.gpu_estimate
    assert est is not None and est.reads_per_step >= 1 and not est.overlapped


def test_lengths_kept_on_the_cpu_as_the_collate_made_them_are_no_read(tmp_path):
    """The advice taken: the loop moves only what the model computes with. ``lengths.cpu()`` in
    the forward is then ``.cpu()`` of a CPU tensor: no finding, no read in the estimate."""
    source = PACKED.replace(MOVE, "    x, y = x.to(device), y.to(device)\n")
    report = _report(tmp_path, source)
    assert not [f for f in report.findings if f.rule_id.startswith("syncs.")]
    est = report.gpu_estimate
    assert est is not None and est.reads_per_step == 0 and est.overlapped


def test_a_read_in_a_helper_under_a_submodules_forward_is_found_through_the_calls(tmp_path):
    """A trainer method's loop -> ``self.net`` (Encoder) -> ``self.block`` (Block) -> ``kept``:
    the ``.item()`` in ``kept`` runs every step; said at its line, in ``kept``, with no patch
    (fails on main: not seen; the trace's item read alone, with no line)."""
    report = _report(tmp_path, NESTED)
    (read,) = [f for f in report.findings if f.rule_id == "syncs.needed_read"]
    assert read.line == _line_of(NESTED, "    n = mask.sum().item()")
    assert "`kept`" in read.title
    assert read.fix_id is None and read.proposal is None
    assert "No patch" in read.fix
