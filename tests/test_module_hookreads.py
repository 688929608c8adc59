"""Host reads of device values in the functions the cell registers as module or tensor hooks
are per-step reads, named at the hook's lines (cell/registered_hooks.py,
rules/syncs.registered_hook_reads).

Unseen round 21 (benchmarks/unseen_programs/activation_stats_hooks.py): ``make_hook(name)``
registered by ``register_forward_hook`` on 20 layers over ``model.named_modules()``, each hook
reading ``mean``/``std``/zeros by ``.item()`` every forward (1.37x by hand gated to every 50th
step); the tool said "ops too small, use torch.compile" and never named the hooks, since the
reads followed only the loop's calls. Asserted: which registered functions are read (a factory
over named_modules, a lambda on one module, a plain def as a tensor's gradient hook, a partial,
the global forward hook) and which are not (a hook that only records shapes, one whose reads
sit behind the flag the loop sets), the finding's words and its refusal of a patch, and a real
``%%gpucheck`` run naming the hook's lines with a sampled share.
"""

from __future__ import annotations

from gpu_notebook.cell.scan import scan_source

FACTORY = """
import collections
import torch
from torch import nn

model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
stats = collections.defaultdict(list)

def make_hook(name):
    def hook(module, inputs, out):
        o = out.detach()
        stats[name + ".mean"].append(o.mean().item())
        stats[name + ".zeros"].append(float((o == 0).float().mean()))
    return hook

for name, m in model.named_modules():
    if isinstance(m, nn.Linear):
        m.register_forward_hook(make_hook(name))

opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(20):
    loss = model(torch.randn(4, 8)).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""

# A lambda on one module, a plain def as a parameter's gradient hook, a partial of a def, the
# global forward hook; and two that read nothing per step: one appends shapes, one reads behind
# the flag the loop sets on its logging steps (under an ``if``, or after an early ``return``).
SHAPES = """
import functools
import torch
from torch import nn
from torch.nn.modules.module import register_module_forward_hook

model = nn.Linear(8, 4)
seen, norms, shapes = [], [], []
model.register_forward_hook(lambda mod, inp, out: seen.append(out.norm().item()))

def grad_peak(g):
    norms.append(g.abs().max().cpu())
    return g

model.weight.register_hook(grad_peak)

def tagged(tag, mod, inp, out):
    seen.append((tag, out.sum().tolist()))

model.register_forward_pre_hook(functools.partial(tagged, "pre"))
register_module_forward_hook(lambda mod, inp, out: seen.append(int(out.argmax())))

def record_shape(mod, inp, out):
    shapes.append(tuple(out.shape))

model.register_forward_hook(record_shape)
log_now = False

def gated(mod, inp, out):
    if log_now:
        seen.append(out.mean().item())

model.register_forward_hook(gated)

def early(mod, inp, out):
    if not log_now:
        return
    seen.append(out.std().item())

model.register_forward_hook(early)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(20):
    log_now = step % 10 == 0
    loss = model(torch.randn(4, 8)).sum()
    loss.backward()
    opt.step()
