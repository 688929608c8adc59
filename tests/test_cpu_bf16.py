"""bfloat16 autocast on a CPU-only run (rules/cpu_bf16.py), real %%gpucheck runs.

Seen (unseen round 21, lightning_bf16_mixed_cpu): Lightning ``precision="bf16-mixed"`` on this
avx512_bf16 CPU without AMX fit 1.60x slower than ``"32-true"``, and the tool said nothing:
``precision.cpu_float16`` read only a literal float16 autocast. The shapes here: a plain loop
under ``torch.autocast("cpu", dtype=torch.bfloat16)`` and Lightning's keyword; HF's and
accelerate's keywords and the other literal spellings on the cell reader and the fix; the
negatives: the same loop in float32, and the recorded GPU runs of the kit, which autocast to
bfloat16 on CUDA (the right recipe there).
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from gpu_notebook.analysis.cpu_bf16_casts import BF16_SLOWDOWN, MATMUL_OPS, cpu_bf16_casts
from gpu_notebook.analysis.phases import phase_breakdown
from gpu_notebook.capture.cpu_bf16_flags import cpu_bf16_flags
from gpu_notebook.cell.cpu_bf16 import bf16_autocast_kind, module_constants
from gpu_notebook.cell.parse import parse_ast
from gpu_notebook.cell.scan import cell_facts
from gpu_notebook.fixes import Patch, Refusal, apply_fix
from gpu_notebook.markers import PROFILER_STEP_PREFIX
from gpu_notebook.records import Report
from gpu_notebook.rules import FAMILIES, cpu_bf16
from gpu_notebook.rules.cpu_bf16 import FIX
from gpu_notebook.rules.cpu_bf16 import cpu_bf16 as rule
from gpu_notebook.traces.kineto import Trace, load_trace

RULE = "precision.cpu_bf16"

LOOP = """\
import torch
from torch import nn
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))
for step in range(12):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""

LIGHTNING = """\
import warnings
import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
warnings.filterwarnings("ignore")
torch.manual_seed(0)
class Net(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10))
    def training_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.cross_entropy(self.net(x), y)
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)
    def make_trainer(self):
        return L.Trainer(max_epochs=1, accelerator="cpu", precision="bf16-mixed", logger=False,
                         enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False)
data = TensorDataset(torch.randn(768, 256), torch.randint(0, 10, (768,)))
net = Net()
net.make_trainer().fit(net, DataLoader(data, batch_size=64))
"""


ACCELERATE = """\
import torch
from torch import nn
from accelerate import Accelerator
torch.manual_seed(0)
accelerator = Accelerator(mixed_precision="bf16", cpu=True)
model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
model, opt = accelerator.prepare(model, opt)
x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))
for step in range(12):
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    accelerator.backward(loss)
    opt.step()
"""


def _run(ip, body: str, options: str = "") -> Report:
    ip.user_ns.pop("rep", None)
    result = ip.run_cell(f"%%gpucheck -q -o rep{options}\n{body}")
    assert result.success, result.error_in_exec
    return ip.user_ns["rep"]


def _ours(rep: Report) -> list:
    return [f for f in rep.findings if f.rule_id == RULE]


def test_the_rule_module_is_found():
    assert cpu_bf16 in FAMILIES


def test_a_loop_under_cpu_bf16_autocast_is_told_to_train_in_float32(ip):
    rep = _run(ip, LOOP)
    casts = rep.analysis.cpu_casts
    assert casts is not None and casts.casts > 0 and casts.matmuls > 0  # read from the trace
    (f,) = _ours(rep)
    assert f.line == 9  # the autocast's line, counted under the %%gpucheck line
    assert f"{casts.casts} aten::_to_copy calls" in f.evidence[1]  # the trace's casts, said
    # The range is Amdahl over the casts' least and summed share: a range, never a point above 1x.
    assert f.gain_low is not None and f.gain_bound is not None
    assert 1.0 < f.gain_low <= f.gain_bound
    assert f.fix_id == FIX.fix_id
    patched = apply_fix(FIX, LOOP)
    assert isinstance(patched, Patch)
    assert 'torch.autocast("cpu", dtype=torch.bfloat16, enabled=False):' in patched.source_after


