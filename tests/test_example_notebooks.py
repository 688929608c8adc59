"""The example notebooks run headless in a real kernel (nbclient) and end with a report."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS = Path(__file__).parents[1] / "example_notebooks"


def execute(name: str, tmp_path: Path):
    shutil.copy(NOTEBOOKS / name, tmp_path / name)
    nb = nbformat.read(tmp_path / name, as_version=4)
    client = nbclient.NotebookClient(
        nb,
        timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
        store_widget_state=True,
    )
    client.execute()
    return nb


def outputs_text(cell) -> str:
    parts = []
    for o in cell.get("outputs", []):
        parts.append(o.get("text", "") or o.get("data", {}).get("text/plain", ""))
    return "\n".join(parts)


def test_outputs_are_stripped_in_git():
    for path in NOTEBOOKS.glob("*.ipynb"):
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert not cell.outputs and cell.execution_count is None, path.name


def test_01_find_the_bottleneck(tmp_path):
    nb = execute("01_find_the_bottleneck.ipynb", tmp_path)
    gpucheck_cells = [
        c for c in nb.cells if c.cell_type == "code" and c.source.startswith("%%gpucheck")
    ]
    assert all(outputs_text(c) for c in gpucheck_cells)  # each shows its report
    last = outputs_text(nb.cells[-1])
    assert "verdict before: input-bound" in last
    assert "measured speedup" in last


def test_02_syncs_and_logging(tmp_path):
    nb = execute("02_syncs_and_logging.ipynb", tmp_path)
    last = outputs_text(nb.cells[-1])
    assert "every step:" in last and "every 20 steps:" in last
    # A verdict on the difference: within the steps' own noise, or the gain with the noise beside.
    assert "within noise" in last or "throughput (steps vary by" in last, last
    chatty = next(c for c in nb.cells if c.source.startswith("%%gpucheck -o chatty"))
    assert "step 0: loss " in outputs_text(chatty)  # the cell's own prints still show


def test_04_compare_runs(tmp_path):
    nb = execute("04_compare_runs.ipynb", tmp_path)
    text = "\n".join(outputs_text(c) for c in nb.cells[-3:])
    assert "2 reports exported" in text
    assert "ms/step ->" in text
    assert "Before / after:" in text  # gpucheck compare ran from the notebook
    assert "GPU(s)" not in text  # no "more GPU(s) of this kind" on a machine without one
    # The exports went to a temporary folder, removed by the last cell: nothing left beside it.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["04_compare_runs.ipynb"]
