"""Does our own sampling block the measured loop? The loop thread's time per step, split by
Linux schedstat into running, waiting for a core, and neither (*blocked*: asleep on a lock, the
GIL, a file read, or stolen by the hypervisor), with the tool off, on, and with each of our
background threads left out in turn.

Each run is a child process running one unchanged program (a ledger or unseen script) either
plainly (``off``: ``runpy``) or under ``gpucheck run -q`` (``on``), or under ``gpucheck run``
with one of our threads stood in for by nothing:

* ``no-sampler``: the psutil/NVML sampler thread (capture/sampler.py) takes its first baseline
  and its last sample only (no tick in between);
* ``no-trickle``: the sparse stack sampler after the dense span (CaptureSession._start_trickle);
* ``no-edges``: the edge sampler (the StackSampler with a ``segment_provider``) starts no thread;
* ``no-stacks``: ``--lines off`` (no stack sampler at all: dense, trickle, edges);
* ``no-backoff``: the sparse and edge samplers keep their set interval when their wakes come
  late (as before ``stacks._BackOff``).

The child registers a global optimizer-step post hook (the same in every mode) that reads the
loop thread's ``/proc/thread-self/schedstat`` (run ns, run-queue wait ns, times switched in) at
each step end. Per run: the medians over the steps after ``--skip`` (the warm-up and profiler
window) of the step's wall time, running time, wait for a core, blocked time (wall - running -
wait) and switches-in. Runs are interleaved (the order of the modes rotates each round); each
figure is the median over rounds, and the paired ratio to ``off`` within each round.

``python benchmarks/sampler_blocking.py [--rounds R] [--programs P ...] [--modes M ...]``
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
PROGRAMS = {
    "iterable_text_stream": BENCH_DIR / "unseen_programs" / "iterable_text_stream.py",
    "plain_logging": BENCH_DIR / "ledger_programs" / "plain_logging.py",
    "nanogpt_shaped": BENCH_DIR / "ledger_programs" / "nanogpt_shaped.py",
}
MODES = ("off", "on", "no-backoff", "no-sampler", "no-trickle", "no-edges", "no-stacks")
FIELDS = ("wall_us", "run_us", "wait_us", "blocked_us", "switches")


# ------------------------------------------------------------------------------ the child


def _child(mode: str, script: str, out: str) -> None:
    import torch
    from torch.optim.optimizer import register_optimizer_step_post_hook

    fd = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
    loop_tid = __import__("threading").get_native_id()
    rows: list[tuple[int, int, int, int]] = []

    def read() -> tuple[int, int, int, int]:
        # The thread's CPU clock, not schedstat's on-CPU figure: schedstat's is brought up to
        # date only when the thread leaves a core (a running thread's reading lags by its
        # current slice, tens of ms on a loaded machine); reading the clock updates it.
        run_ns = time.thread_time_ns()
        _, wait_ns, count = os.pread(fd, 128, 0).split()
        return time.perf_counter_ns(), run_ns, int(wait_ns), int(count)

    def on_step(*_: object) -> None:
        # The loop's own thread only (a hook fired elsewhere would read another thread's file).
        if __import__("threading").get_native_id() == loop_tid:
            rows.append(read())

    register_optimizer_step_post_hook(on_step)
    _stand_in(mode)
    steal0 = _steal_ticks()
    sys.argv = [script]
    stdout, sys.stdout = sys.stdout, open(os.devnull, "w")  # noqa: SIM115 - the program's prints
    try:
        if mode == "off":
            import runpy

            runpy.run_path(script, run_name="__main__")
        else:
            from gpu_notebook import cli

            report = os.path.join(os.path.dirname(out), "report.json")
            lines = ["--lines", "off"] if mode == "no-stacks" else []
            argv = ["run", "-q", "--json", report, *lines, script]
            cli.main(argv)
    finally:
        sys.stdout = stdout
    steal = _steal_ticks() - steal0
    del torch
    Path(out).write_text(json.dumps({"rows": rows, "steal_ticks": steal}))


def _stand_in(mode: str) -> None:
    """Leave one of our threads out (the benchmark's own patch: nothing in the product)."""
    if mode == "no-sampler":
        from gpu_notebook.capture import sampler as sa

        def loop(self: sa.Sampler) -> None:
            probe = sa._Probe(getattr(self, "_main_tid", None))
            probe.prime()
            self._stop_event.wait()
            self._tick(probe, time.perf_counter())

        sa.Sampler._loop = loop  # type: ignore[method-assign]
    elif mode == "no-backoff":
        from gpu_notebook.capture import stacks as st

        st._BackOff.after_wake = lambda self, late_ns, switch_ns: 1  # type: ignore[method-assign]
    elif mode == "no-trickle":
        from gpu_notebook.capture import session as se

        se.CaptureSession._start_trickle = lambda self: None  # type: ignore[method-assign]
    elif mode == "no-edges":
        from gpu_notebook.capture import stacks as st

        start = st.StackSampler.start

        def start_unless_edges(self: st.StackSampler, *, paused: bool = False) -> st.StackSampler:
            if self.segment_provider is None:
                return start(self, paused=paused)
            self._started = True  # no thread: stop() returns empty counts
            return self

        st.StackSampler.start = start_unless_edges  # type: ignore[method-assign]


def _steal_ticks() -> int:
    with open("/proc/stat") as f:
        fields = f.readline().split()
    return int(fields[8]) if len(fields) > 8 else 0


# ------------------------------------------------------------------------------ the parent


def _one(mode: str, script: Path, skip: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "rows.json")
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
        load = os.getloadavg()[0]
        subprocess.run(
            [sys.executable, __file__, "--child", mode, str(script), out],
            check=True,
            env=env,
            stdout=subprocess.DEVNULL,
            cwd=tmp,
        )
        data = json.loads(Path(out).read_text())
        product = _product_blocked_us(os.path.join(tmp, "report.json"), skip)
    rows = data["rows"]
    steps = list(itertools.pairwise(rows))[skip:]
    per: dict[str, list[float]] = {f: [] for f in FIELDS}
    for (t0, r0, w0, c0), (t1, r1, w1, c1) in steps:
        wall, run, wait = (t1 - t0) / 1e3, (r1 - r0) / 1e3, (w1 - w0) / 1e3
        per["wall_us"].append(wall)
        per["run_us"].append(run)
        per["wait_us"].append(wait)
        per["blocked_us"].append(wall - run - wait)
        per["switches"].append(c1 - c0)
    med = {f: statistics.median(v) for f, v in per.items()}
    med["blocked_mean_us"] = statistics.fmean(per["blocked_us"])
    med["blocked_p90_us"] = sorted(per["blocked_us"])[int(0.9 * (len(steps) - 1))]
    med["load"] = load
    med["steps"] = len(steps)
    med["product_blocked_us"] = product
    return med


def _product_blocked_us(path: str, skip: int) -> float:
    """The product's own reading of the same run: its steps' time off a core a step (wall less
    the step clock's wait for a core less its on-CPU figure), over the steps ``on_cpu`` reads
    (those without our own work in them), after ``skip``; NaN without a report."""
    if not os.path.exists(path):
        return float("nan")
    steps = json.loads(Path(path).read_text())["run"]["steps"]["steps"][skip:]
    read = [s for s in steps if s["cpu_s"] is not None and s["wait_s"] is not None]
    read = [s for s in read if s["ours_s"] <= 0]
    if not read:
        return float("nan")
    off = sum(s["duration_s"] - s["wait_s"] - s["cpu_s"] for s in read)
    return 1e6 * off / len(read)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _child(sys.argv[2], sys.argv[3], sys.argv[4])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--programs", nargs="+", default=list(PROGRAMS), choices=list(PROGRAMS))
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    parser.add_argument("--skip", type=int, default=12, help="steps left out at the start")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    results: dict[str, dict[str, list[dict[str, float]]]] = {}
    for program in args.programs:
        results[program] = {m: [] for m in args.modes}
        for r in range(args.rounds):
            k = r % len(args.modes)
            for mode in args.modes[k:] + args.modes[:k]:
                results[program][mode].append(_one(mode, PROGRAMS[program], args.skip))
        _print(program, results[program], args.modes)
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1))


