"""Unseen notebook cells, round 21: what the differential corpus cannot say by itself.

A user's exception whose ``__str__`` raises (a class whose message reads an attribute its
``__init__`` never set): Python and IPython show the traceback with the message replaced; under
``%%gpucheck`` the report's failure sentence called ``str(exc)`` itself, so the cell's outcome
became that AttributeError, raised through our code (IPython showed a second traceback into
``magic.py``/``cellrun.py``, ``sys.last_type`` was AttributeError and no report came). The same
call made ``gpucheck run``'s report of a script that raises such an exception.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from gpu_notebook.exception_text import STR_FAILED, exception_line

BAD_MESSAGE_CLASS = (
    "class BadMsgC21(Exception):\n    def __str__(self):\n        return self.detail  # never set\n"
)


def test_an_exception_whose_str_raises_stays_the_cells_own_outcome_and_has_a_report(ip, capsys):
    assert ip.run_cell(BAD_MESSAGE_CLASS + "netc21 = nn.Linear(8, 1)\n").success
    body = (
        "optc21 = torch.optim.SGD(netc21.parameters(), lr=0.1)\n"
        "for stepc21 in range(6):\n"
        "    lossc21 = netc21(torch.randn(4, 8)).pow(2).mean()\n"
        "    optc21.zero_grad(); lossc21.backward(); optc21.step()\n"
        "    if stepc21 == 4:\n"
        "        raise BadMsgC21()\n"
    )
    res = ip.run_cell("%%gpucheck -q -o repc21\n" + body)
    out = capsys.readouterr().out
    exc = res.error_in_exec
    assert type(exc).__name__ == "BadMsgC21", out  # the user's exception, not its __str__'s
    assert sys.last_type is type(exc)  # what %debug and %tb read
    assert "gpu_notebook" not in out  # one traceback, the user's: none through our code
    rep = ip.user_ns["repc21"]
    assert rep.run.status == "error"
    assert rep.run.error == f"BadMsgC21: {STR_FAILED}"
    assert rep.run.steps.step_count >= 1


def test_the_one_line_of_an_exception_whose_str_fails_is_pythons_own_wording():
    class Broken(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no message")

    import traceback

    # The message as Python's own traceback says it (after the class's qualified name).
    python_says = traceback.format_exception_only(Broken, Broken())[-1].strip()
    assert python_says.endswith(f"Broken: {STR_FAILED}")
    assert exception_line(Broken()) == f"Broken: {STR_FAILED}"


def test_a_script_raising_such_an_exception_exits_by_it_with_a_report(tmp_path: Path):
    script = tmp_path / "prog_c21.py"
    script.write_text(
        "import torch\n" + BAD_MESSAGE_CLASS + "net = torch.nn.Linear(8, 1)\n"
        "opt = torch.optim.SGD(net.parameters(), lr=0.1)\n"
        "for step in range(6):\n"
        "    loss = net(torch.randn(4, 8)).pow(2).mean()\n"
        "    opt.zero_grad(); loss.backward(); opt.step()\n"
        "raise BadMsgC21()\n"
    )
    res = subprocess.run(
        [sys.executable, "-m", "gpu_notebook", "run", str(script)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert res.returncode == 1, res.stderr
    assert "gpu_notebook" not in res.stderr.split("gpucheck: ")[0]  # the script's traceback only
    assert f"failed (BadMsgC21: {STR_FAILED}); this report covers" in res.stderr, res.stderr


# bokeh, which our reports import, replaces warnings.formatwarning with a wrapper at import: Python
# passes a warning's source (an unawaited coroutine, an unclosed file) only to its own
# formatwarning, so after the first measured cell every such warning lost its "Enable tracemalloc
# to get the object allocation traceback" line for the rest of the session. Fresh processes: which
# package imported bokeh first decides whose the wrapper is.
_HOOKS_AFTER_A_CELL = """
import json, sys, warnings
from IPython.testing import globalipapp
{before}
ip = globalipapp.get_ipython()
assert ip.run_cell("%load_ext gpu_notebook").success
ip.run_cell("import torch\\nnet = torch.nn.Linear(4, 1)\\nopt = torch.optim.SGD(net.parameters(), lr=0.1)")
ip.run_cell(
    "%%gpucheck -q\\n"
    "for i in range(8):\\n"
    "    l = net(torch.randn(2, 4)).sum(); opt.zero_grad(); l.backward(); opt.step()\\n"
)
async def never_awaited():
    pass
with warnings.catch_warnings(record=False):
    warnings.simplefilter("always")
    import io
    err, sys.stderr = sys.stderr, io.StringIO()
    never_awaited()
    import gc; gc.collect()
    text, sys.stderr = sys.stderr.getvalue(), err
print(json.dumps({{
    "bokeh_loaded": "bokeh" in sys.modules,
    "formatwarning": getattr(warnings.formatwarning, "__qualname__", "?"),
    "formatwarning_module": warnings.formatwarning.__module__,
    "pythons_own": warnings.formatwarning is warnings._formatwarning_orig,
    "showwarning_own": warnings.showwarning is warnings._showwarning_orig,
    "tracemalloc_line": "Enable tracemalloc" in text,
}}))
"""


def _hooks_after_a_cell(tmp_path: Path, before: str) -> dict[str, object]:
    import json

    script = tmp_path / "hooks_c21.py"
    script.write_text(_HOOKS_AFTER_A_CELL.format(before=before))
    res = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert res.returncode == 0, res.stderr[-3000:]
    return dict(json.loads(res.stdout.strip().splitlines()[-1]))


def test_the_warning_hooks_bokeh_replaced_for_our_report_are_pythons_again(tmp_path: Path):
    seen = _hooks_after_a_cell(tmp_path, before="")
    assert seen["bokeh_loaded"]  # our report imported it
    assert seen["pythons_own"] and seen["showwarning_own"], seen
    assert seen["tracemalloc_line"], seen  # a warning's source is formatted as without us


def test_a_formatwarning_of_the_users_own_stays_and_bokeh_imported_by_the_user_keeps_its_own(
    tmp_path: Path,
):
    users = _hooks_after_a_cell(
        tmp_path,
        before=(
            "def users_format(message, category, filename, lineno, line=None):\n"
            "    return f'USER {category.__name__}: {message}\\n'\n"
            "warnings.formatwarning = users_format\n"
        ),
    )
    assert users["formatwarning"] == "users_format", users  # bokeh wrapped it; the user's is back
    theirs = _hooks_after_a_cell(tmp_path, before="import bokeh")
    assert theirs["formatwarning_module"] == "bokeh", theirs  # the user's import, the user's hook
