"""Loops that take their gradients with torch.autograd.grad or torch.func.grad are measured.

Seen (issue 26, unseen round 6): DP-SGD by hand, per-sample gradients from
``vmap(grad(loss_fn))`` over ``functional_call(model, ...)`` and the parameters updated by hand
(no optimizer, no ``loss.backward()``, no DataLoader): 80 steps read "No training step was
detected in this cell" and "gpucheck needs a loop that calls a model, an optimizer or a
DataLoader" (it calls a model), with nothing measured. So did a manual SGD loop taking its
gradients with ``torch.autograd.grad``. Both are backward passes: the step clock counts them as
it counts ``loss.backward()``.
"""

from __future__ import annotations

import torch

from tests.test_magic import run
from tests.verdicts import judged_at_all

AUTOGRAD_GRAD_SGD = """
model = mlp(); xs = torch.randn(64, 32); ys = torch.randn(64, 1)
for step in range(12):
    loss = ((model(xs) - ys) ** 2).mean()
    grads = torch.autograd.grad(loss, list(model.parameters()))
    with torch.no_grad():
        for p, g in zip(model.parameters(), grads):
            p.sub_(0.01 * g)
"""

FUNC_GRAD_VMAP = """
from torch.func import functional_call, grad, vmap
model = mlp(); params = {k: v.detach() for k, v in model.named_parameters()}
xs = torch.randn(32, 32); ys = torch.randn(32, 1)
def loss_fn(p, x, y):
    return ((functional_call(model, p, (x.unsqueeze(0),)) - y) ** 2).mean()
per_sample = vmap(grad(loss_fn), in_dims=(None, 0, 0))
for step in range(12):
    g = per_sample(params, xs, ys)
    params = {k: v - 0.01 * g[k].mean(0) for k, v in params.items()}
"""

# A gradient penalty (WGAN-GP) takes torch.autograd.grad inside a step an optimizer ends.
PENALTY_WITH_OPTIMIZER = """
model = mlp(); opt = torch.optim.SGD(model.parameters(), lr=0.01)
xs = torch.randn(64, 32); ys = torch.randn(64, 1)
for step in range(12):
    x = xs.clone().requires_grad_(True)
    out = model(x)
    (gx,) = torch.autograd.grad(out.sum(), x, create_graph=True)
    loss = ((out - ys) ** 2).mean() + ((gx.norm(dim=1) - 1) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_a_loop_taking_its_gradients_with_autograd_grad_has_steps(ip):
    original = torch.autograd.grad
    rep = run(ip, AUTOGRAD_GRAD_SGD)
    assert rep.run.steps.anchor == "backward"
    assert rep.run.steps.step_count >= 10
    assert rep.run.window.status == "recorded"
    judged_at_all(rep)  # measured: a verdict, or too busy to judge by the recorded gate
    assert torch.autograd.grad is original  # nothing of ours is left behind


def test_per_sample_gradients_from_func_grad_under_vmap_have_steps(ip):
    rep = run(ip, FUNC_GRAD_VMAP)
    assert rep.run.steps.anchor == "backward"
    assert rep.run.steps.step_count >= 10
    judged_at_all(rep)  # measured: a verdict, or too busy to judge by the recorded gate


def test_a_gradient_penalty_inside_an_optimizer_step_is_no_step_of_its_own(ip):
    rep = run(ip, PENALTY_WITH_OPTIMIZER, "-w 1 -s 3")
    assert rep.run.steps.anchor == "optimizer"
    assert 10 <= rep.run.steps.step_count <= 12
