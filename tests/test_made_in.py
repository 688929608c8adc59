"""A refusal that sends the user to the cell that made an object names that cell (In[N]) where
the kernel's history says which, not "an earlier cell"."""

from __future__ import annotations

from typing import Any

import pytest

from gpu_notebook.cell.ipython import binding_cell
from gpu_notebook.cell.live import live_facts
from gpu_notebook.fixes import Refusal, apply_fix

TRAIN = """\
for x, y in loader:
    loss = ((model(x) - y) ** 2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
"""


def test_the_cell_that_bound_a_name_is_found_in_the_history(ip: Any) -> None:
    ip.run_cell(
        "import torch\nfrom torch.utils.data import DataLoader, TensorDataset", store_history=True
    )
    ip.run_cell(
        "model = torch.nn.Linear(4, 1)\n"
        "loader = DataLoader(TensorDataset(torch.randn(8, 4), torch.randn(8, 1)), batch_size=4)",
        store_history=True,
    )
    made_loader = ip.execution_count - 1
    # A cell magic's body, a shell line beside it, a `for` target, an `if`: still its binding.
    ip.run_cell(
        "%%time\n!true\nif True:\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for step in range(1):\n    pass",
        store_history=True,
    )
    made_opt = ip.execution_count - 1
    ip.run_cell(
        "def helper():\n    loader = None  # a function's own name: no binding", store_history=True
    )
    ip.run_cell("print(opt)", store_history=True)  # reads it: no binding
    assert binding_cell("opt") == binding_cell("step") == made_opt
    assert binding_cell("loader") == made_loader
    assert binding_cell("helper") == made_opt + 1
    assert binding_cell("never_bound_here") is None
    live = live_facts(ip.user_ns, ["opt", "loader"])
    assert [o.made_in for o in live.optimizers] == [made_opt]
    assert [ld.made_in for ld in live.loaders] == [made_loader]
    # A script's globals are bound as it runs: no cell to name.
    script = live_facts(ip.user_ns, ["opt"], made_before=False)
    assert [o.made_in for o in script.optimizers] == [None]


def test_the_fused_optimizer_refusal_names_the_cell_that_made_the_optimizer() -> None:
    def refused(**params: str) -> str:
        result = apply_fix("foreach_fused_optimizer", TRAIN, **params)
        assert isinstance(result, Refusal), result
        return result.reason

    assert refused(elsewhere="opt", cells="3").endswith(
        "pass fused=True where `opt` is created (In[3])"
    )
    assert refused(elsewhere="opt,opt_d", cells="3,5").endswith(
        "where `opt`, `opt_d` are created (In[3], In[5])"
    )
    # One cell not known: said as before.
    assert refused(elsewhere="opt,opt_d", cells="3,").endswith("are created (an earlier cell)")
    assert refused(elsewhere="opt").endswith("is created (an earlier cell)")


def test_a_batch_refusal_names_the_cell_that_made_the_loader(ip: Any) -> None:
    from gpu_notebook.records import Finding
    from gpu_notebook.words.proposals import attach_fixes

    ip.run_cell(
        "import torch\nfrom torch.utils.data import DataLoader, TensorDataset", store_history=True
    )
    ip.run_cell(
        "model = torch.nn.Linear(4, 1)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "train_loader = DataLoader(TensorDataset(torch.randn(8, 4), torch.randn(8, 1)), batch_size=4)",
        store_history=True,
    )
    made = ip.execution_count - 1
    ip.run_cell("print(len(train_loader))", store_history=True)
    cell = TRAIN.replace("in loader", "in train_loader")
    finding = Finding("launch.tiny_ops", "t", "medium", (), None, 2.0, "f", fix_id="bigger_batch",
                      fix_params={"factor": 2, "scale_lr": True})  # fmt: skip
    (found,) = attach_fixes([finding], cell, namespace=ip.user_ns)
    assert found.proposal is not None and found.proposal.refusal is not None
    assert found.proposal.refusal.endswith(
        f"multiply the batch size where the loader is created (`train_loader`, In[{made}])"
    )
    # A script's globals: no cell to name.
    (script,) = attach_fixes([finding], cell, namespace=ip.user_ns, made_before=False)
    assert script.proposal.refusal.endswith("where the loader is created")


@pytest.mark.parametrize(
    "functions, cell",
    [
        # unseen 43: the epoch function iterates the training loader and calls a step helper of
        # another cell (the backward one call deeper); an evaluation loader passed to evaluate().
        (
            [
                "def train_step(x, y):\n    loss = ((model(x) - y) ** 2).mean()\n"
                "    opt.zero_grad()\n    loss.backward()\n    opt.step()\n    return loss.detach()",
                "def evaluate(loader):\n    with torch.no_grad():\n"
                "        return sum(float(((model(x) - y) ** 2).mean()) for x, y in loader)",
                "def run_epoch(epoch):\n    total = 0.0\n"
                "    for i, (x, y) in enumerate(train_loader):\n        total += train_step(x, y)\n"
                "    return total, evaluate(val_loader)",
            ],
            "hist = [run_epoch(e) for e in range(3)]",
        ),
        # The step in the epoch function itself, validation over its own loader after it.
        (
            [
                "def fit():\n    for x, y in train_loader:\n"
                "        loss = ((model(x) - y) ** 2).mean()\n        opt.zero_grad()\n"
                "        loss.backward()\n        opt.step()\n    model.eval()\n"
                "    with torch.no_grad():\n        for x, y in val_loader:\n            model(x)",
            ],
            "for epoch in range(2):\n    fit()",
        ),
    ],
)
def test_a_batch_refusal_names_the_loader_the_training_loop_of_a_called_function_iterates(
    ip: Any, functions: list[str], cell: str
) -> None:
    """Read through the functions the cell calls, a training function reads an evaluation
    loader too: the refusal names the one the training loop iterates (main: neither, as two
    loaders were read)."""
    from gpu_notebook.records import Finding
    from gpu_notebook.words.proposals import attach_fixes

    ip.run_cell(
        "import torch\nfrom torch.utils.data import DataLoader, TensorDataset", store_history=True
    )
    ip.run_cell(
        "train_loader = DataLoader(TensorDataset(torch.randn(8, 4), torch.randn(8, 1)), batch_size=4)",
        store_history=True,
    )
    made = ip.execution_count - 1
    ip.run_cell(
        "val_loader = DataLoader(TensorDataset(torch.randn(8, 4), torch.randn(8, 1)), batch_size=8)\n"
        "model = torch.nn.Linear(4, 1)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)",
        store_history=True,
    )
    for source in functions:
        assert ip.run_cell(source, store_history=True).success
    finding = Finding("launch.tiny_ops", "t", "medium", (), None, 2.0, "f", fix_id="bigger_batch",
                      fix_params={"factor": 2, "scale_lr": True})  # fmt: skip
    (found,) = attach_fixes([finding], cell, namespace=ip.user_ns)
    assert found.proposal is not None and found.proposal.refusal is not None
    assert found.proposal.refusal.endswith(
        f"multiply the batch size where the loader is created (`train_loader`, In[{made}])"
    ), found.proposal.refusal
