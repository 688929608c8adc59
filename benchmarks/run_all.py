"""Run every performance-budget benchmark and print one table (figure, budget, measured, verdict).

Usage::

    python benchmarks/run_all.py            # full runs (the peers' venvs are made once, cached)
    python benchmarks/run_all.py --quick    # seconds-to-minutes smoke run, no peers
    python benchmarks/run_all.py --markdown # the table as Markdown (for benchmarks/README.md)
    python benchmarks/run_all.py --only overhead memory

Each benchmark runs in its own subprocess, one after the other (never two at once: they would
disturb each other's timings), writing its rows as JSON; the table is printed at the end with
the machine's load average before each benchmark. Exit status 0 whether budgets pass or not
(a benchmark is a measurement, not a test), 1 if a benchmark itself crashed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import BENCH_DIR, REPO_ROOT, Result, read_results

BENCHMARKS: tuple[str, ...] = (
    "overhead",
    "memory",
    "report_latency",
    "trace_speed",
    "sampler_cost",
    "fixed_cost",
)


def _table(rows: Sequence[Result], markdown: bool) -> str:
    verdicts = {True: "PASS", False: "FAIL", None: "-"}
    header = ("figure", "budget", "measured", "verdict", "what / how measured")
    body = [
        (r.figure, r.budget or "-", r.display, verdicts[r.passed], f"{r.label} ({r.how})")
        for r in rows
    ]
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += [
            "| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in body
        ]
        return "\n".join(lines)
    short = [(*row[:4], row[4].split(" (")[0]) for row in body]
    widths = [max(len(h), *(len(row[i]) for row in short)) for i, h in enumerate(header[:4])]
    out = ["  ".join(h.ljust(w) for h, w in zip(header[:4], widths, strict=True)) + "  what"]
    out.append("  ".join("-" * w for w in widths) + "  ----")
    out += [
        "  ".join(c.ljust(w) for c, w in zip(row[:4], widths, strict=True)) + "  " + row[4]
        for row in short
    ]
    return "\n".join(out)


def _provenance() -> str:
    """HEAD commit and whether the package's files differ from it (the shared tree is live)."""

    def git(*args: str) -> str:
        proc = subprocess.run(
            ["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, check=False
        )
        return proc.stdout.strip() if proc.returncode == 0 else "?"

    dirty = [
        line for line in git("status", "--short", "--", "gpu_notebook").splitlines() if line.strip()
    ]
    state = (
        f"{len(dirty)} file(s) under gpu_notebook/ differ from it"
        if dirty
        else "gpu_notebook/ clean"
    )
    return f"commit {git('rev-parse', '--short', 'HEAD')} ({git('log', '-1', '--format=%ci')}), {state}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="every benchmark in --quick mode")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    parser.add_argument("--only", nargs="+", choices=BENCHMARKS, default=None)
    args = parser.parse_args(argv)
    rows: list[Result] = []
    crashed: list[str] = []
    t0 = time.perf_counter()
    # The working tree is shared and changes under us: say which code was measured.
    print(f"## code: {_provenance()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="gpucheck-bench-") as tmp:
        for name in args.only or BENCHMARKS:
            out = Path(tmp) / f"{name}.json"
            cmd = [sys.executable, str(BENCH_DIR / f"{name}.py"), "--json", str(out)]
            if args.quick:
                cmd.append("--quick")
            print(f"## {name} (load average {os.getloadavg()[0]:.1f})", flush=True)
            b0 = time.perf_counter()
            proc = subprocess.run(cmd, cwd=REPO_ROOT, check=False)
            print(
                f"## {name}: exit {proc.returncode} after {time.perf_counter() - b0:.0f} s",
                flush=True,
            )
            if proc.returncode != 0 or not out.exists():
                crashed.append(name)
                continue
            rows.extend(read_results(out))
    print(f"## code at the end: {_provenance()}")
    print()
    print(_table(rows, args.markdown))
    print(
        f"\n{sum(r.passed is True for r in rows)} budgets met, {sum(r.passed is False for r in rows)} missed, "
        f"{len(crashed)} benchmark(s) crashed{': ' + ', '.join(crashed) if crashed else ''}; "
        f"{time.perf_counter() - t0:.0f} s in all"
    )
    return 1 if crashed else 0


if __name__ == "__main__":
    sys.exit(main())
