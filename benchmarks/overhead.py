"""Overhead budget: ``%%gpucheck`` vs the same cell without it, beside torch.profiler and the peers.

What runs (a real IPython shell, ``IPython.testing.globalipapp.start_ipython`` with
``%load_ext gpu_notebook``, ``torch.set_num_threads(1)`` for every variant so the two shared
cores give steadier timings):

* a 300-step training loop of a small MLP and of a small CNN (DataLoader, AdamW), as cells:
  ``plain`` (no tool), ``gpucheck`` (the default magic, report displayed), ``full``
  (``%%gpucheck -s 300 -w 0``: every step profiled) and ``torch.profiler`` (default settings,
  one ``with torch.profiler.profile():`` around the loop);
* the tiny-step loop (8-8-1 MLP, batch 1, 1,500 steps, ~0.2 ms a step) with the same variants;
* the peers TraceML (``traceml-ai``) and gpuprof, each in its own venv under benchmarks/venvs/
  (torch==2.13.0 + the peer + IPython, no system site-packages), with the least code change
  their docs give: TraceML ``traceml.init()`` once (against a ``traceml serve`` aggregator, its
  documented path for scripts not started by ``traceml run``) and ``with traceml.trace_step(model):``
  around each step; gpuprof ``with gpuprof.profile(name):`` around the loop. Each peer is
  compared with a plain twin process of the same venv, driven alternately (its patches are
  global once initialised, so the baseline cannot share its process).

Each cell records its loop time inside the cell (``perf_counter`` and ``process_time`` around the
``for``) and the harness times the whole ``run_cell``. Every variant runs once before measuring
(the first profiler start in a process costs ~1 s of Kineto initialisation: warmed here, not
counted). Figures: median over interleaved rounds of the paired ratio variant/plain.

The MLP's (and the compiled shape's) in-loop extra is also split in two, from each step's end
time (``perf_counter_ns``, both cells) with the median per step index over interleaved rounds:
the first window's steps (a fixed time once per cell, ``window_ms``) and the lean steps after
them (``per_step``: the ratio a longer loop approaches), so a short loop's ratio shows which of
the two it pays.

The per-step hook cost is also measured directly: the step clock's hooks installed (lean mode,
what runs after the profiler window, and timing mode, what runs during it) vs none, over the
tiny loop, in thread CPU time. Budgets are judged on process CPU time (this shared machine runs
at a load of ~10 on 2 cores, so wall clocks are dominated by waiting for a core; a cell whose loop
is single-threaded has wall = CPU time on an idle core, and process CPU also counts the sampler
thread, so it is the conservative figure); the wall-clock ratio is printed beside each one.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import io
import itertools
import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    VENVS_DIR,
    Result,
    emit,
    ensure_venv,
    fmt_ratio,
    interleave,
    ipython_shell,
    iqr,
    median,
    paired_diffs,
    paired_ratios,
    parse_args,
    write_results,
)

CELL_BUDGET = 1.03
TINY_BUDGET = 1.10
HOOK_BUDGET_US = 50.0
# "long": the tiny loop over 20,000 steps, under the tiny loop's budget unchanged: a long cell
# (later profiler windows, re-timing checks, memory readings) must not pay more, proportionally.
TINY_WORKLOADS = ("tiny", "long")
LONG_STEPS = 20_000
TORCH_PIN = "torch==2.13.0"

SETUP = """
import time, torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
torch.set_num_threads(1)
torch.manual_seed(0)

class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(),
            nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(4))
        self.head = nn.Linear(16 * 4 * 4, 10)
    def forward(self, x):
        return self.head(self.features(x).flatten(1))

_DATA = {}
def fresh(kind, steps):
    '''A new model, optimizer, loss and a loader of exactly `steps` batches (data cached).'''
    torch.manual_seed(0)
    if kind == "mlp":
        model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
        bs, shape = 32, (64,)
    else:
        model = SmallCNN()
        bs, shape = 16, (3, 16, 16)
    key = (kind, steps)
    if key not in _DATA:
        _DATA[key] = TensorDataset(torch.randn(steps * bs, *shape), torch.randint(0, 10, (steps * bs,)))
    loader = DataLoader(_DATA[key], batch_size=bs, num_workers=0)
    return model, torch.optim.AdamW(model.parameters(), lr=1e-3), nn.CrossEntropyLoss(), loader

def fresh_tiny(steps):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 1))
    xs, ys = torch.randn(steps, 1, 8), torch.randn(steps, 1, 1)
    return model, torch.optim.SGD(model.parameters(), lr=1e-2), nn.MSELoss(), xs, ys
