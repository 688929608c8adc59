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
``tests/data/gpu/README.md``). The scenarios (workloads, fixes, sizes) are in
``gpu_check_workloads.py``; this script measures them, writes the files and the summary table.

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
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

# The scenarios live next to this script (benchmarks/ is not a package): run as a script or loaded
# from its path by the tests, it finds them the same way.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_check_workloads import (
    DRY,
    FULL,
    SCENARIO_NAMES,
    SCENARIOS,
    Context,
    Fix,
    Scenario,
    Workload,
    sync,
    torch_module,
)

if TYPE_CHECKING:
    from gpu_notebook.records import Report, Run

REPO_ROOT = Path(__file__).resolve().parents[1]
EXIT_OK, EXIT_SCENARIO_FAILED, EXIT_USAGE = 0, 1, 2
MIB = 1 << 20
# Profile few steps: the traces are committed as fixtures and must stay small (a few MB in all).
WARMUP_STEPS, PROFILE_STEPS, SAMPLE_INTERVAL_S = 2, 3, 0.2
# The capture's window needs warm-up + profiled steps and a few more so the run is not all window.
MIN_STEPS = WARMUP_STEPS + PROFILE_STEPS + 7


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
    torch = torch_module()
    start_alloc = 0
    if ctx.cuda:
        torch.cuda.reset_peak_memory_stats()
        start_alloc = int(torch.cuda.memory_allocated())
    sync(ctx)
    t0 = time.perf_counter()
    workload.run(steps)
    sync(ctx)
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
    sync(ctx)
    t_start = time.perf_counter()
    session = CaptureSession(options, source)
    with session:
        t0 = time.perf_counter()
        workload.run(steps)
        sync(ctx)
        steps_s = time.perf_counter() - t0
    # A folder of its own: the window's file keeps its name, and a later capture (a repeat, a
    # fix) would otherwise overwrite the trace this capture's report was built from.
    run = session.finish("ok", None, scratch=tempfile.mkdtemp(prefix="capture-", dir=_scratch()))
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
    torch = torch_module()
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
        # Some GPU events without timestamps (GpuTimeline.partial): the share is a lower bound.
        "gpu_busy_partial": gpu is not None and gpu.partial,
        "nvml_util_mean_pct": report.analysis.utilization.gpu_util_mean_pct,
        # NVML's mean over the ticks inside the steps (None: too few there): the loop's own.
        "nvml_util_steps_pct": _nvml_in_steps(report),
        "gpu_memory_peak_bytes": report.analysis.utilization.gpu_memory_peak_bytes,
        "step_median_s": report.analysis.step_stats.median_s,
        "window_status": report.run.window.status,
        "phase": phase,
        "phase_share": share,
        "gain_bound": amdahl_bound(share) if share is not None and share < 1 else None,
    }


def _nvml_in_steps(report: Report) -> float | None:
    steps = report.analysis.utilization.in_steps
    return steps.gpu_util_mean_pct if steps is not None and steps.read else None


def _fmt_busy(e: dict[str, Any]) -> str:
    """The busy column: "-" where no timeline measured it, ">=54% partial" where some GPU
    events carry no timestamps (the share of the clocked ones is a lower bound)."""
    share = e["gpu_busy_share"]
    if share is not None and e.get("gpu_busy_partial"):
        return f">={_fmt_share(share)} partial"
    return _fmt_share(share)


def _fmt_nvml(e: dict[str, Any]) -> str:
    """NVML inside the steps, the whole run's mean beside it ("87% (run 33%)")."""
    steps = e.get("nvml_util_steps_pct")
    if steps is None:
        return _fmt_pct(e["nvml_util_mean_pct"])
    return f"{_fmt_pct(steps)} (run {_fmt_pct(e['nvml_util_mean_pct'])})"


def _stated(report: Report, rule: str | None) -> dict[str, Any] | None:
    """The range the baseline's finding ``rule`` stated for its fix (None: no such finding, or
    it stated none): the product's claim the measured speedup is held against, beside the kit's
    own Amdahl bound over the traced share (``gain_bound``), which the product's bound is not
    (it also reads the run's unprofiled steps)."""
    found = next((f for f in report.findings if f.rule_id == rule), None) if rule else None
    if found is None or found.gain_bound is None:
        return None
    return {
        "rule": found.rule_id,
        "fix_id": found.fix_id,
        "severity": found.severity,
        "low": found.stated_low,
        "bound_low": found.bound_low,
        "bound": found.gain_bound,
        "high": found.stated_high,
    }


