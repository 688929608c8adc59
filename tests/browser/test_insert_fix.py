"""Clicking "Insert fix" inserts one new, unexecuted code cell directly below the profiled cell,
in JupyterLab 4 and Notebook 7, through the DOM event and through the comm; without the
labextension the widget says so and offers the code to copy and a %load line that works."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from gpu_notebook import bridge
from tests.browser.conftest import JupyterServer
from tests.browser.notebook_ui import NotebookUI, write_notebook

pytestmark = pytest.mark.browser

# The fix text carries markup on purpose: the widget must show it as text, never as HTML.
FIX = (
    "# gpucheck fix: use 4 DataLoader workers <b>not bold</b>\n"
    "loader = DataLoader(ds, batch_size=64, num_workers=4)  # was 0\n"
)
TITLE = "Use 4 DataLoader workers <i>(input-bound)</i>"
DIFF = (
    "--- cell\n+++ cell (fixed)\n@@ -1 +1 @@\n"
    "-loader = DataLoader(ds, batch_size=64)\n"
    '+loader = DataLoader(ds, batch_size=64, num_workers=4)  <img src=x onerror="window.__gpuNbXss=1">\n'
)
ABOVE = ("cell-above", "above = 'an existing cell above'")
BELOW = ("cell-below", "below = 'an existing cell below'")


def widget_cell(request_id: str) -> tuple[str, str]:
    return (
        "cell-widget",
        "from gpu_notebook import bridge\n"
        "from gpu_notebook.views.insert_widget import InsertFixWidget\n"
        f"InsertFixWidget({TITLE!r}, {FIX!r}, {DIFF!r}, bridge.current_cell_id(),\n"
        f"                request_id={request_id!r})",
    )


@pytest.fixture
def lab(page: Page, lab_server: JupyterServer) -> Iterator[tuple[Page, JupyterServer]]:
    yield page, lab_server
    lab_server.shutdown_kernels()


def show_widget(nb: NotebookUI, index: int = 1) -> None:
    nb.run(index)
    nb.wait_done(index)
    expect(nb.cell(index).locator(".gpu-nb-fix-insert")).to_be_visible(timeout=30_000)


def click_insert(nb: NotebookUI, index: int = 1) -> None:
    nb.cell(index).locator(".gpu-nb-fix-insert").click()


def assert_inserted_below_widget(saved, request_id: str, others: list[tuple[str, str]]) -> None:
    """Exactly one new cell, directly below the widget's cell; the others as they were."""
    ids = [cell.id for cell in saved.cells]
    assert len(ids) == len(others) + 1, ids
    widget_index = ids.index("cell-widget")
    new = saved.cells[widget_index + 1]
    assert new.id not in {cell_id for cell_id, _ in others}
    assert new.cell_type == "code"
    assert new.source == FIX
    assert new.outputs == []
    assert new.execution_count is None
    assert new.metadata["gpu_notebook"] == {"request_id": request_id, "title": TITLE}
    kept = [(cell.id, cell.source) for cell in saved.cells if cell.id != new.id]
    assert kept == others


def test_insert_fix_adds_one_cell_below_the_widget_cell_in_jupyterlab(lab) -> None:
    page, server = lab
    cells = [ABOVE, widget_cell("lab-fix-1"), BELOW]
    write_notebook(server, "lab_insert.ipynb", cells)
    nb = NotebookUI(page, server, "lab_insert.ipynb", "lab")
    nb.open(cell_count=3)
    show_widget(nb)

    widget = nb.cell(1).locator(".gpu-nb-fix")
    # Escaped: the markup in title, source and diff is text; no element came out of it.
    expect(widget.locator(".gpu-nb-fix-title")).to_have_text(TITLE)
    widget.locator("summary").click()
    expect(widget.locator(".gpu-nb-fix-diff-body")).to_contain_text(
        '<img src=x onerror="window.__gpuNbXss=1">'
    )
    assert widget.locator("img, b, i, script").count() == 0
    assert page.evaluate("window.__gpuNbXss") is None

    click_insert(nb)
    expect(widget.locator(".gpu-nb-fix-status")).to_have_text(
        "Inserted below: a new cell holds the fix (not run yet)."
    )
    expect(nb.cells).to_have_count(4)
    expect(nb.prompt(2)).to_have_text("[ ]:")  # inserted, never run
    expect(widget.locator(".gpu-nb-fix-fallback")).to_be_hidden()
    nb.screenshot("lab-inserted-below")

    saved = nb.save_and_read(lambda n: len(n.cells) == 4)
    assert_inserted_below_widget(saved, "lab-fix-1", cells)
    assert not saved.cells[0].outputs and not saved.cells[3].outputs  # never run either
    assert not [line for line in nb.console if "gpu-notebook" in line and "error" in line.lower()]


