"""The zero-filled gradients rule (rules/grads.py): its check, its words and its fix, on a real
CPU run of the cell and on a run recorded on an H200 (tests/data/gpu/)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from gpu_notebook.fixes import Patch, apply_fix
from gpu_notebook.records import Report, from_jsonable
from gpu_notebook.rules import FAMILIES, RULE_FIXES, cell_facts, grads, run_rules
from gpu_notebook.rules.grads import FIX
from gpu_notebook.words import word_findings
from gpu_notebook.words.proposals import attach_fixes

KIT = Path(__file__).parent / "data" / "gpu" / "2026-12-04-nvidia-h200"

MODEL = """\
import torch
zg_model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
zg_opt = torch.optim.SGD(zg_model.parameters(), lr=0.01, momentum=0.9)
"""
LOOP = """\
for _ in range(40):
    x = torch.randn(32, 16)
    loss = zg_model(x).pow(2).mean()
    zg_opt.zero_grad(set_to_none=False)
    loss.backward()
    zg_opt.step()
"""


def _measured(ip, body: str) -> Report:
    ip.user_ns.pop("rep", None)
    result = ip.run_cell(f"%%gpucheck -q -o rep\n{body}")
    assert result.success, result.error_in_exec
    return ip.user_ns["rep"]


def _grads(report: Report):
    return [f for f in report.findings if f.rule_id == "grads.zero_filled"]


def test_the_rule_module_is_found_with_its_fix():
    assert grads in FAMILIES and RULE_FIXES[FIX.fix_id] is FIX


def test_a_cpu_run_that_zero_fills_its_grads_is_told_and_the_patched_cell_is_silent(ip):
    assert ip.run_cell(MODEL).success
    (f,) = _grads(_measured(ip, LOOP))
    # Line 5 of the notebook cell (the %%gpucheck line is line 1); low, no bound: measure it.
    assert f.line == 5 and f.severity == "low" and f.gain_bound is None
    assert f.fix_id == FIX.fix_id and "zero_grad(set_to_none=False)" in f.evidence[0]
    assert f.proposal is not None and f.proposal.source_after is not None
    after = f.proposal.source_after
    assert "zg_opt.zero_grad(set_to_none=True)" in after and "set_to_none=False" not in after
    # The patched cell, run as the user would run it: it trains, and nothing is zero-filled.
    body = after.split("\n", 2)[2]  # past %%gpucheck and the fix's header line
    report = _measured(ip, body)
    assert not _grads(report) and report.run.steps is not None


def test_a_cpu_run_with_torchs_default_zero_grad_is_not_told(ip):
    assert ip.run_cell(MODEL).success
    assert not _grads(_measured(ip, LOOP.replace("set_to_none=False", "")))


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("zg_opt.zero_grad(False)", "zg_opt.zero_grad(set_to_none=True)"),
        ("zg_model.zero_grad(set_to_none=False)", "zg_model.zero_grad(set_to_none=True)"),
        ("[p.grad.zero_() for p in []]", None),  # not a statement: nothing to set to None
        ("zg_opt.zero_grad(set_to_none=keep)", None),  # not a literal
    ],
)
def test_each_form_and_what_the_fix_makes_of_it(line, expected):
    cell = MODEL + "keep = False\n" + LOOP.replace("zg_opt.zero_grad(set_to_none=False)", line)
    patched = apply_fix(FIX, cell)
    if expected is None:
        assert not isinstance(patched, Patch)
    else:
        assert isinstance(patched, Patch) and expected in patched.source_after


def test_a_hand_written_update_gets_grad_none_unless_the_cell_reads_grad_after_the_loop():
    cell = (
        "import torch\nw = torch.randn(4, requires_grad=True)\n"
        "for _ in range(3):\n"
        "    loss = (w * 2).sum()\n    loss.backward()\n"
        "    with torch.no_grad():\n        w -= 0.1 * w.grad\n        w.grad.data.zero_()\n"
    )
    patched = apply_fix(FIX, cell)
    assert isinstance(patched, Patch)
    assert "        w.grad = None\n" in patched.source_after
    scope: dict[str, object] = {}
    exec(compile(patched.source_after, "<cell>", "exec"), scope)  # it still trains
    # A read after the loop would find None once freed: refused, naming the line.
    refused = apply_fix(FIX, cell + "print(w.grad.norm())\n")
    assert not isinstance(refused, Patch) and "line 9 reads .grad" in refused.reason


def _recorded(scenario: str) -> Report:
    data = json.loads((KIT / f"{scenario}.baseline.report.json").read_text())
    return from_jsonable(Report, data)


def _ruled(report: Report, source: str) -> list:
    run = dataclasses.replace(report.run, cell_source=source)
    offset = run.first_line - 1
    facts = cell_facts(source, None, line_offset=offset)
    found = run_rules(run, report.analysis, report.verdict, facts=facts, line_offset=offset)
    return [f for f in word_findings(found) if f.rule_id == "grads.zero_filled"]


def test_on_a_run_recorded_on_an_h200_the_rule_reads_the_loop_not_the_device():
    report = _recorded("launch-bound")
    source = report.run.cell_source
    assert "zero_grad(set_to_none=True)" in source
    assert not _ruled(report, source)  # as recorded: freed, nothing to say
    kept = source.replace("zero_grad(set_to_none=True)", "zero_grad(set_to_none=False)")
    (f,) = _ruled(report, kept)
    # The recorded GPU run's optimizer share is said as the most the fill is part of.
    assert report.analysis.phases is not None and "optimizer step and zero_grad" in f.evidence[1]
    (fixed,) = attach_fixes([f], kept)
    assert fixed.proposal is not None and fixed.proposal.source_after is not None
    assert "zero_grad(set_to_none=True)" in fixed.proposal.source_after
