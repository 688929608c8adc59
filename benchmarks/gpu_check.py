"""GPU validation kit: run known-bottleneck training loops under the capture and record the evidence.

Each scenario is a small synthetic training loop with one known problem (input-bound DataLoader,
pageable host-to-device copies, a per-step ``.item()``, fp32 matmuls, tiny launch-bound kernels,
memory near the card's limit) and the fix the product would suggest. For every scenario the kit
measures, with interleaved repeats and medians:

* the loop without the tool (wall time of N steps),
* the same loop under ``CaptureSession`` (overhead ratio = median with / median without),
* each fix without the tool (measured speedup, in samples per second, against the baseline),

and writes, for the last captured run of the baseline and one captured run of each fix, the
gzipped Kineto trace, the NVML/psutil sample series and the report as JSON, plus ``summary.json``
and ``environment.json``. The recorded files are the fixtures for GPU-side tests (see
``tests/data/gpu/README.md``).

Usage::

    python benchmarks/gpu_check.py --out tests/data/gpu/<name>   # on a CUDA machine, < 6 min
    python benchmarks/gpu_check.py --dry-run --out /tmp/gpu-dry    # every scenario, tiny, on CPU

Only the standard library is imported at module level: torch and the project are imported once the
arguments are known, so ``--help`` and the CUDA check stay fast and honest.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import gzip
import inspect
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import textwrap
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    import torch

    from gpu_notebook.records import Report, Run

REPO_ROOT = Path(__file__).resolve().parents[1]
EXIT_OK, EXIT_SCENARIO_FAILED, EXIT_USAGE = 0, 1, 2
GIB = 1 << 30
MIB = 1 << 20
# Profile few steps: the traces are committed as fixtures and must stay small (a few MB in all).
WARMUP_STEPS, PROFILE_STEPS, SAMPLE_INTERVAL_S = 2, 3, 0.2
# The capture's window needs warm-up + profiled steps and a few more so the run is not all window.
MIN_STEPS = WARMUP_STEPS + PROFILE_STEPS + 7


# ----------------------------------------------------------------------------------------------
# Sizes: one set for the GPU, one tiny set for the CPU dry run
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sizes:
    """Every size the scenarios use; ``FULL`` targets a datacenter GPU, ``DRY`` 2 CPU cores."""

    scenario_budget_s: float  # wall time of all timed and captured runs of one scenario
    repeats: int  # interleaved repeats of each timed variant (medians over these)
    max_steps: int
    warmup_steps: int  # untimed steps before calibration (allocator, cudnn, worker start)
    # input-bound: a DataLoader whose samples cost CPU time to produce
    input_batch: int
    input_dim: int
    input_transform_s: float  # CPU time per sample (stands for JPEG decode + augmentation)
    input_workers: int  # the fix's num_workers; 0 means "pick from the core count"
    # host-to-device copies: big batches, a cheap model
    copy_batch_shape: tuple[int, int, int, int]
    copy_pool: int  # distinct host batches cycled through
    # per-step .item(): an MLP whose GPU time is close to its launch time
    item_width: int
    item_depth: int
    item_batch: int
    item_every: int  # the fix reads scalars every N steps
    # fp32 vs bf16: a matmul-heavy MLP
    amp_width: int
    amp_depth: int
    amp_batch: int
    # launch-bound: many tiny layers
    launch_width: int
    launch_depth: int
    launch_batch: int
    launch_batch_factor: int  # the fix's batch multiplier
    # memory near the limit: ballast up to this share of the card, then a small model
    mem_target_share: float
    mem_width: int
    mem_depth: int
    mem_batch: int


FULL = Sizes(
    scenario_budget_s=30.0,
    repeats=3,
    max_steps=5000,
    warmup_steps=5,
    input_batch=64,
    input_dim=512,
    input_transform_s=0.0005,
    input_workers=0,
    copy_batch_shape=(64, 3, 256, 256),  # 48 MiB of float32 per batch
    copy_pool=4,
    item_width=2048,
    item_depth=6,
    item_batch=512,
    item_every=50,
    amp_width=4096,
    amp_depth=4,
    amp_batch=4096,
    launch_width=64,
    launch_depth=24,
    launch_batch=32,
    launch_batch_factor=32,
    mem_target_share=0.93,
    mem_width=1024,
    mem_depth=6,
    mem_batch=512,
)

DRY = Sizes(
    scenario_budget_s=3.0,
    repeats=3,
    max_steps=150,
    warmup_steps=3,
    input_batch=8,
    input_dim=32,
    input_transform_s=0.001,
    input_workers=0,
    copy_batch_shape=(8, 3, 32, 32),
    copy_pool=2,
    item_width=64,
    item_depth=3,
    item_batch=32,
    item_every=10,
    amp_width=128,
    amp_depth=2,
    amp_batch=64,
    launch_width=16,
    launch_depth=8,
    launch_batch=4,
    launch_batch_factor=8,
    mem_target_share=0.93,
    mem_width=64,
    mem_depth=3,
    mem_batch=32,
)


@dataclass(frozen=True)
class Context:
    """Where and how big: passed to every workload factory."""

    device: str  # "cuda" or "cpu"
    sizes: Sizes
    dry_run: bool

    @property
    def cuda(self) -> bool:
        return self.device == "cuda"


def _torch() -> Any:
    """torch, imported on first use (module level stays cheap)."""
    import torch

    return torch


def _sync(ctx: Context) -> None:
    # CUDA work is asynchronous: a wall clock means nothing until the queue is drained.
    if ctx.cuda:
        _torch().cuda.synchronize()


# ----------------------------------------------------------------------------------------------
# Workloads: each ``run`` method is the loop a user would write; its source becomes the Run's
# cell source, so the recorded report shows the code that produced it.
# ----------------------------------------------------------------------------------------------


class Workload:
    """A prepared training loop: ``run(steps)`` trains ``steps`` optimizer steps, ``close`` frees."""

    samples_per_step: int = 1

    def run(self, steps: int) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Free what the workload holds (workers, device memory)."""

    @classmethod
    def source(cls) -> str:
        return textwrap.dedent(inspect.getsource(cls.run))


