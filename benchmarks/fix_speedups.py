"""Predicted gain bound vs measured speedup of the generated fix, for every CPU-runnable scenario.

For each scenario of ``tests/scenarios/catalog.py`` this runs the cell under ``%%gpucheck`` in a
real IPython shell, builds the findings as the report does (``run_rules`` + ``attach_fixes``),
takes the top finding's proposed cell (its ``source_after``), and then measures original and
fixed cell in interleaved rounds (the order alternates each round; a scenario's setup cell is
rerun before each run so a fix that rebinds a live object does not leak into the next run).

Measured speedup = median over rounds of ``compare(before, after).speedup``: steady-state
throughput (samples/s from the mean step time, warm-up steps excluded, so DataLoader worker
start-up is not counted), both runs under the same capture. The predicted bound is the top
finding's Amdahl bound from the first measurement. A fix usually falls short of its bound (the
bound assumes the removed phase costs nothing afterwards). It can exceed it when the removed work
also slowed the rest of the step: on 2 cores a per-step print of tensors made forward, backward
and the optimizer ~25% slower (caches), which no phase share can show; the table says so.

Usage::

    python benchmarks/fix_speedups.py                  # all scenarios, 5 rounds (~2-3 min on 2 cores)
    python benchmarks/fix_speedups.py --rounds 3 slow_getitem tiny_steps
    python benchmarks/fix_speedups.py --json /tmp/fix_speedups.json
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ipython_shell  # noqa: E402 -- after the path it is found on


@dataclass(frozen=True)
class Row:
    scenario: str
    planted: str | None
    verdict: str
    top_finding: str | None
    fix_id: str | None
    predicted_bound: float | None
    measured_speedup: float | None  # median over rounds, every steady step
    spread: tuple[float, float] | None  # min, max over rounds
    profiled_speedup: float | None  # median over rounds, profiled steps only (what the bound saw)
    rounds: int
    note: str


def _shell() -> Any:
    from tests.scenarios.catalog import COMMON_SETUP

    shell = ipython_shell()
    shell.run_cell("%load_ext gpu_notebook")
    res = shell.run_cell(COMMON_SETUP)
    if not res.success:
        raise SystemExit(f"setup failed: {res.error_in_exec}")
    return shell


def _measure(shell: Any, setup: str, cell: str, options: str) -> Any:
    """One run of ``cell`` under %%gpucheck; the report (output of the cell swallowed)."""
    if setup:
        res = shell.run_cell(setup)
        if not res.success:
            raise RuntimeError(f"scenario setup failed: {res.error_in_exec}")
    shell.user_ns.pop("_fix_bench_rep", None)
    with contextlib.redirect_stdout(io.StringIO()):
        res = shell.run_cell(f"%%gpucheck -q -o _fix_bench_rep {options}\n{cell}")
    if not res.success:
        raise RuntimeError(f"cell failed: {res.error_in_exec}")
    return shell.user_ns["_fix_bench_rep"]


def run_scenario(shell: Any, scenario: Any, rounds: int) -> Row:
    from gpu_notebook.report.compare import compare
    from gpu_notebook.rules import run_rules
    from gpu_notebook.words.proposals import attach_fixes

    first = _measure(shell, scenario.setup, scenario.cell, scenario.options)
    findings = attach_fixes(
        run_rules(first.run, first.analysis, first.verdict, namespace=shell.user_ns),
        first.run.cell_source,
        namespace=shell.user_ns,
    )
    top = findings[0] if findings else None
    base = Row(
        scenario=scenario.name,
        planted=scenario.planted,
        verdict=first.verdict.category,
        top_finding=top.rule_id if top else None,
        fix_id=top.fix_id if top else None,
        predicted_bound=top.gain_bound if top else None,
        measured_speedup=None,
        spread=None,
        profiled_speedup=None,
        rounds=0,
        note="",
    )
    if top is None:
        return _replace(base, note="no finding")
    if top.fix_id is None or top.proposal is None:
        return _replace(base, note="no codemod for this finding")
    fixed = top.proposal.source_after
    if fixed is None:
        return _replace(base, note=f"fix refused: {top.proposal.refusal}")
    if not scenario.fix_shows_on_cpu:
        return _replace(base, note="fix needs a GPU to show")
    ratios: list[float] = []
    profiled: list[float] = []
    for r in range(rounds):
        order = ("before", "after") if r % 2 == 0 else ("after", "before")
        reports: dict[str, Any] = {}
        for which in order:
            cell = scenario.cell if which == "before" else fixed
            reports[which] = _measure(shell, scenario.setup, cell, scenario.options)
        speedup = compare(reports["before"], reports["after"]).speedup
        if speedup is not None:
            ratios.append(speedup)
        same_steps = _profiled_ratio(reports["before"], reports["after"])
        if same_steps is not None:
            profiled.append(same_steps)
    if not ratios:
        return _replace(base, rounds=rounds, note="speedup not measured (no step time)")
    return _replace(
        base,
        measured_speedup=float(statistics.median(ratios)),
        spread=(min(ratios), max(ratios)),
        profiled_speedup=float(statistics.median(profiled)) if profiled else None,
        rounds=len(ratios),
        note="within bound"
        if base.predicted_bound is None or statistics.median(ratios) <= base.predicted_bound
        else "above the bound (the removed work also slowed the rest: caches, GC)",
    )


def _profiled_ratio(before: Any, after: Any) -> float | None:
    """Throughput ratio over the profiled (timed) steady steps only: the steps the bound saw."""

    def per_sample_s(report: Any) -> float | None:
        steps = [
            s
            for s in report.run.steps.steps
            if s.timed and s.index >= report.run.window.warmup_steps
        ]
        batch = report.analysis.step_stats.batch_size or 1
        return sum(s.duration_s for s in steps) / len(steps) / batch if steps else None

    b, a = per_sample_s(before), per_sample_s(after)
    return b / a if b and a else None


def _replace(row: Row, **changes: Any) -> Row:
    return Row(**{**asdict(row), **changes})


def _fmt(x: float | None, suffix: str = "x") -> str:
    return "-" if x is None else ("inf" if x == float("inf") else f"{x:.2f}{suffix}")


def print_table(rows: list[Row]) -> None:
    head = (
        "scenario",
        "verdict",
        "top finding",
        "fix",
        "predicted",
        "measured",
        "min..max",
        "profiled",
        "note",
    )
    lines = [
        (
            r.scenario,
            r.verdict,
            r.top_finding or "-",
            r.fix_id or "-",
            _fmt(r.predicted_bound),
            _fmt(r.measured_speedup),
            f"{r.spread[0]:.2f}..{r.spread[1]:.2f}" if r.spread else "-",
            _fmt(r.profiled_speedup),
            r.note,
        )
        for r in rows
    ]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *lines, strict=True)]
    for line in (head, *lines):
        print("  ".join(str(x).ljust(w) for x, w in zip(line, widths, strict=True)).rstrip())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("scenarios", nargs="*", help="scenario names (default: every planted one)")
    parser.add_argument(
        "--rounds", type=int, default=5, help="interleaved before/after rounds (default 5)"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the rows as JSON here")
    args = parser.parse_args(argv)

    from tests.scenarios.catalog import BY_NAME, SCENARIOS

    unknown = [n for n in args.scenarios if n not in BY_NAME]
    if unknown:
        parser.error(f"unknown scenario(s): {', '.join(unknown)}; known: {', '.join(BY_NAME)}")
    chosen = [BY_NAME[n] for n in args.scenarios] or [s for s in SCENARIOS if s.planted is not None]
    shell = _shell()
    rows = []
    for scenario in chosen:
        row = run_scenario(shell, scenario, args.rounds)
        print(f"  {row.scenario}: {row.top_finding} predicted {_fmt(row.predicted_bound)}, "
              f"measured {_fmt(row.measured_speedup)} ({row.note})", flush=True)  # fmt: skip
        rows.append(row)
    print()
    print_table(rows)
    print(
        "\nmeasured = median over rounds of the steady-state throughput ratio (fixed / original), "
        "both under %%gpucheck on this CPU; profiled = the same over the profiled steps only, "
        "the steps the predicted bound was computed from"
    )
    if args.json is not None:
        args.json.write_text(json.dumps([asdict(r) for r in rows], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
