"""``%run script.py`` under ``%%gpucheck``: the hot lines are the script's, as file:line.

The cell's one line ran the whole script, so it read "line 2 `%run train.py`: 100%" and the
script's loop, where the time went, never showed (issue 26, unseen). A real shell and a real
script; what is asserted is where the lines point, not their shares.
"""

from __future__ import annotations

from pathlib import Path

from gpu_notebook.analysis.lines import hot_lines
from gpu_notebook.views.wording import describe_line

SCRIPT = """\
import time
import torch
torch.manual_seed(0)
model = torch.nn.Linear(32, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(40):
    x = torch.randn(16, 32)
    time.sleep(0.01)
    loss = model(x).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
"""


def test_a_script_run_by_the_cell_gives_its_own_lines_as_the_hot_lines(ip, tmp_path: Path) -> None:
    script = tmp_path / "train_run.py"
    script.write_text(SCRIPT)
    ip.user_ns.pop("rep", None)
    ip.run_cell(f"%%gpucheck -q -o rep --lines all\n%run {script}\n")
    stacks = ip.user_ns["rep"].analysis.stacks
    assert stacks is not None
    assert stacks.script_callers == (2,)  # the cell's `%run` line
    assert {s.filename for s in stacks.script_lines} == {str(script)}
    hot = hot_lines(stacks, 3)
    assert hot and all(s.filename == str(script) for s in hot)
    sleep = next(s for s in stacks.script_lines if s.line == 8)
    assert sleep.text == "    time.sleep(0.01)"
    assert describe_line(sleep).startswith("train_run.py:8 `time.sleep(0.01)`")