"""

_LOADER_STEP = """
loss = loss_fn(model(x), y)
opt.zero_grad(); loss.backward(); opt.step()
"""
_TINY_STEP = """
loss = loss_fn(model(xs[i]), ys[i])
opt.zero_grad(); loss.backward(); opt.step()
"""


def _loop(workload: str, steps: int, wrap_step: str | None = None) -> str:
    """The training loop of ``workload``; ``wrap_step``: a ``with`` line put around each step."""
    tiny = workload in TINY_WORKLOADS
    head = "for x, y in loader:" if not tiny else f"for i in range({steps}):"
    step = _TINY_STEP if tiny else _LOADER_STEP
    body = textwrap.indent(step.strip(), "    ")
    if wrap_step:
        body = "    " + wrap_step + "\n" + textwrap.indent(body, "    ")
    return f"{head}\n{body}\n"


def cell_source(variant: str, workload: str, steps: int) -> str:
    """The cell a user would run for ``variant`` (its loop timed from inside the cell)."""
    make = (
        f"model, opt, loss_fn, xs, ys = fresh_tiny({steps})\n"
        if workload in TINY_WORKLOADS
        else f"model, opt, loss_fn, loader = fresh({workload!r}, {steps})\n"
    )
    timed_open = "_t0 = time.perf_counter(); _c0 = time.process_time()\n"
    timed_close = "_loop = (time.perf_counter() - _t0, time.process_time() - _c0)\n"
    if variant in ("plain", "gpucheck", "full"):
        body = make + timed_open + _loop(workload, steps) + timed_close
        if variant == "gpucheck":
            return "%%gpucheck\n" + body
        if variant == "full":
            return f"%%gpucheck -s {steps} -w 0\n" + body
        return body
    if variant == "traceml":
        return (
            make
            + timed_open
            + _loop(workload, steps, "with traceml.trace_step(model):")
            + timed_close
        )
    wrapper = {
        "torch.profiler": "with torch.profiler.profile():",
        "gpuprof": "with gpuprof.profile('gpucheck-bench'):",
    }[variant]
    inner = timed_open + _loop(workload, steps) + timed_close
    return make + wrapper + "\n" + textwrap.indent(inner, "    ")


@dataclass(frozen=True)
class CellTiming:
    cell_s: float  # whole run_cell, perf_counter
    cell_cpu_s: float  # whole run_cell, process_time (all threads: the sampler's too)
    loop_s: float  # the for loop, perf_counter inside the cell
    loop_cpu_s: float  # the for loop, process_time inside the cell
    # The magic's time after the cell ended (analysis, rendering, display: budget 3, measured
    # by report_latency.py), from its CellCost marks; 0 for cells without the magic.
    report_s: float = 0.0
    report_cpu_s: float = 0.0

    @property
    def run_s(self) -> float:
        """The cell up to its end: run_cell without the report built after it."""
        return self.cell_s - self.report_s

    @property
    def run_cpu_s(self) -> float:
        return self.cell_cpu_s - self.report_cpu_s


class Shell:
    """A real IPython shell with gpu_notebook loaded; runs cells with their output silenced."""

    def __init__(self, extra_setup: str = "") -> None:
        self.ip: Any = ipython_shell()
        self._run("%load_ext gpu_notebook", check=False)
        self._run(SETUP + extra_setup)

    def _run(self, source: str, *, check: bool = True) -> None:
        with _silenced():
            result = self.ip.run_cell(source)
        if check and not result.success:
            raise RuntimeError(f"cell failed: {result.error_in_exec or result.error_before_exec}")

    def time_cell(self, source: str) -> CellTiming:
        self.ip.user_ns.pop("_loop", None)
        magics = self.ip.magics_manager.registry.get("GpuCheckMagics")
        if magics is not None:
            magics.last_cost = None
        # Start every measurement from a collected heap: torch.profiler leaves its results in
        # reference cycles that cost 100-240 ms to free, and without this the *next* cell that
        # allocates enough to trigger the collector pays for them (seen as a bimodal in-loop
        # ratio, x1.09 or x1.8, for whichever variant followed a torch.profiler cell).
        gc.collect()
        with _silenced():
            t0, c0 = time.perf_counter(), time.process_time()
            result = self.ip.run_cell(source)
            cell_s, cell_cpu_s = time.perf_counter() - t0, time.process_time() - c0
        if not result.success:
            raise RuntimeError(f"cell failed: {result.error_in_exec or result.error_before_exec}")
        loop_s, loop_cpu_s = self.ip.user_ns["_loop"]
        cost = getattr(magics, "last_cost", None)
        report_s = report_cpu_s = 0.0
        if cost is not None:  # a %%gpucheck cell: the magic's own marks (magic_run.CellCost)
            report_s = cost.span("closed", "shown") or 0.0
            report_cpu_s = cost.span("closed", "shown", cpu=True) or 0.0
        return CellTiming(
            cell_s, cell_cpu_s, float(loop_s), float(loop_cpu_s), report_s, report_cpu_s
        )


@contextlib.contextmanager
def _silenced() -> Iterator[None]:
    """Reports, summaries and warnings printed by a cell go nowhere (same for every variant)."""
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        yield


# ------------------------------------------------------------------------------ peer workers


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_port(port: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return True
        time.sleep(0.1)
    return False


def worker_main(kind: str, out: TextIO) -> None:
    """``--worker KIND``: a shell that runs cells on request (JSON lines on stdin/stdout)."""
    extra = ""
    if kind == "traceml":
        port = int(os.environ["GPUCHECK_BENCH_TRACEML_PORT"])
        extra = (
            "\nimport traceml_ai as traceml\n"
            f"traceml.init(aggregator_port={port}, on_missing_aggregator='raise')\n"
        )
    elif kind == "gpuprof":
        extra = "\nimport gpuprof\n"
    try:
        shell = Shell(extra)
    except Exception as exc:  # noqa: BLE001 -- reported to the parent as the peer's reason, not raised there
        out.write(json.dumps({"error": f"{type(exc).__name__}: {exc}"}) + "\n")
        out.flush()
        return
    out.write(json.dumps({"ready": True}) + "\n")
    out.flush()
    for line in sys.stdin:
        request = json.loads(line)
        try:
            t = shell.time_cell(
                cell_source(request["variant"], request["workload"], request["steps"])
            )
            reply: dict[str, Any] = {
                "cell_s": t.cell_s,
                "cell_cpu_s": t.cell_cpu_s,
                "loop_s": t.loop_s,
                "loop_cpu_s": t.loop_cpu_s,
            }
        except Exception as exc:  # noqa: BLE001 -- the parent reports it as the peer's reason
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        out.write(json.dumps(reply) + "\n")
        out.flush()


class Worker:
    """The parent's handle on one ``--worker`` process."""

    def __init__(self, python: Path, kind: str, env: dict[str, str], cwd: Path) -> None:
        self.kind = kind
        self.proc = subprocess.Popen(
            [str(python), str(Path(__file__).resolve()), "--worker", kind],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
            cwd=cwd,
        )
        hello = self._read()
        self.error: str | None = hello.get("error")

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            return {"error": f"worker exited (code {self.proc.wait()})"}
        reply: dict[str, Any] = json.loads(line)
        return reply

    def run(self, variant: str, workload: str, steps: int) -> CellTiming:
        assert self.proc.stdin is not None
        self.proc.stdin.write(
            json.dumps({"variant": variant, "workload": workload, "steps": steps}) + "\n"
        )
        self.proc.stdin.flush()
        reply = self._read()
        if "error" in reply:
            raise RuntimeError(reply["error"])
        return CellTiming(
            reply["cell_s"], reply["cell_cpu_s"], reply["loop_s"], reply["loop_cpu_s"]
        )

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


