"""The product end to end on a GPU: ``gpucheck run`` (and ``--try-fixes``) on bundled CUDA scripts.

``gpu_check.py`` measures known loops through the capture's Python API; this runs what a user
runs, a script under the command line, and records for each script in ``gpu_scripts/``:

* ``<script>.report.json``, ``<script>.trace.json.gz`` and ``<script>.log`` (its printed report),
* with ``--try-fixes N``: the fixes the report offered, each tried on a private copy of the
  script and measured against it (``TryFixes`` in the report JSON),
* ``summary.json``: per script its verdict, findings (rule, severity, gain range) and, per tried
  fix, its measured speedup and outcome.

Usage::

    python benchmarks/gpu_cli_check.py --out DIR [--try-fixes 30]   # on a CUDA machine
    python benchmarks/gpu_cli_check.py --out DIR --dry-run           # tiny, on the CPU

Only the standard library: the scripts run in fresh processes, as a user's would.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent
SCRIPTS = HERE / "gpu_scripts"
# Steps per script: enough for the warm-up, the profiled window and a steady run after it.
STEPS = {"gpu_bound": 120, "gpu_train": 200}
DRY_STEPS = 12


def _run_one(
    script: Path, steps: int, out: Path, try_fixes: int | None, budget_s: float, timeout_s: float
) -> dict[str, Any]:
    name = script.stem
    report, trace, log = (
        out / f"{name}.report.json",
        out / f"{name}.trace.json.gz",
        out / f"{name}.log",
    )
    cmd = [
        sys.executable,
        "-m",
        "gpu_notebook",
        "run",
        "--json",
        str(report),
        "--trace",
        str(trace),
    ]
    if try_fixes is not None:
        cmd += ["--try-fixes", str(try_fixes), "--try-budget", str(budget_s), "--try-rounds", "2"]
    cmd += [str(script), str(steps)]
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])
    )
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout_s, env=env, cwd=out
        )
        rc, text = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as exc:
        rc, text = None, f"timed out after {timeout_s:.0f} s\n{exc.stdout or ''}{exc.stderr or ''}"
    log.write_text(text)
    entry: dict[str, Any] = {"script": name, "rc": rc, "elapsed_s": time.perf_counter() - t0}
    if not report.is_file():
        entry["error"] = text[-2000:]
        return entry
    data = json.loads(report.read_text())
    entry["verdict"] = data["verdict"]["category"]
    entry["headline"] = data["verdict"]["headline"]
    # torch up to 2.11 joins a pinned persistent loader's workers at exit one by one, 5 s each
    # (pytorch#81794): what a workers fix's run costs past its result depends on it.
    entry["torch"] = (data.get("run") or {}).get("env", {}).get("torch_version")
    entry["findings"] = [
        {
            "rule": f["rule_id"],
            "severity": f["severity"],
            "fix": f.get("fix_id"),
            "gain_low": f.get("gain_low"),
            "gain_high": f.get("gain_bound"),
        }
        for f in data.get("findings", [])
    ]
    tried = data.get("try_fixes") or {}
    entry["try_fixes"] = {
        "trials": [
            {k: t.get(k) for k in ("fix_id", "verdict", "speedup", "speedup_low", "speedup_high")}
            | {"predicted": [t.get("predicted_low"), t.get("predicted_bound")]}
            for t in tried.get("trials", [])
        ],
        "notes": tried.get("notes", []),
        # Every trial run as it went (how it ended, its limit, first step, warm-up, steps, exit,
        # where its threads were at its limit, its output's last lines where it did not end as
        # planned): what tells a slow fix from a run lost to its start-up, its limit or its exit.
        "runs": tried.get("runs", []),
    }
    return entry


def _run_lines(runs: list[dict[str, Any]]) -> list[str]:
    """One line per trial run: its arm, how it ended, and where its time went (seconds)."""

    def t(value: object) -> str:
        return f"{value:.1f}" if isinstance(value, (int, float)) else "-"

    lines = []
    for n, r in enumerate(runs, 1):
        line = (
            f"run {n} {r.get('arm') or 'script'}: {r.get('ended')} (limit {t(r.get('limit_s'))}"
            f"{', budget' if r.get('budget_limited') else ''}), wall {t(r.get('wall_s'))}, "
            f"first step {t(r.get('first_step_s'))}, warm {t(r.get('warm_s'))}, "
            f"{r.get('steps_timed')}/{r.get('steps_asked')} steps, exit {t(r.get('exit_s'))}"
            f"{' killed' if r.get('exit_killed') else ''}, code {r.get('exit_code')}"
        )
        lines.append(line)
        lines += [f"    {s}" for s in (r.get("stacks") or [])[:2]]
        lines += [f"    | {s}" for s in (r.get("output_tail") or [])[-2:]]
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpu_cli_check", description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="output folder")
    parser.add_argument("--dry-run", action="store_true", help=f"{DRY_STEPS} steps a script")
    parser.add_argument("--try-fixes", type=int, help="gpucheck run --try-fixes N")
    parser.add_argument("--try-budget", type=float, default=90.0, help="per script (s)")
    parser.add_argument("--timeout", type=float, default=200.0, help="per script (s)")
    parser.add_argument("--script", action="append", choices=sorted(STEPS), help="default: all")
    args = parser.parse_args(argv)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    entries = []
    for name in args.script or sorted(STEPS):
        steps = DRY_STEPS if args.dry_run else STEPS[name]
        entry = _run_one(
            SCRIPTS / f"{name}.py", steps, out, args.try_fixes, args.try_budget, args.timeout
        )
        entries.append(entry)
        tried = ", ".join(
            f"{t['fix_id']} {t['verdict']}" + (f" x{t['speedup']:.2f}" if t.get("speedup") else "")
            for t in entry.get("try_fixes", {}).get("trials", [])
        )
        print(
            f"{name}: {entry.get('verdict', 'no report')} (rc {entry['rc']}, "
            f"{entry['elapsed_s']:.0f} s){'; tried: ' + tried if tried else ''}",
            flush=True,
        )
        for line in _run_lines(entry.get("try_fixes", {}).get("runs", [])):
            print(f"  {line}", flush=True)
    (out / "summary.json").write_text(json.dumps({"scripts": entries}, indent=1))
    return 0 if all(e["rc"] == 0 for e in entries) else 1


if __name__ == "__main__":
    sys.exit(main())
