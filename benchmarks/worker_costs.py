"""A DataLoader worker's costs on this machine, measured now, against the workers rule's constants.

``rules/input_pipeline.py`` prices a worker with constants measured by hand on a quiet 2-core VM:
the main process's receiving of each tensor of a batch (``WORKER_HANDOFF_US``), a worker's
collate into shared memory and queueing per tensor (``WORKER_BATCH_US``) and its items' Python at
``WORKER_CPU_FACTOR`` the main process's time. A ledger miss on a per-item Python loader was read
as "the program's Python runs slower under load while the constants stay": this script measures
the costs again beside a tiny Python loop (the probe), so the two can be compared at any load.

- main side: the thread CPU time of ``next(it)`` with the workers ahead (the main thread sleeps
  between reads), batches of 1 and of 8 tensors: the slope is the handoff per tensor, the rest
  per batch;
- worker side: the workers' CPU (``/proc/PID/stat``) per batch less the same batch's getitem and
  collate in this process, 1 and 8 tensors: the slope is a worker's cost per tensor;
- ``--items``: python_items' own dataset (``benchmarks/ledger_programs/python_items.py``): a
  batch's CPU in this process and in a worker, and the main process's ``next(it)``.

Usage::

    python benchmarks/worker_costs.py            # per-tensor costs
    python benchmarks/worker_costs.py --items    # python_items' batch, in process and in a worker
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch
from torch.utils.data import DataLoader, Dataset, default_collate

TICK = os.sysconf("SC_CLK_TCK")
FEATURES = 64
WORDS = ("gpu", "notebook", "loader", "worker", "batch", "tensor", "python", "step")


def probe(n: int = 2000) -> int:
    s = 0
    for i in range(n):
        s += (i * 31 + 7) % 64
    return s


def probe_us(k: int = 30) -> float:
    """The probe's median thread CPU time (microseconds)."""
    out = []
    for _ in range(k):
        t = time.thread_time_ns()
        probe()
        out.append((time.thread_time_ns() - t) / 1e3)
    return statistics.median(out)


class Items(Dataset):  # type: ignore[type-arg]
    """Items of ``tensors`` ready tensors: the loader's own costs alone."""

    def __init__(self, tensors: int) -> None:
        self.t = [torch.randn(64) for _ in range(tensors)]

    def __len__(self) -> int:
        return 1_000_000

    def __getitem__(self, i: int) -> tuple[torch.Tensor, ...]:
        return tuple(self.t)


class HashedText(Dataset):  # type: ignore[type-arg]
    """python_items' dataset: hashed character trigrams of a synthetic text, per-item Python."""

    def __len__(self) -> int:
        return 100_000

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        text = " ".join(WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(60))
        feats = [0.0] * FEATURES
        for j in range(len(text) - 2):
            feats[(ord(text[j]) * 31 + ord(text[j + 1]) * 7 + ord(text[j + 2])) % FEATURES] += 1.0
        return torch.tensor(feats), torch.tensor([float(i % 2)])


def proc_cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / TICK


def main_next_us(ds: Dataset, batches: int = 200, bs: int = 32, gap_s: float = 0.004) -> float:  # type: ignore[type-arg]
    """The main process's CPU for one ``next(it)`` with the workers ahead (median, us)."""
    it = iter(DataLoader(ds, batch_size=bs, num_workers=2, prefetch_factor=4))
    for _ in range(10):
        next(it)
    cpu = []
    for _ in range(batches):
        time.sleep(gap_s)  # the workers fill the queue: the read is the handoff alone
        t = time.thread_time_ns()
        next(it)
        cpu.append((time.thread_time_ns() - t) / 1e3)
    return statistics.median(cpu)


def worker_batch_us(ds: Dataset, batches: int = 120, bs: int = 32) -> tuple[float, float]:  # type: ignore[type-arg]
    """(a batch's CPU in a worker, the same batch's getitem and collate in this process), us."""
    t = time.thread_time_ns()
    for b in range(50):
        default_collate([ds[b * bs + i] for i in range(bs)])
    here = (time.thread_time_ns() - t) / 1e3 / 50
    it = iter(DataLoader(ds, batch_size=bs, num_workers=2, persistent_workers=True))
    for _ in range(10):
        next(it)
    pids = [w.pid for w in it._workers]  # type: ignore[attr-defined]
    c0 = sum(proc_cpu_s(p) for p in pids)
    for _ in range(batches):
        next(it)
    c1 = sum(proc_cpu_s(p) for p in pids)
    return (c1 - c0) / batches * 1e6, here


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", action="store_true", help="python_items' dataset")
    args = parser.parse_args()
    torch.set_num_threads(1)
    p0 = probe_us()
    if args.items:
        ds = HashedText()
        worker, here = worker_batch_us(ds)
        nxt = main_next_us(ds, batches=120, gap_s=0.01)
        print(
            f"probe {p0:.0f}/{probe_us():.0f} us | python_items batch: {here:.0f} us in this "
            f"process, {worker:.0f} us in a worker ({worker / here:.2f}x) | main next() {nxt:.0f} us"
        )
        return
    tensors = 8
    h1, ht = main_next_us(Items(1)), main_next_us(Items(tensors))
    (w1, _), (wt, _) = worker_batch_us(Items(1)), worker_batch_us(Items(tensors))
    p1 = probe_us()
    handoff, batch = (ht - h1) / (tensors - 1), (wt - w1) / (tensors - 1)
    print(
        f"probe {p0:.0f}/{p1:.0f} us | main next(): {h1:.0f} us with 1 tensor, {ht:.0f} with "
        f"{tensors}: {handoff:.0f} us a tensor | a worker's batch: {w1:.0f} us with 1 tensor, "
        f"{wt:.0f} with {tensors}: {batch:.0f} us a tensor"
    )


if __name__ == "__main__":
    main()