class SpinDataset:
    """Synthetic samples behind a CPU-heavy transform; ``length`` is set before each epoch.

    The transform spins on the CPU rather than sleeping: a decode competes for cores, so the fix's
    speedup depends on the core count as it would for real data. A plain class (not a torch
    Dataset subclass) keeps it picklable for spawned workers without importing torch here.
    """

    def __init__(self, dim: int, transform_s: float, pool: int = 256) -> None:
        torch = _torch()
        gen = torch.Generator().manual_seed(0)
        self.x = torch.randn(pool, dim, generator=gen)
        self.y = torch.randint(0, 10, (pool,), generator=gen)
        self.transform_s = transform_s
        self.length = 0

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        deadline = time.perf_counter() + self.transform_s
        while time.perf_counter() < deadline:
            pass
        j = index % len(self.x)
        return self.x[j] * 1.0, self.y[j]


def _mlp(width: int, depth: int, out: int = 10) -> torch.nn.Module:
    nn = _torch().nn
    layers: list[Any] = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.ReLU()]
    layers.append(nn.Linear(width, out))
    return cast("torch.nn.Module", nn.Sequential(*layers))


class InputPipeline(Workload):
    """A DataLoader feeding a small MLP; baseline ``num_workers=0``, fix: workers + pinned memory."""

    def __init__(self, ctx: Context, num_workers: int) -> None:
        torch = _torch()
        s = ctx.sizes
        self.device = ctx.device
        self.batch = s.input_batch
        self.samples_per_step = s.input_batch
        self.pin = ctx.cuda and num_workers > 0
        self.dataset = SpinDataset(s.input_dim, s.input_transform_s)
        # persistent_workers: worker start-up is paid once in the warm-up, not in every timed
        # epoch; the epoch length follows ``dataset.length`` so each run ends its epoch cleanly.
        self.loader = torch.utils.data.DataLoader(
            self.dataset,
            batch_size=self.batch,
            num_workers=num_workers,
            pin_memory=self.pin,
            persistent_workers=num_workers > 0,
        )
        self.model = _mlp(s.input_dim, 2).to(ctx.device)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3)
        self.loss_fn = torch.nn.functional.cross_entropy

    def run(self, steps: int) -> None:
        self.dataset.length = steps * self.batch
        for x, y in self.loader:
            x = x.to(self.device, non_blocking=self.pin)
            y = y.to(self.device, non_blocking=self.pin)
            loss = self.loss_fn(self.model(x), y)
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            self.opt.step()

    def close(self) -> None:
        # Dropping the loader drops its persistent iterator, which shuts the workers down.
        del self.loader
        gc.collect()


class HostCopies(Workload):
    """Large host batches copied to the device each step; fix: pinned once + non_blocking."""

    def __init__(self, ctx: Context, pinned: bool) -> None:
        torch = _torch()
        s = ctx.sizes
        self.device = ctx.device
        self.pinned = pinned
        self.samples_per_step = s.copy_batch_shape[0]
        gen = torch.Generator().manual_seed(0)
        self.xs = [torch.randn(s.copy_batch_shape, generator=gen) for _ in range(s.copy_pool)]
        self.ys = [torch.randint(0, 10, (s.copy_batch_shape[0],), generator=gen) for _ in self.xs]
        if pinned:
            # What DataLoader(pin_memory=True) does in its pin thread: page-locked host buffers.
            self.xs = [x.pin_memory() for x in self.xs]
            self.ys = [y.pin_memory() for y in self.ys]
        self.model = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, kernel_size=4, stride=4),
            torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(1),
            torch.nn.Flatten(),
            torch.nn.Linear(8, 10),
        ).to(ctx.device)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=1e-2)
        self.loss_fn = torch.nn.functional.cross_entropy

    def run(self, steps: int) -> None:
        for i in range(steps):
            x = self.xs[i % len(self.xs)].to(self.device, non_blocking=self.pinned)
            y = self.ys[i % len(self.ys)].to(self.device, non_blocking=self.pinned)
            loss = self.loss_fn(self.model(x), y)
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            self.opt.step()


class _ScalarLoop(Workload):
    """An MLP on device-resident batches whose GPU time is close to its launch time."""

    def __init__(self, ctx: Context) -> None:
        torch = _torch()
        s = ctx.sizes
        self.samples_per_step = s.item_batch
        self.every = s.item_every
        gen = torch.Generator().manual_seed(0)
        self.xs = [torch.randn(s.item_batch, s.item_width, generator=gen).to(ctx.device) for _ in range(4)]
        self.ys = [torch.randint(0, 10, (s.item_batch,), generator=gen).to(ctx.device) for _ in range(4)]
        self.model = _mlp(s.item_width, s.item_depth).to(ctx.device)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3)
        self.loss_fn = torch.nn.functional.cross_entropy
        self.log: list[float] = []


class PerStepItem(_ScalarLoop):
    """Baseline: the loss and the accuracy read with ``.item()`` every step (two host syncs)."""

    def run(self, steps: int) -> None:
        for i in range(steps):
            x, y = self.xs[i % 4], self.ys[i % 4]
            out = self.model(x)
            loss = self.loss_fn(out, y)
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            self.opt.step()
            self.log.append(loss.item())
            self.log.append((out.argmax(1) == y).float().mean().item())


