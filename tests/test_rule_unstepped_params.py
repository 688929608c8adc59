"""Parameters that get gradients but no optimizer steps (rules/unstepped_params.py), real runs.

Seen (unseen round 20, probe_unfrozen_backbone): a linear probe's optimizer holds only the head,
the backbone never frozen: every backward computed its gradients for nothing (by hand
``backbone.requires_grad_(False)`` 1.64x) and the tool said nothing. The negatives are the
shapes where parameters are rightly outside one optimizer: a GAN's two optimizers, a
hand-written update, a fully stepped model, an EMA teacher copy run under no_grad.
"""

from __future__ import annotations

from gpu_notebook.fixes import Patch, Refusal, apply_fix
from gpu_notebook.records import Report
from gpu_notebook.rules import FAMILIES, unstepped_params
from gpu_notebook.rules.unstepped_params import FIX

RULE = "unstepped_params.unfrozen"

PROBE = """\
import torch
from torch import nn
torch.manual_seed(0)
backbone = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1),
                         nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
head = nn.Linear(16, 10)
images = torch.randn(16 * 30, 3, 16, 16)
labels = torch.randint(0, 10, (len(images),))
opt = torch.optim.SGD(head.parameters(), lr=0.1)
for i in range(0, len(images), 16):
    xb, yb = images[i : i + 16], labels[i : i + 16]
    loss = nn.functional.cross_entropy(head(backbone(xb)), yb)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def _findings(ip, body: str) -> list:
    ip.user_ns.pop("rep", None)
    result = ip.run_cell(f"%%gpucheck -q -o rep\n{body}")
    assert result.success, result.error_in_exec
    rep: Report = ip.user_ns["rep"]
    return [f for f in rep.findings if f.rule_id == RULE]


def test_the_rule_module_is_found():
    assert unstepped_params in FAMILIES


def test_a_probe_whose_backbone_was_never_frozen_names_it_and_freezes_it(ip):
    (f,) = _findings(ip, PROBE)
    assert f.fix_params["target"] == "backbone" and f.fix_params["modules"] == "backbone"
    assert "4 parameter tensor(s)" in f.evidence[0]  # two convs' weights and biases
    assert "9" in f.evidence[1]  # the backbone: over 90% of the trained parameters
    assert f.phase_share is not None and 0 < f.phase_share < 1
    assert f.gain_bound is not None and f.gain_bound > 1.0
    assert "`backbone`" in f.title
    patched = apply_fix(FIX, PROBE, **f.fix_params)
    assert isinstance(patched, Patch)
    after = patched.source_after
    assert after.index("backbone.requires_grad_(False)") > after.index("opt = torch.optim.SGD")
    scope: dict[str, object] = {}
    exec(compile(after, "<cell>", "exec"), scope)  # it still trains the head
    assert all(p.grad is None for p in scope["backbone"].parameters())  # type: ignore[attr-defined]


def test_one_submodule_left_out_is_frozen_and_mixed_ones_are_refused(ip):
    net = PROBE.replace(
        "opt = torch.optim.SGD(head.parameters(), lr=0.1)",
        "net = nn.Sequential(backbone, head)\nopt = torch.optim.SGD(net[1].parameters(), lr=0.1)",
    ).replace("head(backbone(xb))", "net(xb)")
    (f,) = _findings(ip, net)
    assert f.fix_params["target"] == 'net.get_submodule("0")' and "net.0" in f.title
    patched = apply_fix(FIX, net, **f.fix_params)
    assert (
        isinstance(patched, Patch)
        and 'net.get_submodule("0").requires_grad_(False)' in patched.source_after
    )
    # Half of the backbone's first conv stepped (its weight), its bias not: no whole submodule.
    mixed = PROBE.replace("head.parameters()", "[*head.parameters(), backbone[0].weight]")
    (f,) = _findings(ip, mixed)
    assert f.fix_params["target"] is None and "backbone" in str(f.fix_params["modules"])
    refused = apply_fix(FIX, mixed, **f.fix_params)
    assert isinstance(refused, Refusal) and "backbone" in refused.reason


def test_parameters_rightly_outside_the_optimizer_say_nothing(ip):
    stepped = PROBE.replace("head.parameters()", "[*backbone.parameters(), *head.parameters()]")
    gan = (
        PROBE.replace(
            "opt = torch.optim.SGD(head.parameters(), lr=0.1)",
            "opt = torch.optim.SGD(head.parameters(), lr=0.1)\n"
            "opt_b = torch.optim.SGD(backbone.parameters(), lr=0.1)",
        )
        .replace("    opt.zero_grad()\n", "    opt.zero_grad()\n    opt_b.zero_grad()\n")
        .replace("    opt.step()\n", "    opt.step()\n    opt_b.step()\n")
    )
    manual = PROBE.replace(
        "    opt.step()\n",
        "    opt.step()\n    with torch.no_grad():\n"
        "        for p in backbone.parameters():\n            p -= 0.01 * p.grad\n",
    )
    teacher = (
        PROBE.replace(
            "opt = torch.optim.SGD(head.parameters(), lr=0.1)",
            "backbone.requires_grad_(False)\nimport copy\nmodel = nn.Sequential(copy.deepcopy(backbone), head)\n"
            "model[0].requires_grad_(True)\nema = copy.deepcopy(model)\n"
            "opt = torch.optim.SGD(model.parameters(), lr=0.1)",
        )
        .replace("head(backbone(xb))", "model(xb)")
        .replace("    opt.step()\n", "    opt.step()\n    with torch.no_grad():\n        ema(xb)\n")
    )
    # The backbone run under no_grad: the backward never reaches it, no gradient is made.
    no_grad = PROBE.replace(
        "    loss = nn.functional.cross_entropy(head(backbone(xb)), yb)\n",
        "    with torch.no_grad():\n        feats = backbone(xb)\n"
        "    loss = nn.functional.cross_entropy(head(feats), yb)\n",
    )
    # A second optimizer local to the function that trains: the namespace does not hold it
    # (a name of its own: the shell keeps the GAN case's opt_b).
    local = (
        PROBE.replace(
            "for i in range(0, len(images), 16):\n",
            "def train():\n  opt_local = torch.optim.SGD(backbone.parameters(), lr=0.1)\n"
            "  for i in range(0, len(images), 16):\n",
        )
        .replace("    opt.zero_grad()\n", "    opt.zero_grad()\n    opt_local.zero_grad()\n")
        .replace("    opt.step()\n", "    opt.step()\n    opt_local.step()\ntrain()\n")
    )
    for body in (stepped, gan, manual, teacher, no_grad, local):
        assert _findings(ip, body) == [], body
        # The backward reached every parameter: the silence is the rule's, not a missing grad.
        assert all(p.grad is not None for p in ip.user_ns["head"].parameters())
    assert all(p.grad is not None for p in ip.user_ns["backbone"].parameters())  # local's


def test_reading_the_namespace_runs_none_of_its_objects_code_and_warns_nothing():
    """A namespace holding ``torch.distributed`` (its deprecated ``reduce_op`` warns from its own
    ``__getattribute__``) and a user object that counts reads of its attributes: the optimizer is
    found behind both kinds, nothing of theirs runs, and nothing is warned (the fresh-clone CI of
    b4d3f18 showed a FutureWarning from cell/unstepped_params for every cell importing it)."""
    import warnings

    import torch
    import torch.distributed as dist
    from torch import nn

    from gpu_notebook.cell.unstepped_params import optimizer_params

    model = nn.Linear(2, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    class Holder:
        reads = 0

        def __init__(self) -> None:
            self.opt = opt

        def __getattribute__(self, name: str):
            type(self).reads += 1
            return object.__getattribute__(self, name)

    holder = Holder()
    Holder.reads = 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        params, count = optimizer_params({"dist": dist, "holder": holder}, torch)
    assert count == 1 and {id(p) for p in model.parameters()} <= params
    assert Holder.reads == 0
