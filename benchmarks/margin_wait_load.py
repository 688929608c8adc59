"""The run's margin (what two runs of the code may differ by, ``compare_samples.run_margin``: the
spread of a run's fifths, every fix's stated range widened by it) read on wall times and net of
each step's wait for a core (``analyze.margin_step_s``), idle and beside spinners.

Two loops under the step clock (``capture.stepclock.StepClock``, which reads the loop thread's
schedstat at every step end): ``lbfgs`` (LBFGS, one closure call a step, as lbfgs_closure's
one-call steps) and ``adam`` (a small MLP and Adam), torch's intra-op threads at 1 (the wait
read is the loop thread's; ``--threads`` adds torch's default count, where the other intra-op
threads' waits are not read: some load stays in the net figure, and at load 10 on 2 cores
their steps took 0.1-0.5 s, so that case is slow). Each under
0 and 2 spinners of ours (``yes > /dev/null``); other programs on the machine load it too (the
load average is printed beside each). Rounds alternate the loads' order; the same run gives
both figures (side by side), medians over the rounds.

``--program PATH``: the same for a script run as users run it (``gpucheck run --json``), both
figures re-read from its report's steps (the wall figure as main read it: the step less our own
work only), e.g. ``benchmarks/ledger_programs/lbfgs_closure.py`` (its one-call steps are the ones
whose margin read 102-729% at load 22-30).

``python benchmarks/margin_wait_load.py [ROUNDS] [STEPS] [--threads] [--program PATH]``
(default 5, 200). A measurement, not a test: the figures move with the machine's load.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from gpu_notebook.analysis.analyze import margin_step_s
from gpu_notebook.analysis.compare_samples import run_margin
from gpu_notebook.capture.stepclock import StepClock

WARMUP = 10


def _spinners(n: int) -> subprocess.Popen[bytes] | None:
    if not n:
        return None
    cmd = " & ".join(["yes > /dev/null"] * n) + " & wait"
    return subprocess.Popen(["bash", "-c", cmd], start_new_session=True)


def _stop(p: subprocess.Popen[bytes] | None) -> None:
    if p is None:
        return
    import os
    import signal

    os.killpg(p.pid, signal.SIGKILL)
    p.wait()


def _load() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def loop(kind: str, steps: int) -> dict[str, float]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.Tanh(), torch.nn.Linear(256, 1))
    x, y = torch.randn(256, 128), torch.randn(256, 1)
    opt: torch.optim.Optimizer
    if kind == "lbfgs":
        # A short history: its two-loop recursion's cost grows with the history held (the
        # default 100: on-core time 3.8 ms a step in the first fifth, 8.5 ms from the third on),
        # the program's own drift, in every run alike; 5 fill within the warm-up.
        opt = torch.optim.LBFGS(model.parameters(), lr=0.1, max_iter=1, history_size=5)
    else:
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = (model(x) - y).pow(2).mean()
        loss.backward()
        return loss

    clock = StepClock(time.perf_counter_ns())
    clock.install()
    try:
        for _ in range(WARMUP + steps):
            if kind == "lbfgs":
                opt.step(closure)
            else:
                closure()
                opt.step()
    finally:
        clock.uninstall()
    kept = [s for s in clock.record().steps if s.index >= WARMUP]
    wall = [max(0.0, s.duration_s - s.ours_s) for s in kept]  # as the margin was read
    net = [margin_step_s(s) for s in kept]
    waits = [s.wait_s or 0.0 for s in kept]
    return {
        "wall": run_margin(wall) or float("nan"),
        "net": run_margin(net) or float("nan"),
        "wait_share": sum(waits) / max(sum(wall), 1e-12),
        "step_ms": statistics.median(wall) * 1e3,
        "read": sum(s.wait_s is not None for s in kept) / max(1, len(kept)),
    }


def program(path: str, tmp: Path) -> dict[str, float]:
    """Both margins of one ``gpucheck run`` of ``path``, re-read from its report's steps."""
    from gpu_notebook.analysis import analyze
    from gpu_notebook.records import Report

    out = tmp / "r.json"
    subprocess.run(
        [sys.executable, "-m", "gpu_notebook", "run", "-q", "--json", str(out), path],
        check=True, capture_output=True, timeout=900, cwd=tmp,
    )  # fmt: skip
    report = Report.from_json(out.read_text())
    net_of_wait = analyze.margin_step_s
    figures = {}
    try:
        for key, fn in (("wall", lambda s: max(0.0, s.duration_s - s.ours_s)), ("net", None)):
            analyze.margin_step_s = fn or net_of_wait  # type: ignore[assignment]
            margin = analyze.with_run_figures(report.run, report.analysis).run_margin
            figures[key] = float("nan") if margin is None else margin
    finally:
        analyze.margin_step_s = net_of_wait
    steps = report.run.steps.steps
    wall_s = sum(s.duration_s for s in steps)
    figures["wait_share"] = sum(s.wait_s or 0.0 for s in steps) / max(wall_s, 1e-12)
    figures["step_ms"] = statistics.median(s.duration_s for s in steps) * 1e3
    figures["read"] = sum(s.wait_s is not None for s in steps) / max(1, len(steps))
    # Steps the hooks timed (their model calls counted): the margin is read between steps of
    # one work only where the timed steps are the run's more (``analyze._one_work``).
    figures["timed"] = sum(s.timed for s in steps) / max(1, len(steps))
    return figures