def test_clicking_twice_with_the_same_request_id_inserts_once(lab) -> None:
    page, server = lab
    cells = [ABOVE, widget_cell("lab-twice"), BELOW]
    write_notebook(server, "lab_twice.ipynb", cells)
    nb = NotebookUI(page, server, "lab_twice.ipynb", "lab")
    nb.open(cell_count=3)
    show_widget(nb)
    click_insert(nb)
    expect(nb.cells).to_have_count(4)
    click_insert(nb)
    status = nb.cell(1).locator(".gpu-nb-fix-status")
    expect(status).to_have_text("Already inserted below: this fix has its cell.")
    page.wait_for_timeout(500)
    expect(nb.cells).to_have_count(4)
    nb.screenshot("lab-second-click-duplicate")
    saved = nb.save_and_read(lambda n: len(n.cells) == 4)
    assert_inserted_below_widget(saved, "lab-twice", cells)


def test_the_fix_is_inserted_while_another_cell_keeps_the_kernel_busy(lab, record_property) -> None:
    page, server = lab
    sleeper = ("cell-sleeper", "import time\ntime.sleep(60)")
    cells = [ABOVE, widget_cell("lab-busy"), BELOW, sleeper]
    write_notebook(server, "lab_busy.ipynb", cells)
    nb = NotebookUI(page, server, "lab_busy.ipynb", "lab")
    nb.open(cell_count=4)
    show_widget(nb)
    nb.run(3)
    nb.wait_running(3)

    started = time.monotonic()
    click_insert(nb)
    # The mechanism, not a time: the cell is inserted while the sleeper still holds the kernel
    # (a kernel round trip would wait for its 60 s). How long the browser takes to draw it on a
    # loaded machine is recorded, not asserted.
    expect(nb.cells).to_have_count(5, timeout=30_000)
    elapsed_s = time.monotonic() - started
    record_property("insert_while_busy_s", round(elapsed_s, 3))
    expect(nb.prompt(4)).to_have_text("[*]:")  # the sleeper still runs: no kernel round trip
    expect(nb.cell(1).locator(".gpu-nb-fix-status")).to_contain_text("Inserted below")
    nb.screenshot("lab-inserted-while-busy")

    saved = nb.save_and_read(lambda n: len(n.cells) == 5)
    assert_inserted_below_widget(saved, "lab-busy", cells)


