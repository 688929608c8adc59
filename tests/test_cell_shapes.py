"""Notebook cell shapes met in unseen notebooks (round 9): what the report says of them.

Each test is a cell as users write it, run under %%gpucheck in a real IPython shell.
"""

from __future__ import annotations

from gpu_notebook.analysis.elsewhere import defined_not_run, scheduled_not_awaited
from gpu_notebook.records import Report

TRAIN_EPOCH = """\
def train_epoch(model, batches, opt):
    for x, y in batches:
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return loss.item()
"""

SETUP = """\
import torch
_model = torch.nn.Linear(8, 1)
_opt = torch.optim.SGD(_model.parameters(), lr=0.01)
_batches = [(torch.randn(16, 8), torch.randn(16, 1)) for _ in range(12)]
"""


def run(ip, body: str) -> Report:
    ip.user_ns.pop("rep", None)
    ip.run_cell(f"%%gpucheck -q -o rep\n{body}")
    return ip.user_ns["rep"]


def test_a_cell_that_only_defines_its_training_says_so_and_where_to_measure(ip):
    # 09_define_then_call: the report guessed "the training ran where the step clock does not
    # follow it (another process, or a thread...)": nothing ran, the function was only defined.
    ip.run_cell(SETUP)
    rep = run(ip, TRAIN_EPOCH)
    assert rep.run.steps.step_count == 0
    assert rep.verdict.category == "unknown"
    assert "train_epoch()" in rep.verdict.headline
    assert "cell that calls train_epoch()" in rep.verdict.more_gpus
    assert not any("another process" in e for e in rep.verdict.evidence)
    # The later cell that calls it is measured as any training cell.
    rep = run(ip, "train_epoch(_model, _batches, _opt)")
    assert rep.run.steps.step_count == 12
    assert "defines" not in rep.verdict.headline


def test_a_definition_counts_as_run_when_the_cell_uses_it():
    assert defined_not_run(TRAIN_EPOCH) == ("train_epoch",)
    assert defined_not_run(TRAIN_EPOCH + "train_epoch(m, b, o)\n") == ()
    # Handed on (a thread's target, a decorator, a map) is used: it may run where we cannot see.
    assert defined_not_run(TRAIN_EPOCH + "threading.Thread(target=train_epoch).start()\n") == ()
    assert defined_not_run("@torch.no_grad()\n" + TRAIN_EPOCH) == ("train_epoch",)
    # A class whose method trains is used once the cell names the class.
    cls = "class Trainer:\n    def fit(self):\n        self.loss.backward()\n"
    assert defined_not_run(cls) == ("Trainer",)
    assert defined_not_run(cls + "Trainer().fit()\n") == ()
    # The cell trains itself beside the definition, or trains nowhere: nothing to say here.
    assert defined_not_run(TRAIN_EPOCH + "loss.backward()\n") == ()
    assert defined_not_run("def f(x):\n    return x + 1\n") == ()
    # A function calling itself is not used by the cell; IPython lines do not hide it.
    assert defined_not_run("def f(m):\n    m.backward()\n    f(m)\n") == ("f",)
    assert defined_not_run("%time x = 1\n" + TRAIN_EPOCH) == ("train_epoch",)


ASYNC_TRAIN = """\
import asyncio
async def train(model, batches, opt):
    for x, y in batches:
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
        await asyncio.sleep(0)
    return loss.item()
"""


def test_a_coroutine_the_cell_schedules_and_does_not_await_is_said_so():
    # 20_asyncio_task_background: `create_task(train(3))` runs after the cell ends, in the
    # kernel's loop; the report guessed "another process, or a thread".
    task = ASYNC_TRAIN + "task = asyncio.get_running_loop().create_task(train(m, b, o))\n"
    assert scheduled_not_awaited(task) == (("train",), "create_task")
    assert scheduled_not_awaited(ASYNC_TRAIN + "coro = train(m, b, o)\n") == (("train",), None)
    assert scheduled_not_awaited(ASYNC_TRAIN + "await train(m, b, o)\n") == ((), None)
    assert scheduled_not_awaited(ASYNC_TRAIN) == ((), None)  # defined only: not this class
    assert scheduled_not_awaited(TRAIN_EPOCH + "train_epoch(m, b, o)\n") == ((), None)


def test_a_coroutine_called_and_never_awaited_is_not_training_elsewhere(ip):
    ip.run_cell(SETUP)
    rep = run(ip, ASYNC_TRAIN + "coro = train(_model, _batches, _opt)\ncoro.close()\n")
    assert rep.run.steps.step_count == 0
    assert rep.verdict.category == "unknown"
    assert "coroutine train() and never awaits it" in rep.verdict.headline
    assert "await train(...)" in rep.verdict.more_gpus
    assert not any("another process" in e for e in rep.verdict.evidence)
