"""Shared helpers of the performance-budget benchmarks: interleaved repeats, paired medians, results.

Every figure on this shared, noisy 2-core machine is measured the same way: the variants being
compared run one after the other in each *round* (the order rotates from round to round, so no
variant always runs first or last), and the figure is the **median over rounds of the paired
ratio** ``variant / baseline`` taken within the round. A burst of load from another process hits
both members of a pair, so paired ratios are far steadier than a ratio of two medians; the
ratio of medians is printed beside it as a check.

Each benchmark prints one ``RESULT`` line per figure (what ``run_all.py`` and the smoke test
read) and, with ``--json PATH``, writes the same rows as JSON. Only the standard library is
imported here: the peers' and HTA's virtual environments run these helpers too.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar

__all__ = [
    "BENCH_DIR",
    "REPO_ROOT",
    "VENVS_DIR",
    "BenchArgs",
    "Result",
    "Timing",
    "emit",
    "ensure_venv",
    "fmt_ratio",
    "interleave",
    "iqr",
    "median",
    "paired_diffs",
    "paired_ratios",
    "parse_args",
    "peak_rss_bytes",
    "reset_peak_rss",
    "rss_bytes",
    "write_results",
]

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
VENVS_DIR = BENCH_DIR / "venvs"
RESULT_PREFIX = "RESULT"

T = TypeVar("T")


@dataclass(frozen=True)
class Timing:
    """One timed run: wall clock (perf_counter), this thread's CPU and the process's CPU, in s."""

    wall_s: float
    thread_cpu_s: float
    process_cpu_s: float

    @staticmethod
    def measure(fn: Callable[[], object]) -> Timing:
        w0, t0, p0 = time.perf_counter(), time.thread_time(), time.process_time()
        fn()
        return Timing(time.perf_counter() - w0, time.thread_time() - t0, time.process_time() - p0)


@dataclass(frozen=True)
class Result:
    """One figure of the performance budget, as printed in the table."""

    figure: str  # stable id, e.g. "overhead.mlp.cell"
    label: str  # what a reader sees in the table
    measured: float | None  # None: not measured (see ``display``)
    display: str  # the measured value as printed ("x1.012", "38 us", "not available: ...")
    budget: str  # "<= 1.03", "" when the row is context, not a budget
    passed: bool | None  # None: no budget on this row (context) or not measured
    how: str  # how it was measured (clock, repeats, statistic)


@dataclass(frozen=True)
class BenchArgs:
    quick: bool
    json_path: Path | None
    rounds: int | None


def parse_args(description: str, argv: Sequence[str] | None = None) -> BenchArgs:
    """The options every benchmark takes: ``--quick`` (seconds, for the smoke test), ``--json``."""
    parser = argparse.ArgumentParser(description=description.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="tiny sizes, a few rounds: a smoke run"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the result rows here")
    parser.add_argument("--rounds", type=int, default=None, help="override the number of rounds")
    ns = parser.parse_args(argv)
    return BenchArgs(quick=bool(ns.quick), json_path=ns.json, rounds=ns.rounds)


# ---------------------------------------------------------------------------------- statistics


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else math.nan


def iqr(values: Sequence[float]) -> tuple[float, float]:
    """The 25th and 75th percentiles (the spread printed beside a median)."""
    if len(values) < 2:
        v = values[0] if values else math.nan
        return v, v
    q = statistics.quantiles(values, n=4, method="inclusive")
    return float(q[0]), float(q[2])


def paired_ratios(variant: Sequence[float], baseline: Sequence[float]) -> list[float]:
    """``variant[i] / baseline[i]`` for each round (both measured side by side in round i)."""
    return [v / b for v, b in zip(variant, baseline, strict=True) if b > 0]


def paired_diffs(variant: Sequence[float], baseline: Sequence[float]) -> list[float]:
    return [v - b for v, b in zip(variant, baseline, strict=True)]


def interleave(
    variants: Mapping[str, Callable[[], T]],
    rounds: int,
    *,
    between: Callable[[], None] | None = None,
) -> dict[str, list[T]]:
    """Run every variant once per round, rotating the order each round; the results by variant."""
    names = list(variants)
    out: dict[str, list[T]] = {name: [] for name in names}
    for r in range(rounds):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            if between is not None:
                between()
            out[name].append(variants[name]())
    return out


def fmt_ratio(value: float | None) -> str:
    return "n/a" if value is None or math.isnan(value) else f"x{value:.3f}"


# ---------------------------------------------------------------------------------- memory


def rss_bytes() -> int:
    """Current resident set size of this process (Linux /proc)."""
    return _status_kib("VmRSS") * 1024


def peak_rss_bytes() -> int:
    """Peak resident set size since start or since the last ``reset_peak_rss``."""
    return _status_kib("VmHWM") * 1024


def reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS mark to the current RSS (``clear_refs`` 5, Linux >= 4.0)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _status_kib(key: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{key} not in /proc/self/status")


# ---------------------------------------------------------------------------------- results


def emit(result: Result, sink: list[Result] | None = None) -> Result:
    """Print one ``RESULT`` line (what run_all and the smoke test read) and keep the row."""
    verdict = {True: "PASS", False: "FAIL", None: "-"}[result.passed]
    budget = f" [budget {result.budget}]" if result.budget else ""
    print(
        f"{RESULT_PREFIX} {result.figure}: {result.display}{budget} {verdict} | {result.label}",
        flush=True,
    )
    if sink is not None:
        sink.append(result)
    return result


def write_results(path: Path | None, rows: Sequence[Result]) -> None:
    if path is None:
        return
    path.write_text(json.dumps([asdict(r) for r in rows], indent=1))


def read_results(path: Path) -> list[Result]:
    return [Result(**row) for row in json.loads(path.read_text())]


# ---------------------------------------------------------------------------------- venvs


def ipython_shell() -> Any:
    """A real IPython shell to run the benchmarks' cells in.

    ``InteractiveShell.instance()``, not ``IPython.testing.globalipapp.start_ipython``: the
    latter imports pytest (IPython.testing.decorators), which a peer's own virtual environment
    does not have, so every peer row read "not available: No module named 'pytest'".
    """
    from IPython.core.interactiveshell import InteractiveShell

    return InteractiveShell.instance()


def venv_python(name: str) -> Path:
    return VENVS_DIR / name / "bin" / "python"


def ensure_venv(
    name: str,
    requirements: Sequence[str],
    *,
    check_import: str,
    install: bool,
    editable_project: bool = False,
    timeout_s: float = 1800.0,
) -> tuple[Path | None, str]:
    """An isolated venv under benchmarks/venvs/NAME with ``requirements`` (cached once made).

    Returns ``(python, "")`` when ``check_import`` imports there, else ``(None, reason)``. With
    ``install=False`` (quick mode) nothing is installed. ``torch==2.13.0`` is installed first
    when asked for, so a peer's unpinned torch requirement cannot pull a CUDA build; no
    ``--system-site-packages``: each peer sees only what it installed.
    """
    python = venv_python(name)
    if python.exists() and _imports(python, check_import):
        return python, ""
    if not install:
        return None, f"venv benchmarks/venvs/{name} not set up (run without --quick once)"
    VENVS_DIR.mkdir(parents=True, exist_ok=True)
    log = VENVS_DIR / f"{name}.install.log"
    steps: list[list[str]] = []
    if not python.exists():
        steps.append([sys.executable, "-m", "venv", str(VENVS_DIR / name)])
    torch_first = [r for r in requirements if r.startswith("torch==")]
    rest = [r for r in requirements if not r.startswith("torch==")]
    for group in (torch_first, rest):
        if group:
            steps.append([str(python), "-m", "pip", "install", "-q", *group])
    if editable_project:
        steps.append([str(python), "-m", "pip", "install", "-q", "-e", str(REPO_ROOT)])
    deadline = time.monotonic() + timeout_s
    with log.open("a") as out:
        for cmd in steps:
            out.write("$ " + " ".join(cmd) + "\n")
            out.flush()
            try:
                proc = subprocess.run(
                    cmd,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    timeout=max(1.0, deadline - time.monotonic()),
                    check=False,
                )
            except subprocess.TimeoutExpired:
                return None, f"install timed out (see {log.relative_to(REPO_ROOT)})"
            if proc.returncode != 0:
                return (
                    None,
                    f"pip failed (exit {proc.returncode}; see {log.relative_to(REPO_ROOT)})",
                )
    if not _imports(python, check_import):
        return (
            None,
            f"installed but `import {check_import}` fails (see {log.relative_to(REPO_ROOT)})",
        )
    return python, ""


def _imports(python: Path, module: str) -> bool:
    proc = subprocess.run(
        [str(python), "-c", f"import {module}"],
        capture_output=True,
        timeout=300,
        check=False,
        env={**os.environ, "PYTHONNOUSERSITE": "1"},
    )
    return proc.returncode == 0
