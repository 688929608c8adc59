"""A frozen model's no_grad forward every step (rules/frozen_forward.py), on real CPU runs.

Seen (unseen round 8, distill_teacher): a wide teacher in eval mode under torch.no_grad, a small
student learning from its logits. The phases read other 92.7%, forward 1.5% (autograd numbers no
operator under no_grad, so the teacher's forward lies outside the inferred forward), the verdict
said cpu-only, and no finding named the teacher: the step's cost had no name.
"""

from __future__ import annotations

from gpu_notebook.cell.scan import scan_source
from gpu_notebook.records import Report
from gpu_notebook.rules import FAMILIES, frozen_forward

DISTILL = """\
import torch
torch.manual_seed(0)
teacher = torch.nn.Sequential(torch.nn.Linear(128, 768), torch.nn.GELU(), torch.nn.Linear(768, 768),
                              torch.nn.GELU(), torch.nn.Linear(768, 4)).eval()
for p in teacher.parameters():
    p.requires_grad_(False)
student = torch.nn.Sequential(torch.nn.Linear(128, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
opt = torch.optim.SGD(student.parameters(), lr=0.01)
xs = torch.randn(40, 64, 128)
for i in range(40):
    x = xs[i]
    with torch.no_grad():
        target = teacher(x).softmax(-1)
    loss = torch.nn.functional.kl_div(student(x).log_softmax(-1), target, reduction="batchmean")
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def _measured(ip, body: str) -> Report:
    ip.user_ns.pop("rep", None)
    result = ip.run_cell(f"%%gpucheck -q -o rep\n{body}")
    assert result.success, result.error_in_exec
    return ip.user_ns["rep"]


def test_the_rule_module_is_found():
    assert frozen_forward in FAMILIES


def test_a_no_grad_block_the_loss_reads_that_runs_a_model_is_a_frozen_forward():
    facts = scan_source(DISTILL)
    (line,) = facts.frozen_forwards
    assert line.text == "target = teacher(x).softmax(-1)" and not line.gated
    assert not facts.validation  # the step needs it: not validation
    # A no_grad block that calls no model (an augmentation), or whose outputs the loss never
    # reads (a metric), or that updates in place (a hand-written EMA), is none.
    augment = DISTILL.replace("target = teacher(x).softmax(-1)", "target = (x * 2).softmax(-1)")
    assert not scan_source(augment).frozen_forwards
    metric = DISTILL.replace(
        "        target = teacher(x).softmax(-1)\n",
        "        seen = teacher(x).argmax(-1)\n    target = torch.full((64, 4), 0.25)\n",
    )
    assert not scan_source(metric).frozen_forwards


def test_a_cpu_run_whose_teacher_is_most_of_the_step_names_it(ip):
    rep = _measured(ip, DISTILL)
    phases = rep.analysis.phases
    assert phases is not None and phases.source == "trace"
    (f,) = [f for f in rep.findings if f.rule_id == "frozen_forward.every_step"]
    assert f.line == 14  # the teacher's line in the notebook cell (%%gpucheck is line 1)
    assert f.phase_share == phases.share("other") and f.phase_share >= 0.10
    assert f.gain_bound is not None and f.gain_bound > 1.0
    assert f.fix_id is None  # whether its inputs repeat is the user's call: no patch
    assert "teacher(x)" in f.evidence[0]
