"""Where ``%%gpucheck``'s in-loop cost goes, read from outside by py-spy: our frames' share.

A wall-clock or CPU ratio of two loops spreads by +-10% on a loaded 2-core machine, which hides a
3% budget. What does not depend on the load is *where* the measured loop's thread is when it
runs: py-spy (``pip install py-spy``; it reads the process from outside, no GIL, no code of
ours in the target) samples a child process that runs one of ``overhead_shapes.py``'s cells
``--rounds`` times plain and ``--rounds`` times under ``%%gpucheck``, alternating. For the loop's
samples (stacks through ``--loop-frame``, e.g. Lightning's ``fit``) it prints:

* the samples of the plain and the measured cells (their ratio: the in-loop cost, sampled);
* the share of the measured loop's samples whose innermost frame is ours (the step clock's
  hooks, the session's listener) or is a callee of ours (the profiler window's start and stop);
  a wrapper of ours calling torch's original is torch's time, not ours;
* those samples by function of ours, and what our callees were.

Usage: ``python benchmarks/our_frames.py --shape lightning --rounds 10`` (py-spy from PATH or
``GPUCHECK_PYSPY``). Prints "not available" without py-spy. Sampled on-CPU only (no ``--idle``):
the budget's clock is CPU time.
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
LOOP_FRAMES = {
    "lightning": "fit (lightning/pytorch/trainer/trainer.py",
    "hf": "train (transformers/trainer.py",
    "lbfgs": "step (torch/optim/lbfgs.py",
}

CHILD = """
import contextlib, gc, io, os, sys
sys.path.insert(0, {bench!r})
os.environ.setdefault("KINETO_LOG_LEVEL", "6")
from IPython.core.interactiveshell import InteractiveShell
import overhead, overhead_shapes
shape = getattr(overhead_shapes, {shape!r}.upper())
ip = InteractiveShell.instance()
def run(src):
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        r = ip.run_cell(src)
    assert r.success, (r.error_in_exec, r.error_before_exec)
run("%load_ext gpu_notebook"); run(overhead_shapes.COMMON + shape.setup)
for v in ("plain", "gpucheck"):  # warm
    run(overhead.shape_cell(shape, v))
for r in range({rounds}):
    for v in (("plain", "gpucheck") if r % 2 == 0 else ("gpucheck", "plain")):
        gc.collect(); run(overhead.shape_cell(shape, v))
"""


def read(path: Path, loop_frame: str) -> None:
    samples: collections.Counter[str] = collections.Counter()
    ours: collections.Counter[str] = collections.Counter()
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        n = int(count)
        frames = stack.split(";")
        loop = [i for i, f in enumerate(frames) if loop_frame in f]
        if not loop:
            continue
        magic = any("gpu_notebook/magic.py" in f for f in frames)
        samples["gpucheck" if magic else "plain"] += n
        mine = [i for i, f in enumerate(frames) if "gpu_notebook/" in f and i > loop[-1]]
        if not magic or not mine:
            continue
        i = mine[-1]
        name = frames[i].split(" (")[0]
        if i == len(frames) - 1:
            ours[name] += n
        elif i != mine[0] or not name.endswith((".backward", ".__next__")):
            # a callee of ours (the profiler's start/stop), not a wrapper's call of the original
            ours[f"{name} -> {frames[i + 1].split(' (')[0]}"] += n
    plain, measured = samples["plain"], samples["gpucheck"]
    total = sum(ours.values())
    print(f"loop samples: plain {plain}, %%gpucheck {measured} (x{measured / max(1, plain):.3f})")
    # Under load a sample counts a thread that waits for a core too, and threads are preempted
    # most often where a system call returns: our few /proc reads weigh more than their CPU.
    print(f"ours: {total} samples = {100 * total / max(1, measured):.2f}% of the measured loop's")
    for name, n in ours.most_common(25):
        print(f"  {100 * n / max(1, measured):5.2f}%  {n:5d}  {name}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shape", default="lightning", choices=sorted(LOOP_FRAMES))
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--rate", type=int, default=500)
    args = parser.parse_args()
    spy = os.environ.get("GPUCHECK_PYSPY") or shutil.which("py-spy")
    if spy is None:
        print("not available: py-spy is not installed (pip install py-spy)")
        return 0
    print(f"# load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory(prefix="gpucheck-our-frames-") as tmp:
        out = Path(tmp) / "raw.txt"
        code = CHILD.format(bench=str(BENCH), shape=args.shape, rounds=args.rounds)
        env = {**os.environ, "PYTHONPATH": str(BENCH.parent)}
        cmd = [spy, "record", "--rate", str(args.rate), "--format", "raw", "-o", str(out)]
        subprocess.run([*cmd, "--", sys.executable, "-c", code], env=env, check=True)
        read(out, LOOP_FRAMES[args.shape])
    print(f"# load average at end: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
