"""Drive one notebook in JupyterLab 4 or Notebook 7 the way a user does: click, keys, save.

Cell contents are checked on disk after an explicit save (autosave is off): the saved .ipynb
holds the exact sources, ids, outputs and metadata, with no guessing from the editor's DOM.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import nbformat
from playwright.sync_api import Locator, Page, expect

from tests.browser.conftest import ARTIFACTS, JupyterServer

# A finished cell's prompt: "[3]:" (never "[*]:" or the blank "[ ]:").
_EXECUTED = re.compile(r"^\[\d+\]:$")
KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}


def write_notebook(server: JupyterServer, name: str, cells: Sequence[tuple[str, str]]) -> Path:
    """Write ``name`` with code cells given as (nbformat id, source)."""
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": KERNELSPEC})
    nb.cells = [nbformat.v4.new_code_cell(source=source, id=cell_id) for cell_id, source in cells]
    path = server.root_dir / name
    nbformat.write(nb, path)
    return path


class NotebookUI:
    """One open notebook in a page."""

    def __init__(
        self, page: Page, server: JupyterServer, name: str, ui: Literal["lab", "notebook"]
    ):
        self.page = page
        self.server = server
        self.name = name
        self.ui = ui
        self.path = server.root_dir / name
        self.console: list[str] = []
        page.on("console", lambda msg: self.console.append(f"{msg.type}: {msg.text}"))

    # -------------------------------------------------------------------------------- locators

    @property
    def cells(self) -> Locator:
        return self.page.locator(".jp-NotebookPanel:visible .jp-Notebook .jp-Cell")

    def cell(self, index: int) -> Locator:
        return self.cells.nth(index)

    def prompt(self, index: int) -> Locator:
        return self.cell(index).locator(".jp-InputArea-prompt")

    # ---------------------------------------------------------------------------------- actions

    def open(self, cell_count: int) -> None:
        self.page.goto(self.server.url(self.name, self.ui))
        expect(self.cells).to_have_count(cell_count, timeout=60_000)
        self.wait_kernel_idle()

    def wait_kernel_idle(self, timeout_s: float = 60.0) -> None:
        """Wait until the server has this notebook's kernel, idle, and the page shows it idle.

        The toolbar indicator alone is not enough: it reads "idle" before any kernel exists,
        and a cell run then is dropped without a word.
        """
        deadline = time.monotonic() + timeout_s
        while True:
            kernel = self.server.kernel_of(self.name)
            if kernel is not None and kernel["execution_state"] == "idle":
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"no idle kernel for {self.name}: {kernel}")
            time.sleep(0.2)
        expect(
            self.page.locator(".jp-NotebookPanel:visible .jp-Notebook-ExecutionIndicator")
        ).to_have_attribute("data-status", "idle", timeout=30_000)

    def select(self, index: int) -> None:
        """Select cell ``index`` in command mode (a click on its prompt, not in the editor)."""
        self.prompt(index).click()

    def run(self, index: int) -> None:
        """Run cell ``index`` in place (no new cell appears after the last one).

        Through the Run menu, not Ctrl+Enter: right after the first page load the keyboard
        shortcuts may not be registered yet, and the key press is then silently lost.
        """
        # Never retried: cells move when one is inserted, and a retry could run the wrong one.
        self.select(index)
        self.menu("Run", "Run Selected Cell and Do not Advance")

    def wait_done(self, index: int, timeout_ms: int = 60_000) -> None:
        try:
            expect(self.prompt(index)).to_have_text(_EXECUTED, timeout=timeout_ms)
        except AssertionError as err:
            raise AssertionError(f"{err}\nbrowser console:\n" + "\n".join(self.console)) from None

    def wait_running(self, index: int, timeout_ms: int = 30_000) -> None:
        expect(self.prompt(index)).to_have_text("[*]:", timeout=timeout_ms)

    def output_text(self, index: int) -> str:
        return self.cell(index).locator(".jp-OutputArea").inner_text()

    def save_and_read(
        self, check: Callable[[Any], bool], timeout_s: float = 20.0
    ) -> nbformat.NotebookNode:
        """Save with Ctrl+S and return the saved notebook once ``check(notebook)`` holds."""
        before = self.path.stat().st_mtime_ns
        self.page.locator(
            ".jp-NotebookPanel:visible .jp-Toolbar [data-command='docmanager:save']"
        ).click()
        deadline = time.monotonic() + timeout_s
        nb = None
        while time.monotonic() < deadline:
            if self.path.stat().st_mtime_ns != before:
                try:
                    nb = nbformat.read(self.path, as_version=4)
                except Exception:  # noqa: BLE001 - the file may be half written: read it again
                    nb = None
                if nb is not None and check(nb):
                    return nb
            time.sleep(0.1)
        raise AssertionError(
            f"saved {self.name} never satisfied the check; last read: "
            f"{[(c.get('id'), c.source) for c in nb.cells] if nb else None}"
        )

    def menu(self, menu: str, item: str) -> None:
        """Click ``item`` in the menu bar's ``menu`` (JupyterLab and Notebook 7 share it)."""
        self.page.locator(".lm-MenuBar-itemLabel", has_text=menu).click()
        self.page.locator(".lm-Menu-itemLabel", has_text=item).click()

    def accept_dialog(self) -> None:
        """Press the accept button of the dialog that is open (Restart, Select...)."""
        button = self.page.locator(".jp-Dialog .jp-mod-accept")
        button.click()
        expect(button).to_have_count(0)

    def wait_for_new_kernel(self, old_kernel_id: str, timeout_s: float = 60.0) -> str:
        """After a kernel change: wait until the session has another kernel and the page is idle."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            kernel = self.server.kernel_of(self.name)
            if kernel and kernel["id"] != old_kernel_id:
                break
            time.sleep(0.2)
        else:
            raise AssertionError(f"{self.name} kept kernel {old_kernel_id}")
        self.wait_kernel_idle()
        # The page learns of the new kernel from the same server reply; give it a moment to
        # connect so the next execution is not sent on the old, disposed connection.
        self.page.wait_for_timeout(1000)
        return str(kernel["id"])

    def screenshot(self, name: str) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path