_PEERS: dict[str, tuple[list[str], str]] = {
    # venv name: (requirements after torch, module that must import)
    "traceml": (["traceml-ai", "ipython"], "traceml_ai"),
    "gpuprof": (["gpuprof", "ipython"], "gpuprof"),
}


@dataclass
class PeerRun:
    """One peer's interleaved rounds against its plain twin, or why it could not run."""

    name: str
    reason: str = ""
    timings: dict[str, dict[str, list[CellTiming]]] | None = None  # workload -> side -> rounds


def run_peer(
    name: str, workloads: Sequence[tuple[str, int]], rounds: int, install: bool
) -> PeerRun:
    requirements, module = _PEERS[name]
    python, reason = ensure_venv(
        name, [TORCH_PIN, *requirements], check_import=module, install=install
    )
    if python is None:
        return PeerRun(name, reason)
    for extra in ("IPython", "torch"):
        _, reason = ensure_venv(name, [], check_import=extra, install=False)
        if reason:
            return PeerRun(name, f"`import {extra}` fails in benchmarks/venvs/{name}")
    scratch = VENVS_DIR / "scratch" / name
    scratch.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONNOUSERSITE": "1", "KINETO_LOG_LEVEL": "6"}
    env.pop("PYTHONPATH", None)
    server: subprocess.Popen[bytes] | None = None
    workers: list[Worker] = []
    try:
        if name == "traceml":
            port = _free_port()
            env["GPUCHECK_BENCH_TRACEML_PORT"] = str(port)
            server = subprocess.Popen(
                [
                    str(python.parent / "traceml"),
                    "serve",
                    "--aggregator-port",
                    str(port),
                    "--logs-dir",
                    str(scratch / "logs"),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                cwd=scratch,
                env=env,
            )
            if not _wait_port(port, 60):
                return PeerRun(name, "the `traceml serve` aggregator did not listen within 60 s")
        plain = Worker(python, "plain", env, scratch)
        workers.append(plain)
        peer = Worker(python, name, env, scratch)
        workers.append(peer)
        for w in workers:
            if w.error:
                return PeerRun(name, f"{w.kind} worker failed: {w.error}")
        timings: dict[str, dict[str, list[CellTiming]]] = {}
        for workload, steps in workloads:
            for side, w in (("plain", plain), (name, peer)):
                w.run("plain" if side == "plain" else name, workload, steps)  # warm-up
            runs = interleave(
                {
                    # Called inside this iteration only (interleave runs them now): the loop
                    # variables are the ones meant.
                    "plain": lambda: plain.run("plain", workload, steps),  # noqa: B023
                    name: lambda: peer.run(name, workload, steps),  # noqa: B023
                },
                rounds,
            )
            timings[workload] = runs
        return PeerRun(name, "", timings)
    except RuntimeError as exc:
        return PeerRun(name, f"run failed: {exc}")
    finally:
        for w in workers:
            w.close()
        if server is not None:
            server.terminate()
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()


# ------------------------------------------------------------------------------ hook cost


def hook_cost_us(steps: int, rounds: int) -> dict[str, list[float]]:
    """Thread-CPU µs a step of the tiny loop: no hooks, step-clock lean mode, timing mode."""
    import torch
    from torch import nn

    from gpu_notebook.capture.stepclock import StepClock

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    loss_fn = nn.MSELoss()
    xs, ys = torch.randn(steps, 1, 8), torch.randn(steps, 1, 1)

    def loop() -> float:
        c0 = time.thread_time()
        for i in range(steps):
            loss = loss_fn(model(xs[i]), ys[i])
            opt.zero_grad()
            loss.backward()
            opt.step()
        return (time.thread_time() - c0) / steps * 1e6

    def with_clock(lean: bool) -> Callable[[], float]:
        def run() -> float:
            clock = StepClock(time.perf_counter_ns())
            clock.install()
            try:
                for i in range(3):  # the optimizer becomes the anchor, as in a real cell
                    loss = loss_fn(model(xs[i]), ys[i])
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                if lean:
                    clock.lean()
                return loop()
            finally:
                clock.uninstall()

        return run

    loop()
    return interleave({"none": loop, "lean": with_clock(True), "timing": with_clock(False)}, rounds)


def closure_cost_us(steps: int, rounds: int) -> dict[str, list[float]]:
    """Thread-CPU µs a step of an LBFGS closure loop (8-8-1 MLP, batch 16, ``max_iter=4``: up
    to 5 closure calls a step): no hooks, step-clock lean mode, timing mode. The clock's part
    of a closure step: the optimizer hooks and the closure handed to ``step`` wrapped
    (``_wrap_closure``: two clock reads and the phases' sums around each call)."""
    import torch
    from torch import nn

    from gpu_notebook.capture.stepclock import StepClock

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 1))
    opt = torch.optim.LBFGS(model.parameters(), lr=0.1, max_iter=4)
    # A fresh batch each step: on one fixed batch LBFGS converges and then calls its closure
    # once a step.
    xs, ys = torch.randn(steps + 3, 16, 8), torch.randn(steps + 3, 16, 1)
    calls, at = [0], [0]

    def closure() -> torch.Tensor:
        calls[0] += 1
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(xs[at[0]]), ys[at[0]])
        loss.backward()
        return loss

    def loop() -> float:
        c0 = time.thread_time()
        for i in range(steps):
            at[0] = i
            opt.step(closure)
        return (time.thread_time() - c0) / steps * 1e6

    def with_clock(lean: bool, wrap: bool = True) -> Callable[[], float]:
        def run() -> float:
            clock = StepClock(time.perf_counter_ns())
            if not wrap:  # the hooks alone: the closure handed on as it is
                clock._wrap_closure = lambda closure: closure  # type: ignore[method-assign]
            clock.install()
            try:
                for i in range(3):  # the optimizer becomes the anchor, as in a real cell
                    at[0] = steps + i
                    opt.step(closure)
                if lean:
                    clock.lean()
                return loop()
            finally:
                clock.uninstall()

        return run

    loop()
    calls[0] = 0
    variants = {
        "none": loop,
        "lean": with_clock(True),
        "timing": with_clock(False),
        "timing_unwrapped": with_clock(False, wrap=False),
    }
    out = interleave(variants, rounds)
    out["calls_per_step"] = [calls[0] / (rounds * (4 * steps + 9))]
    return out


