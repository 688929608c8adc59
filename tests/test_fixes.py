"""The fix catalog and the IPython-syntax guard: what every fix promises, whatever the codemod.

Codemod-specific behaviour lives in tests/test_fixes_data.py, test_fixes_loop.py and
test_fixes_model.py.
"""

from __future__ import annotations

import json
from typing import Any

import libcst as cst
import pytest
from IPython.core.inputtransformer2 import TransformerManager

from gpu_notebook.cell.ipython import NotPythonCell, protect, restore
from gpu_notebook.fixes import FIXES, HEADER_PREFIX, Patch, Refusal, apply_fix, to_proposal
from gpu_notebook.records import FixProposal, from_jsonable, to_jsonable

CELL = """\
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

%time X = torch.randn(64, 4)
ds = TensorDataset(X, torch.randint(0, 2, (64,)))
loader = DataLoader(ds, batch_size=16)  # tiny on purpose
model = nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
!echo "starting"
files = !ls
for xb, yb in loader:
    %time out = model(xb)
    loss = nn.functional.cross_entropy(out, yb)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"loss {loss.item():.3f}")
"""

# One call per fix that succeeds on CELL (or on a cell made for it), to check the common promises.
APPLICABLE = {
    "dataloader_workers": {},
    "non_blocking_copies": {},
    "throttle_host_syncs": {"every": 5},
    "log_every_n": {"every": 5},
    "torch_compile": {},
    "bigger_batch": {},
    "autocast": {},
    "backend_flags": {},
    "foreach_fused_optimizer": {},
}
NON_BLOCKING_CELL = CELL.replace(
    "for xb, yb in loader:\n", "for xb, yb in loader:\n    xb = xb.to('cuda')\n"
)


def _patched(fix_id: str) -> Patch:
    source = NON_BLOCKING_CELL if fix_id == "non_blocking_copies" else CELL
    result = apply_fix(fix_id, source, **APPLICABLE[fix_id])
    assert isinstance(result, Patch), result
    return result


# --------------------------------------------------------------------------------------------
# The catalog
# --------------------------------------------------------------------------------------------


def test_every_fix_has_a_title_two_why_lines_and_a_docs_link() -> None:
    assert len(FIXES) == 18  # gate_training_log added
    for fix_id, info in FIXES.items():
        assert info.fix_id == fix_id
        assert info.title and "\n" not in info.title
        assert len(info.why) == 2
        assert all(line and len(line) <= 100 and "\n" not in line for line in info.why)
        # PyTorch's docs, or those of the library whose call the fix changes (tqdm's bar, the
        # HF Trainer's callbacks, Lightning's Trainer).
        assert info.doc_url.startswith(
            ("https://pytorch.org/", "https://tqdm.github.io/", "https://huggingface.co/docs/",
             "https://lightning.ai/docs/")
        )  # fmt: skip


def test_fix_parameters_are_the_codemods_keyword_parameters() -> None:
    params = {p.name: p.default for p in FIXES["dataloader_workers"].params}
    assert params == {
        "num_workers": 4,
        "pin_memory": True,
        "persistent_workers": True,
        "prefetch_factor": None,
        "running_workers": None,
    }
    assert {p.name for p in FIXES["autocast"].params} == {"dtype", "device_type"}
    assert FIXES["dataparallel_to_ddp"].params == ()


def test_unknown_fix_or_parameter_is_a_caller_bug_not_a_refusal() -> None:
    with pytest.raises(ValueError, match="unknown fix 'make_fast'"):
        apply_fix("make_fast", CELL)
    with pytest.raises(TypeError, match="num_workers"):
        apply_fix("dataloader_workers", CELL, workers=4)
    with pytest.raises(ValueError, match="num_workers"):
        apply_fix("dataloader_workers", CELL, num_workers=-1)


@pytest.mark.parametrize("fix_id", sorted(APPLICABLE))
def test_a_patch_names_its_fix_first_and_still_parses(fix_id: str) -> None:
    patch = _patched(fix_id)
    first = patch.source_after.splitlines()[0]
    assert first.startswith(HEADER_PREFIX + FIXES[fix_id].title)
    assert patch.title == FIXES[fix_id].title and patch.why == FIXES[fix_id].why
    assert patch.source_before in (CELL, NON_BLOCKING_CELL)
    assert TransformerManager().transform_cell(patch.source_after)  # IPython accepts it
    cst.parse_module(protect(patch.source_after).code)
    assert 1 in patch.changed_lines


