"""A GradScaler where nothing is float16 (rules/precision.scaler_unneeded): the scaler's own
operators read from a real torch.profiler trace, the precision read from the cell, the
drop_grad_scaler fix on each form, and the float16 cells where the scaler is needed."""

from __future__ import annotations

import dataclasses

import pytest

from gpu_notebook.cell.scan import scan_source
from gpu_notebook.fixes import Patch, Refusal, apply_fix
from gpu_notebook.records import ScalerOps
from gpu_notebook.rules.precision import scaler_unneeded
from tests.cells import measured
from tests.scenarios import synthetic as syn
from tests.test_rules import ids, only, rules_for
from tests.trace_edits import time_lost

RULE = "precision.scaler_unneeded"

CELL = """\
import torch
from torch import nn
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(48, 256), nn.SiLU(), nn.Linear(256, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
scaler = torch.amp.GradScaler("cpu")
x, y = torch.randn(64, 48), torch.randn(64)
for step in range(16):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = nn.functional.mse_loss(model(x).squeeze(1).float(), y)
    opt.zero_grad()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
"""


def test_the_scalers_operators_are_counted_in_a_real_cpu_trace_and_the_fix_drops_it(ip):
    rep = measured(ip, CELL)
    ops = rep.analysis.scaler
    # The traced steps it read (the phases may leave out a step that only waited for a core).
    steps = ops.steps if ops is not None else 0
    # One inf/nan check-and-unscale and one scale update a step, every traced step.
    assert ops is not None and not ops.on_device and steps >= 1
    assert ops.calls == 2 * steps
    assert 0 < ops.scaler_us < ops.steps_us
    f = only(rep.findings, RULE)
    assert f.line == 7 and f.phase_share == pytest.approx(ops.share)
    # Low (its share is small); "info" where the run's own margin is wider than its bound.
    assert f.severity in ("low", "info")
    after = f.proposal.source_after
    code = after.split("\n", 2)[2]  # below the magic and the fix's header comment
    assert "loss.backward()" in code and "opt.step()" in code and "scaler" not in code.lower()
    # The patched cell runs no scaler (measured again) and has no finding.
    again = measured(ip, after.split("\n", 1)[1])
    assert again.analysis.scaler is not None and again.analysis.scaler.calls == 0
    assert RULE not in ids(again.findings)


FP16 = [
    CELL.replace("torch.bfloat16", "torch.float16"),
    CELL.replace('torch.autocast("cpu", dtype=torch.bfloat16)', "torch.cuda.amp.autocast()"),
    CELL.replace('torch.autocast("cpu", dtype=torch.bfloat16)', 'torch.autocast("cuda")'),
    CELL.replace("dtype=torch.bfloat16", "dtype=amp_dtype"),
    CELL.replace("nn.Linear(256, 1))", "nn.Linear(256, 1)).half()").replace(
        'with torch.autocast("cpu", dtype=torch.bfloat16):', "if True:"
    ),
    CELL.replace('GradScaler("cpu")', 'GradScaler("cpu", enabled=False)'),
]


@pytest.mark.parametrize(
    "cell", FP16, ids=["fp16", "cuda-amp", "cuda-default", "dtype-var", "half", "off"]
)
def test_no_finding_and_no_fix_where_the_scaler_is_needed_or_off(ip, cell):
    rep = measured(ip, CELL)  # a real run's measurement: the scaler's operators ran
    assert rep.analysis.scaler is not None and rep.analysis.scaler.calls > 0
    assert scaler_unneeded(rep.run, rep.analysis, scan_source(cell)) is None
    if "enabled=False" not in cell:
        assert isinstance(apply_fix("drop_grad_scaler", cell), Refusal)


BF16_CUDA = """\
import torch
scaler = torch.cuda.amp.GradScaler()
for xb, yb in loader:
    with torch.cuda.amp.autocast(dtype=torch.bfloat16):
        loss = crit(model(xb), yb)
    optimizer.zero_grad(set_to_none=True)
    scaler.scale(loss).backward(retain_graph=False)
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer); scaler.update()
"""

FP32 = """\
import torch
from torch.amp import GradScaler
scaler = GradScaler()
for xb, yb in loader:
    loss = crit(model(xb), yb)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    opt.zero_grad()
"""


