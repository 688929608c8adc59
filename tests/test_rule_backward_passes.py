"""Issue 26 (unseen round 9): two losses on a shared trunk, each with its own backward.

``l_cls.backward(retain_graph=True); l_reg.backward()`` runs the trunk's backward twice; summed
into one backward the step measured 1.45x-1.60x faster (thread time, a 512-wide MLP trunk, two
linear heads), and main said nothing (cpu-only, no finding). Mechanisms: the cell's facts, the
rule on a seeded window, the patch, and the patched code's gradients equal to the original's.
"""

from __future__ import annotations

import pytest
import torch

from gpu_notebook.cell.scan import scan_source
from gpu_notebook.fixes.catalog import apply_fix
from gpu_notebook.fixes.records import Patch, Refusal
from gpu_notebook.rules import RULE_FIXES, run_rules
from gpu_notebook.rules.backward_passes import backward_groups
from gpu_notebook.words import word_findings as words
from tests.scenarios import synthetic as syn

CELL = """\
for x, yc, yr in loader:
    logits, pred = model(x)
    l_cls = F.cross_entropy(logits, yc)
    l_reg = F.mse_loss(pred, yr)
    l_cls.backward(retain_graph=True)
    l_reg.backward()
    opt.step()
    opt.zero_grad()
"""


def _groups(cell: str) -> list[int]:
    tree = scan_source(cell).tree
    assert tree is not None
    return [len(g) for g in backward_groups(tree)]


def test_consecutive_backwards_that_keep_the_graph_are_one_group():
    assert _groups(CELL) == [2]
    three = CELL.replace(
        "    l_reg.backward()\n",
        "    l_reg.backward(retain_graph=True)\n    (0.1 * l_cls.detach() + l_aux).backward()\n",
    )
    assert _groups(three) == [3]


@pytest.mark.parametrize(
    "between",
    [
        "    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n",  # sees the partial sum
        "    opt.step()\n",
        "    grads.append(model.fc.weight.grad.clone())\n",
    ],
)
def test_work_between_the_passes_keeps_them_apart(between):
    cell = CELL.replace("    l_reg.backward()\n", between + "    l_reg.backward()\n")
    assert _groups(cell) == []


def test_passes_without_retain_graph_or_with_a_gradient_are_not_joined():
    assert _groups(CELL.replace("retain_graph=True", "")) == []
    assert _groups(CELL.replace("l_reg.backward()", "l_reg.backward(torch.ones(1))")) == []
    # Outside a step loop: not a step's work.
    assert _groups("l_cls.backward(retain_graph=True)\nl_reg.backward()\n") == []


def _finding(backward: float):
    run = syn.make_run(CELL)
    analysis = syn.make_analysis({"forward": 0.3, "backward": backward, "optimizer": 0.1})
    found = {f.rule_id: f for f in words(run_rules(run, analysis, syn.VERDICT))}
    return found.get("backward.retained")


def test_the_bound_is_every_pass_but_one_of_the_backward_phase():
    f = _finding(0.6)
    assert f is not None and f.fix_id == "one_backward"
    assert f.gain_bound == pytest.approx(1 / (1 - 0.3))
    assert f.gain_low is None
    assert f.line == 6  # `l_cls.backward(retain_graph=True)` under the cell's %%gpucheck line
    assert "(l_cls + l_reg).backward()" in f.fix


def test_a_backward_too_small_to_matter_is_not_said():
    assert _finding(0.06) is None  # 3% removable, under the 5% line


def test_the_patch_gives_the_same_gradients_with_one_pass():
    patch = apply_fix(RULE_FIXES["one_backward"], CELL)
    assert isinstance(patch, Patch), patch
    assert "retain_graph" not in patch.source_after
    assert "(l_cls + l_reg).backward()" in patch.source_after

    def grads(source: str) -> list[torch.Tensor]:
        torch.manual_seed(0)
        trunk = torch.nn.Linear(6, 8)
        heads = torch.nn.Linear(8, 3), torch.nn.Linear(8, 1)

        class M(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.trunk, self.cls, self.reg = trunk, *heads

            def forward(self, x):
                h = torch.relu(self.trunk(x))
                return self.cls(h), self.reg(h)

        model = M()
        data = [(torch.randn(4, 6), torch.randint(0, 3, (4,)), torch.randn(4, 1))]
        seen: list[torch.Tensor] = []

        class Opt:
            def step(self):
                seen.extend(p.grad.clone() for p in model.parameters())

            def zero_grad(self):
                model.zero_grad()

        ns = {"loader": data, "model": model, "F": torch.nn.functional, "opt": Opt()}
        exec(source, ns)
        return seen

    before, after = grads(CELL), grads(patch.source_after)
    assert len(before) == len(after) == 6
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(before, after, strict=True))


def test_nothing_to_join_is_a_refusal():
    assert isinstance(
        apply_fix(RULE_FIXES["one_backward"], CELL.replace("retain_graph=True", "")), Refusal
    )
