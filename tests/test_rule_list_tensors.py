"""The list-of-arrays rule (rules/list_tensors.py): its check, its fix, end to end on a cell with
a real namespace (the list of arrays is read live)."""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest
import torch

from gpu_notebook.fixes import Patch, apply_fix
from gpu_notebook.records import HostOverhead
from gpu_notebook.rules.list_tensors import FIX
from gpu_notebook.words.proposals import attach_fixes
from tests.scenarios import synthetic as syn
from tests.test_rules import ids, only, rules_for

SETUP = """\
import numpy as np
import torch
rng = np.random.default_rng(0)
rows = [rng.standard_normal(6).astype(np.float32) for _ in range(50)]
labels = rng.integers(0, 3, 50)
model = torch.nn.Linear(6, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
"""
LOOP = """\
for step in range(3):
    idx = rng.integers(0, len(rows), 8)
    x = torch.tensor([rows[i] for i in idx])
    y = torch.tensor(labels[idx])
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""
CELL = SETUP + LOOP


def namespace(source: str = SETUP) -> dict[str, object]:
    scope: dict[str, object] = {}
    exec(compile(source, "<setup>", "exec"), scope)
    return scope


def host_bound(between: float = 0.5):
    return dataclasses.replace(
        syn.make_analysis({"forward": 0.2}), host=HostOverhead(40.0, 3.0, between, 0.1, 30.0)
    )


def test_a_list_of_arrays_made_a_tensor_every_step_is_found_and_stacked():
    findings = rules_for(syn.make_run(CELL), host_bound(), namespace=namespace())
    f = only(findings, "host.tensor_from_arrays")
    # Line 11 of the notebook cell: the %%gpucheck line is line 1.
    assert f.line == 11 and f.fix_id == FIX.fix_id and f.fix_params == {"items": "rows"}
    assert f.gain_bound == pytest.approx(2.0)  # the Python between operators, removed
    (fixed,) = attach_fixes([f], CELL)
    assert fixed.proposal is not None and fixed.proposal.source_after is not None
    after = fixed.proposal.source_after
    assert "x = torch.from_numpy(np.stack([rows[i] for i in idx]))" in after
    assert "y = torch.tensor(labels[idx])" in after  # an array already: one copy in C
    # The patched cell trains on the same numbers: same batches, same dtype, same loss.
    losses = []
    for source in (CELL, after):
        torch.manual_seed(0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # torch's own "extremely slow"
            scope = namespace(source)
        assert scope["x"].dtype == torch.float32  # type: ignore[attr-defined]
        losses.append(scope["loss"].item())  # type: ignore[attr-defined]
    assert losses[0] == losses[1]


def test_a_dtype_or_device_goes_to_as_tensor():
    cell = CELL.replace("[rows[i] for i in idx])", "[rows[i] for i in idx], dtype=torch.float64)")
    patched = apply_fix(FIX, cell, items="rows")
    assert isinstance(patched, Patch)
    assert "torch.as_tensor(np.stack([rows[i] for i in idx]), dtype=torch.float64)" in (
        patched.source_after
    )


@pytest.mark.parametrize(
    "line",
    [
        "x = torch.from_numpy(np.stack([rows[i] for i in idx]))",  # stacked already
        "x = torch.tensor([float(i) for i in idx])",  # numbers, not arrays
        "x = torch.tensor([rows[i] for i in idx], requires_grad=True)",  # not as_tensor's
        "x = torch.tensor([rows[i] for i in idx]) if step else None",  # some steps only
    ],
)
def test_no_finding_where_no_list_of_arrays_is_parsed_every_step(line):
    cell = CELL.replace("x = torch.tensor([rows[i] for i in idx])", line)
    findings = rules_for(syn.make_run(cell), host_bound(), namespace=namespace())
    assert "host.tensor_from_arrays" not in ids(findings)


def test_a_script_read_without_its_namespace_is_found_by_the_cells_own_binding():
    # Without a namespace (a name in a script's main(), no global): `rows = [<array> ...]`.
    assert "host.tensor_from_arrays" in ids(rules_for(syn.make_run(CELL), host_bound()))
    # A list whose items numpy does not make is not known to hold arrays: no finding.
    cell = CELL.replace(".astype(np.float32) for", ".tolist() for")
    assert "host.tensor_from_arrays" not in ids(rules_for(syn.make_run(cell), host_bound()))


def test_the_fix_needs_numpy_imported_in_the_cell():
    cell = CELL.replace("import numpy as np\n", "")
    assert not isinstance(apply_fix(FIX, cell, items="rows"), Patch)


def test_the_live_reading_takes_only_plain_lists_and_tuples_of_arrays():
    from gpu_notebook.cell.live import live_facts

    class Odd(list):  # a list subclass may run code of its own on indexing: not read
        pass

    ns = {"a": [np.zeros(2)], "b": (np.zeros(2),), "c": [1.0], "d": Odd([np.zeros(2)]), "e": []}
    assert live_facts(ns, ns).array_lists == {"a", "b"}