@pytest.mark.parametrize("cell", [CELL, BF16_CUDA, FP32], ids=["amp-cpu", "cuda-amp-bf16", "fp32"])
def test_the_fix_drops_the_scaler_in_each_form(cell):
    patch = apply_fix("drop_grad_scaler", cell)
    assert isinstance(patch, Patch), patch
    body = patch.source_after.split("\n", 1)[1]
    code = "\n".join(ln for ln in body.splitlines() if "import" not in ln)  # the import may stay
    assert "scaler" not in code.lower()
    assert ".backward(" in body and "(loss).backward" not in body
    compile(body, "<cell>", "exec")
    if cell is BF16_CUDA:
        assert "loss.backward(retain_graph=False)" in body and "optimizer.step()" in body
        assert "clip_grad_norm_" in body
    else:
        assert "loss.backward()" in body and "opt.step()" in body


@pytest.mark.parametrize(
    "cell, where",
    [
        (CELL + "torch.save(scaler.state_dict(), 'ckpt.pt')\n", "line 15"),
        (CELL.replace('scaler = torch.amp.GradScaler("cpu")\n', ""), "where it is made"),
        (CELL.replace("scaler.step(opt)", "train_step(scaler, opt)"), "line 13"),
    ],
    ids=["saved", "made-elsewhere", "handed-on"],
)
def test_the_fix_refuses_where_a_use_is_not_the_cells_own(cell, where):
    refusal = apply_fix("drop_grad_scaler", cell)
    assert isinstance(refusal, Refusal) and where in refusal.reason


def test_stalled_steps_left_out_keep_the_scalers_operators_the_window_read():
    # The rules decide on the steady steps (a minority over 3x the median left out of the phase
    # split, rules.run_rules); the scaler's operators, read from every traced step, stay as read.
    from gpu_notebook.analysis.steady import without_stalls

    window = syn.phase_window([(10_000.0, 500.0)] * 5 + [(100_000.0, 500.0)] * 3, "optimizer")
    ops = ScalerOps(16, 4_000.0, window.total_us, 8)
    analysis = dataclasses.replace(syn.make_analysis(phase_split=window), scaler=ops)
    steady, stalls = without_stalls(analysis)
    assert stalls == 3 and steady.scaler == ops
    f = only(rules_for(syn.make_run(CELL), analysis), RULE)
    assert f.phase_share == pytest.approx(ops.share)


def _record(tmp_path) -> str:
    """A real torch.profiler trace of CELL's loop, three steps marked as ``prof.step()``."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(48, 256), nn.SiLU(), nn.Linear(256, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cpu")
    x, y = torch.randn(64, 48), torch.randn(64)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for i in range(3):
            with torch.profiler.record_function(f"ProfilerStep#{i}"):
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    loss = nn.functional.mse_loss(model(x).squeeze(1).float(), y)
                opt.zero_grad()
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
    path = str(tmp_path / "scaler.json")
    prof.export_chrome_trace(path)
    return path


def test_a_time_slice_lost_inside_one_scaler_operator_is_not_the_scalers(tmp_path):
    # One step's inf/nan check preempted for 20 ms (a busy machine's time slice): summed, the
    # scaler read a tenth of the steps and more ("medium" where it costs 0.2%); each operator
    # at its least over the steps, the same reading as without the slice.
    import json

    from gpu_notebook.analysis.amp_scaler import SCALER_OPS, scaler_ops
    from gpu_notebook.analysis.phases import phase_breakdown
    from gpu_notebook.traces.kineto import load_trace

    path = _record(tmp_path)
    trace = load_trace(path)
    quiet = scaler_ops(trace, phase_breakdown(trace))
    assert quiet is not None and quiet.calls == 6 and quiet.steps == 3
    with open(path) as f:
        doc = json.load(f)
    events = doc["traceEvents"]
    # The slice lands in the step whose check read longest: never the least at its place, so
    # the least is the quiet trace's however the recording machine's load spread them (a slice
    # in the step that read least raises that least to the next step's).
    hit = max((e for e in events if e.get("name") == SCALER_OPS[0]), key=lambda e: e["dur"])
    lost = 20_000.0
    sliced = load_trace(time_lost(path, hit["ts"] + hit["dur"] / 2, lost))
    busy = scaler_ops(sliced, phase_breakdown(sliced))
    assert busy is not None and busy.calls == 6 and busy.steps_us > quiet.steps_us + lost - 1
    # Each operator at its least over the steps, times the steps: the quiet trace's reading.
    assert busy.scaler_us == pytest.approx(quiet.scaler_us, rel=1e-6)
    assert busy.scaler_us <= 2 * quiet.scaler_us < lost / 10
    assert busy.share < 0.05  # the scaler's own share, as a quiet run reads it: no severity