class EveryNItem(_ScalarLoop):
    """Fix: accumulate on the device, read scalars every ``every`` steps."""

    def run(self, steps: int) -> None:
        torch = _torch()
        running = torch.zeros((), device=self.xs[0].device)
        correct = torch.zeros((), device=self.xs[0].device)
        for i in range(steps):
            x, y = self.xs[i % 4], self.ys[i % 4]
            out = self.model(x)
            loss = self.loss_fn(out, y)
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            self.opt.step()
            running += loss.detach()
            correct += (out.argmax(1) == y).float().mean()
            if (i + 1) % self.every == 0 or i + 1 == steps:
                self.log.append(running.item())
                self.log.append(correct.item())
                running.zero_()
                correct.zero_()


class MatmulHeavy(Workload):
    """A wide MLP on device-resident data: fp32 baseline, fix: autocast to bf16 (tensor cores)."""

    def __init__(self, ctx: Context, bf16: bool) -> None:
        torch = _torch()
        s = ctx.sizes
        self.samples_per_step = s.amp_batch
        self.device_type = "cuda" if ctx.cuda else "cpu"
        self.bf16 = bf16
        gen = torch.Generator().manual_seed(0)
        self.x = torch.randn(s.amp_batch, s.amp_width, generator=gen).to(ctx.device)
        self.y = torch.randint(0, 10, (s.amp_batch,), generator=gen).to(ctx.device)
        self.model = _mlp(s.amp_width, s.amp_depth).to(ctx.device)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-4)
        self.loss_fn = torch.nn.functional.cross_entropy

    def run(self, steps: int) -> None:
        torch = _torch()
        for _ in range(steps):
            with torch.autocast(self.device_type, dtype=torch.bfloat16, enabled=self.bf16):
                loss = self.loss_fn(self.model(self.x), self.y)
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            self.opt.step()


class TinyLayers(Workload):
    """Many tiny Linear+GELU layers on a small batch: each kernel is shorter than its launch."""

    def __init__(self, ctx: Context, batch_factor: int = 1, compile_model: bool = False) -> None:
        torch = _torch()
        s = ctx.sizes
        batch = s.launch_batch * batch_factor
        self.samples_per_step = batch
        gen = torch.Generator().manual_seed(0)
        self.x = torch.randn(batch, s.launch_width, generator=gen).to(ctx.device)
        self.y = torch.randint(0, 10, (batch,), generator=gen).to(ctx.device)
        layers: list[Any] = []
        for _ in range(s.launch_depth):
            layers += [torch.nn.Linear(s.launch_width, s.launch_width), torch.nn.GELU()]
        layers.append(torch.nn.Linear(s.launch_width, 10))
        model = torch.nn.Sequential(*layers).to(ctx.device)
        self.opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        self.model = torch.compile(model) if compile_model else model
        self.loss_fn = torch.nn.functional.cross_entropy

    def run(self, steps: int) -> None:
        for _ in range(steps):
            loss = self.loss_fn(self.model(self.x), self.y)
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            self.opt.step()


class SmallModelFullCard(Workload):
    """A small MLP trained while the card is nearly full; fix: activation checkpointing."""

    def __init__(self, ctx: Context, checkpointing: bool) -> None:
        torch = _torch()
        s = ctx.sizes
        self.samples_per_step = s.mem_batch
        self.checkpointing = checkpointing
        gen = torch.Generator().manual_seed(0)
        self.x = torch.randn(s.mem_batch, s.mem_width, generator=gen).to(ctx.device)
        self.y = torch.randint(0, 10, (s.mem_batch,), generator=gen).to(ctx.device)
        self.blocks = [
            torch.nn.Sequential(torch.nn.Linear(s.mem_width, s.mem_width), torch.nn.GELU()).to(ctx.device)
            for _ in range(s.mem_depth)
        ]
        self.head = torch.nn.Linear(s.mem_width, 10).to(ctx.device)
        params = [p for b in self.blocks for p in b.parameters()] + list(self.head.parameters())
        self.opt = torch.optim.AdamW(params, lr=1e-3)
        self.loss_fn = torch.nn.functional.cross_entropy

    def run(self, steps: int) -> None:
        from torch.utils.checkpoint import checkpoint

        for _ in range(steps):
            h = self.x
            for block in self.blocks:
                h = checkpoint(block, h, use_reentrant=False) if self.checkpointing else block(h)
            loss = self.loss_fn(self.head(h), self.y)
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            self.opt.step()


# ----------------------------------------------------------------------------------------------
# Scenarios
# ----------------------------------------------------------------------------------------------

WorkloadFactory = Callable[[Context], Workload]
Pressure = Callable[[Context], contextlib.AbstractContextManager[dict[str, Any]]]


@dataclass(frozen=True)
class Fix:
    """One suggested fix of a scenario, measured without the tool against the baseline."""

    fix_id: str
    title: str
    make: WorkloadFactory
    needs_cuda: bool = False
    dry_run_skip: str | None = None  # why the dry run leaves it out (None: it runs)
    optional: bool = False  # skipped, not failed, when the time budget is short


