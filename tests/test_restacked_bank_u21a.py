"""A memory bank kept as a Python container of tensors and stacked whole every step is named
(rules/restacked_bank.py).

Unseen round 21 (benchmarks/unseen_programs/moco_list_queue.py): a MoCo loop's negative queue,
``collections.deque(maxlen=8192)`` of key rows grown by ``queue.extend(k.unbind(0))`` and read
by ``torch.stack(list(queue))`` every step: the stack line held 27% of the sampled step and no
finding named it (by hand a preallocated tensor ring buffer was 1.49x of the loop). Asserted
here: which loops are flagged (a deque, a list trimmed by re-binding; not a list the step makes
for itself, not a sample of a replay buffer, not a bank the loop never grows), and a real run's
finding at the stack line with its share read off the sampled lines.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from gpu_notebook.cell.scan import scan_source
from gpu_notebook.records import Report
from gpu_notebook.rules.restacked_bank import restacked_banks


def _hits(source: str) -> list[tuple[int, str, str, tuple[int, ...]]]:
    tree = scan_source(source).tree
    assert tree is not None
    return [
        (tree.line_of(call), bank, kind, grown) for call, bank, kind, grown in restacked_banks(tree)
    ]


def _line(source: str, text: str) -> int:
    return source.splitlines().index(text) + 1


SHAPES = """
import collections
import random

import torch
from torch import nn

model = nn.Linear(16, 16)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
queue = collections.deque(torch.randn(512, 16).unbind(0), maxlen=512)
bank = [torch.randn(16) for _ in range(512)]
replay = []
protos = [torch.randn(16) for _ in range(8)]
for x in torch.randn(10, 32, 16):
    k = model(x)
    negs = torch.stack(list(queue))
    past = torch.cat([*bank]).view(-1, 16)
    outs = []
    for chunk in x.split(8):
        outs.append(model(chunk))
    mine = torch.cat(outs)
    sample = torch.stack(random.sample(replay, 4)) if len(replay) > 4 else k
    fixed = torch.stack(protos)
    loss = (k @ negs.T).mean() + (k @ past.T).mean() + mine.mean() + sample.mean() + (k @ fixed.T).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    queue.extend(k.detach().unbind(0))
    bank = bank[32:] + list(k.detach().unbind(0))
    replay.append(k.detach())
"""


def test_a_grown_deque_and_a_re_bound_list_are_flagged_and_nothing_else():
    hits = _hits(SHAPES)
    assert hits == [
        (
            _line(SHAPES, "    negs = torch.stack(list(queue))"),
            "queue",
            "deque",
            (_line(SHAPES, "    queue.extend(k.detach().unbind(0))"),),
        ),
        (
            _line(SHAPES, "    past = torch.cat([*bank]).view(-1, 16)"),
            "bank",
            "list",
            (_line(SHAPES, "    bank = bank[32:] + list(k.detach().unbind(0))"),),
        ),
    ]
    # `outs` is made inside the step, `replay` is sampled (4 rows), `protos` never grows.


MOCO = """
import collections

import torch
from torch import nn

torch.set_num_threads(1)
torch.manual_seed(0)
K, D, B = 8192, 64, 32
enc = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, D))
opt = torch.optim.SGD(enc.parameters(), lr=0.03)
queue = collections.deque(torch.randn(K, D).unbind(0), maxlen=K)
data = torch.randn(B * 60, 64)
for epoch in range(2):
    for i in range(0, len(data), B):
        q = enc(data[i : i + B])
        bank = torch.stack(list(queue))
        loss = torch.logsumexp(q @ bank.T, dim=1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        queue.extend(q.detach().unbind(0))
"""


def test_a_real_run_names_the_restacked_queue_at_its_line(tmp_path: Path):
    script = tmp_path / "train.py"
    script.write_text(MOCO)
    out = tmp_path / "r.json"
    cmd = [sys.executable, "-m", "gpu_notebook", "run", "-s", "4", "--lines", "all", "--json",
           str(out), "-q", str(script)]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True, timeout=300)
    report = Report.from_json(out.read_text())
    hits = [f for f in report.findings if f.rule_id == "host.restacked_bank"]
    assert [f.line for f in hits] == [_line(MOCO, "        bank = torch.stack(list(queue))")]
    finding = hits[0]
    assert "`queue`" in finding.title and "deque" in finding.title
    assert "ring buffer" in finding.fix and finding.proposal is None
    # The share is the sampled stack and growing lines' (a whole-script sampling has many).
    assert finding.phase_share is not None and finding.phase_share > 0
    assert finding.gain_bound is not None and finding.gain_bound > 1