def _recomputed_top(casts) -> float:
    """The range's top from the record alone: Amdahl over the casts' greater share and what
    float32 saves on each bfloat16 operator (its time less its time over its slowdown)."""
    summed = sum(op.us * (1 - 1 / op.slowdown) for op in casts.bf16_ops)
    floored = sum(op.floored_us * (1 - 1 / op.slowdown) for op in casts.bf16_ops)
    share = max(
        (casts.casts_sum_us + summed) / casts.steps_us,  # on the wall
        (casts.casts_us + floored) / casts.ops_us,  # floored, against every operator floored
    )
    return 1.0 / (1.0 - min(1.0, share))


def test_the_ranges_top_is_built_from_the_traces_bf16_operators_and_casts(ip, tmp_path: Path):
    """The top is no fixed factor on the matmuls: each operator the autocast runs in bfloat16
    (the trace's matmuls and the activations between them) is read with its time in the
    steps and its slowdown measured on this CPU (BF16_SLOWDOWN), beside the casts."""
    rep = _run(ip, LOOP, f" --export {tmp_path}")
    casts = rep.analysis.cpu_casts
    (f,) = _ours(rep)
    names = {op.name for op in casts.bf16_ops}
    assert {"aten::addmm", "aten::mm", "aten::relu", "aten::threshold_backward"} <= names
    assert not casts.dtypes_read  # the tool's own profiler records no input types
    # Each operator's time is the trace's: its outermost calls inside the profiled steps.
    (path,) = tmp_path.glob("*.trace.json.gz")
    trace = load_trace(path)
    again = cpu_bf16_casts(trace, phase_breakdown(trace))  # the steps as the analysis read them
    assert again is not None and again.bf16_ops == casts.bf16_ops
    matmuls = [op for op in casts.bf16_ops if op.name in MATMUL_OPS]
    assert sum(op.us for op in matmuls) == pytest.approx(casts.matmul_us)
    assert all(op.slowdown == BF16_SLOWDOWN[op.name] for op in casts.bf16_ops)
    assert f.gain_bound == pytest.approx(_recomputed_top(casts))
    # Without the bfloat16 operators the top would be the casts' alone: they add to it.
    assert f.gain_bound > 1.0 / (1.0 - casts.share_high)
    assert all(0 < op.floored_us <= op.us + 1e-6 for op in casts.bf16_ops)


def test_recorded_input_types_keep_only_the_bf16_calls(tmp_path: Path):
    """A trace that records input types (``record_shapes=True``) says which calls ran in
    bfloat16: a float32 head outside the autocast is not counted; a real profiler run."""
    torch.manual_seed(0)
    body = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128))
    head = nn.Linear(128, 10)
    x = torch.randn(32, 64)

    def step() -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            h = body(x)
        head(h.float()).sum().backward()

    def traced(shapes: bool) -> Trace:
        with torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=shapes
        ) as prof:
            for i in range(3):
                with torch.profiler.record_function(f"{PROFILER_STEP_PREFIX}{i}"):
                    step()
        path = tmp_path / f"t{shapes}.json"
        prof.export_chrome_trace(str(path))
        return load_trace(path)

    step()
    typed, untyped = traced(True), traced(False)
    read = cpu_bf16_casts(typed, phase_breakdown(typed))
    blind = cpu_bf16_casts(untyped, phase_breakdown(untyped))
    assert read is not None and blind is not None
    assert read.dtypes_read and not blind.dtypes_read
    calls = {op.name: op.calls for op in read.bf16_ops}
    every = {op.name: op.calls for op in blind.bf16_ops}
    # The head's float32 addmm (forward) and its two mm (backward) are left out; the body's two
    # bfloat16 linears (their addmm, and the mm of their backward) are in.
    assert calls["aten::addmm"] == 2 * 3 and every["aten::addmm"] == 3 * 3
    assert calls["aten::mm"] < every["aten::mm"]
    rows = np.flatnonzero(typed.name_mask(names=("aten::addmm",)))
    f32 = [r for r in rows if "BFloat16" not in str(typed.kept_arg("input_types", r, ""))]
    assert len(f32) >= 3  # the head's, recorded as float


