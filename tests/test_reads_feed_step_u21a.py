"""A per-step read whose value the step's work takes is needed: never gated to every N steps.

Unseen round 21 (benchmarks/unseen_programs/graphsage_python_sampler.py): a GraphSAGE loop
samples each batch's neighbourhood with ``nodes, hops = sample_block(batch.tolist())`` and
trains on ``model(feats[nodes], hops)``. The sync rule read the ``.tolist()`` as a log-like
read, put the sampler's 40% of the step on it, and its read-less-often patch wrapped the line
in ``if step % 10 == 0:``: nine steps in ten trained on the last batch's nodes with this
batch's labels ("measured 2.33x"). cell/syncs.feeds_the_step marks such a read needed (its
name, or the model call it is an argument of, reaches the model or a ``.backward()``); the rule
then costs it by the sync wait alone and offers no patch.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from gpu_notebook.cell.scan import scan_source
from gpu_notebook.records import Report

UNSEEN = Path(__file__).resolve().parents[1] / "benchmarks" / "unseen_programs"


def _reads(source: str) -> dict[str, tuple[bool, str | None]]:
    return {s.text: (s.needed, s.feeds) for s in scan_source(source).syncs}


def test_the_graphsage_samplers_seed_list_feeds_the_model():
    reads = _reads((UNSEEN / "graphsage_python_sampler.py").read_text())
    assert reads["nodes, hops = sample_block(batch.tolist())"] == (True, "nodes")
    assert reads["print(epoch, loss.item())"] == (False, None)  # a log: still optional


SHAPES = """
import torch
from torch import nn

model = nn.Linear(8, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = [(torch.randn(4, 8), torch.tensor([3, 5, 8, 2]), torch.randint(0, 2, (4,)))] * 3
running, history = 0.0, []
for x, lengths, y in loader:
    n = int(lengths.max())
    x = x[:, :n]
    out = model(torch.nn.functional.pad(x, (0, 8 - n)))
    logits = model(x.new_zeros(4, 8) + y.sum().item())
    loss = nn.functional.cross_entropy(out + logits, y)
    lv = loss.item()
    running = 0.9 * running + 0.1 * lv
    history.append(loss.detach().cpu())
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_a_size_read_through_names_and_a_read_in_the_models_arguments_feed_the_step():
    reads = _reads(SHAPES)
    # Through two assignments (`n` sizes `x`, which the model takes).
    assert reads["n = int(lengths.max())"] == (True, "n")
    # An argument of the model call itself.
    assert reads["logits = model(x.new_zeros(4, 8) + y.sum().item())"] == (True, "model")
    # Values kept for a log reach neither the model nor the backward: optional as before.
    assert reads["lv = loss.item()"] == (False, None)
    assert reads["history.append(loss.detach().cpu())"] == (False, None)


SAMPLER = """
import random

import torch
from torch import nn

torch.set_num_threads(1)
torch.manual_seed(0)
random.seed(0)
N = 2000
feats = torch.randn(N, 16)
labels = torch.randint(0, 4, (N,))
adj = {i: random.sample(range(N), 12) for i in range(N)}


def neighbours(seeds):
    picked = [m for n in seeds for m in random.sample(adj[n], 5)]
    return torch.tensor(seeds + picked)


model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(2):
    for batch in torch.randperm(N).split(64):
        nodes = neighbours(batch.tolist())
        out = model(feats[nodes]).view(6, len(batch), 4).mean(0)
        loss = nn.functional.cross_entropy(out, labels[batch])
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def test_a_run_offers_no_read_less_often_patch_for_the_samplers_read(tmp_path: Path):
    script = tmp_path / "train.py"
    script.write_text(SAMPLER)
    out = tmp_path / "r.json"
    cmd = [sys.executable, "-m", "gpu_notebook", "run", "-s", "4", "--json", str(out), "-q",
           str(script)]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True, timeout=300)
    report = Report.from_json(out.read_text())
    line = SAMPLER.splitlines().index("        nodes = neighbours(batch.tolist())") + 1
    assert not [f for f in report.findings if f.fix_id == "throttle_host_syncs"]
    assert not [f for f in report.findings if f.rule_id == "syncs.per_step"]
    needed = [f for f in report.findings if f.rule_id == "syncs.needed_read"]
    assert [f.line for f in needed] == [line]
    assert needed[0].proposal is None and "so no patch" in needed[0].fix
    assert "`nodes`" in " ".join(needed[0].evidence)