@dataclass(frozen=True)
class Scenario:
    """A loop with one known bottleneck, the verdicts the product should give, and its fixes."""

    name: str
    title: str
    expected_verdicts: tuple[str, ...]  # what a correct analysis says about the baseline on a GPU
    phase: str | None  # the phase its fixes remove (for the Amdahl gain bound), if one
    make: WorkloadFactory
    fixes: tuple[Fix, ...]
    needs_cuda: bool = False
    pressure: Pressure | None = None  # held around calibration and every timed run
    # On the CPU there is no device to wait for: only a data wait is still visible as such,
    # and per-op overhead (the dry run's tiny sizes make several loops host-bound on a CPU).
    expected_cpu_verdicts: tuple[str, ...] = ("cpu-only",)


def _input_workers(ctx: Context) -> int:
    # One worker per core but the training loop's, capped at 8: enough to hide this transform.
    # (SageMaker Debugger's 70-200% of cores would oversubscribe a small shared machine.)
    if ctx.sizes.input_workers:
        return ctx.sizes.input_workers
    cores = os.cpu_count() or 2
    return max(2, min(8, cores - 1))


@contextlib.contextmanager
def memory_ballast(ctx: Context) -> Iterator[dict[str, Any]]:
    """Fill the card up to ``mem_target_share`` of its memory, guarded, and free it on exit.

    Called after the workloads' warm-up, so the caching allocator already holds the blocks their
    steps need; the ballast then takes what is left up to the target, never more than the free
    memory minus a headroom (2 GiB or 2% of the card), in 1 GiB pieces so an out-of-memory error
    leaves a smaller ballast rather than none.
    """
    torch = _torch()
    free_b, total_b = (int(v) for v in torch.cuda.mem_get_info())
    headroom_b = max(2 * GIB, int(0.02 * total_b))
    want_b = min(int(ctx.sizes.mem_target_share * total_b) - (total_b - free_b), free_b - headroom_b)
    info: dict[str, Any] = {
        "card_total_bytes": total_b,
        "free_before_bytes": free_b,
        "target_share": ctx.sizes.mem_target_share,
        "ballast_bytes": 0,
    }
    pieces: list[Any] = []
    try:
        remaining = max(0, want_b)
        while remaining > 0:
            n = min(GIB, remaining)
            try:
                pieces.append(torch.empty(n, dtype=torch.uint8, device="cuda"))
            except torch.cuda.OutOfMemoryError:
                info["note"] = "out of memory while placing the ballast: kept what fit"
                break
            remaining -= n
            info["ballast_bytes"] += n
        free_after, _ = torch.cuda.mem_get_info()
        info["used_share_after"] = 1.0 - int(free_after) / total_b
        yield info
    finally:
        pieces.clear()
        torch.cuda.empty_cache()


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        name="input-bound",
        title="DataLoader num_workers=0 with a slow CPU transform",
        expected_verdicts=("input-bound",),
        expected_cpu_verdicts=("input-bound",),
        phase="data",
        make=lambda ctx: InputPipeline(ctx, num_workers=0),
        fixes=(
            Fix(
                "dataloader-workers",
                "num_workers>0, persistent workers, pin_memory on CUDA",
                lambda ctx: InputPipeline(ctx, num_workers=_input_workers(ctx)),
            ),
        ),
    ),
    Scenario(
        name="pageable-copy",
        title="large pageable host batches copied to the device every step",
        expected_verdicts=("input-bound", "host-bound"),
        phase="copy",
        make=lambda ctx: HostCopies(ctx, pinned=False),
        fixes=(
            Fix(
                "pinned-non-blocking",
                "pinned host buffers + .to(device, non_blocking=True)",
                lambda ctx: HostCopies(ctx, pinned=True),
                needs_cuda=True,
            ),
        ),
    ),
    Scenario(
        name="item-per-step",
        title="loss.item() and accuracy .item() every step",
        expected_verdicts=("sync-bound",),
        expected_cpu_verdicts=("cpu-only", "host-bound"),
        phase="sync",
        make=PerStepItem,
        fixes=(Fix("item-every-n", "accumulate on device, .item() every N steps", EveryNItem),),
    ),
    Scenario(
        name="fp32-matmul",
        title="matmul-heavy MLP in fp32",
        expected_verdicts=("gpu-bound",),
        expected_cpu_verdicts=("cpu-only", "host-bound"),
        phase=None,
        make=lambda ctx: MatmulHeavy(ctx, bf16=False),
        fixes=(
            Fix(
                "autocast-bf16",
                "torch.autocast(dtype=torch.bfloat16)",
                lambda ctx: MatmulHeavy(ctx, bf16=True),
                needs_cuda=True,
            ),
        ),
    ),
    Scenario(
        name="memory-near-limit",
        title="small model trained with the card ~93% full",
        expected_verdicts=("memory-bound",),
        phase=None,
        make=lambda ctx: SmallModelFullCard(ctx, checkpointing=False),
        fixes=(
            Fix(
                "activation-checkpointing",
                "torch.utils.checkpoint per block (trades compute for memory: speedup < 1)",
                lambda ctx: SmallModelFullCard(ctx, checkpointing=True),
            ),
        ),
        needs_cuda=True,
        pressure=memory_ballast,
    ),
    Scenario(
        name="launch-bound",
        title="tiny model: many kernels shorter than their launch",
        expected_verdicts=("host-bound",),
        expected_cpu_verdicts=("host-bound",),
        phase=None,
        make=TinyLayers,
        fixes=(
            Fix(
                "bigger-batch",
                "batch size x{factor} (throughput per launch)",
                lambda ctx: TinyLayers(ctx, batch_factor=ctx.sizes.launch_batch_factor),
            ),
            Fix(
                "torch-compile",
                "torch.compile (best effort; compile time not counted)",
                lambda ctx: TinyLayers(ctx, compile_model=True),
                dry_run_skip="dry run: compiling takes minutes on 2 CPU cores",
                optional=True,
            ),
        ),
    ),
)