def test_the_same_loop_in_float32_is_silent(ip):
    plain = LOOP.replace('with torch.autocast("cpu", dtype=torch.bfloat16):', "if True:")
    assert plain != LOOP
    rep = _run(ip, plain)
    assert rep.analysis.cpu_casts is not None and rep.analysis.cpu_casts.casts == 0
    assert not _ours(rep)
    off = LOOP.replace("dtype=torch.bfloat16)", "dtype=torch.bfloat16, enabled=False)")
    assert not _ours(_run(ip, off))


def test_lightnings_bf16_mixed_in_a_method_gets_32_true(ip):
    rep = _run(ip, LIGHTNING)
    (f,) = _ours(rep)
    assert "Lightning's bf16 precision" in f.evidence[0]
    assert rep.analysis.cpu_casts is not None and rep.analysis.cpu_casts.casts > 0
    assert f.line is not None and 'precision="bf16-mixed"' in LIGHTNING.splitlines()[f.line - 2]
    patched = apply_fix(FIX, LIGHTNING)
    assert isinstance(patched, Patch)
    assert 'precision="32-true"' in patched.source_after
    assert "bf16" not in patched.source_after


def _fresh_accelerate(ip) -> None:
    """accelerate keeps one AcceleratorState per process, and refuses another mixed precision
    once set: the shared test shell may hold an earlier module's (a fresh kernel would not)."""
    assert ip.run_cell(
        "from accelerate.state import AcceleratorState\nAcceleratorState._reset_state(True)"
    ).success


def test_accelerates_mixed_precision_keyword_gets_no(ip):
    _fresh_accelerate(ip)
    rep = _run(ip, ACCELERATE)
    (f,) = _ours(rep)
    assert f.line == 6  # the Accelerator(...) line, under the %%gpucheck line
    assert rep.analysis.cpu_casts is not None and rep.analysis.cpu_casts.casts > 0
    patched = apply_fix(FIX, ACCELERATE)
    assert isinstance(patched, Patch)
    assert 'Accelerator(mixed_precision="no", cpu=True)' in patched.source_after
    plain = ACCELERATE.replace('mixed_precision="bf16", ', "")
    _fresh_accelerate(ip)
    assert not _ours(_run(ip, plain))
    _fresh_accelerate(ip)


def test_an_amx_cpu_is_asked_to_measure_not_told_it_is_slower(ip):
    rep = _run(ip, LOOP)
    assert _ours(rep)[0].severity != "info"
    assert "amx_bf16" not in (rep.run.env.cpu_bf16_flags or ())  # this machine: no AMX
    # The flags are the capture's reading (capture.cpu_bf16_flags): an AMX CPU's, given there.
    env = dataclasses.replace(rep.run.env, cpu_bf16_flags=("avx512_bf16", "amx_bf16"))
    amx = dataclasses.replace(rep.run, env=env)
    f = rule(amx, rep.analysis, cell_facts(amx.cell_source, ip.user_ns))
    assert f is not None and f.severity == "info"
    assert f.gain_bound is None and f.gain_low is None  # bfloat16 may win there: no slowdown
    assert f.said.amx and f.fix_id == FIX.fix_id  # the change offered, to measure


