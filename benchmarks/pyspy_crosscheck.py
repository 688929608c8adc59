"""Cross-check the in-process stack sampler against py-spy on the same training-like script.

py-spy reads the process from outside (no GIL, no in-process cost), so it is the reference. The
script below runs three known kinds of host work in one loop: a pure-Python preprocessing step,
a torch forward/backward/optimizer step, and a logging call that sleeps (I/O-like). It is run
twice, in separate processes: once as py-spy's child (``py-spy record --idle --format
speedscope -- python this.py --workload``: a child needs no ptrace attach, which containers
often forbid) and once under our sampler (``--workload --ours FILE``). Both write speedscope
JSON; this script then prints each tool's top three functions by self time side by side, and
the inclusive share of the three user-level functions, with their share measured by wrappers
timing each call in our run (the truth for that run: the two runs' shares differ a little).

``--idle`` makes py-spy count sleeping/waiting samples too: our sampler samples wall time.

Usage: ``python benchmarks/pyspy_crosscheck.py [--seconds 6] [--rate 200] [--mode thread]``
(``pip install py-spy`` first.)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

USER_FUNCTIONS = ("python_preprocess", "train_step", "log_metrics")


# --------------------------------------------------------------------------------------------
# The workload (runs in the child processes)
# --------------------------------------------------------------------------------------------


def python_preprocess(rows: list[list[float]]) -> list[list[float]]:
    """Per-element normalisation in pure Python: the classic slow collate/transform."""
    out = []
    for row in rows:
        mean = sum(row) / len(row)
        out.append([(v - mean) * 0.5 for v in row])
    return out


def train_step(model: Any, opt: Any, x: Any, y: Any) -> Any:
    import torch

    loss: Any = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss


def log_metrics(loss: Any) -> None:
    time.sleep(0.004)  # a blocking write to a remote logger


def setup() -> tuple[Any, Any, list[list[float]]]:
    """Model, optimizer and data, built and warmed up (imports, first step) before measuring."""
    import random

    import torch

    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(
        torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1)
    )
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    rnd = random.Random(0)
    rows = [[rnd.random() for _ in range(256)] for _ in range(64)]
    training_loop(model, opt, rows, 0.5)
    return model, opt, rows


def training_loop(model: Any, opt: Any, rows: list[list[float]], seconds: float) -> None:
    """The steady state both tools are compared on (their samples outside it are ignored)."""
    import torch

    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        batch = python_preprocess(rows)
        x = torch.tensor(batch)
        loss = train_step(model, opt, x, x[:, :1])
        log_metrics(loss)


def workload(seconds: float) -> None:
    training_loop(*setup(), seconds)


def run_ours(seconds: float, interval_s: float, out: Path, mode: str = "thread") -> None:
    from gpu_notebook.analysis.lines import stack_profile, to_speedscope
    from gpu_notebook.capture.stacks import StackSampler

    model, opt, rows = setup()
    # The truth for this run: each user function timed by a wrapper (training_loop calls them
    # through this module's globals). ~1 us a call, against milliseconds of work.
    spent = dict.fromkeys(USER_FUNCTIONS, 0.0)
    for name in USER_FUNCTIONS:
        globals()[name] = _timed(globals()[name], name, spent)
    sampler = StackSampler(threading.get_ident(), interval_s, root_codes=())  # a thread sampler
    sampler.start()
    t0 = time.perf_counter()
    try:
        training_loop(model, opt, rows, seconds)
    finally:
        wall_s = time.perf_counter() - t0
        raw = sampler.stop()
    profile = stack_profile(raw)
    _truth_path(out).write_text(json.dumps({k: v / wall_s for k, v in spent.items()}))
    out.write_text(json.dumps(to_speedscope(profile, name="gpu_notebook StackSampler (thread)")))


def _timed(func: Any, name: str, spent: dict[str, float]) -> Any:
    def timed(*args: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return func(*args)
        finally:
            spent[name] += time.perf_counter() - t0

    return timed


def _truth_path(ours: Path) -> Path:
    return ours.with_name(ours.name.replace(".speedscope.json", ".measured.json"))


# --------------------------------------------------------------------------------------------
# Reading speedscope files (py-spy's and ours)
# --------------------------------------------------------------------------------------------


def _frame_key(frame: dict[str, Any]) -> str:
    """``function (file.py)``: py-spy names frames by co_name, we by co_qualname."""
    name = str(frame["name"]).rsplit(".", 1)[-1]
    file = os.path.basename(str(frame.get("file", "")))
    return f"{name} ({file})" if file else name


def shares(path: Path, thread: str | None) -> tuple[Counter[str], Counter[str], float]:
    """Self and total time share per function, and the seconds covered, of one speedscope file,
    over the samples inside ``training_loop`` (py-spy also sees start-up, imports and setup)."""
    doc = json.loads(path.read_text())
    frames = doc["shared"]["frames"]
    profiles = doc["profiles"]
    if thread is not None:  # py-spy writes one profile per thread
        profiles = [p for p in profiles if thread in p["name"]] or profiles[:1]
    self_w: Counter[str] = Counter()
    total_w: Counter[str] = Counter()
    all_w = 0.0
    for prof in profiles:
        for stack, weight in zip(prof["samples"], prof["weights"], strict=True):
            if not any(frames[i]["name"].endswith("training_loop") for i in stack):
                continue
            all_w += weight
            self_w[_frame_key(frames[stack[-1]])] += weight
            for key in {_frame_key(frames[i]) for i in stack}:
                total_w[key] += weight
    unit = profiles[0]["unit"] if profiles else "none"
    scale = {"seconds": 1.0, "milliseconds": 1e-3, "microseconds": 1e-6, "nanoseconds": 1e-9}
    seconds = all_w * scale.get(unit, 0.0)
    if all_w <= 0:
        return Counter(), Counter(), 0.0
    return (
        Counter({k: v / all_w for k, v in self_w.items()}),
        Counter({k: v / all_w for k, v in total_w.items()}),
        seconds,
    )


def report(pyspy: Path, ours: Path) -> None:
    ps_self, ps_total, ps_s = shares(pyspy, "MainThread")
    our_self, our_total, our_s = shares(ours, None)
    width = 46
    print(
        f"{'rank':<5}{'py-spy --idle (self time)':<{width}}{'gpu_notebook StackSampler (self time)':<{width}}"
    )
    ps_top = ps_self.most_common(3)
    our_top = our_self.most_common(3)
    for i in range(3):
        left = f"{ps_top[i][0]}  {ps_top[i][1]:.1%}" if i < len(ps_top) else ""
        right = f"{our_top[i][0]}  {our_top[i][1]:.1%}" if i < len(our_top) else ""
        print(f"{i + 1:<5}{left:<{width}}{right:<{width}}")
    print()
    truth_file = _truth_path(ours)
    truth = json.loads(truth_file.read_text()) if truth_file.exists() else {}
    print(
        f"{'inclusive share':<24}{'py-spy':>10}{'ours':>10}{'diff (pts)':>12}"
        f"{'measured':>11}{'ours-measured':>15}"
    )
    for name in USER_FUNCTIONS:
        key = f"{name} ({Path(__file__).name})"
        a, b = ps_total.get(key, 0.0), our_total.get(key, 0.0)
        t = truth.get(name)
        tail = f"{t:>11.1%}{100 * (b - t):>+15.1f}" if t is not None else ""
        print(f"{name:<24}{a:>10.1%}{b:>10.1%}{100 * (b - a):>+12.1f}{tail}")
    if truth:
        print(
            "(measured: the same functions timed by wrappers in our run; py-spy's run is another process)"
        )
    print(f"{'seconds covered':<24}{ps_s:>10.2f}{our_s:>10.2f}")


# --------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--rate", type=int, default=200, help="samples per second, both tools")
    parser.add_argument("--workload", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--ours", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--keep", type=Path, default=None, help="folder to keep both JSON files")
    parser.add_argument(
        "--mode",
        choices=("thread",),
        default="thread",
        help="our sampler's design (a thread: the only one since the SIGALRM design went)",
    )
    args = parser.parse_args(argv)

    if args.workload:
        if args.ours is not None:
            run_ours(args.seconds, 1.0 / args.rate, args.ours, args.mode)
        else:
            workload(args.seconds)
        return 0

    pyspy = shutil.which("py-spy")
    if pyspy is None:
        print("py-spy is not installed: pip install py-spy", file=sys.stderr)
        return 2
    folder = Path(args.keep or tempfile.mkdtemp(prefix="pyspy-crosscheck-"))
    folder.mkdir(parents=True, exist_ok=True)
    ps_out, our_out = folder / "pyspy.speedscope.json", folder / "ours.speedscope.json"
    me = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--workload",
        "--seconds",
        str(args.seconds),
        "--rate",
        str(args.rate),
    ]
    # As py-spy's child: no attach to a running process, so no ptrace permission is needed.
    subprocess.run(
        [
            pyspy,
            "record",
            "--idle",
            "--format",
            "speedscope",
            "--rate",
            str(args.rate),
            "-o",
            str(ps_out),
            "--",
            *me,
        ],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    subprocess.run([*me, "--ours", str(our_out), "--mode", args.mode], check=True)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"{args.seconds:.0f} s of the workload under each tool at {args.rate} Hz "
        f"(ours: --mode {args.mode}); load average {load}"
    )
    print()
    report(ps_out, our_out)
    print(f"\nspeedscope files: {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