def _print(program: str, runs: dict[str, list[dict[str, float]]], modes: list[str]) -> None:
    loads = [run["load"] for m in modes for run in runs[m]]
    print(f"\n{program}: {len(runs[modes[0]])} rounds, load {min(loads):.1f}-{max(loads):.1f}")
    print(
        f"{'mode':<11} {'wall us':>8} {'run us':>8} {'wait us':>8} {'blocked':>8} "
        f"{'blk mean':>8} {'blk p90':>8} {'sw/step':>7} {'wall/off':>8} {'blk-off us':>10} "
        f"{'product blk':>11}"
    )
    base = runs.get("off")
    for mode in modes:
        rs = runs[mode]

        def med(field: str, rs: list[dict[str, float]] = rs) -> float:
            return statistics.median(run[field] for run in rs)

        ratio = diff = float("nan")
        if base is not None:
            ratio = statistics.median(
                a["wall_us"] / b["wall_us"] for a, b in zip(rs, base, strict=True)
            )
            diff = statistics.median(
                a["blocked_mean_us"] - b["blocked_mean_us"] for a, b in zip(rs, base, strict=True)
            )
        print(
            f"{mode:<11} {med('wall_us'):8.0f} {med('run_us'):8.0f} {med('wait_us'):8.0f} "
            f"{med('blocked_us'):8.0f} {med('blocked_mean_us'):8.0f} {med('blocked_p90_us'):8.0f} {med('switches'):7.1f} "
            f"{ratio:8.3f} {diff:10.0f} {med('product_blocked_us'):11.0f}"
        )


if __name__ == "__main__":
    main()