def test_the_cpu_flags_are_read_from_cpuinfo(tmp_path: Path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu sse avx512f avx512_bf16 amx_tile amx_bf16\n")
    assert cpu_bf16_flags(info) == ("avx512_bf16", "amx_bf16")
    info.write_text("processor\t: 0\nflags\t\t: fpu sse avx2\n")
    assert cpu_bf16_flags(info) == ()
    info.write_text("processor\t: 0\nFeatures\t: fp asimd\n")  # an ARM CPU: not read
    assert cpu_bf16_flags(info) is None
    assert cpu_bf16_flags(tmp_path / "absent") is None
    if os.path.exists("/proc/cpuinfo"):
        assert cpu_bf16_flags() is not None


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        ('torch.autocast("cpu", dtype=torch.bfloat16)', "autocast"),
        ('torch.autocast(device_type="cpu")', "autocast"),  # the CPU's default: bfloat16
        ("torch.cpu.amp.autocast()", "autocast"),
        ('torch.amp.autocast("cpu", torch.bfloat16)', "autocast"),
        ("torch.autocast(dev.type, dtype=torch.bfloat16)", "autocast"),
        ('torch.autocast("cpu", dtype=torch.bfloat16, enabled=False)', None),
        ('torch.autocast("cpu", dtype=torch.float16)', None),  # precision.cpu_float16's
        ('torch.autocast("cuda", dtype=torch.bfloat16)', None),
        ("torch.cuda.amp.autocast(dtype=torch.bfloat16)", None),
        ('L.Trainer(precision="bf16-mixed", accelerator="cpu")', "lightning"),
        ('pl.Trainer(precision="bf16")', "lightning"),
        ('Fabric(precision="bf16-mixed")', "lightning"),
        ('L.Trainer(precision="32-true")', None),
        ('Trainer(model=m, args=args, precision="bf16-mixed")', None),  # HF's Trainer
        ("TrainingArguments(output_dir='o', bf16=True, use_cpu=True)", "hf"),
        ("Seq2SeqTrainingArguments(output_dir='o', bf16=True)", "hf"),
        ("TrainingArguments(output_dir='o', bf16=False)", None),
        ('Accelerator(mixed_precision="bf16", cpu=True)', "accelerate"),
        ('Accelerator(mixed_precision="no")', None),
    ],
)
def test_each_spelling_is_read_and_switched_off(code: str, kind: str | None):
    call = parse_ast(code).body[0].value  # type: ignore[attr-defined]
    assert bf16_autocast_kind(call) == kind
    patched = apply_fix(FIX, f"x = {code}\n")
    if kind is None:
        assert isinstance(patched, Refusal)
        return
    assert isinstance(patched, Patch)
    after = patched.source_after.split("x = ", 1)[1].strip()
    assert bf16_autocast_kind(parse_ast(after).body[0].value) is None  # type: ignore[attr-defined]


def test_a_keyword_naming_a_module_constant_is_read_through_it():
    """Unseen round 21's script: ``PRECISION = "bf16-mixed"`` above
    ``L.Trainer(precision=PRECISION)``; the fix sets the literal at the call."""
    code = 'import lightning as L\nPRECISION = "bf16-mixed"\ntrainer = L.Trainer(precision=PRECISION)\n'
    tree = parse_ast(code)
    call = tree.body[2].value  # type: ignore[attr-defined]
    assert bf16_autocast_kind(call, module_constants(tree)) == "lightning"
    assert bf16_autocast_kind(call) is None  # a name alone is not read
    patched = apply_fix(FIX, code)
    assert isinstance(patched, Patch)
    assert 'L.Trainer(precision="32-true")' in patched.source_after
    rebound = code + 'PRECISION = "32-true"\n'  # bound twice: which one ran is not known
    assert bf16_autocast_kind(call, module_constants(parse_ast(rebound))) is None


def test_recorded_gpu_runs_that_autocast_to_bf16_are_silent():
    """The H200's and H100's kit runs autocast to bfloat16 on CUDA (a non-literal device and
    ``enabled=self.bf16``: the cell reader counts it): no CPU casts are read from a GPU trace,
    and the rule stays silent, even where the run's record says no GPU was visible."""
    from tests.test_recorded_gpu_runs import H100, H200, _rebuilt, _stored

    for kit in (H200, H100):
        stem = "fp32-matmul.fix-autocast-bf16"
        if not (kit / f"{stem}.trace.json.gz").exists():
            continue
        rep = _rebuilt(kit, stem)
        assert any(
            bf16_autocast_kind(c) for c in cell_facts(rep.run.cell_source, None).tree.calls()
        )
        assert rep.analysis.cpu_casts is None
        assert not _ours(rep)
        stored = _stored(kit, stem)
        blind = dataclasses.replace(
            rep.run, env=dataclasses.replace(rep.run.env, cuda_available=False, gpus=())
        )
        assert rule(blind, rep.analysis, cell_facts(stored.run.cell_source, None)) is None