@pytest.mark.parametrize("fix_id", sorted(APPLICABLE))
def test_ipython_lines_survive_every_fix_byte_for_byte(fix_id: str) -> None:
    after = _patched(fix_id).source_after.splitlines()
    assert '!echo "starting"' in after
    assert "files = !ls" in after
    assert "%time X = torch.randn(64, 4)" in after
    # %time inside the loop may move into a new block (autocast), never lose its text.
    assert any(line.strip() == "%time out = model(xb)" for line in after)


@pytest.mark.parametrize("fix_id", sorted(APPLICABLE))
def test_applying_a_fix_twice_is_refused_or_changes_nothing_more(fix_id: str) -> None:
    once = _patched(fix_id)
    again = apply_fix(fix_id, once.source_after, **APPLICABLE[fix_id])
    if isinstance(again, Patch):
        # Only the header may be new: a second pass must not stack another change.
        body_once = once.source_after.split("\n", 1)[1]
        body_again = again.source_after.split("\n", 2)[2]
        assert body_again == body_once, fix_id
    else:
        assert again.reason


def test_diff_and_changed_lines_point_at_the_new_lines() -> None:
    patch = apply_fix("dataloader_workers", CELL, num_workers=2)
    assert isinstance(patch, Patch)
    assert patch.diff.startswith("--- before\n+++ after\n")
    assert "-loader = DataLoader(ds, batch_size=16)  # tiny on purpose" in patch.diff
    new_loader = (
        "loader = DataLoader(ds, batch_size=16, num_workers=2, pin_memory=True, "
        "persistent_workers=True)  # tiny on purpose"
    )
    assert "+" + new_loader in patch.diff
    lines = patch.source_after.splitlines()
    assert [lines[i - 1] for i in patch.changed_lines] == [lines[0], new_loader]


def test_patch_and_refusal_are_json_records() -> None:
    patch = apply_fix("autocast", CELL)
    assert isinstance(patch, Patch)
    data = json.loads(json.dumps(to_jsonable(patch)))
    assert from_jsonable(Patch, data) == patch
    refusal = apply_fix("inference_mode", CELL)
    assert isinstance(refusal, Refusal)
    assert from_jsonable(Refusal, json.loads(json.dumps(to_jsonable(refusal)))) == refusal


def test_to_proposal_carries_the_patch_or_the_refusal_into_the_report() -> None:
    patch = apply_fix("backend_flags", CELL)
    assert isinstance(patch, Patch)
    proposal = to_proposal(patch)
    assert isinstance(proposal, FixProposal)
    assert proposal.source_after == patch.source_after and proposal.refusal is None
    refused = to_proposal(apply_fix("dataparallel_to_ddp", CELL))
    assert refused.source_after is None and refused.diff is None
    assert refused.refusal == "no nn.DataParallel(...) in this cell"
    assert refused.title == FIXES["dataparallel_to_ddp"].title


# --------------------------------------------------------------------------------------------
# IPython syntax
# --------------------------------------------------------------------------------------------


def test_a_cell_magic_other_than_gpucheck_is_refused_with_its_name() -> None:
    result = apply_fix("dataloader_workers", "%%bash\nls -l\n")
    assert result == Refusal(
        "dataloader_workers", "this cell starts with %%bash; gpucheck fixes only Python cells"
    )


def test_a_leading_gpucheck_line_stays_first_and_the_header_follows_it() -> None:
    source = "%%gpucheck --steps 20 --no-profile\n" + CELL
    patch = apply_fix("dataloader_workers", source)
    assert isinstance(patch, Patch)
    lines = patch.source_after.splitlines()
    assert lines[0] == "%%gpucheck --steps 20 --no-profile"
    assert lines[1].startswith(HEADER_PREFIX)
    assert patch.changed_lines[0] == 2


def test_python_body_cell_magics_like_time_are_patched_below_their_line() -> None:
    patch = apply_fix("backend_flags", "%%time\nimport torch\nx = 1\n")
    assert isinstance(patch, Patch)
    assert patch.source_after.startswith("%%time\n" + HEADER_PREFIX)