def closure_rows(rows: list[Result], steps: int, rounds: int) -> None:
    """The closure wrapper's cost: LBFGS steps plain vs under the step clock, interleaved."""
    cost = closure_cost_us(steps, rounds)
    for mode, what in (
        ("lean", "lean mode"),
        ("timing", "timing mode"),
        ("timing_unwrapped", "timing mode, closure not wrapped (the hooks' part)"),
    ):
        ratio = median([m / n for m, n in zip(cost[mode], cost["none"], strict=True)])
        d = median(paired_diffs(cost[mode], cost["none"]))
        emit(
            Result(
                f"overhead.closure.{mode}_ratio",
                f"LBFGS closure loop under the step clock, {what}: CPU ratio",
                ratio,
                f"{fmt_ratio(ratio)} ({d:+.1f} us/step; plain {median(cost['none']):.0f} us/step, "
                f"{mode} {median(cost[mode]):.0f}; "
                f"{cost['calls_per_step'][0]:.1f} closure calls a step)",
                "<= 1.03",
                ratio <= 1.03,
                f"median of {rounds} paired thread_time ratios, {steps}-step LBFGS loop, rounds "
                "interleaved (order rotated), hooks installed directly (no profiler, no sampler); "
                f"load {os.getloadavg()[0]:.1f}",
            ),
            rows,
        )