SCENARIO_NAMES: tuple[str, ...] = tuple(s.name for s in SCENARIOS)


# ----------------------------------------------------------------------------------------------
# Measurement
# ----------------------------------------------------------------------------------------------


@dataclass
class Timing:
    """Wall times of one variant's timed runs (seconds for ``steps`` steps each)."""

    samples_per_step: int
    runs_s: list[float] = field(default_factory=list)
    peak_extra_bytes: list[int] = field(default_factory=list)  # CUDA peak above the start

    @property
    def median_s(self) -> float | None:
        return statistics.median(self.runs_s) if self.runs_s else None


@dataclass
class Captured:
    """One run under the capture session, its report and the time it took."""

    run: Run
    report: Report
    steps_s: float  # the steps only
    total_s: float  # session start + steps + finish (what the user waits for)


def _time_steps(ctx: Context, workload: Workload, steps: int) -> tuple[float, int]:
    """Wall time of ``steps`` steps and the device memory they needed above what was held."""
    torch = _torch()
    start_alloc = 0
    if ctx.cuda:
        torch.cuda.reset_peak_memory_stats()
        start_alloc = int(torch.cuda.memory_allocated())
    _sync(ctx)
    t0 = time.perf_counter()
    workload.run(steps)
    _sync(ctx)
    elapsed = time.perf_counter() - t0
    peak = int(torch.cuda.max_memory_allocated()) - start_alloc if ctx.cuda else 0
    return elapsed, peak


def _capture(ctx: Context, workload: Workload, steps: int, source: str) -> Captured:
    """Run ``steps`` steps under a fresh CaptureSession and build its report."""
    from gpu_notebook.capture.session import CaptureOptions, CaptureSession
    from gpu_notebook.report.build import build_report

    options = CaptureOptions(
        warmup_steps=WARMUP_STEPS, profile_steps=PROFILE_STEPS, interval_s=SAMPLE_INTERVAL_S
    )
    _sync(ctx)
    t_start = time.perf_counter()
    session = CaptureSession(options, source)
    with session:
        t0 = time.perf_counter()
        workload.run(steps)
        _sync(ctx)
        steps_s = time.perf_counter() - t0
    run = session.finish("ok", None, scratch=_scratch())
    total_s = time.perf_counter() - t_start
    return Captured(run=run, report=build_report(run), steps_s=steps_s, total_s=total_s)


_SCRATCH: list[tempfile.TemporaryDirectory[str]] = []


def _scratch() -> str:
    """One private folder for the kit's window traces (a capture's own is removed after its
    report; the kit copies each into its output first), removed when the kit exits."""
    if not _SCRATCH:
        _SCRATCH.append(tempfile.TemporaryDirectory(prefix="gpucheck-kit-"))
    return _SCRATCH[0].name