"""


def _line(source: str, text: str) -> int:
    return next(i for i, t in enumerate(source.splitlines(), 1) if text in t)


def _reads(source: str) -> list[tuple[int, str, str | None]]:
    return [(s.line, s.kind, s.called_in) for s in scan_source(source).registered_hook_reads]


def test_a_factorys_hooks_over_named_modules_are_read_at_the_inner_defs_lines():
    registered = _line(FACTORY, "m.register_forward_hook(make_hook(name))")
    where = f"forward hook `hook` (registered at line {registered})"
    assert _reads(FACTORY) == [
        (_line(FACTORY, 'name + ".mean"'), "item", where),
        (_line(FACTORY, 'name + ".zeros"'), "float", where),
    ]
    # None of them is a read of the loop's own (cell/syncs follows calls, not registrations).
    assert not scan_source(FACTORY).syncs


def test_lambdas_gradient_hooks_partials_and_global_hooks_are_read_shapes_and_gated_are_not():
    got = _reads(SHAPES)
    assert got == [
        (_line(SHAPES, "model.register_forward_hook(lambda"), "item",
         f"forward hook `lambda` (registered at line {_line(SHAPES, 'forward_hook(lambda')})"),
        (_line(SHAPES, "norms.append"), "cpu",
         f"gradient hook `grad_peak` (registered at line {_line(SHAPES, 'register_hook(grad')})"),
        (_line(SHAPES, "seen.append((tag"), "tolist",
         f"forward pre hook `tagged` (registered at line {_line(SHAPES, 'partial(tagged')})"),
        (_line(SHAPES, "register_module_forward_hook(lambda"), "float",
         f"forward hook `lambda` (registered at line {_line(SHAPES, 'module_forward_hook(lam')})"),
    ]  # fmt: skip
    lines = {line for line, _, _ in got}
    assert _line(SHAPES, "shapes.append") not in lines
    assert _line(SHAPES, "seen.append(out.mean().item())") not in lines
    assert _line(SHAPES, "seen.append(out.std().item())") not in lines  # after `return` on a flag


def test_the_finding_names_the_hooks_and_refuses_a_patch_saying_where_to_gate():
    from tests.scenarios import synthetic as syn
    from tests.test_rules import only, rules_for

    f = only(rules_for(syn.make_run(FACTORY), syn.make_analysis({})), "syncs.module_hook_read")
    assert f.fix_id is None and f.proposal is None
    assert "forward hook `hook`" in f.title
    assert f.line == _line(FACTORY, 'name + ".mean"') + 1  # the %%gpucheck line
    named = [e for e in f.evidence if "which torch runs on every forward or backward" in e]
    assert len(named) == 2, f.evidence
    assert "handle.remove()" in f.fix and "if not log_now: return" in f.fix
    # A hook that reads nothing is no finding.
    quiet = FACTORY.replace("make_hook(name))", "print)")
    assert "syncs.module_hook_read" not in [
        g.rule_id for g in rules_for(syn.make_run(quiet), syn.make_analysis({}))
    ]


def test_a_real_cell_run_names_the_hooks_lines_with_their_sampled_share(ip):
    cell = FACTORY.replace("nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)", ", ".join(
        ["nn.Linear(8, 16)", *["nn.Linear(16, 16)"] * 6, "nn.Linear(16, 4)"]
    )).replace("range(20)", "range(300)")  # fmt: skip
    cell = cell.replace("model =", "hr_model =").replace("model.", "hr_model.")
    cell = cell.replace("model(", "hr_model(").replace("stats", "hr_stats")
    ip.run_cell_magic("gpucheck", "-q -o _hr_report --lines all", cell)
    report = ip.user_ns["_hr_report"]
    assert report.run.status == "ok"
    hits = [f for f in report.findings if f.rule_id == "syncs.module_hook_read"]
    assert len(hits) == 1, [f.rule_id for f in report.findings]
    f = hits[0]
    assert f.line == _line(cell, 'name + ".mean"')
    assert "forward hook `hook`" in f.title and f.fix_id is None
    # Costed by the stack sampler on the hook's lines (their frames are the cell's); how many
    # samples land there is the machine's load (after another module's cells, under load: too
    # few), and then the finding says so rather than cost them.
    sampled = any("the sampled time on those lines" in e for e in f.evidence)
    assert sampled or any("too few stack samples of those lines" in e for e in f.evidence), (
        f.evidence
    )
    if sampled:
        assert f.phase_share is not None and f.phase_share > 0
        assert f.gain_bound is not None and f.gain_bound > 1


def test_the_too_small_ops_finding_stands_down_where_hooks_read_every_step():
    """A CPU window of many small ops: the too-small-ops finding (compile, a bigger batch) is
    there for a plain loop and stands down where a registered hook reads every step (its
    reductions are among the small ops; the hook's finding names them), as it does for the
    loop's own per-step reads."""
    from gpu_notebook.rules import run_rules
    from tests.scenarios import synthetic as syn
    from tests.test_compile_bound import LOOP, _window

    hooked = LOOP.replace("for step", "model.register_forward_hook(lambda m, i, o: "
                          "seen.append(o.abs().mean().item()))\nfor step")  # fmt: skip
    plain = [f.rule_id for f in run_rules(syn.make_run(LOOP), _window(10.0), syn.VERDICT)]
    got = [f.rule_id for f in run_rules(syn.make_run(hooked), _window(10.0), syn.VERDICT)]
    assert "launch.tiny_ops" in plain and "syncs.module_hook_read" not in plain
    assert "launch.tiny_ops" not in got and "syncs.module_hook_read" in got
    # A hook that reads nothing leaves it as it was.
    quiet = LOOP.replace("for step", "model.register_forward_hook(record_shape)\nfor step")
    assert "launch.tiny_ops" in [
        f.rule_id for f in run_rules(syn.make_run(quiet), _window(10.0), syn.VERDICT)
    ]
