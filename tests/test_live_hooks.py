"""Hooks on the live modules that the measured cell's source does not show (cell/live_hooks.py).

The class: per-step hook code registered outside the cell. A notebook attaches its monitoring
hooks in one cell (``for n, m in model.named_modules(): m.register_forward_hook(make_hook(n))``)
or through a helper of its own ``.py`` file, and measures a cell that only trains: the source
rule (cell/registered_hooks) read registrations in the cell, found none, and the hooks' ``.item()``
every forward went unnamed. Asserted, on a real IPython shell and real modules: such a hook is
read off the live dicts and named where it was defined (``In[N] line K``, ``file.py:K``); one whose
handles the cell removes before its loop (by ``.remove()`` or a ``with``) is not, whether the
earlier cell or the cell itself registered it, while one removed after the loop still is; and a
real ``%%gpucheck`` run names the earlier cell in the finding. With the hooks read as the cell
starts too, an earlier cell's hook the cell removes after its loop is read (not one on a model
the cell rebuilt); a model the cell reaches only through an object (a trainer's ``self.model``,
a list of models) is read; two lambdas alike are told apart by where they sit.
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


# ---------------------------------------------------------------- the hooks as the cell started


def _facts_of(ip, cell: str, steps: int = 3):
    """The cell's facts read as the magic reads them: the hooks at its start, then at its end."""
    import torch

    from gpu_notebook.cell.live_hooks import hooks_at_start

    cell = cell.replace("STEPS", str(steps))
    at_start = hooks_at_start(ip.user_ns, cell, torch)
    assert ip.run_cell(cell).success
    return cell, cell_facts(cell, ip.user_ns, hooks_at_start=at_start)


def test_an_earlier_cells_hook_the_cell_removes_after_its_loop_is_read_from_its_start(ip):
    """Gone by the cell's end, on during its loop: the start's dicts hold it. Removed before
    the loop (its handles named there), rebuilt away (a new model): not read."""
    number = _earlier(ip)
    after = TRAIN + "for h in lh_handles:\n    h.remove()\n"
    cell, facts = _facts_of(ip, after)
    assert [len(m._forward_hooks) for m in ip.user_ns["lh_model"]] == [0, 0, 0]  # gone at the end
    assert not cell_facts(cell, ip.user_ns).registered_hook_reads  # the end alone: missed
    reads = facts.registered_hook_reads
    assert [(r.kind, r.called_in) for r in reads] == [
        ("item", "forward hook `hook` (on `lh_model.0` +1)")
    ]
    assert reads[0].origin is not None and reads[0].origin.cell_number == number
    _earlier(ip)
    _, facts = _facts_of(ip, "for h in lh_handles:\n    h.remove()\n" + TRAIN)
    assert not facts.registered_hook_reads  # removed before the loop: never ran in it
    _earlier(ip)
    fresh = "lh_model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))\n"
    _, facts = _facts_of(ip, fresh + after)
    assert not facts.registered_hook_reads  # the hooked model is not the one trained


# ---------------------------------------------------------------- a model behind an object


HOLDER = """\
class LhHolder:
    calls = 0

    def __init__(self, model):
        self.model = model
        self.parts = {"student": model}

    @property
    def net(self):
        LhHolder.calls += 1
        return self.model

    def __getattr__(self, name):
        LhHolder.calls += 1
        raise AttributeError(name)

    @property
    def __class__(self):  # a proxy's: ``isinstance`` asks it
        LhHolder.calls += 1
        return LhHolder

    def fit(self, steps):
        opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
        for _ in range(steps):
            loss = self.model(torch.randn(4, 8)).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()

lh_trainer = LhHolder(lh_model)
"""


def test_a_model_held_by_a_framework_like_object_is_read_through_its_attributes(ip):
    """The cell names only the trainer (``lh_trainer.fit(3)``): its ``model`` attribute is the
    hooked model, read through the instance dict, never a property, ``__getattr__`` or the
    object's own ``__class__``."""
    _earlier(ip)
    assert ip.run_cell(HOLDER).success
    import torch

    from gpu_notebook.cell.live_hooks import hooks_at_start, live_hooks

    cell = _ran(ip, "lh_trainer.fit(STEPS)\n")
    before = ip.user_ns["LhHolder"].calls
    assert len(hooks_at_start(ip.user_ns, cell, torch).hooks) == 2
    assert len(live_hooks(ip.user_ns, ["lh_trainer"], cell, torch).reads) == 1
    assert ip.user_ns["LhHolder"].calls == before  # no code of the user's ran
    reads = cell_facts(cell, ip.user_ns).registered_hook_reads
    assert [(r.kind, r.called_in) for r in reads] == [
        ("item", "forward hook `hook` (on `lh_trainer.model.0` +1)")
    ]
    # No loop in the cell (the object's method holds it): a removal after its last working
    # call came after the steps, one before it before them.
    removal = "for h in lh_handles:\n    h.remove()\n"
    _, facts = _facts_of(ip, "lh_trainer.fit(STEPS)\n" + removal)
    assert [r.kind for r in facts.registered_hook_reads] == ["item"]
    _earlier(ip)
    assert ip.run_cell(HOLDER).success
    _, facts = _facts_of(ip, removal + "lh_trainer.fit(STEPS)\n")
    assert not facts.registered_hook_reads