def _warm_profiler(ctx: Context) -> Run:
    """Pay Kineto's (and CUPTI's) one-time start-up before any timed capture; return its Run."""
    torch = _torch()
    model = torch.nn.Linear(8, 8).to(ctx.device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(4, 8, device=ctx.device)

    class Warm(Workload):
        def run(self, steps: int) -> None:
            for _ in range(steps):
                loss = model(x).square().mean()
                opt.zero_grad()
                loss.backward()
                opt.step()

    return _capture(ctx, Warm(), MIN_STEPS, "# profiler warm-up").run


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def _ratio(num: float | None, den: float | None) -> float | None:
    return num / den if num is not None and den else None


def _throughput_gain(base: Timing, fix: Timing) -> float | None:
    """Samples/s of the fix over samples/s of the baseline (step time ratio at equal batch)."""
    b, f = base.median_s, fix.median_s
    if not b or not f:
        return None
    return (fix.samples_per_step / f) / (base.samples_per_step / b)


# ----------------------------------------------------------------------------------------------
# Output
# ----------------------------------------------------------------------------------------------


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "unknown"


def _save_capture(out: Path, stem: str, cap: Captured) -> dict[str, Any]:
    """Write ``<stem>.trace.json.gz``, ``.samples.json`` and ``.report.json``; return their names."""
    from gpu_notebook.records import to_jsonable

    files: dict[str, Any] = {"trace": None}
    trace_path = cap.run.window.trace_path
    if trace_path is not None and Path(trace_path).is_file():
        dest = out / f"{stem}.trace.json.gz"
        with open(trace_path, "rb") as fin:
            head = fin.read(2)
        if head == b"\x1f\x8b":
            shutil.copyfile(trace_path, dest)
        else:  # an uncompressed export: compress it, the size budget counts
            with open(trace_path, "rb") as fin, gzip.open(dest, "wb") as fout:
                shutil.copyfileobj(fin, fout)
        files["trace"] = dest.name
    samples = out / f"{stem}.samples.json"
    samples.write_text(json.dumps(to_jsonable(cap.run.samples)))
    report = out / f"{stem}.report.json"
    report.write_text(cap.report.to_json())
    files["samples"] = samples.name
    files["report"] = report.name
    return files


def _report_figures(report: Report, phase: str | None) -> dict[str, Any]:
    """The few numbers of one report the summary table shows."""
    from gpu_notebook.analysis.verdict import amdahl_bound

    gpu = report.analysis.gpu
    phases = report.analysis.phases
    share = phases.share(phase) if phases is not None and phase is not None else None
    return {
        "verdict": report.verdict.category,
        "headline": report.verdict.headline,
        "confidence": report.verdict.confidence,
        "gpu_busy_share": gpu.busy_share if gpu is not None and gpu.window_us > 0 else None,
        "nvml_util_mean_pct": report.analysis.utilization.gpu_util_mean_pct,
        "gpu_memory_peak_bytes": report.analysis.utilization.gpu_memory_peak_bytes,
        "step_median_s": report.analysis.step_stats.median_s,
        "window_status": report.run.window.status,
        "phase": phase,
        "phase_share": share,
        "gain_bound": amdahl_bound(share) if share is not None and share < 1 else None,
    }


def _environment(ctx: Context, run: Run, args: argparse.Namespace) -> dict[str, Any]:
    from gpu_notebook.records import to_jsonable

    torch = _torch()
    env: dict[str, Any] = {
        "run_env": to_jsonable(run.env),
        "device": ctx.device,
        "dry_run": ctx.dry_run,
        "argv": sys.argv[1:],
        "torch_version": str(torch.__version__),
        "torch_cuda_version": torch.version.cuda,
        "cudnn_version": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        # fp32 matmuls run on tensor cores only when TF32 is allowed: it decides the AMP speedup.
        "matmul_allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "cpu_count": os.cpu_count(),
        "sizes": to_jsonable(ctx.sizes),
        "capture": {
            "warmup_steps": WARMUP_STEPS,
            "profile_steps": PROFILE_STEPS,
            "interval_s": SAMPLE_INTERVAL_S,
        },
    }
    if ctx.cuda:
        props = torch.cuda.get_device_properties(0)
        env.update(
            gpu_name=torch.cuda.get_device_name(0),
            gpu_compute_capability=f"{props.major}.{props.minor}",
            gpu_memory_total_bytes=int(props.total_memory),
            gpu_count=torch.cuda.device_count(),
            cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"),
        )
    return env


# ----------------------------------------------------------------------------------------------
# One scenario
# ----------------------------------------------------------------------------------------------


class Deadline:
    """The whole kit's time budget: scenarios and optional fixes that would overrun are skipped."""

    def __init__(self, budget_s: float) -> None:
        self.budget_s = budget_s
        self.t0 = time.perf_counter()

    def elapsed_s(self) -> float:
        return time.perf_counter() - self.t0

    def left_s(self) -> float:
        return self.budget_s - self.elapsed_s()


def _fix_skip_reason(ctx: Context, fix: Fix, deadline: Deadline, no_compile: bool) -> str | None:
    if fix.needs_cuda and not ctx.cuda:
        return "skipped: needs CUDA"
    if ctx.dry_run and fix.dry_run_skip:
        return f"skipped: {fix.dry_run_skip}"
    if fix.fix_id == "torch-compile" and no_compile:
        return "skipped: --no-compile"
    # Compiling alone can take a minute: an optional fix must not eat the remaining scenarios.
    if fix.optional and deadline.left_s() < 4 * ctx.sizes.scenario_budget_s:
        return "skipped: time budget"
    return None


def run_scenario(
    ctx: Context, scenario: Scenario, out: Path, deadline: Deadline, no_compile: bool
) -> dict[str, Any]:
    """Measure one scenario; return its summary entry (never raises for the scenario's own errors)."""
    expected = scenario.expected_verdicts if ctx.cuda else scenario.expected_cpu_verdicts
    entry: dict[str, Any] = {
        "scenario": scenario.name,
        "title": scenario.title,
        "expected_verdicts": list(expected),
        "status": "ok",
        "skip_reason": None,
        "error": None,
    }
    if scenario.needs_cuda and not ctx.cuda:
        entry.update(status="skipped", skip_reason="skipped: needs CUDA")
        return entry
    if deadline.left_s() < 1.5 * ctx.sizes.scenario_budget_s:
        entry.update(status="skipped", skip_reason="skipped: time budget")
        return entry
    t0 = time.perf_counter()
    workloads: list[Workload] = []
    try:
        # One scenario's failure must not cost the others' data: device time is lent once and
        # scarce, so the error is recorded in the summary (and the exit code) instead of raised.
        _measure(ctx, scenario, out, deadline, no_compile, entry, workloads)
    except Exception as exc:  # noqa: BLE001 -- recorded in the summary, see above
        entry.update(status="error", error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc())
    finally:
        for w in workloads:
            w.close()
        workloads.clear()
        gc.collect()
        if ctx.cuda:
            _torch().cuda.empty_cache()
    entry["elapsed_s"] = time.perf_counter() - t0
    return entry


def _measure(
    ctx: Context,
    scenario: Scenario,
    out: Path,
    deadline: Deadline,
    no_compile: bool,
    entry: dict[str, Any],
    workloads: list[Workload],
) -> None:
    s = ctx.sizes
    _torch().manual_seed(0)
    base = scenario.make(ctx)
    workloads.append(base)
    base.run(s.warmup_steps)

    # Fixes that cannot or should not run here are listed with their reason, never faked.
    fixes: list[tuple[Fix, Workload]] = []
    fix_entries: dict[str, dict[str, Any]] = {}
    for fix in scenario.fixes:
        title = fix.title.format(factor=s.launch_batch_factor)
        fe: dict[str, Any] = {"fix_id": fix.fix_id, "title": title, "status": "ok", "skip_reason": None}
        fix_entries[fix.fix_id] = fe
        reason = _fix_skip_reason(ctx, fix, deadline, no_compile)
        if reason is not None:
            fe.update(status="skipped", skip_reason=reason)
            continue
        try:
            t_warm = time.perf_counter()
            w = fix.make(ctx)
            workloads.append(w)
            w.run(s.warmup_steps)  # compile / worker start-up happen here, outside the timings
            _sync(ctx)
            fe["warmup_s"] = time.perf_counter() - t_warm
        except Exception as exc:  # noqa: BLE001 -- a best-effort fix (torch.compile) may fail; the baseline stands
            fe.update(status="error", error=f"{type(exc).__name__}: {exc}")
            continue
        fixes.append((fix, w))

    pressure = scenario.pressure(ctx) if scenario.pressure is not None else contextlib.nullcontext({})
    with pressure as pressure_info:
        if pressure_info:
            entry["pressure"] = pressure_info
        # Calibrate: the slowest variant sets the step count so every run fits the budget.
        calib = max(3, s.warmup_steps)
        step_s = max(_time_steps(ctx, w, calib)[0] / calib for w in [base, *(w for _, w in fixes)])
        n_runs = s.repeats * (2 + len(fixes)) + len(fixes)
        steps = int(min(s.max_steps, max(MIN_STEPS, s.scenario_budget_s / n_runs / max(step_s, 1e-6))))
        entry["steps_per_run"] = steps
        entry["repeats"] = s.repeats
        entry["calibrated_step_s"] = step_s

        source = base.source()
        base_t = Timing(base.samples_per_step)
        with_steps: list[float] = []
        with_total: list[float] = []
        verdicts: list[str] = []
        fix_t = {fix.fix_id: Timing(w.samples_per_step) for fix, w in fixes}
        last: Captured | None = None

        def run_base() -> None:
            t, peak = _time_steps(ctx, base, steps)
            base_t.runs_s.append(t)
            base_t.peak_extra_bytes.append(peak)

        def run_with() -> None:
            nonlocal last
            cap = _capture(ctx, base, steps, source)
            with_steps.append(cap.steps_s)
            with_total.append(cap.total_s)
            verdicts.append(cap.report.verdict.category)
            last = cap

        def run_fix(fix: Fix, w: Workload) -> Callable[[], None]:
            def go() -> None:
                t, peak = _time_steps(ctx, w, steps)
                fix_t[fix.fix_id].runs_s.append(t)
                fix_t[fix.fix_id].peak_extra_bytes.append(peak)

            return go

        order: list[Callable[[], None]] = [run_base, run_with, *(run_fix(f, w) for f, w in fixes)]
        for r in range(s.repeats):
            # Rotate the order each repeat so drift (clocks, temperature) hits every variant alike.
            k = r % len(order)
            for step_fn in order[k:] + order[:k]:
                step_fn()

        fix_caps = {fix.fix_id: _capture(ctx, w, steps, w.source()) for fix, w in fixes}

    assert last is not None  # repeats >= 1
    entry["files"] = {"baseline": _save_capture(out, f"{scenario.name}.baseline", last)}
    entry.update(_report_figures(last.report, scenario.phase))
    entry["repeat_verdicts"] = verdicts
    entry["verdict_matches"] = entry["verdict"] in entry["expected_verdicts"]
    entry["baseline_runs_s"] = base_t.runs_s
    entry["baseline_median_s"] = base_t.median_s
    entry["baseline_peak_extra_bytes"] = max(base_t.peak_extra_bytes, default=0) if ctx.cuda else None
    entry["with_tool_runs_s"] = with_steps
    entry["with_tool_median_s"] = _median(with_steps)
    entry["with_tool_total_runs_s"] = with_total
    entry["overhead_ratio"] = _ratio(_median(with_steps), base_t.median_s)
    # Session start (environment, NVML) and finish (trace export) included: what the user waits.
    entry["overhead_ratio_total"] = _ratio(_median(with_total), base_t.median_s)

    for fix, _w in fixes:
        fe = fix_entries[fix.fix_id]
        t = fix_t[fix.fix_id]
        cap = fix_caps[fix.fix_id]
        fe["runs_s"] = t.runs_s
        fe["median_s"] = t.median_s
        fe["samples_per_step"] = t.samples_per_step
        fe["speedup"] = _throughput_gain(base_t, t)
        fe["peak_extra_bytes"] = max(t.peak_extra_bytes, default=0) if ctx.cuda else None
        fe["files"] = _save_capture(out, f"{scenario.name}.fix-{fix.fix_id}", cap)
        fe["after"] = _report_figures(cap.report, scenario.phase)
    entry["fixes"] = [fix_entries[f.fix_id] for f in scenario.fixes]


# ----------------------------------------------------------------------------------------------
# Summary table
# ----------------------------------------------------------------------------------------------


def _fmt_share(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def _fmt_pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.0f}%"


def _fmt_x(x: float | None) -> str:
    return "-" if x is None else f"x{x:.2f}"


def _one_line(text: str, width: int = 90) -> str:
    # CUDA errors run over several long lines; the table keeps the first, summary.json all.
    first = text.strip().splitlines()[0] if text.strip() else text
    return first if len(first) <= width else first[: width - 3] + "..."


def summary_table(entries: Sequence[dict[str, Any]]) -> str:
    """scenario -> verdict, GPU busy, NVML util, overhead, fix and its measured speedup."""
    head = ("scenario", "verdict (expected?)", "GPU busy", "NVML util", "overhead", "fix", "speedup (bound)")
    rows: list[tuple[str, ...]] = [head]
    for e in entries:
        if e["status"] != "ok":
            reason = e["skip_reason"] or e["error"] or e["status"]
            rows.append((e["scenario"], _one_line(reason), "", "", "", "", ""))
            continue
        mark = "yes" if e["verdict_matches"] else f"no, want {'/'.join(e['expected_verdicts'])}"
        first = True
        for fe in e["fixes"]:
            if fe["status"] == "ok":
                bound = f" (<= {_fmt_x(e['gain_bound'])})" if e.get("gain_bound") else ""
                gain = _fmt_x(fe["speedup"]) + bound
            else:
                gain = _one_line(fe.get("skip_reason") or f"error: {fe.get('error')}")
            lead = (
                (e["scenario"], f"{e['verdict']} ({mark})", _fmt_share(e["gpu_busy_share"]),
                 _fmt_pct(e["nvml_util_mean_pct"]), _fmt_x(e["overhead_ratio"]))
                if first
                else ("", "", "", "", "")
            )
            rows.append((*lead, fe["fix_id"], gain))
            first = False
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# Command line
# ----------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpu_check",
        description="Run known-bottleneck training loops under gpucheck's capture and record "
        "traces, samples, reports, overhead and fix speedups.",
    )
    parser.add_argument(
        "--out",
        type=Path,
        help="output folder (default: tests/data/gpu/<date>-<gpu-name>; dry run: a temp folder)",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="tiny sizes; on the CPU unless --device cuda (checks the kit itself in < 60 s)",
    )
    parser.add_argument(
        "--device", choices=("cuda", "cpu"), help="default: cuda, or cpu with --dry-run"
    )
    parser.add_argument(
        "--scenario",
        action="append",
        choices=SCENARIO_NAMES,
        help="run only this scenario (repeatable; default: all)",
    )
    parser.add_argument(
        "--budget-s",
        type=float,
        help="whole-kit time budget: scenarios that would overrun are skipped (default 330; dry run: none)",
    )
    parser.add_argument("--scenario-budget-s", type=float, help="timed runs of one scenario")
    parser.add_argument("--repeats", type=int, help="interleaved repeats per variant (default 3)")
    parser.add_argument("--no-compile", action="store_true", help="skip the torch.compile fix")
    return parser


