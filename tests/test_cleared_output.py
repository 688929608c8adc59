"""A cell that clears its output (``clear_output()``: tqdm.notebook loops, live plots) wipes our
live box with its own outputs. In a real kernel: the box is shown again right after each clear
that took effect on the cell's thread, the cell's own outputs are those of the plain cell, and
the report comes once, into the box shown last. On main the box stayed away after the first
clear, until the report was displayed anew at the end.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.test_kernel_outcomes import execute, kernel, loaded, users

__all__ = ["kernel", "loaded"]  # the real kernel, with the extension loaded

_LOOP = (
    "import torch\n"
    "from IPython.display import clear_output, display\n"
    "m = torch.nn.Linear(8, 1); o = torch.optim.SGD(m.parameters(), 0.1)\n"
    "for epoch in range(3):\n"
    "    for _ in range(4):\n"
    "        o.zero_grad(); m(torch.randn(16, 8)).sum().backward(); o.step()\n"
    "    {clear}\n"
    "    display(f'curve after epoch {{epoch}}')\n"
    "    print(f'epoch {{epoch}} done')\n"
)


def _ours(outputs: list[tuple[str, Any, dict[str, Any]]]) -> list[tuple[int, str, Any]]:
    return [(i, k, t) for i, (k, t, meta) in enumerate(outputs) if "gpu_notebook" in meta]


@pytest.mark.parametrize("clear", ["clear_output()", "clear_output(wait=True)"])
def test_the_live_box_is_shown_again_after_each_clear_and_takes_the_report(
    kernel: Any, clear: str
) -> None:
    """A per-epoch clear, then a display (the curve), then a print: after each clear, the box
    comes before the cell's next output (a wait-clear: the box's display takes the clear
    with the old outputs), and the report updates the last one."""
    body = _LOOP.format(clear=clear)
    plain_status, plain = execute(kernel, body)
    status, outputs = execute(kernel, "%%gpucheck -w 1 -s 2 --lines off\n" + body)
    assert status == plain_status == "ok"
    assert users(outputs) == users(plain)  # the cell's own outputs, in order, untouched
    kinds = [k for k, _, _ in outputs]
    clears = [i for i, k in enumerate(kinds) if k == "clear_output"]
    assert len(clears) == 3
    ours = _ours(outputs)
    for at in clears:
        # Right after the clear: our box, then the cell's curve.
        assert (at + 1, "display_data") == ours[[i for i, _, _ in ours].index(at + 1)][:2]
        assert outputs[at + 2][1].startswith("'curve after epoch")
    # The report comes once, into the box shown after the last clear: no new display after it.
    last_clear = clears[-1]
    later = [(k, t) for i, k, t in ours if i > last_clear + 1]
    assert [k for k, _ in later] and all(k == "update_display_data" for k, _ in later), later
    assert later[-1][1].startswith("gpucheck:"), later[-1][1]


def test_a_wait_clear_taken_by_a_print_shows_the_report_after_the_cells_outputs(
    kernel: Any,
) -> None:
    """A print (the kernel's IO thread) takes the wait-clear: the box is not shown again then
    (we never display from that thread); the report is displayed anew after the cell's outputs,
    as before."""
    body = "from IPython.display import clear_output\nprint('a')\nclear_output(wait=True)\nprint('b')\n"
    status, outputs = execute(kernel, "%%gpucheck\n" + body)
    assert status == "ok"
    at = [k for k, _, _ in outputs].index("clear_output")
    assert outputs[at + 1][:2] == ("stream", "b\n")
    reports = [t for i, k, t in _ours(outputs) if i > at and k == "display_data"]
    assert len(reports) == 1 and reports[0].startswith("gpucheck:")