# ------------------------------------------------------------------------------ split

# The steps the first window touches in a default cell: 2 warm-up steps in timing mode, 3
# profiled, the profiler's stop at the last one's end, 5 stack-sampled steps after it, and the
# lean decision; from step 16 on every step is lean (read at 300 steps: the extra per step index
# is flat from step ~12).
WINDOW_STEPS = 16


def timestamped(source: str) -> str:
    """``source`` (a cell whose loop is ``for x, y in loader:``) with each step's end time kept
    in ``_ts`` (one ``perf_counter_ns`` a step, plain and measured cell alike)."""
    head, sep, rest = source.partition("for x, y in loader:\n")
    if not sep:
        raise ValueError("no `for x, y in loader:` loop in the cell")
    body, tail = [], rest.splitlines(keepends=True)
    while tail and tail[0].startswith("    "):
        body.append(tail.pop(0))
    stamp = "    _ts.append(time.perf_counter_ns())\n"
    start = "_ts = [time.perf_counter_ns()]\n"
    return head + start + sep + "".join(body) + stamp + "".join(tail)


def step_times_us(shell: Shell, source: str) -> list[float]:
    """Run ``source`` (timestamped) and return its steps' wall times in us."""
    shell.time_cell(source)
    ts = shell.ip.user_ns["_ts"]
    return [(b - a) / 1e3 for a, b in itertools.pairwise(ts)]


def loop_split(
    shell: Shell, rows: list[Result], name: str, cells: dict[str, str], rounds: int
) -> None:
    """Where the in-loop extra lies: once per cell (the first window's steps) or every step.

    Each step's wall time, plain and ``%%gpucheck``, interleaved rounds; per step index the
    median over rounds. The window's steps (0 to WINDOW_STEPS - 1) add a fixed time whatever the
    loop's length; the lean steps after them add a share of each step: the ratio a loop
    approaches as it grows. The 300-step in-loop ratio holds both, the first at 1/300.
    """
    calls = {v: functools.partial(step_times_us, shell, timestamped(c)) for v, c in cells.items()}
    for call in calls.values():  # warm
        call()
    runs = interleave(calls, rounds)
    n = min(len(r) for side in runs.values() for r in side)
    med = {v: [median([r[i] for r in runs[v]]) for i in range(n)] for v in ("plain", "gpucheck")}
    extra = [g - p for g, p in zip(med["gpucheck"], med["plain"], strict=True)]
    window_ms = sum(extra[:WINDOW_STEPS]) / 1e3
    lean = [
        g / p
        for g, p in zip(med["gpucheck"][WINDOW_STEPS:], med["plain"][WINDOW_STEPS:], strict=True)
        if p > 0
    ]
    step_ratio = median(lean) if lean else float("nan")
    lo, hi = iqr(lean) if lean else (float("nan"), float("nan"))
    plain_step = median(med["plain"][WINDOW_STEPS:]) if n > WINDOW_STEPS else float("nan")
    how = (
        f"per step index, the median wall time over {rounds} interleaved rounds (perf_counter_ns "
        f"at each step's end, both cells); {n} steps"
    )
    emit(
        Result(
            f"overhead.{name}.gpucheck.window_ms",
            f"{name}: the first window's steps (0-{WINDOW_STEPS - 1}), extra time once per cell",
            window_ms,
            f"{window_ms:.1f} ms wall ({100 * window_ms * 1e3 / max(1e-9, sum(med['plain'])):.1f}% "
            f"of this {sum(med['plain']) / 1e3:.0f} ms loop)",
            "",
            None,
            how + f"; sum over steps 0-{WINDOW_STEPS - 1} of (measured - plain)",
        ),
        rows,
    )
    emit(
        Result(
            f"overhead.{name}.gpucheck.per_step",
            f"{name}: lean steps (from step {WINDOW_STEPS}), in-loop ratio per step",
            step_ratio,
            f"{fmt_ratio(step_ratio)} wall (IQR over steps {lo:.3f}-{hi:.3f}; plain step "
            f"{plain_step:.0f} us)",
            f"<= {CELL_BUDGET:.2f}",
            step_ratio <= CELL_BUDGET,
            how + "; median over the lean steps of (measured / plain)",
        ),
        rows,
    )