def _environment(ctx: Context, run: Run, args: argparse.Namespace) -> dict[str, Any]:
    from gpu_notebook.records import to_jsonable

    torch = torch_module()
    env: dict[str, Any] = {
        "run_env": to_jsonable(run.env),
        "device": ctx.device,
        "dry_run": ctx.dry_run,
        "argv": sys.argv[1:],
        "torch_version": str(torch.__version__),
        "torch_cuda_version": torch.version.cuda,
        "cudnn_version": torch.backends.cudnn.version()
        if torch.backends.cudnn.is_available()
        else None,
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
        entry.update(
            status="error", error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc()
        )
    finally:
        for w in workloads:
            w.close()
        workloads.clear()
        gc.collect()
        if ctx.cuda:
            torch_module().cuda.empty_cache()
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
    torch_module().manual_seed(0)
    base = scenario.make(ctx)
    workloads.append(base)
    base.run(s.warmup_steps)

    # Fixes that cannot or should not run here are listed with their reason, never faked.
    fixes: list[tuple[Fix, Workload]] = []
    fix_entries: dict[str, dict[str, Any]] = {}
    for fix in scenario.fixes:
        title = fix.title.format(factor=s.launch_batch_factor)
        fe: dict[str, Any] = {
            "fix_id": fix.fix_id,
            "title": title,
            "status": "ok",
            "skip_reason": None,
        }
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
            sync(ctx)
            fe["warmup_s"] = time.perf_counter() - t_warm
        except Exception as exc:  # noqa: BLE001 -- a best-effort fix (torch.compile) may fail; the baseline stands
            fe.update(status="error", error=f"{type(exc).__name__}: {exc}")
            continue
        fixes.append((fix, w))

    pressure = (
        scenario.pressure(ctx) if scenario.pressure is not None else contextlib.nullcontext({})
    )
    with pressure as pressure_info:
        if pressure_info:
            entry["pressure"] = pressure_info
        # Calibrate: the slowest variant sets the step count so every run fits the budget.
        calib = max(3, s.warmup_steps)
        step_s = max(_time_steps(ctx, w, calib)[0] / calib for w in [base, *(w for _, w in fixes)])
        n_runs = s.repeats * (2 + len(fixes)) + len(fixes)
        steps = int(
            min(s.max_steps, max(MIN_STEPS, s.scenario_budget_s / n_runs / max(step_s, 1e-6)))
        )
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
    entry["baseline_peak_extra_bytes"] = (
        max(base_t.peak_extra_bytes, default=0) if ctx.cuda else None
    )
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
        fe["stated"] = _stated(last.report, fix.rule)
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
    head = (
        "scenario",
        "verdict (expected?)",
        "GPU busy",
        "NVML util",
        "overhead",
        "fix",
        "speedup (bound)",
    )
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
                bounds = [f"<= {_fmt_x(e['gain_bound'])}"] if e.get("gain_bound") else []
                if fe.get("stated"):
                    bounds.append(f"said <= {_fmt_x(fe['stated']['high'])}")
                gain = _fmt_x(fe["speedup"]) + (f" ({', '.join(bounds)})" if bounds else "")
            else:
                gain = _one_line(fe.get("skip_reason") or f"error: {fe.get('error')}")
            lead = (
                (
                    e["scenario"],
                    f"{e['verdict']} ({mark})",
                    _fmt_busy(e),
                    _fmt_nvml(e),
                    _fmt_x(e["overhead_ratio"]),
                )
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
    torch = torch_module()
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
    print(
        f"gpu_check: {len(names)} scenario(s) on {gpu_name} ({device}), writing {out}", flush=True
    )

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
    print(
        f"\n{len(list(out.iterdir()))} files, {total_bytes / MIB:.1f} MiB in {out} "
        f"({deadline.elapsed_s():.0f} s)"
    )
    failed = [e["scenario"] for e in entries if e["status"] == "error"]
    if failed:
        print(
            f"gpu_check: failed scenario(s): {', '.join(failed)} (see summary.json)",
            file=sys.stderr,
        )
        return EXIT_SCENARIO_FAILED
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