def test_a_cell_that_is_not_python_is_refused_with_the_line() -> None:
    result = apply_fix("dataloader_workers", "import torch\nloader = DataLoader(ds,\nfor x in\n")
    assert isinstance(result, Refusal)
    assert result.reason.startswith("this cell is not valid Python (line ")
    assert "fix it and run it first" in result.reason


def test_protect_replaces_each_ipython_line_and_restore_gives_the_exact_text_back() -> None:
    source = (
        "%matplotlib inline\n"
        "files = !ls -la\n"
        "t = %timeit -o sum(range(10))\n"
        "for f in files:\n"
        "    !echo {f} \\\n"
        "        --verbose\n"
        "torch.compile?\n"
        "text = '''\n!not a shell line\n%not a magic\n'''\n"
        "ratio = (7\n     % 3)\n"
        "%env CUDA_VISIBLE_DEVICES=0"
    )
    cell = protect(source)
    assert cell.code == (
        "__gpucheck_ipy_0__()\n"
        "__gpucheck_ipy_1__()\n"
        "__gpucheck_ipy_2__()\n"
        "for f in files:\n"
        "    __gpucheck_ipy_3__()\n"
        "__gpucheck_ipy_4__()\n"
        "text = '''\n!not a shell line\n%not a magic\n'''\n"
        "ratio = (7\n     % 3)\n"
        "__gpucheck_ipy_5__()"
    )
    assert cell.originals[3] == ("    !echo {f} \\\n", "        --verbose\n")
    assert restore(cell.code, cell) == source


@pytest.mark.parametrize("fix_id", ["throttle_host_syncs", "autocast"])
def test_a_patched_cell_with_magics_and_shell_lines_runs_in_ipython(fix_id: str, ip: Any) -> None:
    params = {"every": 2} if fix_id == "throttle_host_syncs" else {"device_type": "cpu"}
    patch = apply_fix(fix_id, CELL.replace("files = !ls", "files = !echo hi"), **params)
    assert isinstance(patch, Patch)
    # The shell is shared by the whole session: give back every name this cell (re)binds.
    saved = dict(ip.user_ns)
    try:
        result = ip.run_cell(patch.source_after)
        assert result.success, result.error_in_exec
        assert list(ip.user_ns["files"]) == ["hi"]  # the shell escape ran, output captured
        assert ip.user_ns["loss"].requires_grad  # the loop ran through its %time line
    finally:
        ip.user_ns.clear()
        ip.user_ns.update(saved)


def test_restore_moves_ipython_lines_with_the_block_they_were_moved_into() -> None:
    cell = protect("for x in y:\n    %time f(x)\n")
    moved = cell.code.replace("    __gpucheck", "    with ctx:\n        __gpucheck")
    assert restore(moved, cell) == "for x in y:\n    with ctx:\n        %time f(x)\n"


def test_restore_refuses_to_lose_an_ipython_line() -> None:
    cell = protect("!nvidia-smi\nx = 1\n")
    with pytest.raises(ValueError, match="dropped"):
        restore("x = 1\n", cell)


def test_protect_raises_for_non_python_cell_magics_only() -> None:
    with pytest.raises(NotPythonCell, match="%%html"):
        protect("%%html\n<b>hi</b>\n")
    assert protect("%%gpucheck\nx = 1\n").magic_line == "%%gpucheck\n"


def test_windows_line_endings_are_kept() -> None:
    source = CELL.replace("\n", "\r\n")
    patch = apply_fix("dataloader_workers", source)
    assert isinstance(patch, Patch)
    assert "\n" not in patch.source_after.replace("\r\n", "")
    assert patch.source_after.startswith(HEADER_PREFIX)


def test_a_python_cell_is_protected_without_importing_ipython():
    """`gpucheck run` reads scripts: plain Python needs no IPython (its import is 0.1-0.2 s)."""
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import sys\n"
        "from gpu_notebook.cell.ipython import protect\n"
        "cell = protect('for x in loader:\\n    step(x)\\n')\n"
        "assert cell.originals == () and cell.code.startswith('for x')\n"
        "print('IPython' in sys.modules)\n"
        "cell = protect('%time step(1)\\nx = 1\\n')\n"  # an IPython line: IPython finds it
        "print(len(cell.originals), 'IPython' in sys.modules)\n"
    )
    env = {"PYTHONPATH": str(Path(__file__).parents[1]), "PATH": "/usr/bin:/bin"}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["False", "1", "True"]
