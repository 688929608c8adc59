"""The whole notebook experience in a real browser: a %%gpucheck cell trains ~10 s, its live
sparkline changes while it runs, the report replaces it, and "Insert fix" puts the patched cell
directly below (never run), in JupyterLab 4 and Notebook 7."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Literal

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import JupyterServer
from tests.browser.notebook_ui import NotebookUI, write_notebook

pytestmark = pytest.mark.browser

SETUP = (
    "cell-setup",
    "%load_ext gpu_notebook\n"
    "import time, torch\n"
    "from torch import nn\n"
    "from torch.utils.data import DataLoader, Dataset\n"
    "torch.set_num_threads(1)\n"
    "class SlowDataset(Dataset):\n"
    "    def __len__(self): return 320\n"
    "    def __getitem__(self, i):\n"
    "        time.sleep(0.004)\n"
    "        return torch.randn(32), torch.randn(1)\n"
    "model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))\n"
    "opt = torch.optim.SGD(model.parameters(), lr=0.01)",
)
# ~8 epochs x 40 batches x 32 ms of loading: about 10 s, input-bound, DataLoader in the cell.
TRAIN = (
    "cell-train",
    "%%gpucheck -i 0.2\n"
    "loader = DataLoader(SlowDataset(), batch_size=8, num_workers=0)\n"
    "for epoch in range(8):\n"
    "    for x, y in loader:\n"
    "        loss = nn.functional.mse_loss(model(x), y)\n"
    "        opt.zero_grad()\n"
    "        loss.backward()\n"
    "        opt.step()\n"
    "print('training done')",
)
BELOW = ("cell-below", "below = 'an existing cell below'")


@pytest.fixture
def lab(page: Page, lab_server: JupyterServer) -> Iterator[tuple[Page, JupyterServer]]:
    yield page, lab_server
    lab_server.shutdown_kernels()


@pytest.fixture
def notebook7(page: Page, notebook_server: JupyterServer) -> Iterator[tuple[Page, JupyterServer]]:
    yield page, notebook_server
    notebook_server.shutdown_kernels()


def sparkline_changes_while_running(
    nb: NotebookUI, index: int, wanted: int, seconds: float = 120.0
) -> int:
    """How many times the live sparkline's SVG changed while the cell still showed [*] (read
    until ``wanted`` changes were seen: ``seconds`` only bounds the wait, and a starved browser
    gets few polls in a fixed time)."""
    svg = nb.cell(index).locator(".jp-OutputArea svg").first
    expect(svg).to_be_visible(timeout=30_000)
    seen: list[str] = []
    deadline = time.monotonic() + seconds
    while (
        len(seen) <= wanted
        and time.monotonic() < deadline
        and nb.prompt(index).inner_text() == "[*]:"
    ):
        try:
            # 10 s: a busy machine's browser may take seconds to answer; a box the report
            # replaced meanwhile is not found either, and ends the count.
            html = svg.inner_html(timeout=10_000)
        except Exception:  # noqa: BLE001 - the live box was replaced by the report meanwhile
            break
        if not seen or seen[-1] != html:
            seen.append(html)
        nb.page.wait_for_timeout(250)
    return len(seen) - 1


def run_flow(page: Page, server: JupyterServer, ui: Literal["lab", "notebook"], name: str) -> None:
    cells = [SETUP, TRAIN, BELOW]
    write_notebook(server, name, cells)
    nb = NotebookUI(page, server, name, ui)
    nb.open(cell_count=3)
    nb.run(0)
    nb.wait_done(0)

    nb.run(1)
    nb.wait_running(1)
    changes = sparkline_changes_while_running(nb, 1, wanted=3)
    nb.screenshot(f"{ui}-gpucheck-live")
    assert changes >= 3, f"the sparkline changed {changes} times while the cell ran"
    nb.wait_done(1, timeout_ms=120_000)

    report = nb.cell(1).locator(".jp-OutputArea")
    expect(report).to_contain_text("Will more GPUs help?".upper(), ignore_case=True, timeout=30_000)
    expect(report).to_contain_text("training done")  # the cell's own output is still there
    insert = report.locator(".gpu-nb-fix-insert").first
    expect(insert).to_be_visible(timeout=30_000)
    nb.screenshot(f"{ui}-gpucheck-report")
    insert.click()
    expect(nb.cells).to_have_count(4)
    expect(nb.prompt(2)).to_have_text("[ ]:")  # inserted, never run
    nb.screenshot(f"{ui}-gpucheck-inserted")

    saved = nb.save_and_read(lambda n: len(n.cells) == 4)
    ids = [c.id for c in saved.cells]
    assert ids[0] == "cell-setup" and ids[1] == "cell-train" and ids[3] == "cell-below"
    new = saved.cells[2]
    assert new.source.startswith("%%gpucheck -i 0.2\n# gpucheck fix: ")
    assert "num_workers=" in new.source and "num_workers=0" not in new.source
    assert new.outputs == [] and new.execution_count is None
    assert [
        c.source for c in saved.cells if c.id in ("cell-setup", "cell-train", "cell-below")
    ] == [SETUP[1], TRAIN[1], BELOW[1]]


def test_gpucheck_live_view_report_and_insert_fix_in_jupyterlab(lab) -> None:
    page, server = lab
    run_flow(page, server, "lab", "flow_lab.ipynb")


def test_gpucheck_live_view_report_and_insert_fix_in_notebook7(notebook7) -> None:
    page, server = notebook7
    run_flow(page, server, "notebook", "flow_nb7.ipynb")
