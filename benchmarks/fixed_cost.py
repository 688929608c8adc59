"""Fixed cost, whole process: the first ``%%gpucheck`` in a fresh kernel, and ``gpucheck run``.

What a user pays once, measured as a user meets it (every process fresh, nothing warmed):

* **first cell**: a fresh IPython shell (``InteractiveShell``, as in a kernel) loads the
  extension, runs a set-up cell (torch, a small MLP, AdamW, a DataLoader) and then one 200-step
  training cell, plain or under ``%%gpucheck`` (the default: profiler window, stack sampler,
  report printed); the process then exits. The figure is the paired difference of the whole
  process's wall time, and beside it the difference inside the measured cell alone (the report
  included: the user waits for it) and of the process's CPU time.
* **gpucheck run**: ``python train.py`` against ``python -m gpu_notebook run train.py`` (what
  the ``gpucheck`` entry point runs) on the same 200-step script, whole process.

Variants alternate in each round (the order rotating), each a new process; the figure is the
median of the paired differences with their IQR. Budgets: both extras <= 0.3 s.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import REPO_ROOT, Result, emit, interleave, iqr, median, paired_diffs, parse_args
from _common import write_results as _write

EXTRA_BUDGET_S = 0.3

SETUP = """
import time, torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
torch.set_num_threads(1)
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
loss_fn = nn.CrossEntropyLoss()
loader = DataLoader(TensorDataset(torch.randn(STEPS * 32, 64), torch.randint(0, 10, (STEPS * 32,))), batch_size=32)
"""

LOOP = """
for x, y in loader:
    loss = loss_fn(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
"""

# The kernel side of the first-cell row: the shell, %load_ext, the set-up cell, the cell.
SHELL_DRIVER = """
import contextlib, io, sys, time
from IPython.core.interactiveshell import InteractiveShell
ip = InteractiveShell.instance()
sink = io.StringIO()
with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
    ip.run_cell("%load_ext gpu_notebook")
    ip.run_cell(SETUP)
    t0 = time.perf_counter()
    result = ip.run_cell(CELL)
    cell_s = time.perf_counter() - t0
if not result.success:
    sys.exit(f"cell failed: {result.error_in_exec or result.error_before_exec}")
print(f"CELL_S {cell_s:.6f}")
"""


def _run(cmd: Sequence[str], env: dict[str, str], cwd: Path) -> tuple[float, float, float]:
    """(whole-process wall, its CPU (user + sys, children included), the cell's own wall or 0)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[1:3]} exited {proc.returncode}: {proc.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    cell = 0.0
    for line in proc.stdout.splitlines():
        if line.startswith("CELL_S "):
            cell = float(line.split()[1])
    return wall, cpu, cell


def _row(
    rows: list[Result],
    figure: str,
    label: str,
    runs: dict[str, list[tuple[float, float, float]]],
    base: str,
    variant: str,
    *,
    cell: bool,
) -> None:
    walls = paired_diffs([r[0] for r in runs[variant]], [r[0] for r in runs[base]])
    cpus = paired_diffs([r[1] for r in runs[variant]], [r[1] for r in runs[base]])
    m, (lo, hi) = median(walls), iqr(walls)
    plain_wall = median([r[0] for r in runs[base]])
    extra = f"; CPU {median(cpus):+.2f} s"
    if cell:
        cells = paired_diffs([r[2] for r in runs[variant]], [r[2] for r in runs[base]])
        extra += f"; inside the cell {median(cells):+.2f} s (report included)"
    emit(
        Result(
            figure=figure,
            label=label,
            measured=m,
            display=(
                f"{m:+.2f} s wall (IQR {lo:+.2f} to {hi:+.2f}; plain process {plain_wall:.1f} s){extra}"
            ),
            budget=f"<= {EXTRA_BUDGET_S:.1f} s",
            passed=m <= EXTRA_BUDGET_S,
            how=(
                f"median of {len(walls)} paired whole-process wall differences, fresh processes, "
                "variants alternating (order rotating); CPU: user+sys of the child"
            ),
        ),
        rows,
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(__doc__ or "", argv)
    steps = 30 if args.quick else 200
    rounds = args.rounds or (1 if args.quick else 5)
    env = {**os.environ, "KINETO_LOG_LEVEL": "6", "PYTHONPATH": str(REPO_ROOT)}
    rows: list[Result] = []
    print(
        f"# load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True
    )
    with tempfile.TemporaryDirectory(prefix="gpucheck-fixed-cost-") as tmp:
        work = Path(tmp)
        setup = SETUP.replace("STEPS", str(steps))
        script = work / "train.py"
        script.write_text(setup + LOOP)
        py = sys.executable

        def shell(magic: bool) -> tuple[float, float, float]:
            cell = ("%%gpucheck\n" if magic else "") + LOOP.lstrip("\n")
            code = f"SETUP = {setup!r}\nCELL = {cell!r}\n" + textwrap.dedent(SHELL_DRIVER)
            return _run([py, "-c", code], env, work)

        first = interleave({"plain": lambda: shell(False), "gpucheck": lambda: shell(True)}, rounds)
        _row(
            rows,
            "fixed_cost.first_cell",
            f"first %%gpucheck in a fresh kernel ({steps}-step MLP cell): extra time, whole process",
            first,
            "plain",
            "gpucheck",
            cell=True,
        )
        run = interleave(
            {
                "python": lambda: _run([py, str(script)], env, work),
                "gpucheck run": lambda: _run(
                    [py, "-m", "gpu_notebook", "run", str(script)], env, work
                ),
            },
            rounds,
        )
        _row(
            rows,
            "fixed_cost.gpucheck_run",
            f"`gpucheck run train.py` vs `python train.py` ({steps} steps): extra time, whole process",
            run,
            "python",
            "gpucheck run",
            cell=False,
        )
    _write(args.json_path, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