def _range(rs: list[dict[str, float]], key: str) -> str:
    values = [100 * r[key] for r in rs]
    return f"{min(values):.0f}-{max(values):.0f}%"


def main() -> None:
    args = sys.argv[1:]
    path = None
    if "--program" in args:
        k = args.index("--program")
        path = str(Path(args[k + 1]).resolve())
        del args[k : k + 2]
    argv = [a for a in args if a != "--threads"]
    rounds = int(argv[0]) if argv else 5
    steps = int(argv[1]) if len(argv) > 1 else 200
    default_threads = torch.get_num_threads()
    threads = {1, default_threads} if "--threads" in sys.argv else {1}
    cases = [(k, t) for k in ("lbfgs", "adam") for t in sorted(threads)]
    if path is not None:
        cases = [(Path(path).stem, 0)]  # threads: the script's own
    rows: dict[tuple[str, int, int], list[dict[str, float]]] = {}
    for r in range(rounds):
        for spin in (0, 2) if r % 2 == 0 else (2, 0):
            p = _spinners(spin)
            try:
                time.sleep(0.5 if spin else 0.0)  # the spinners are on a core
                for kind, n in cases:
                    if path is not None:
                        with tempfile.TemporaryDirectory() as tmp:
                            res = program(path, Path(tmp))
                    else:
                        torch.set_num_threads(n)
                        res = loop(kind, steps)
                    res["load"] = _load()
                    rows.setdefault((kind, n, spin), []).append(res)
                    print(f"round {r} {kind} threads={n} spinners={spin}: "
                          f"wall {res['wall']:.3f} net {res['net']:.3f} load {res['load']:.1f} "
                          f"wait {res['wait_share']:.2f} timed {res.get('timed', 1.0):.2f}",
                          flush=True)  # fmt: skip
            finally:
                _stop(p)
    torch.set_num_threads(default_threads)
    print(f"{rounds} rounds of {steps} steps; medians over the rounds (margin: the fifths' spread)")
    print(
        f"{'loop':8} {'thr':>3} {'spin':>4} {'load':>5} {'step ms':>8} {'wait%':>6} "
        f"{'read':>5} {'margin wall':>12} {'margin net':>11} {'wall range':>11} {'net range':>10}"
    )
    for (kind, threads, spin), rs in sorted(rows.items()):

        def med(key: str, rs: list[dict[str, float]] = rs) -> float:
            return statistics.median(r[key] for r in rs)

        print(
            f"{kind:8} {threads:>3} {spin:>4} {med('load'):5.1f} {med('step_ms'):8.2f} "
            f"{100 * med('wait_share'):6.1f} {med('read'):5.2f} {100 * med('wall'):11.1f}% "
            f"{100 * med('net'):10.1f}% {_range(rs, 'wall'):>11} {_range(rs, 'net'):>10}"
        )
    print("busy/idle ratio of the median margin (1.00: the load does not move it)")
    for kind, threads in cases:
        idle, busy = rows[(kind, threads, 0)], rows[(kind, threads, 2)]
        ratio = {
            k: statistics.median(r[k] for r in busy) / statistics.median(r[k] for r in idle)
            for k in ("wall", "net")
        }
        print(f"  {kind} threads={threads}: wall {ratio['wall']:.2f}  net {ratio['net']:.2f}")


if __name__ == "__main__":
    main()