def test_the_comm_inserts_below_the_cell_with_the_requested_id_across_kernel_restarts(lab) -> None:
    page, server = lab
    caller = (
        "cell-caller",
        "import os\n"
        "from gpu_notebook import bridge\n"
        "print('running in', bridge.current_cell_id(), 'pid', os.getpid())\n"
        "pending = bridge.insert_cell(bridge.InsertCellRequest(\n"
        f"    request_id='comm-fix-1', cell_id='cell-above', source={FIX!r}, title='comm fix'))",
    )
    # An async cell: the reply is handled while it awaits (ipykernel dispatches comm messages).
    checker = (
        "cell-checker",
        "reply = await pending.wait_async(10)\n"
        "print('reply:', reply.status if reply else None, bridge.frontend_has_extension(),"
        " 'pid', os.getpid())",
    )
    cells = [ABOVE, caller, checker]
    write_notebook(server, "lab_comm.ipynb", cells)
    nb = NotebookUI(page, server, "lab_comm.ipynb", "lab")
    nb.open(cell_count=3)

    nb.run(1)
    expect(nb.cells).to_have_count(4, timeout=30_000)  # the caller moved down by one

    def check_round(status: str, previous: str) -> str:
        """Wait for the caller's output of this round; the checker must print ``status``."""
        caller_out = nb.cell(2).locator(".jp-OutputArea")
        expect(caller_out).to_contain_text("running in cell-caller pid", timeout=30_000)
        expect(caller_out).not_to_have_text(previous, timeout=30_000)
        text = caller_out.inner_text().strip()
        pid = text.rsplit(" ", 1)[1]
        nb.run(3)
        expect(nb.cell(3).locator(".jp-OutputArea")).to_have_text(
            f"reply: {status} True pid {pid}", timeout=30_000
        )
        return text

    first = check_round("inserted", previous="")
    assert first.startswith("running in cell-caller pid")

    # The comm target survives a restart (same connection) and a kernel change (new connection):
    # without it JupyterLab would close the comm and the reply would be "error False".
    nb.menu("Kernel", "Restart Kernel…")
    nb.accept_dialog()
    nb.run(2)  # the same request again: answered duplicate, nothing inserted
    after_restart = check_round("duplicate", previous=first)

    old_kernel = server.kernel_of("lab_comm.ipynb")
    assert old_kernel is not None
    nb.menu("Kernel", "Change Kernel…")
    page.locator(".jp-Dialog select").select_option(value='{"name":"python3"}')  # a new kernel
    nb.accept_dialog()
    nb.wait_for_new_kernel(old_kernel["id"])
    nb.run(2)
    check_round("duplicate", previous=after_restart)
    expect(nb.cells).to_have_count(4)
    nb.screenshot("lab-comm-inserted")

    saved = nb.save_and_read(lambda n: len(n.cells) == 4)
    ids = [cell.id for cell in saved.cells]
    assert ids[0] == "cell-above" and ids[2:] == ["cell-caller", "cell-checker"], ids
    new = saved.cells[1]
    assert (new.cell_type, new.source, new.outputs, new.execution_count) == ("code", FIX, [], None)
    assert new.metadata["gpu_notebook"]["request_id"] == "comm-fix-1"
    assert [(c.id, c.source) for c in saved.cells if c.id != new.id] == cells


def test_insert_fix_and_the_comm_insert_below_their_cells_in_notebook7(
    page: Page, notebook_server: JupyterServer
) -> None:
    server = notebook_server
    comm_fix = "# gpucheck fix: pin host memory\nloader = DataLoader(ds, pin_memory=True)\n"
    caller = (
        "cell-caller",
        "from gpu_notebook import bridge\n"
        "pending = bridge.insert_cell(bridge.InsertCellRequest(\n"
        f"    request_id='nb7-comm-1', cell_id='cell-above', source={comm_fix!r}, title='pin'))",
    )
    cells = [ABOVE, widget_cell("nb7-fix-1"), BELOW, caller]
    write_notebook(server, "nb7_insert.ipynb", cells)
    nb = NotebookUI(page, server, "nb7_insert.ipynb", "notebook")
    try:
        nb.open(cell_count=4)
        show_widget(nb)
        click_insert(nb)  # DOM event
        expect(nb.cell(1).locator(".gpu-nb-fix-status")).to_contain_text("Inserted below")
        expect(nb.cells).to_have_count(5)
        click_insert(nb)
        expect(nb.cell(1).locator(".gpu-nb-fix-status")).to_contain_text("Already inserted below")
        saved = nb.save_and_read(lambda n: len(n.cells) == 5)
        assert_inserted_below_widget(saved, "nb7-fix-1", cells)

        nb.run(4)  # comm: below the cell with id cell-above
        expect(nb.cells).to_have_count(6, timeout=30_000)
        nb.screenshot("notebook7-inserted-below")
        saved = nb.save_and_read(lambda n: len(n.cells) == 6)
        ids = [cell.id for cell in saved.cells]
        assert ids[0] == "cell-above" and ids[2:4] == ["cell-widget", ids[3]], ids
        assert [ids[4], ids[5]] == ["cell-below", "cell-caller"], ids
        by_comm, by_click = saved.cells[1], saved.cells[3]
        assert (by_comm.source, by_comm.outputs, by_comm.execution_count) == (comm_fix, [], None)
        assert by_comm.metadata["gpu_notebook"]["request_id"] == "nb7-comm-1"
        assert (by_click.source, by_click.outputs) == (FIX, [])
    finally:
        page.close()
        server.shutdown_kernels()


