"""The GPU validation kit's scenarios: known-bottleneck training loops, their fixes, their sizes.

Each :class:`Workload` is the loop a user would write (its ``run`` source becomes the Run's cell
source); each :class:`Scenario` pairs one with the verdict it should get and the fixes the
product would suggest. ``gpu_check.py`` measures and records them. Only the standard library is
imported at module level: torch is imported on first use.
"""

from __future__ import annotations

import contextlib
import gc
import inspect
import os
import textwrap
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    import torch

GIB = 1 << 30


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


def torch_module() -> Any:
    """torch, imported on first use (module level stays cheap)."""
    import torch

    return torch


def sync(ctx: Context) -> None:
    # CUDA work is asynchronous: a wall clock means nothing until the queue is drained.
    if ctx.cuda:
        torch_module().cuda.synchronize()


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
        torch = torch_module()
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
    nn = torch_module().nn
    layers: list[Any] = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.ReLU()]
    layers.append(nn.Linear(width, out))
    return cast("torch.nn.Module", nn.Sequential(*layers))


class InputPipeline(Workload):
    """A DataLoader feeding a small MLP; baseline ``num_workers=0``, fix: workers + pinned memory."""

    def __init__(self, ctx: Context, num_workers: int) -> None:
        torch = torch_module()
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
        torch = torch_module()
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
        torch = torch_module()
        s = ctx.sizes
        self.samples_per_step = s.item_batch
        self.every = s.item_every
        gen = torch.Generator().manual_seed(0)
        self.xs = [
            torch.randn(s.item_batch, s.item_width, generator=gen).to(ctx.device) for _ in range(4)
        ]
        self.ys = [
            torch.randint(0, 10, (s.item_batch,), generator=gen).to(ctx.device) for _ in range(4)
        ]
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
        torch = torch_module()
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
        torch = torch_module()
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
        torch = torch_module()
        for _ in range(steps):
            with torch.autocast(self.device_type, dtype=torch.bfloat16, enabled=self.bf16):
                loss = self.loss_fn(self.model(self.x), self.y)
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            self.opt.step()


class TinyLayers(Workload):
    """Many tiny Linear+GELU layers on a small batch: each kernel is shorter than its launch."""

    def __init__(self, ctx: Context, batch_factor: int = 1, compile_model: bool = False) -> None:
        torch = torch_module()
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
        torch = torch_module()
        s = ctx.sizes
        self.samples_per_step = s.mem_batch
        self.checkpointing = checkpointing
        gen = torch.Generator().manual_seed(0)
        self.x = torch.randn(s.mem_batch, s.mem_width, generator=gen).to(ctx.device)
        self.y = torch.randint(0, 10, (s.mem_batch,), generator=gen).to(ctx.device)
        self.blocks = [
            torch.nn.Sequential(torch.nn.Linear(s.mem_width, s.mem_width), torch.nn.GELU()).to(
                ctx.device
            )
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
    # The product's finding whose fix this is: the summary records the range that finding
    # stated on the baseline, beside the measured speedup (None: no finding states one).
    rule: str | None = None


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
    # On the CPU dry run the sizes are tiny: any of them can read as overhead-bound (host-bound)
    # on a busy machine; the GPU run is where the expected verdict is checked.
    expected_cpu_verdicts: tuple[str, ...] = ("cpu-only", "host-bound")


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
    torch = torch_module()
    free_b, total_b = (int(v) for v in torch.cuda.mem_get_info())
    headroom_b = max(2 * GIB, int(0.02 * total_b))
    want_b = min(
        int(ctx.sizes.mem_target_share * total_b) - (total_b - free_b), free_b - headroom_b
    )
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
                rule="input.loader_workers",
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
                rule="copies.pageable",
            ),
        ),
    ),
    Scenario(
        name="item-per-step",
        title="loss.item() and accuracy .item() every step",
        # On an H200 (2026-12-04) the GPU was 62% busy with the syncs and 62% without them (the
        # fix: 1.13x): its steps are as long as their launches, so the host sets the pace and
        # the syncs are a finding of their own, not the verdict.
        expected_verdicts=("sync-bound", "host-bound"),
        expected_cpu_verdicts=("cpu-only", "host-bound"),
        phase="sync",
        make=PerStepItem,
        fixes=(
            Fix(
                "item-every-n",
                "accumulate on device, .item() every N steps",
                EveryNItem,
                rule="syncs.per_step",
            ),
        ),
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
                rule="precision.fp32_tensor_cores",
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
                rule="launch.gpu_starved",
            ),
        ),
    ),
)

SCENARIO_NAMES: tuple[str, ...] = tuple(s.name for s in SCENARIOS)
