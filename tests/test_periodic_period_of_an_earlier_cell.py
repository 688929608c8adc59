"""A gate's period named by an int an earlier cell bound (``if i % log_every == 0:`` with
``log_every = 16`` in the cell above, read by a function the cell calls) is that int, as a
literal's is.

Unseen round 18 (example_notebooks/unseen/43): ``run_epoch`` of In[5] logs under
``if i % log_every == 0`` with ``log_every = 16`` bound in In[6]; the cell only calls
``[run_epoch(e) for e in range(3)]``. On a busy machine 40 of 144 steps stalled at random
(steps 13, 15, 17, 20...) and the report read "[high] Some steps stall (logging)", naming the
gate: a period it could not read takes period-less stalls. Read from the namespace (a real
IPython shell), the gate is every 16 steps, and stalls with no period are not its.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpu_notebook.cell.blocks import periodic_blocks
from gpu_notebook.rules import cell_facts
from gpu_notebook.rules.run_shape import matching_block
from tests.test_run_shape_partial_waits import _run

RUN_EPOCH = """\
def run_epoch_u18(epoch):
    total = 0.0
    for i, (x, y) in enumerate(batches_u18):
        loss = ((model_u18(x) - y) ** 2).mean()
        opt_u18.zero_grad(); loss.backward(); opt_u18.step()
        total += loss.detach()
        if i % log_every_u18 == 0:
            print(epoch, i, float(total))
    return total
"""
OWN_LOOP = """\
for step, (x, y) in enumerate(batches_u18):
    loss = ((model_u18(x) - y) ** 2).mean()
    opt_u18.zero_grad(); loss.backward(); opt_u18.step()
    if step % log_every_u18 == 0:
        print(step, loss.item())
"""


@pytest.fixture
def shell(ip: Any) -> Any:
    setup = (
        "import torch\nmodel_u18 = torch.nn.Linear(4, 1)\n"
        "opt_u18 = torch.optim.SGD(model_u18.parameters(), lr=0.1)\n"
        "batches_u18 = [(torch.randn(2, 4), torch.randn(2, 1))] * 4"
    )
    for source in (setup, RUN_EPOCH, "log_every_u18 = 16"):
        assert ip.run_cell(source, store_history=True).success
    yield ip
    for name in ("model_u18", "opt_u18", "batches_u18", "run_epoch_u18", "log_every_u18"):
        ip.user_ns.pop(name, None)


def _everies(source: str, namespace: Any, made_before: bool = True) -> list[int]:
    facts = cell_facts(source, namespace, made_before=made_before)
    return [b.every for b in periodic_blocks(facts.tree, facts.live.ints)]


@pytest.mark.parametrize(
    "cell",
    [
        "hist = [run_epoch_u18(e) for e in range(3)]",  # unseen 43: through a call
        OWN_LOOP,  # the cell's own loop, the period of an earlier cell
    ],
)
def test_a_period_bound_in_an_earlier_cell_is_read(shell: Any, cell: str) -> None:
    assert _everies(cell, shell.user_ns) == [16]
    facts = cell_facts(cell, shell.user_ns)
    run = _run([0.001] * 48, [0.0] * 48, readings=False)
    # Own-time stalls with no period are not the gate's (it would have given them 16) ...
    assert matching_block(run, facts, None, own_time=True) is None
    # ... stalls every 16 steps are.
    block = matching_block(run, facts, 16, own_time=True)
    assert block is not None and block.every == 16 and block.work == "logging"


def test_a_name_the_reading_binds_itself_is_not_the_namespaces(shell: Any) -> None:
    # The cell binds it (not to a literal): the earlier cell's value is not what the gate reads.
    rebound = "log_every_u18 = int('4')\n" + OWN_LOOP
    assert _everies(rebound, shell.user_ns) == [0]
    # A parameter of the function of that name: its own, whatever the namespace holds.
    assert shell.run_cell(
        RUN_EPOCH.replace("(epoch):", "(epoch, log_every_u18=4):"), store_history=True
    ).success
    assert _everies("run_epoch_u18(0)", shell.user_ns) == [0]
    # A script's globals are bound as it runs: not read before it.
    assert _everies(OWN_LOOP, shell.user_ns, made_before=False) == [0]
    # A bool is no period.
    shell.user_ns["log_every_u18"] = True
    assert _everies(OWN_LOOP, shell.user_ns) == [0]