# ------------------------------------------------------------------------------ shapes


def shape_cell(shape: Any, variant: str) -> str:
    """``shape``'s cell for ``variant`` (plain or gpucheck), its loop timed inside the cell."""
    timed_open = "_t0 = time.perf_counter(); _c0 = time.process_time()\n"
    timed_close = "_loop = (time.perf_counter() - _t0, time.process_time() - _c0)\n"
    body = shape.make + timed_open + shape.loop.strip("\n") + "\n" + timed_close
    return ("%%gpucheck\n" + body) if variant == "gpucheck" else body


def run_shapes(
    shell: Shell, rows: list[Result], rounds: int, quick: bool, only: str | None
) -> None:
    """The loop shapes users bring (overhead_shapes.py): %%gpucheck vs plain, same budget."""
    import importlib.util

    from overhead_shapes import COMMON, SHAPES

    for shape in SHAPES:
        if only and shape.name not in only.split(",") and "shapes" not in only.split(","):
            continue
        label = f"{shape.name}: {shape.label}, %%gpucheck (default)"
        reason = ""
        if quick:
            reason = "skipped in --quick mode (framework imports and compiles take minutes here)"
        elif missing := [m for m in shape.needs if importlib.util.find_spec(m) is None]:
            reason = f"`import {missing[0]}` fails in this environment"
        else:
            try:
                shell._run(COMMON + shape.setup)
                for v in ("plain", "gpucheck"):  # warm: imports, compiles, first profiler start
                    shell.time_cell(shape_cell(shape, v))
            except RuntimeError as exc:
                reason = f"set-up failed: {exc}"
        if reason:
            for part, what in (("loop", "in-loop"), ("run", "cell up to its end")):
                emit(
                    Result(
                        f"overhead.{shape.name}.gpucheck.{part}",
                        f"{label}: {what} ratio",
                        None,
                        f"not available: {reason}",
                        "",
                        None,
                        "-",
                    ),
                    rows,
                )
            continue
        runs = interleave(
            {
                v: functools.partial(shell.time_cell, shape_cell(shape, v))
                for v in ("plain", "gpucheck")
            },
            rounds,
        )
        plain_loop = median([t.loop_cpu_s for t in runs["plain"]])
        print(f"# {shape.name}: plain loop median {plain_loop * 1e3:.0f} ms CPU", flush=True)
        _ratio_rows(
            rows,
            shape.name,
            "gpucheck",
            runs["plain"],
            runs["gpucheck"],
            budget=CELL_BUDGET,
            label=label,
        )
        if "for x, y in loader:" in shape.loop:
            cells = {v: shape_cell(shape, v) for v in ("plain", "gpucheck")}
            loop_split(shell, rows, shape.name, cells, max(rounds, 11))


# ------------------------------------------------------------------------------ main


def _time_variant(shell: Shell, variant: str, workload: str, steps: int) -> CellTiming:
    return shell.time_cell(cell_source(variant, workload, steps))


