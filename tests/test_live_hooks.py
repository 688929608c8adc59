"""Hooks on the live modules that the measured cell's source does not show (cell/live_hooks.py).

The class: per-step hook code registered outside the cell. A notebook attaches its monitoring
hooks in one cell (``for n, m in model.named_modules(): m.register_forward_hook(make_hook(n))``)
or through a helper of its own ``.py`` file, and measures a cell that only trains: the source
rule (cell/registered_hooks) read registrations in the cell, found none, and the hooks' ``.item()``
every forward went unnamed. Asserted, on a real IPython shell and real modules: such a hook is
read off the live dicts and named where it was defined (``In[N] line K``, ``file.py:K``); one whose
handles the cell removes before its loop (by ``.remove()`` or a ``with``) is not, whether the
earlier cell or the cell itself registered it, while one removed after the loop still is; and a
real ``%%gpucheck`` run names the earlier cell in the finding.
"""

from __future__ import annotations

import sys

from gpu_notebook.cell.scan import cell_facts, scan_source

EARLIER = """\
import torch
from torch import nn
lh_model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
lh_stats = []

def lh_make(name):
    def hook(module, inputs, out):
        lh_stats.append(out.detach().mean().item())
    return hook

lh_handles = [m.register_forward_hook(lh_make(n))
              for n, m in lh_model.named_modules() if isinstance(m, nn.Linear)]
"""

TRAIN = """opt = torch.optim.SGD(lh_model.parameters(), lr=0.1)
for step in range(STEPS):
    loss = lh_model(torch.randn(4, 8)).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def _ran(ip, cell: str, steps: int = 3) -> str:
    cell = cell.replace("STEPS", str(steps))
    assert ip.run_cell(cell).success
    return cell


def _earlier(ip) -> int:
    result = ip.run_cell(EARLIER)
    assert result.success
    return result.execution_count


def test_a_hook_registered_in_an_earlier_cell_is_read_off_the_live_model_and_named_there(ip):
    number = _earlier(ip)
    cell = _ran(ip, TRAIN)
    assert not scan_source(cell).registered_hook_reads  # the cell's source shows no hook
    reads = cell_facts(cell, ip.user_ns).registered_hook_reads
    assert [(r.kind, r.called_in, r.cell_line) for r in reads] == [
        ("item", "forward hook `hook` (on `lh_model.0` +1)", None)
    ]
    origin = reads[0].origin
    assert origin is not None and origin.cell_number == number
    assert reads[0].line_there == EARLIER.splitlines().index(
        "        lh_stats.append(out.detach().mean().item())") + 1  # fmt: skip
    # Read only: the model's hooks are as the earlier cell left them.
    assert [len(m._forward_hooks) for m in ip.user_ns["lh_model"]] == [1, 0, 1]


def test_handles_removed_before_the_loop_are_not_read_and_after_it_are(ip):
    _earlier(ip)
    removed = _ran(ip, "for h in lh_handles:\n    h.remove()\n" + TRAIN)
    assert not cell_facts(removed, ip.user_ns).registered_hook_reads
    # The cell's own hook: removed before the loop by its handle, or by a ``with`` block.
    own = "h = lh_model.register_forward_hook(lambda m, i, o: lh_stats.append(o.sum().item()))\n"
    before = _ran(ip, own + "h.remove()\n" + TRAIN)
    assert [r.line for r in scan_source(before).registered_hook_reads] == [1]  # source alone
    assert not cell_facts(before, ip.user_ns).registered_hook_reads
    block = own.replace("h = ", "with ").replace(")))\n", "))):\n    lh_model(torch.ones(1, 8))\n")
    assert not cell_facts(_ran(ip, block + TRAIN), ip.user_ns).registered_hook_reads
    # Removed after the loop: it ran every step.
    after = _ran(ip, own + TRAIN + "h.remove()\n")
    assert [r.cell_line for r in cell_facts(after, ip.user_ns).registered_hook_reads] == [2]


def test_a_gradient_hook_from_a_users_file_is_named_at_its_file_line(ip, tmp_path):
    (tmp_path / "lh_monitor.py").write_text(
        "import functools\n\n\n"
        "class Peaks:\n"
        "    def __init__(self):\n"
        "        self.seen = []\n\n"
        "    def grad(self, tag, g):\n"
        "        self.seen.append((tag, g.abs().max().cpu()))\n\n\n"
        "def attach(model):\n"
        "    peaks = Peaks()\n"
        "    for n, p in model.named_parameters():\n"
        "        p.register_hook(functools.partial(peaks.grad, n))\n"
        "    return peaks\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        _earlier(ip)
        _ran(
            ip,
            "for h in lh_handles:\n    h.remove()\nimport lh_monitor\nlh_peaks = lh_monitor.attach(lh_model)",
        )
        cell = _ran(ip, TRAIN)
        reads = cell_facts(cell, ip.user_ns).registered_hook_reads
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("lh_monitor", None)
    assert [(r.kind, r.called_in, r.line_there) for r in reads] == [
        ("cpu", "gradient hook `grad` (on `lh_model.0.weight` +3)", 9)
    ]
    assert reads[0].origin is not None and reads[0].origin.in_file
    assert reads[0].origin.filename == str(tmp_path / "lh_monitor.py")


def test_a_gpucheck_run_names_the_earlier_cells_hook_in_its_finding(ip):
    number = _earlier(ip)
    ip.run_cell_magic("gpucheck", "-q -o _lh_report", TRAIN.replace("STEPS", "40"))
    report = ip.user_ns["_lh_report"]
    assert report.run.status == "ok"
    hits = [f for f in report.findings if f.rule_id == "syncs.module_hook_read"]
    assert len(hits) == 1, [f.rule_id for f in report.findings]
    f = hits[0]
    assert f.fix_id is None and f.proposal is None and "forward hook `hook`" in f.title
    line = EARLIER.splitlines().index("        lh_stats.append(out.detach().mean().item())") + 1
    assert any(f"In[{number}] line {line}" in e for e in f.evidence), f.evidence
    assert f"In[{number}] line {line}" in f.fix and "handle.remove()" in f.fix


def test_the_earlier_cells_hook_is_costed_by_the_samples_on_its_own_lines(ip):
    """The stack sampler names an earlier cell's lines by that cell's file: the hook's body
    lines there are its cost; another line of that cell is not."""
    from dataclasses import replace

    from gpu_notebook.records import LineStat, StackProfile
    from gpu_notebook.rules.syncs import registered_hook_reads
    from tests.scenarios import synthetic as syn

    _earlier(ip)
    cell = _ran(ip, TRAIN)
    facts = cell_facts(cell, ip.user_ns)
    origin = facts.registered_hook_reads[0].origin
    assert origin is not None
    body = {s.line_there for s in facts.live_hook_lines}
    assert body == {origin.first_line, origin.first_line + 1}  # ``def hook``, its read

    def sampled(line: int) -> float | None:
        at = LineStat(line, "", 300, 0.3, filename=origin.filename, other_cell=True)
        stacks = StackProfile(0.01, 1000, 10.0, script_lines=(at,))
        analysis = replace(syn.make_analysis({}), stacks=stacks)
        f = registered_hook_reads(syn.make_run(cell), analysis, facts)
        assert f is not None
        return f.said.removable  # type: ignore[attr-defined]

    assert sampled(origin.first_line + 1) == 0.3
    assert sampled(origin.first_line - 1) == 0.0  # ``def lh_make``: not the hook's
