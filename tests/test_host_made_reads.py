"""Reads of tensors made on the CPU are no device reads in the GPU estimate, through the real
``gpucheck run``: what a GPU run would sync on is what the estimate counts.

Unseen round 13: an augment's ``if torch.rand(()) < 0.5`` per image read "256.0 read(s) of
device values per step: host and GPU take turns" (contrastive_views_in_step); a CPU metric and
the loader's CPU labels read with ``.item()``/``.tolist()`` counted as device reads.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from gpu_notebook.cell.scan import scan_source
from gpu_notebook.records import Report

LOOP = """
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

device = "cpu"
torch.manual_seed(0); torch.set_num_threads(1)


def jitter(img):
    if torch.rand(()) < 0.5:
        img = img.flip(-1)
    return img * (1.0 + 0.1 * (torch.rand(1) - 0.5))


model = nn.Sequential(nn.Flatten(), nn.Linear(64, 4)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(384, 8, 8), torch.randint(0, 4, (384,))), batch_size=16)
seen = []
for x, y in loader:
    x = torch.stack([jitter(img) for img in x]).to(device)
    loss = nn.functional.cross_entropy(model(x), y.to(device))
    opt.zero_grad(); loss.backward(); opt.step()
    zeros = (y == 0).float().mean().item()
    counts = y.bincount(minlength=4).tolist()
    seen.append(len(counts))
"""


def _estimate(tmp_path: Path, source: str):
    script = tmp_path / "train.py"
    script.write_text(source)
    out = tmp_path / "r.json"
    cmd = [sys.executable, "-m", "gpu_notebook", "run", "-s", "4", "--json", str(out), "-q",
           str(script)]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True, timeout=300)
    report = Report.from_json(out.read_text())
    assert report.gpu_estimate is not None
    return report


def test_reads_of_cpu_made_tensors_are_no_device_reads_in_the_estimate(tmp_path):
    """16 ``if torch.rand(()) < 0.5`` a step (one an image, in a helper the loop calls), a
    fraction and counts of the loader's labels, which the loop never moves (it moves ``x`` and
    a copy of ``y``): none waits for a kernel on a GPU. No read a step, the host runs ahead, no
    sync finding (fails on main: 17 reads a step, 'after the host')."""
    report = _estimate(tmp_path, LOOP)
    est = report.gpu_estimate
    assert est.reads_per_step == 0 and est.overlapped, est
    assert not [f for f in report.findings if f.rule_id.startswith("syncs.")]


def test_the_same_reads_of_tensors_made_on_the_device_still_count(tmp_path):
    """No over-reach: the coin made with ``device=device`` and labels the loop moved before
    reading them are device values on a GPU: their reads still count (16 + 1 a step)."""
    source = LOOP.replace("torch.rand(()) < 0.5", "torch.rand((), device=device) < 0.5").replace(
        "    zeros = (y == 0)", "    y = y.to(device)\n    zeros = (y == 0)"
    )
    est = _estimate(tmp_path, source).gpu_estimate
    assert est.reads_per_step >= 17 and not est.overlapped, est


def test_what_the_source_shows_on_the_cpu():
    """The facts behind it: the loader's unmoved labels and a factory's fresh tensor read on the
    host are no sync; the same read of a moved value is (a second shape: a while loop is not
    read, a model's output is not shown on the CPU)."""
    cell = (
        "for x, y, lengths in loader:\n"
        "    x = x.to(device)\n"
        "    out = model(x)\n"
        "    loss = crit(out, y.to(device)); loss.backward(); opt.step()\n"
        "    n = lengths.tolist()\n"
        "    m = torch.tensor(n).float().mean().item()\n"
        "    preds = out.argmax(1).cpu()\n"
        "    acc = (preds == y).float().mean().item()\n"
        "    hits = out.argmax(1).eq(y.to(device)).sum().item()\n"
    )
    facts = scan_source(cell)
    assert {s.line for s in facts.syncs} == {7, 9}  # `.cpu()` of the output, and `hits`
    assert facts.host_reads == 1  # `acc` (the factory's `m` is the trace's to find)
    assert facts.host_factories == frozenset({"aten::lift_fresh"})


def test_a_default_device_shows_nothing_on_the_cpu():
    """``torch.set_default_device(device)``: factories and collates may make tensors on the GPU;
    the same reads stay device reads (no over-reach)."""
    cell = (
        "torch.set_default_device(device)\n"
        "for x, y in loader:\n"
        "    x = x.to(device)\n"
        "    loss = crit(model(x), y.to(device)); loss.backward(); opt.step()\n"
        "    coin = torch.rand(()).item()\n"
        "    acc = (y == 0).float().mean().item()\n"
    )
    facts = scan_source(cell)
    assert {s.line for s in facts.syncs} == {5, 6}
    assert facts.host_reads == 0 and facts.host_factories == frozenset()
    plain = scan_source(cell.replace("torch.set_default_device(device)\n", "pass\n"))
    assert not plain.syncs and plain.host_reads == 1