def _ratio_rows(
    rows: list[Result],
    workload: str,
    variant: str,
    base: list[CellTiming],
    runs: list[CellTiming],
    *,
    budget: float | None,
    label: str,
    how_extra: str = "",
) -> None:
    """Three rows: in-loop, the cell up to its end, the whole run_cell with the report.

    Each is the process-CPU ratio with the wall ratio beside. The budget judges the loop and the
    cell up to its end; the report built after the cell has a budget of its own (report_latency,
    <= 0.5 s), so the whole-cell row is printed for information only.
    """
    n = len(base)
    parts = (
        ("loop", "in-loop", "inside the cell around the loop", True),
        (
            "run",
            "cell up to its end (report excluded)",
            "around run_cell minus the magic's report + display time (its CellCost marks)",
            True,
        ),
        ("cell", "whole cell with the report", "around run_cell", False),
    )
    for part, what, where, judged in parts:
        cpu = paired_ratios(
            [getattr(t, f"{part}_cpu_s") for t in runs], [getattr(t, f"{part}_cpu_s") for t in base]
        )
        wall = paired_ratios(
            [getattr(t, f"{part}_s") for t in runs], [getattr(t, f"{part}_s") for t in base]
        )
        m, mw = median(cpu), median(wall)
        lo, hi = iqr(cpu)
        emit(
            Result(
                figure=f"overhead.{workload}.{variant}.{part}",
                label=f"{label}: {what} ratio",
                measured=m,
                display=f"{fmt_ratio(m)} CPU (IQR {lo:.3f}-{hi:.3f}); wall {fmt_ratio(mw)}",
                budget=f"<= {budget:.2f}" if budget is not None and judged else "",
                passed=(m <= budget) if budget is not None and judged else None,
                how=(
                    f"median of {n} paired ratios vs plain, interleaved rounds; process_time "
                    f"{where} (wall: perf_counter, same places){how_extra}"
                ),
            ),
            rows,
        )


