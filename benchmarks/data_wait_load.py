"""What a loop's "data wait" is made of on a busy machine: the loader's work, a wait for a core,
or a wait for the GIL another thread of the process holds ("framework share cause 2").

Three loops, each under the step clock (``capture.stepclock.StepClock``) and measured beside it
around every ``next(it)`` from outside: ``inproc`` (a loader with ``num_workers=0`` whose
dataset computes), ``workers`` (the same dataset, ``num_workers=2``), ``side`` (a loader whose
work releases the GIL, ``num_workers=0``, beside a Python thread that spins: a logger, a
progress thread, a sampler). Each under 0, 2 and 4 spinners of ours (``yes > /dev/null``, as
/work/wt/burn.sh); other programs on the machine load it too (the load average is printed).
Rounds alternate the loads' order.

Outside, each read of a batch is split: the loop thread's CPU time (``time.thread_time_ns``:
the in-process loader's work), its wait for a core (schedstat run delay), its time blocked off
a core while another thread of the process ran (the process's CPU clock less the thread's: the
GIL held by the side thread, up to the loop's blocked time) and the rest blocked (a worker's
queue, a sleep, a GIL holder waiting for a core). The step clock's reading is printed as main
read it (``before``: the wall time in the loader, ``data_s + data_contention_s``) and as now
(``after``: less the contention it read, on the steps it reads apart: 1-39, then 1 in 8).

``python benchmarks/data_wait_load.py [ROUNDS] [STEPS]`` (default 3, 80). A measurement, not a
test: the figures move with the machine's load.
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import torch
from torch.utils.data import DataLoader, Dataset

from gpu_notebook.capture.stepclock import StepClock


class Computes(Dataset[torch.Tensor]):
    """A sample costs ~0.25 ms of Python and torch on a core (a decode, an augmentation)."""

    def __len__(self) -> int:
        return 10**7

    def __getitem__(self, i: int) -> torch.Tensor:
        x = torch.full((64,), float(i % 7))
        for _ in range(20):
            x = x * 1.0001 + 0.5
        return x


class Releases(Dataset[torch.Tensor]):
    """A sample is one ~0.2 ms torch op that releases the GIL (a decode in PIL, a numpy op):
    long enough for a side thread waiting for the GIL to take it, which the loop thread then
    waits for (a switch interval, 5 ms). A cheap op is over before the waiting thread wakes."""

    def __len__(self) -> int:
        return 10**7

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.ones(1 << 17).cumsum(0)[:64]


def _spinners(n: int) -> subprocess.Popen[bytes] | None:
    if not n:
        return None
    cmd = " & ".join(["yes > /dev/null"] * n) + " & wait"
    return subprocess.Popen(["bash", "-c", cmd], start_new_session=True)


def _load() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def _run_delay(fd: int) -> int:
    return int(os.pread(fd, 64, 0).split()[1])


def loop(kind: str, steps: int) -> dict[str, float]:
    done = threading.Event()

    def spin() -> None:  # pure Python: holds the GIL until the switch interval asks for it
        while not done.is_set():
            sum(range(1000))

    side = threading.Thread(target=spin, daemon=True) if kind == "side" else None
    dataset: Dataset[torch.Tensor] = Releases() if kind == "side" else Computes()
    workers = 2 if kind == "workers" else 0
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    fd = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
    it = iter(DataLoader(dataset, batch_size=8, num_workers=workers))
    next(it)  # the workers' start is not a step's wait
    clock = StepClock(time.perf_counter_ns())
    clock.install()
    if side is not None:
        side.start()
    parts = {"wall": 0, "cpu": 0, "core": 0, "gil": 0, "rest": 0}
    step_wall = 0
    t_start = time.perf_counter_ns()
    try:
        for _ in range(steps):
            # The CPU clocks (system calls that can preempt) outside the wall and run-delay
            # marks, which sit next to each other (as the step clock reads them).
            p0, c0 = time.process_time_ns(), time.thread_time_ns()
            w0, r0 = time.perf_counter_ns(), _run_delay(fd)
            x = next(it)
            w1, r1 = time.perf_counter_ns(), _run_delay(fd)
            c1, p1 = time.thread_time_ns(), time.process_time_ns()
            wall, cpu, core = w1 - w0, c1 - c0, r1 - r0
            blocked = max(0, wall - cpu - core)
            gil = min(blocked, max(0, p1 - p0 - cpu))
            for k, v in (("wall", wall), ("cpu", cpu), ("core", core), ("gil", gil),
                         ("rest", blocked - gil)):  # fmt: skip
                parts[k] += v
            loss = model(x).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    finally:
        step_wall = time.perf_counter_ns() - t_start
        done.set()
        clock.uninstall()
        os.close(fd)
        del it
    read = [s for s in clock.record().steps if s.data_contention_s is not None]
    steps_all = clock.record().steps
    dur = sum(s.duration_s for s in steps_all)
    after = sum(s.data_s for s in steps_all)
    before = after + sum(s.data_contention_s or 0.0 for s in steps_all)
    wall_s = parts["wall"] / 1e9
    return {
        "outside_data_share": parts["wall"] / step_wall,
        "cpu": parts["cpu"] / 1e9 / wall_s,
        "core": parts["core"] / 1e9 / wall_s,
        "gil": parts["gil"] / 1e9 / wall_s,
        "rest": parts["rest"] / 1e9 / wall_s,
        "before": before / dur if dur else 0.0,
        "after": after / dur if dur else 0.0,
        "read_steps": float(len(read)),
    }


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 80
    rows: dict[tuple[str, int], list[dict[str, float]]] = {}
    for k in range(rounds):
        for n in (0, 2, 4) if k % 2 == 0 else (4, 2, 0):
            spin = _spinners(n)
            try:
                time.sleep(0.5)
                for kind in ("inproc", "workers", "side"):
                    load0 = _load()
                    row = loop(kind, steps)
                    row["load"] = (load0 + _load()) / 2
                    rows.setdefault((kind, n), []).append(row)
                    print(f"round {k} spinners {n} {kind}: "
                          + " ".join(f"{a}={b:.3f}" for a, b in row.items()), flush=True)  # fmt: skip
            finally:
                if spin is not None:
                    os.killpg(spin.pid, signal.SIGTERM)
                    spin.wait()
    keys = ("load", "outside_data_share", "cpu", "core", "gil", "rest", "before", "after")
    print("\nloop | spinners | " + " | ".join(keys) + " | after/before (medians)")
    for (kind, n), got in sorted(rows.items()):
        med = {key: statistics.median(r[key] for r in got) for key in keys}
        ratio = med["after"] / med["before"] if med["before"] else float("nan")
        print(f"{kind} | {n} | " + " | ".join(f"{med[key]:.3f}" for key in keys)
              + f" | {ratio:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
