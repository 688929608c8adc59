"""Bounded memory: peak RSS the tool adds to a 1,000-step and a 50,000-step tiny loop must match.

Each measurement is a fresh subprocess (a real IPython shell with ``%load_ext gpu_notebook``)
that builds the tiny loop's data first (8-8-1 MLP, batch 1, SGD; the input tensors for all steps
exist before measuring), runs the loop once without the magic for 50 steps (torch's own lazy
allocations), then:

1. ``gc.collect()``, reads RSS (``VmRSS``), resets the kernel's peak mark (``/proc/self/clear_refs``
   ``5``: ``VmHWM`` := current RSS);
2. runs the measured cell (``plain`` or ``%%gpucheck`` with default options, report displayed
   into a discarded stream);
3. reads the peak (``VmHWM``) and the RSS after.

*Added peak* = peak - RSS before. The tool's share = median added peak with ``%%gpucheck`` -
median added peak of the plain cell of the same length (the loop's own growth). The budget: the
tool's share at 50,000 steps minus its share at 1,000 steps < 20 MB (memory stays flat however
long the cell runs). The tool is *not* warmed in the child: its first use in a fresh kernel
includes Kineto's initialisation, the same for both lengths.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    REPO_ROOT,
    Result,
    emit,
    interleave,
    median,
    parse_args,
    write_results,
)

BUDGET_MB = 20.0
MB = 1 << 20

SETUP_TEMPLATE = """
import gc, time, torch
from torch import nn
torch.set_num_threads(1)
torch.manual_seed(0)
xs, ys = torch.randn({steps}, 1, 8), torch.randn({steps}, 1, 1)
def fresh():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 1))
    return model, torch.optim.SGD(model.parameters(), lr=1e-2), nn.MSELoss()
"""

BODY_TEMPLATE = """
model, opt, loss_fn = fresh()
for i in range({steps}):
    loss = loss_fn(model(xs[i]), ys[i])
    opt.zero_grad(); loss.backward(); opt.step()
"""


def child(tool: str, steps: int) -> dict[str, Any]:
    """One measurement in this (fresh) process."""
    import gc

    from _common import peak_rss_bytes, reset_peak_rss, rss_bytes
    from overhead import Shell

    os.environ.setdefault("KINETO_LOG_LEVEL", "6")
    shell = Shell(SETUP_TEMPLATE.format(steps=steps))
    shell.time_cell(BODY_TEMPLATE.format(steps=50) + "_loop = (0.0, 0.0)\n")  # torch warm-up
    body = BODY_TEMPLATE.format(steps=steps) + "_loop = (0.0, 0.0)\n"
    source = ("%%gpucheck\n" + body) if tool == "gpucheck" else body
    gc.collect()
    before = rss_bytes()
    if not reset_peak_rss():
        raise RuntimeError("cannot reset the peak RSS mark (/proc/self/clear_refs)")
    t0 = time.perf_counter()
    timing = shell.time_cell(source)
    wall_s = time.perf_counter() - t0
    peak = peak_rss_bytes()
    gc.collect()
    after = rss_bytes()
    return {
        "before": before,
        "peak": peak,
        "after": after,
        "wall_s": wall_s,
        "cell_s": timing.cell_s,
    }


def _measure(tool: str, steps: int) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", tool, str(steps)],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=900,
        check=False,
        env={**os.environ, "KINETO_LOG_LEVEL": "6"},
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(
            f"child {tool} {steps} failed (exit {proc.returncode}): {proc.stderr[-600:]}"
        )
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def main(argv: Sequence[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if len(argv) == 3 and argv[0] == "--child":
        print(json.dumps(child(argv[1], int(argv[2]))), flush=True)
        return 0
    args = parse_args(__doc__ or "", argv)
    short, long = (200, 2_000) if args.quick else (1_000, 50_000)
    rounds = args.rounds or (1 if args.quick else 3)
    rows: list[Result] = []
    t_start = time.perf_counter()
    runs = interleave(
        {
            f"gpucheck-{short}": lambda: _measure("gpucheck", short),
            f"gpucheck-{long}": lambda: _measure("gpucheck", long),
            f"plain-{short}": lambda: _measure("plain", short),
            f"plain-{long}": lambda: _measure("plain", long),
        },
        rounds,
    )

    def added_mb(key: str) -> float:
        return median([(r["peak"] - r["before"]) / MB for r in runs[key]])

    for key, values in runs.items():
        print(
            f"# {key}: added peak {[round((r['peak'] - r['before']) / MB, 1) for r in values]} MB, "
            f"retained {[round((r['after'] - r['before']) / MB, 1) for r in values]} MB, "
            f"RSS before {[round(r['before'] / MB) for r in values]} MB, "
            f"cell {[round(r['cell_s'], 1) for r in values]} s",
            flush=True,
        )
    tool: dict[int, float] = {}
    how = (
        f"fresh subprocess per measurement, {rounds} interleaved round(s); VmHWM after the cell minus "
        "VmRSS before it (peak mark reset before the cell); tool share = median with %%gpucheck "
        "minus median plain"
    )
    for n in (short, long):
        tool[n] = added_mb(f"gpucheck-{n}") - added_mb(f"plain-{n}")
        emit(
            Result(
                f"memory.tool_peak_mb.{n}",
                f"peak RSS added by %%gpucheck, {n:,}-step tiny loop",
                tool[n],
                f"{tool[n]:.1f} MB (cell with tool {added_mb(f'gpucheck-{n}'):.1f} MB, plain "
                f"{added_mb(f'plain-{n}'):.1f} MB)",
                "",
                None,
                how,
            ),
            rows,
        )
    diff = tool[long] - tool[short]
    emit(
        Result(
            "memory.growth_mb",
            f"tool's added peak RSS, {long:,} steps minus {short:,} steps",
            diff,
            f"{diff:+.1f} MB",
            f"< {BUDGET_MB:.0f} MB",
            abs(diff) < BUDGET_MB,
            how,
        ),
        rows,
    )
    print(f"# memory benchmark took {time.perf_counter() - t_start:.0f} s", flush=True)
    write_results(args.json_path, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