def main(argv: Sequence[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if len(argv) >= 2 and argv[0] == "--worker":
        real_stdout = sys.stdout
        sys.stdout = sys.stderr  # nothing but protocol lines on the pipe
        worker_main(argv[1], real_stdout)
        return 0
    args = parse_args(__doc__ or "", argv)
    quick = args.quick
    steps = 30 if quick else 300
    tiny_steps = 150 if quick else 1500
    # Rounds are few on purpose: this 2-core machine is shared (load ~10) and the whole
    # benchmark should stay within minutes; the IQR printed with each figure shows the spread.
    rounds = args.rounds or (1 if quick else 5)
    tiny_rounds = args.rounds or (1 if quick else 7)
    rows: list[Result] = []
    t_start = time.perf_counter()
    print(
        f"# load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True
    )

    only = os.environ.get("GPUCHECK_OVERHEAD_ONLY")  # e.g. "long": one workload, no peers
    if only == "closure":  # the closure wrapper's row alone (no shell, no cells)
        closure_rows(rows, 30 if quick else 200, args.rounds or (2 if quick else 9))
        print(f"# overhead benchmark took {time.perf_counter() - t_start:.0f} s", flush=True)
        write_results(args.json_path, rows)
        return 0

    os.environ.setdefault("KINETO_LOG_LEVEL", "6")
    shell = Shell()
    workloads: list[tuple[str, int]] = [("mlp", steps), ("cnn", steps), ("tiny", tiny_steps)]
    workloads.append(("long", 2_000 if quick else LONG_STEPS))
    if only:
        workloads = [w for w in workloads if w[0] in only.split(",")]
    variants = ("plain", "gpucheck", "torch.profiler")
    labels = {
        "gpucheck": "%%gpucheck (default)",
        "full": "%%gpucheck -s N -w 0 (every step profiled)",
        "torch.profiler": "torch.profiler default, around the loop",
    }
    results: dict[str, dict[str, list[CellTiming]]] = {}
    for workload, n in workloads:
        for v in variants:  # warm: Kineto init, allocator, DataLoader, the report's imports
            shell.time_cell(cell_source(v, workload, n))
        r = (
            tiny_rounds
            if workload == "tiny"
            else (min(rounds, 3) if workload == "long" else rounds)
        )
        calls: dict[str, Callable[[], CellTiming]] = {
            v: functools.partial(_time_variant, shell, v, workload, n) for v in variants
        }
        results[workload] = interleave(calls, r)
        if workload == "long":
            continue  # every one of 20,000 steps profiled is not a mode anyone runs
        # Full-profile mode costs seconds per cell (every step exported and analysed): one pair.
        full = interleave(
            {v: functools.partial(_time_variant, shell, v, workload, n) for v in ("plain", "full")},
            1,
        )
        results[workload]["full"] = full["full"]
        results[workload]["plain_for_full"] = full["plain"]
    for workload, n in workloads:
        runs = results[workload]
        plain_loop = median([t.loop_cpu_s for t in runs["plain"]])
        fixed = median(
            paired_diffs(
                [t.run_cpu_s - t.loop_cpu_s for t in runs["gpucheck"]],
                [t.run_cpu_s - t.loop_cpu_s for t in runs["plain"]],
            )
        )
        report = median([t.report_cpu_s for t in runs["gpucheck"]])
        print(
            f"# {workload}: {n} steps, plain loop median {plain_loop * 1e3:.0f} ms CPU "
            f"({plain_loop / n * 1e6:.0f} us/step; wall {median([t.loop_s for t in runs['plain']]) * 1e3:.0f} ms); "
            f"%%gpucheck's cost outside the loop: {fixed * 1e3:.1f} ms CPU (capture start, close), "
            f"then its report and display {report * 1e3:.0f} ms CPU",
            flush=True,
        )
        for v in ("gpucheck", "full", "torch.profiler"):
            if v not in runs:
                continue
            budget = (
                (TINY_BUDGET if workload in TINY_WORKLOADS else CELL_BUDGET)
                if v == "gpucheck"
                else None
            )
            base = runs["plain_for_full"] if v == "full" else runs["plain"]
            _ratio_rows(
                rows,
                workload,
                v,
                base,
                runs[v],
                budget=budget,
                label=f"{workload} {n} steps, {labels[v]}",
            )
    if "mlp" in results:
        mlp = {v: cell_source(v, "mlp", steps) for v in ("plain", "gpucheck")}
        loop_split(shell, rows, "mlp", mlp, args.rounds or (1 if quick else 11))
    run_shapes(shell, rows, args.rounds or 5, quick, only)
    if "tiny" not in results:
        print(f"# overhead benchmark took {time.perf_counter() - t_start:.0f} s", flush=True)
        write_results(args.json_path, rows)
        return 0
    tiny = results["tiny"]
    per_step = [
        d / tiny_steps * 1e6
        for d in paired_diffs(
            [t.loop_cpu_s for t in tiny["gpucheck"]], [t.loop_cpu_s for t in tiny["plain"]]
        )
    ]
    per_step_wall = [
        d / tiny_steps * 1e6
        for d in paired_diffs(
            [t.loop_s for t in tiny["gpucheck"]], [t.loop_s for t in tiny["plain"]]
        )
    ]
    m = median(per_step)
    emit(
        Result(
            "overhead.tiny.gpucheck.per_step_us",
            "tiny loop: %%gpucheck's added time per step, in the loop",
            m,
            f"{m:.1f} us/step CPU (wall {median(per_step_wall):.1f} us/step)",
            f"< {HOOK_BUDGET_US:.0f} us",
            m < HOOK_BUDGET_US,
            f"median of {len(per_step)} paired (gpucheck - plain) in-loop process_time differences / "
            f"{tiny_steps} steps; includes the profiler window's 7 steps and the sampler thread",
        ),
        rows,
    )

    hooks = hook_cost_us(tiny_steps, args.rounds or (2 if quick else 7))
    for mode, what in (
        ("lean", "lean mode (after the window)"),
        ("timing", "timing mode (warm-up + window)"),
    ):
        d = median(paired_diffs(hooks[mode], hooks["none"]))
        emit(
            Result(
                f"overhead.hooks.{mode}_us",
                f"step-clock hooks, {what}: cost per step",
                d,
                f"{d:.2f} us/step (loop {median(hooks['none']):.0f} us/step)",
                f"< {HOOK_BUDGET_US:.0f} us",
                d < HOOK_BUDGET_US,
                f"median of {len(hooks['none'])} paired thread_time differences, {tiny_steps}-step tiny loop, "
                "hooks installed directly (no profiler, no sampler)",
            ),
            rows,
        )

    closure_rows(rows, 30 if quick else 200, args.rounds or (2 if quick else 9))

    # Peers: each in its own venv, against a plain twin process of that venv.
    peer_rounds = args.rounds or 3
    for peer in ("traceml", "gpuprof"):
        if quick:
            pr = PeerRun(peer, "skipped in --quick mode (own venv, two processes)")
        else:
            pr = run_peer(peer, [w for w in workloads if w[0] != "long"], peer_rounds, install=True)
        for workload, n in workloads:
            if workload == "long":
                continue
            label = f"{workload} {n} steps, {peer} (own venv, vs plain twin process)"
            if pr.timings is None:
                for part, what in (("loop", "in-loop"), ("cell", "whole cell")):
                    emit(
                        Result(
                            f"overhead.{workload}.{peer}.{part}",
                            f"{label}: {what} ratio",
                            None,
                            f"not available: {pr.reason}",
                            "",
                            None,
                            "-",
                        ),
                        rows,
                    )
                continue
            runs = pr.timings[workload]
            _ratio_rows(
                rows,
                workload,
                peer,
                runs["plain"],
                runs[peer],
                budget=None,
                label=label,
                how_extra="; two processes driven alternately",
            )
    print(f"# overhead benchmark took {time.perf_counter() - t_start:.0f} s", flush=True)
    write_results(args.json_path, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
