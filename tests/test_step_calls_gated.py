"""A function the step loop calls under an ``if`` (``if step % 25 == 0: evaluate(...)``) runs
some steps only: a host read inside it is no per-step read (cell/step_calls).

Unseen round 15 (benchmarks/unseen_programs/while_next_step_fn.py): the step loop calls
``evaluate(model, val_loader, device)`` every 25 steps, whose own loop reads
``(...).sum().item()`` per validation batch. The report said "[info] `evaluate` reads a device
value every step ... No patch: `evaluate` needs the value to go on": the read was taken for the
model's forward's, every step and needed.
"""

from __future__ import annotations

from gpu_notebook.cell.scan import scan_source

EVAL_EVERY_N = """
import torch
from torch import nn

def evaluate(model, loader):
    correct = 0
    with torch.no_grad():
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum().item()
    return correct

model = nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
step = 0
it = iter(loader)
while True:
    try:
        x, y = next(it)
    except StopIteration:
        break
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    step += 1
    if step % 25 == 0:
        print(step, evaluate(model, val_loader))
"""

# A second shape: a module of the cell called like a function under a gate, its forward reads
# with no loop of its own (a monitor every 10 steps), beside the model's forward called every
# step whose read stays a needed one.
MONITOR = """
import torch
from torch import nn

class Monitor(nn.Module):
    def forward(self, h):
        return h.std().item()

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        keep = int(x.abs().sum().item()) % 2
        return self.fc(x)

model = Net()
monitor = Monitor()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step, (x, y) in enumerate(loader):
    out = model(x)
    loss = nn.functional.cross_entropy(out, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 10 == 0:
        spread = monitor(out)
"""


def _line(source: str, text: str) -> int:
    return next(i for i, line in enumerate(source.splitlines(), 1) if text in line)


def test_a_read_in_a_function_called_every_n_steps_is_no_per_step_read():
    facts = scan_source(EVAL_EVERY_N)
    read = _line(EVAL_EVERY_N, ".sum().item()")
    at = [s for s in facts.syncs if s.line == read]
    assert at, facts.syncs
    assert all(s.called_in is None and not s.needed for s in at), at
    # The evaluation's own loop holds it, not the step loop: no rule reads it as a step's.
    assert all(s.step_loop_line is None for s in at), at
    assert not [s for s in facts.per_step(facts.syncs) if s.step_loop_line is not None and
                s.line == read]  # fmt: skip


def test_a_gated_call_of_a_modules_forward_is_no_step_read_but_the_models_forward_is():
    facts = scan_source(MONITOR)
    assert not [s for s in facts.syncs if s.line == _line(MONITOR, "h.std().item()")]
    forward = [s for s in facts.syncs if s.line == _line(MONITOR, "x.abs().sum().item()")]
    assert [(s.called_in, s.needed) for s in forward] == [("Net.forward", True)]
