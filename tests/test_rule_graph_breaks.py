"""The graph-break rule (rules/graph_breaks.py): a compiled model's forward read from the cell."""

from __future__ import annotations

import pytest

from tests.scenarios import synthetic as syn
from tests.test_rules import ids, only, rules_for

CELL = """\
import torch
from torch import nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 8)
        self.b = nn.Linear(8, 1)

    def forward(self, x):
        h = self.a(x)
        if h.abs().max().item() > 50:
            h = h / 50
        return self.b(h)

model = torch.compile(Net())
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    loss = model(torch.randn(8, 4)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_a_value_read_in_a_compiled_models_forward_is_named_as_a_graph_break():
    f = only(rules_for(syn.make_run(CELL), syn.make_analysis()), "compile.graph_break")
    # Line 13 of the notebook cell: the %%gpucheck line is line 1.
    assert f.line == 13 and f.severity == "low" and f.fix_id is None and f.gain_bound is None
    assert "Net.forward" in f.evidence[0]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("model = torch.compile(Net())", "net = Net()\nmodel = torch.compile(net)"),
        ("if h.abs().max().item() > 50:", "if print(h) is None:"),
    ],
)
def test_the_compiled_instance_may_be_named_and_a_print_breaks_too(old, new):
    cell = CELL.replace(old, new)
    assert "compile.graph_break" in ids(rules_for(syn.make_run(cell), syn.make_analysis()))


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("model = torch.compile(Net())", "model = Net()"),  # not compiled
        ("if h.abs().max().item() > 50:", "if x.shape[0] > 50:"),  # shapes are traced
        (
            "        return self.b(h)\n",
            "        return self.b(h)\n\n    def report(self, h):\n        return h.item()\n",
        ),  # not in forward (and the original read removed below)
    ],
)
def test_no_finding_without_a_break_in_a_compiled_forward(old, new):
    cell = CELL.replace(old, new)
    if "def report" in cell:
        cell = cell.replace("if h.abs().max().item() > 50:", "if x.shape[0] > 50:")
    assert "compile.graph_break" not in ids(rules_for(syn.make_run(cell), syn.make_analysis()))