def test_without_the_extension_the_widget_offers_copy_and_a_working_load_line(lab, context) -> None:
    page, server = lab
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.base_url)
    scratch = ("cell-scratch", "")
    cells = [ABOVE, widget_cell("plain-fix-1"), scratch]
    write_notebook(server, "plain.ipynb", cells)
    nb = NotebookUI(page, server, "plain.ipynb", "lab")
    with server.extension_disabled():
        nb.open(cell_count=3)
    show_widget(nb)
    widget = nb.cell(1).locator(".gpu-nb-fix")

    click_insert(nb)
    expect(widget.locator(".gpu-nb-fix-status")).to_have_text(
        "No notebook extension answered here: copy the code into a new cell."
    )
    expect(nb.cells).to_have_count(3)
    expect(widget.locator(".gpu-nb-fix-code")).to_have_text(FIX)
    widget.locator(".gpu-nb-fix-copy").click()
    expect(widget.locator(".gpu-nb-fix-copy-status")).to_have_text("Code copied to the clipboard.")
    assert page.evaluate("navigator.clipboard.readText()") == FIX
    load_line = widget.locator(".gpu-nb-fix-load-line").inner_text()
    assert load_line == bridge.load_command("plain-fix-1")  # read from kernel memory, no file
    nb.screenshot("lab-no-extension-fallback")

    # The user's one line in a new cell: %load replaces that cell's text with the fix.
    nb.cell(2).locator(".cm-content").click()
    page.keyboard.type(load_line)
    nb.menu("Run", "Run Selected Cell and Do not Advance")
    nb.wait_done(2)
    nb.screenshot("lab-no-extension-after-load")
    saved = nb.save_and_read(lambda n: n.cells[2].source.startswith("# %load"))
    assert saved.cells[2].source == f"# {load_line}\n{FIX}"
    assert [cell.id for cell in saved.cells] == ["cell-above", "cell-widget", "cell-scratch"]


def test_page_scripts_cannot_insert_a_cell_only_the_users_click_can(lab) -> None:
    page, server = lab
    cells = [ABOVE, widget_cell("lab-forged"), BELOW]
    write_notebook(server, "lab_forged.ipynb", cells)
    nb = NotebookUI(page, server, "lab_forged.ipynb", "lab")
    nb.open(cell_count=3)
    show_widget(nb)
    widget = nb.cell(1).locator(".gpu-nb-fix")

    # A script's click on the button is not trusted: the widget dispatches, the extension refuses.
    nb.cell(1).locator(".gpu-nb-fix-insert").evaluate("button => button.click()")
    expect(widget.locator(".gpu-nb-fix-status")).to_contain_text(
        "does not come from a click on the widget's Insert button"
    )
    # A script's own event, aimed at the cell above, with a forged "trusted" click object.
    reply = (
        nb.cell(1)
        .locator(".gpu-nb-fix")
        .evaluate(
            """root => {
          const detail = { request_id: 'forged-1', cell_id: 'cell-above', source: 'import evil\\n',
                           title: 'x', handled: false, reply: null,
                           trigger: { isTrusted: true, type: 'click', eventPhase: 2,
                                      target: root.querySelector('.gpu-nb-fix-insert') } };
          root.dispatchEvent(new CustomEvent('gpu-notebook:insert-cell',
                                             { detail, bubbles: true, cancelable: true }));
          return detail.reply;
        }"""
        )
    )
    assert reply["status"] == "error", reply
    assert "does not come from a click" in reply["message"]
    page.wait_for_timeout(500)
    expect(nb.cells).to_have_count(3)

    click_insert(nb)  # the user's own click still works
    expect(widget.locator(".gpu-nb-fix-status")).to_contain_text("Inserted below")
    expect(nb.cells).to_have_count(4)
    saved = nb.save_and_read(lambda n: len(n.cells) == 4)
    assert_inserted_below_widget(saved, "lab-forged", cells)