def test_a_model_in_a_plain_container_is_read_and_one_module_once():
    """A dict or list of models (accelerate's ``_models``) is followed; a model reached by
    two paths is one model; a tensor, a class and a module object are not walked."""
    import torch

    from gpu_notebook.cell.live_hooks_reach import modules_reached, slots

    model = torch.nn.Sequential(torch.nn.Linear(2, 2))
    model[0].register_forward_hook(lambda m, i, o: None)

    class Acc:
        def __init__(self) -> None:
            self._models = [model]
            self.same = {"m": model}
            self.t = torch.ones(2)

    namespace = {"acc": Acc(), "model": model, "torch": torch, "Acc": Acc}
    reached = modules_reached(namespace, ["acc", "torch", "Acc"], torch)
    assert [(where, m is model) for where, m in reached] == [("acc._models[0]", True)]
    both = modules_reached(namespace, ["acc", "model"], torch)
    assert [where for where, _ in both] == ["model"]  # the name first, once
    assert [(s.kind, s.where) for s in slots(namespace, ["acc"], torch)] == [
        ("forward hook", "acc._models[0].0")
    ]


# ---------------------------------------------------------------- two lambdas alike


def test_of_two_lambdas_alike_the_removed_one_is_not_read_and_the_other_is(ip):
    """Both named ``<lambda>``: told apart by where their code sits in the cell (line, and
    column for two on one line)."""
    _earlier(ip)
    _ran(ip, "for h in lh_handles:\n    h.remove()\nlh_0, lh_2 = lh_model[0], lh_model[2]\n")
    hook = "lh_{k}.register_forward_hook(lambda m, i, o: lh_stats.append(o.sum().item()))"
    two_lines = f"h0 = {hook.format(k=0)}\nh2 = {hook.format(k=2)}\nh0.remove()\n" + TRAIN
    cell = _ran(ip, two_lines)
    assert [r.cell_line for r in cell_facts(cell, ip.user_ns).registered_hook_reads] == [3]
    ip.user_ns["h2"].remove()
    one_line = f"h0 = {hook.format(k=0)}; h2 = {hook.format(k=2)}\nh0.remove()\n" + TRAIN
    cell = _ran(ip, one_line)
    reads = cell_facts(cell, ip.user_ns).registered_hook_reads
    assert [(r.cell_line, r.called_in) for r in reads] == [
        (2, "forward hook `lambda` (registered at line 2)")
    ]
    # The second lambda's read: were both read, the line's one fact would be the first's.
    assert reads[0].node is not None and reads[0].node.col_offset > len(f"h0 = {hook.format(k=0)}")
    ip.user_ns["h2"].remove()


def test_a_hook_registered_on_a_subscripted_module_is_read_from_the_source():
    """``model[0].register_forward_hook(...)``, ``model.layers[3]...``: the register call is
    known by its method, whatever the receiver."""
    hook = "lambda m, i, o: stats.append(o.sum().item())"
    for receiver in ("model[0]", "model.layers[3]", "get(model)"):
        reads = scan_source(f"{receiver}.register_forward_hook({hook})\n").registered_hook_reads
        assert [r.kind for r in reads] == ["item"], receiver


def test_a_gpucheck_run_reads_the_hooks_its_cell_removes_after_the_loop(ip):
    """The magic takes the hooks as the cell starts and hands them to the report."""
    number = _earlier(ip)
    cell = TRAIN.replace("STEPS", "40") + "for h in lh_handles:\n    h.remove()\n"
    ip.run_cell_magic("gpucheck", "-q -o _lh_report", cell)
    report = ip.user_ns["_lh_report"]
    assert report.run.status == "ok"
    hits = [f for f in report.findings if f.rule_id == "syncs.module_hook_read"]
    assert len(hits) == 1, [f.rule_id for f in report.findings]
    assert any(f"In[{number}] line" in e for e in hits[0].evidence), hits[0].evidence