def _check_device(device: str) -> str | None:
    """None when ``device`` can be used, else the one-line reason."""
    try:
        import torch
    except ImportError:
        return "gpu_check: torch is not installed; install a torch build first"
    if device == "cuda" and not torch.cuda.is_available():
        return (
            f"gpu_check: --device cuda was asked but CUDA is not available "
            f"(torch {torch.__version__}, CUDA build {torch.version.cuda or 'none'}); "
            "run with --dry-run to check the kit on the CPU"
        )
    return None


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    device = args.device or ("cpu" if args.dry_run else "cuda")
    problem = _check_device(device)
    if problem is not None:
        print(problem, file=sys.stderr)
        return EXIT_USAGE
    if args.repeats is not None and args.repeats < 1:
        print("gpu_check: --repeats must be at least 1", file=sys.stderr)
        return EXIT_USAGE

    # A bare checkout (no `pip install -e .`) still finds the project it measures with.
    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))
    torch = _torch()
    sizes = DRY if args.dry_run else FULL
    if args.scenario_budget_s is not None:
        sizes = replace(sizes, scenario_budget_s=args.scenario_budget_s)
    if args.repeats is not None:
        sizes = replace(sizes, repeats=args.repeats)
    ctx = Context(device=device, sizes=sizes, dry_run=args.dry_run)
    if not ctx.cuda:
        # On a small shared CPU, OpenMP threads oversubscribed by DataLoader workers and other
        # processes spin-wait: step times became 10-100x slower and noisy. One thread keeps the
        # dry run fast and its ratios readable; a CUDA run keeps torch's default.
        torch.set_num_threads(1)

    gpu_name = torch.cuda.get_device_name(0) if ctx.cuda else "cpu"
    date = datetime.now().strftime("%Y-%m-%d")
    out: Path = args.out or (
        Path(tempfile.gettempdir()) / f"gpu_check-{date}-{_slug(gpu_name)}-dry-run"
        if args.dry_run
        else REPO_ROOT / "tests" / "data" / "gpu" / f"{date}-{_slug(gpu_name)}"
    )
    out.mkdir(parents=True, exist_ok=True)
    # The dry run has no budget by default: skipping a scenario there would hide a rotten one.
    deadline = Deadline(args.budget_s or (float("inf") if args.dry_run else 330.0))
    names = args.scenario or list(SCENARIO_NAMES)
    print(f"gpu_check: {len(names)} scenario(s) on {gpu_name} ({device}), writing {out}", flush=True)

    warm = _warm_profiler(ctx)
    (out / "environment.json").write_text(json.dumps(_environment(ctx, warm, args), indent=2))

    entries: list[dict[str, Any]] = []
    for i, scenario in enumerate(s for s in SCENARIOS if s.name in names):
        entry = run_scenario(ctx, scenario, out, deadline, args.no_compile)
        entries.append(entry)
        what = entry.get("verdict") or entry["skip_reason"] or entry["error"]
        print(
            f"  [{i + 1}/{len(names)}] {scenario.name}: {what} "
            f"({entry.get('elapsed_s', 0.0):.1f} s, {deadline.elapsed_s():.0f} s in all)",
            flush=True,
        )

    total_bytes = sum(p.stat().st_size for p in out.iterdir() if p.is_file())
    summary = {
        "started_at": warm.started_at,
        "device": device,
        "gpu_name": gpu_name,
        "dry_run": args.dry_run,
        "elapsed_s": deadline.elapsed_s(),
        "output_bytes": total_bytes,
        "scenarios": entries,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    print()
    print(summary_table(entries))
    print(f"\n{len(list(out.iterdir()))} files, {total_bytes / MIB:.1f} MiB in {out} "
          f"({deadline.elapsed_s():.0f} s)")
    failed = [e["scenario"] for e in entries if e["status"] == "error"]
    if failed:
        print(f"gpu_check: failed scenario(s): {', '.join(failed)} (see summary.json)", file=sys.stderr)
        return EXIT_SCENARIO_FAILED
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
