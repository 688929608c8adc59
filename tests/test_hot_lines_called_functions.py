"""A function the measured cell calls, defined in an earlier cell or in the user's own module:
its lines are hot lines too, and the calling cell line stays.

The notebook shape: ``def train_epoch(...)`` in one cell (or ``from utils import train_epoch``),
``%%gpucheck`` over ``train_epoch(model, loader)`` in the next. The hot lines read only
"line 2 `train_epoch(model, loader)`: 100%", never where the time went (unseen notebooks round).
A real shell, a real module file; what is asserted is where the lines point, not their shares.
"""

from __future__ import annotations

import sys
from pathlib import Path

from gpu_notebook.analysis.lines import hot_lines
from gpu_notebook.views.wording import describe_line

# Line 4 (`s += i`) holds nearly all of the time; a sleep-free loop the sampler cannot miss.
SLOW = "def slow_part(n):\n    s = 0\n    for i in range(n):\n        s += i\n    return s\n"


def _stacks(ip, body: str):
    ip.user_ns.pop("rep", None)
    res = ip.run_cell(f"%%gpucheck -q -o rep --lines all\n{body}")
    assert res.success, res.error_in_exec
    stacks = ip.user_ns["rep"].analysis.stacks
    assert stacks is not None
    return stacks


def test_a_function_of_an_earlier_cell_gives_its_lines_and_keeps_the_call_line(ip) -> None:
    number = ip.execution_count  # the defining cell's In[N], as a notebook numbers it
    defined = ip.run_cell(SLOW.replace("slow_part", "slow_in_cell"), store_history=True)
    assert defined.success
    stacks = _stacks(ip, "for _ in range(3):\n    slow_in_cell(1000000)\n")
    assert stacks.script_callers == ()  # a call, not a file run whole: the call line stays
    called = [s for s in stacks.script_lines if s.other_cell]
    assert called and all(s.cell_number == number for s in called)
    loop = next(s for s in called if s.line == 4)
    assert loop.text == "        s += i"
    assert describe_line(loop).startswith(f"In[{number}] line 4 `s += i`")
    hot = hot_lines(stacks, 3)
    assert hot[0].filename is None and hot[0].line == 3  # the cell's call line, first at a tie
    assert any(s.other_cell and s.line == 4 for s in hot)


def test_a_function_imported_from_the_users_module_gives_its_lines(ip, tmp_path: Path) -> None:
    (tmp_path / "hot_utils.py").write_text(SLOW)
    sys.path.insert(0, str(tmp_path))
    try:
        stacks = _stacks(ip, "from hot_utils import slow_part\nslow_part(3000000)\n")
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("hot_utils", None)
    mine = [s for s in stacks.script_lines if s.filename == str(tmp_path / "hot_utils.py")]
    assert mine and not any(s.other_cell for s in mine)
    assert stacks.script_callers == ()
    loop = next(s for s in mine if s.line == 4)
    assert describe_line(loop).startswith("hot_utils.py:4 `s += i`")
    hot = hot_lines(stacks, 3)
    assert hot[0].filename is None and hot[0].line == 3
    assert any(s.filename == str(tmp_path / "hot_utils.py") and s.line == 4 for s in hot)


def test_a_function_of_an_earlier_kernel_cell_is_named_by_its_number(ip) -> None:
    """ipykernel compiles a cell to "/tmp/ipykernel_PID/HASH.py", a hash of its source that
    holds no In[N]: the line read "another cell, line 4". Its own tracebacks name "Cell In[3]"
    from the compiler's record; the hot line reads the same record. The shell here compiles
    with ipykernel's own compiler class, as a kernel's shell does."""
    from ipykernel.compiler import XCachingCompiler

    plain = ip.compile
    ip.compile = XCachingCompiler()
    try:
        number = ip.execution_count
        defined = ip.run_cell(SLOW.replace("slow_part", "slow_in_kernel"), store_history=True)
        assert defined.success
        stacks = _stacks(ip, "for _ in range(3):\n    slow_in_kernel(1000000)\n")
    finally:
        ip.compile = plain
    called = [s for s in stacks.script_lines if s.other_cell]
    assert called and all("ipykernel_" in (s.filename or "") for s in called)
    assert all(s.cell_number == number for s in called)
    loop = next(s for s in called if s.line == 4)
    assert describe_line(loop).startswith(f"In[{number}] line 4 `s += i`")
