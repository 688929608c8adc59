"""`gpucheck run` reads the script's globals as a notebook's namespace: the live objects behind
the names the script uses, as the script left them (stopped or failed included), and nothing of
ours holds them after the report. Real scripts through the real command line."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from gpu_notebook.cell.calls import callees
from gpu_notebook.records import Finding, Report
from gpu_notebook.words.proposals import attach_fixes
from tests.test_cli import gpucheck

# The rows come from a function of the script: only the live list says they are numpy arrays
# (the source's own reading knows a list comprehension of numpy calls, not an append loop).
ARRAYS_FROM_A_FUNCTION = """\
import numpy as np
import torch

torch.manual_seed(0)
torch.set_num_threads(1)


def load_rows(n):
    rng = np.random.default_rng(0)
    rows = []
    for _ in range(n):
        rows.append(rng.standard_normal(32).astype(np.float32))
    return rows


rows = load_rows(512)
labels = np.random.default_rng(1).integers(0, 4, 512)
model = torch.nn.Linear(32, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
rng = np.random.default_rng(2)
for step in range(40):
    idx = rng.integers(0, len(rows), 16)
    x = torch.tensor([rows[i] for i in idx])
    y = torch.tensor(labels[idx])
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def _run(tmp_path: Path, source: str) -> tuple[Report, str, int]:
    script = tmp_path / "train.py"
    script.write_text(source)
    out = tmp_path / "r.json"
    res = gpucheck("run", "--json", str(out), str(script))
    assert out.exists(), res.stderr[-3000:]
    return Report.from_json(out.read_text()), res.stderr, res.returncode


@pytest.mark.parametrize("ending", ["", "    if step == 30:\n        raise RuntimeError('stop')\n"])
def test_a_list_of_arrays_made_by_a_function_of_the_script_is_read_live(tmp_path, ending):
    """The rule reads ``rows`` from the script's globals (before: no finding at all), with its
    patch of the script. A script that fails in its loop leaves what it had bound by then: read
    the same (the report is the failed run's, the exit status the script's)."""
    report, stderr, code = _run(tmp_path, ARRAYS_FROM_A_FUNCTION + ending)
    assert code == (1 if ending else 0), stderr[-3000:]
    assert report.run.status == ("error" if ending else "ok")
    (found,) = [f for f in report.findings if f.rule_id == "host.tensor_from_arrays"]
    assert found.line == 23 and found.fix_params == {"items": "rows"}
    assert found.proposal is not None and found.proposal.source_after is not None
    assert "torch.from_numpy(np.stack([rows[i] for i in idx]))" in found.proposal.source_after
    assert "internal.rule_failed" not in [f.rule_id for f in report.findings]


COMPILED_IN_MAIN = """\
import torch
from torch import nn


def main():
    torch._dynamo.config.recompile_limit = 2
    model = torch.compile(nn.Linear(8, 2), backend="eager", dynamic=False)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(30):
        loss = model(torch.randn(4 + step % 4, 8)).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()


if __name__ == "__main__":
    main()
"""


def test_dynamo_counters_are_read_for_a_script_that_compiles_in_main(tmp_path):
    """Dynamo's counters are the process's: with the script's globals handed to the rules
    they are read even where the model lives in ``main()``'s locals (before: never read on a
    script). Four batch shapes against a recompile limit of 2: the limit is hit."""
    report, stderr, code = _run(tmp_path, COMPILED_IN_MAIN)
    assert code == 0, stderr[-3000:]
    (found,) = [f for f in report.findings if f.rule_id == "compile.recompiles"]
    assert found.severity == "medium"
    assert "graphs compiled in this run" in " ".join(found.evidence)  # no kernel in a script


def test_a_class_the_script_defines_is_not_read_again_above_it(tmp_path):
    """The script's own ``class Trainer`` whose ``fit()`` it calls is in the script already;
    a class from another file of the user's is read with it (``cell.calls``)."""
    (tmp_path / "helpers.py").write_text(
        textwrap.dedent(
            """\
            class Base:
                def fit(self):
                    for step in range(2):
                        pass
            """
        )
    )
    source = textwrap.dedent(
        """\
        from helpers import Base


        class Trainer:
            def fit(self):
                for step in range(2):
                    pass


        class Mine(Base):
            pass


        trainer = Trainer()
        mine = Mine()
        trainer.fit()
        mine.fit()
        """
    )
    path = tmp_path / "train.py"
    path.write_text(source)
    namespace: dict[str, object] = {"__name__": "__main__", "__file__": str(path)}
    sys.path.insert(0, str(tmp_path))
    try:
        exec(compile(source, str(path), "exec"), namespace)
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("helpers", None)
    assert [o.function for o in callees(source, namespace)] == ["Base"]


def test_nothing_of_ours_holds_the_scripts_globals_after_the_report(tmp_path):
    """The globals are the report's namespace only while it is built: a finalizer on a global
    fires before the report is printed (a script that imports multiprocessing, as torch does,
    is kept by Python's own ``__mp_main__`` alias to the end, as under plain python)."""
    script = tmp_path / "train.py"
    script.write_text(
        "import array, sys, weakref\n"
        "held = array.array('d', [1.0])\n"
        "weakref.finalize(held, print, 'held freed', file=sys.stderr, flush=True)\n"
    )
    res = gpucheck("run", str(script))
    assert res.returncode == 0, res.stderr[-3000:]
    lines = res.stderr.splitlines()
    report = next(i for i, line in enumerate(lines) if line.startswith("gpucheck: "))
    assert "held freed" in lines[:report], res.stderr[-3000:]


def test_a_fix_in_a_file_of_the_users_is_said_as_an_edit_and_a_rerun(tmp_path):
    """The step loop is in ``engine.py``: its fix is refused as a diff of that file, and on a
    script the user edits it and runs the script again (before: "import it again
    (importlib.reload)", a kernel's step a script has not)."""
    (tmp_path / "engine.py").write_text(
        "import torch\n\n\n"
        "def train(model, opt, rows, labels, rng):\n"
        "    for step in range(40):\n"
        "        idx = rng.integers(0, len(rows), 16)\n"
        "        x = torch.tensor([rows[i] for i in idx])\n"
        "        y = torch.tensor(labels[idx])\n"
        "        loss = torch.nn.functional.cross_entropy(model(x), y)\n"
        "        opt.zero_grad()\n"
        "        loss.backward()\n"
        "        opt.step()\n"
    )
    source = ARRAYS_FROM_A_FUNCTION.split("for step in range(40):")[0]
    source = source.replace("import torch\n", "import torch\nfrom engine import train\n", 1)
    report, stderr, code = _run(tmp_path, source + "train(model, opt, rows, labels, rng)\n")
    assert code == 0, stderr[-3000:]
    (found,) = [f for f in report.findings if f.rule_id == "host.tensor_from_arrays"]
    refusal = found.proposal.refusal if found.proposal else None
    assert refusal is not None and "engine.py" in refusal, refusal
    assert "make it there and run the script again" in refusal
    assert "importlib" not in refusal


def test_a_model_made_in_a_function_of_the_script_is_not_said_of_an_earlier_cell():
    """torch.compile's refusal where the script's top level does not create the model names a
    function or an import, not an earlier cell (a script has none): as ``build_report`` hands
    a script's globals (``made_before=False``) to ``attach_fixes``."""
    source = ARRAYS_FROM_A_FUNCTION.replace(
        "model = torch.nn.Linear(32, 4)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)",
        "model, opt = build()",
    )
    finding = Finding("compile.small_ops", "", "low", (), None, None, "", fix_id="torch_compile")
    (script,) = attach_fixes([finding], source, namespace={}, made_before=False)
    (cell,) = attach_fixes([finding], source)
    assert script.proposal is not None and cell.proposal is not None
    assert script.proposal.refusal == (
        "model is not created at the top level of this script (a function or an import makes "
        "it); add model = torch.compile(model) where it is created"
    )
    assert "earlier cell" in (cell.proposal.refusal or "")  # a notebook's wording kept


SAVES_TO_MEMORY = """\
import io

import torch

torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Linear(256, 256)
opt = torch.optim.Adam(model.parameters())
for step in range(30):
    loss = model(torch.randn(8, 256)).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
"""


@pytest.mark.parametrize("target", ["buf", "path"])
def test_a_save_into_a_bytesio_every_step_is_said_to_serialise_not_to_write(tmp_path, target):
    """``torch.save(..., io.BytesIO())`` every step writes no file: the finding says it
    serialises to memory (before: "writes it to disk"); a save to a path still says the disk."""
    path = repr(str(tmp_path / "ckpt.pt"))  # the run's folder is the caller's: not there
    source = SAVES_TO_MEMORY.replace("torch.save(model.state_dict(), buf)",
                                     f"torch.save(model.state_dict(), {path})")  # fmt: skip
    report, stderr, code = _run(tmp_path, source if target == "path" else SAVES_TO_MEMORY)
    assert code == 0, stderr[-3000:]
    (found,) = [f for f in report.findings if f.rule_id == "checkpoint.every_step"]
    said = " ".join((found.title, found.fix))
    if target == "buf":
        assert "to memory" in said and "serialises" in said and "disk" not in said, said
    else:
        assert "writes it to disk" in said, said
