"""The fix ledger: every fix the product offers on the programs in ``ledger_programs/``, its
predicted range against the speedup ``gpucheck run --try-fixes`` measures (interleaved runs of
the script as it is and the patched copy, each a fresh process, warm-up then N steps).

Per program: one ``gpucheck run --try-fixes N --try-budget S --json`` (the product's own
command, so the ledger measures what users get). Per offered fix: the predicted range ("L-Hx":
the finding's ``gain_low`` to its ``gain_bound``; "up to Hx" where no low end is estimated, 1x to
H; since 2026-12-02 12:30 the stated range, the model's widened by the run's margin, with the
model's beside it; since 2026-12-05 its high end widened no further than the change can give,
e.g. a batch xk at most k: ``Finding.gain_ceiling``, so "in range" reads that capped high end;
since 2026-12-07 widened by the trial's own margin, what its runs of the script as it is differed
by, "over N runs", and by the profiled run's only where they were too few: ``tryfix.base_margin``),
the measured speedup with its interval (since 2026-12-05 the median of the rounds' ratios,
so one disturbed round does not carry it out of or into the range), the verdict, and whether the measured gain lies inside the range (L or 1x to H; "under its low end" said apart). Refused fixes (no patch
offered) are listed with their reason, findings said at severity info without a fix (a fix whose
mechanism cannot help on this device, e.g. a fused CPU update of plain SGD) with theirs.
The share of offered fixes that were verified is the ledger's figure; the target is that
every offered fix is verified and inside its range.

Usage::

    python benchmarks/fix_ledger.py                   # every program (~25 min on 2 cores)
    python benchmarks/fix_ledger.py plain_input lbfgs_closure --steps 30 --rounds 3
    python benchmarks/fix_ledger.py python_items /tmp/unseen/gan.py   # a script outside too
    python benchmarks/fix_ledger.py --json /tmp/ledger.json --markdown /tmp/ledger.md
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
PROGRAMS = Path(__file__).resolve().parent / "ledger_programs"


def _run(
    program: Path, steps: int, budget_s: float, rounds: int, keep: Path | None = None
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="gpucheck-ledger-") as tmp:
        out = Path(tmp) / "r.json"
        env = dict(
            os.environ,
            PYTHONPATH=os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]),
        )
        started = time.monotonic()
        res = subprocess.run(
            [sys.executable, "-m", "gpu_notebook", "run", "-q", "--json", str(out),
             "--try-fixes", str(steps), "--try-budget", str(budget_s), "--try-rounds",
             str(rounds), str(program)],
            capture_output=True, text=True, cwd=tmp, env=env, timeout=budget_s * 3 + 600,
        )  # fmt: skip
        wall = time.monotonic() - started
        if not out.exists():
            return {"program": program.stem, "error": res.stderr[-2000:], "wall_s": wall}
        report = json.loads(out.read_text())
        if keep is not None:  # the whole report, to read its figures (margins, machine) later
            keep.mkdir(parents=True, exist_ok=True)
            (keep / f"{program.stem}.report.json").write_text(out.read_text())
            (keep / f"{program.stem}.stderr.txt").write_text(res.stderr)
    findings = report["findings"]
    refused = [
        {"fix_id": f["fix_id"], "rule_id": f["rule_id"], "reason": f["proposal"]["refusal"]}
        for f in findings
        if f.get("proposal") and f["proposal"]["source_after"] is None
    ]
    # A patch bounded within the run-to-run margin: said as small (severity info), never tried
    # (compare_samples.measurable, on the bound). One whose range only starts there is
    # uncertain: tried like any other (its trial's predicted_low says so).
    small = [
        {"fix_id": f["fix_id"], "bound": f["gain_bound"], "low": f.get("gain_low"),
         "severity": f["severity"]}
        for f in findings
        if f.get("proposal") and f["proposal"]["source_after"] is not None
        and isinstance(f["gain_bound"], (int, float)) and _judged_bound(f) <= 1.05
    ]  # fmt: skip
    # Findings said without a fix to try (severity info, no fix id): e.g. the optimizer's time
    # on CPU tensors where no fused/foreach kernel can shorten it, or per-step reads on the
    # CPU whose cost nothing measured (no bound: not offered).
    unoffered = [
        {"rule_id": f["rule_id"], "title": f["title"], "fix": f["fix"]}
        for f in findings
        if f["severity"] == "info"
        and f.get("fix_id") is None
        and f["rule_id"].startswith(("launch.", "syncs.", "input."))
    ]
    # A patch on a run too short to size it (rules._unsized): severity info, no range, never
    # tried ("not measurable on a run this short"); not an offered fix.
    unsized = [
        {"fix_id": f["fix_id"], "fix": f["fix"]}
        for f in findings
        if f.get("proposal") and f["proposal"]["source_after"] is not None
        and f["gain_bound"] is None and f["severity"] == "info"
        and f["fix"].startswith("Not sized")
    ]  # fmt: skip
    tf = report.get("try_fixes") or {}
    trials = []
    for t in tf.get("trials", []):
        bound, speedup, low = t["predicted_bound"], t["speedup"], t.get("predicted_low")
        inside = None
        if speedup is not None and bound is not None:
            inside = max(1.0, low or 1.0) <= speedup <= bound and speedup > 1.0
        trials.append({**{k: t[k] for k in ("fix_id", "rule_id", "title", "predicted_bound",
                                              "verdict", "speedup", "speedup_low", "speedup_high",
                                              "per_round", "error_lines", "note")},
                       "predicted_low": low, "inside_range": inside,
                       "added_rounds": t.get("added_rounds", 0),
                       "margin": t.get("predicted_margin", 0.0),
                       # Read from this many runs of the script as it is (tryfix.base_margin);
                       # 0: the profiled run's margin.
                       "margin_runs": t.get("margin_runs", 0)
                       if t.get("margin_source") == "base runs" else 0,
                       "profiled_margin": t.get("profiled_margin"),
                       "model_bound": t.get("predicted_model_bound"),
                       "under_low": speedup is not None and low is not None and speedup < low})  # fmt: skip
    return {
        "program": program.stem,
        "verdict": report["verdict"]["category"],
        "findings": [f["rule_id"] for f in findings],
        "trials": trials,
        "refused": refused,
        "small": small,
        "unsized": unsized,
        "unoffered": unoffered,
        "rounds": tf.get("rounds"),
        # The steps each run measured: at least --steps, sized by time since 2026-12-06.
        "steps": tf.get("steps"),
        "notes": tf.get("notes", []),
        "wall_s": wall,
    }


def _judged_bound(finding: dict[str, Any]) -> float:
    """The bound the small-gain gate judges (``compare_samples.measurable``): the model's, or
    the least it reads within its shares' interval where lower (``Finding.bound_low``)."""
    low = finding.get("bound_low")
    bound = float(finding["gain_bound"])
    return min(bound, low) if isinstance(low, (int, float)) else bound


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def _inside(t: dict[str, Any]) -> str:
    """Whether the measured point lies in the predicted range; if not, on which side, and
    whether the measurement's own interval still meets the range."""
    speedup, high = t["speedup"], t["predicted_bound"]
    if speedup is None or high is None:
        return "-"
    low = max(1.0, t.get("predicted_low") or 1.0)
    if t["inside_range"]:
        return "yes"
    side = "under its low end" if speedup < low else "over its high end"
    meets = t["speedup_low"] <= high and t["speedup_high"] >= low
    return f"no, {side}" + ("; its interval meets the range" if meets else "")


def _range(
    low: float | None,
    high: float | None,
    margin: float = 0.0,
    model_high: float | None = None,
    runs: int = 0,
) -> str:
    """The stated range; with a margin, the model's range it widens beside it. The stated high
    end is widened no further than the change can give (``Finding.gain_ceiling``), so the
    model's high end is the trial's own where it carries it (older reports: high / (1 + margin)).
    ``runs``: the margin is what the trial's runs of the script as it is differed by, read from
    that many (since 2026-12-07, ``tryfix.base_margin``); 0: the profiled run's."""
    if high is None:  # nothing bounds it: offered to be measured (rules.UnboundedGain)
        return "not bounded (measure it)"
    said = f"up to {_fmt(high)}" if low is None else f"{_fmt(low)}-{_fmt(high)}"
    if not margin or high is None:
        return said
    m_high = model_high if model_high is not None else high / (1 + margin)
    model = f"up to {_fmt(m_high)}" if low is None else f"{_fmt(low * (1 + margin))}-{_fmt(m_high)}"
    over = f" over {runs} runs" if runs else ""
    return f"{said} ({model} ±{margin:.0%}{over})"


def markdown(rows: list[dict[str, Any]], steps: int) -> str:
    lines = [
        "| program | verdict | fix | predicted | measured: median of rounds (interval; per round) | result | in range |",
        "|---|---|---|---|---|---|---|",
    ]
    offered = verified = inside = 0
    for row in rows:
        if "error" in row:
            lines.append(f"| {row['program']} | run failed | | | | {row['error'][:80]!r} | |")
            continue
        for t in row["trials"]:
            offered += 1
            verified += t["verdict"] == "verified"
            inside += bool(t["inside_range"]) and t["verdict"] == "verified"
            rounds = ", ".join(f"{r:.2f}" for r in t["per_round"])
            measured = (
                f"{_fmt(t['speedup'])} ({_fmt(t['speedup_low'])}-{_fmt(t['speedup_high'])}; {rounds})"
                if t["speedup"] is not None
                else "-"
            )
            result = t["verdict"] + (f": {t['error_lines'][0]}" if t["error_lines"] else "")
            if t.get("added_rounds"):  # tryfix.sequential: the interval is the rounds' own
                result += f" ({t['added_rounds']} rounds added)"
            lines.append(
                f"| {row['program']} | {row['verdict']} | {t['fix_id']} | "
                f"{_range(t.get('predicted_low'), t['predicted_bound'], t.get('margin') or 0.0, t.get('model_bound'), t.get('margin_runs') or 0)} | "
                f"{measured} | {result} | "
                f"{_inside(t)} |"
            )
        for r in row["refused"]:
            lines.append(
                f"| {row['program']} | {row['verdict']} | {r['fix_id']} | refused | - | "
                f"not offered: {r['reason'][:90]} | - |"
            )
        for sm in row.get("small", []):
            lines.append(
                f"| {row['program']} | {row['verdict']} | {sm['fix_id']} | "
                f"{_range(sm.get('low'), sm['bound'])} | - | small, severity {sm['severity']}: may "
                "have no measurable effect (bound within the 5% run-to-run margin), not tried | - |"
            )
        for u in row.get("unsized", []):
            lines.append(
                f"| {row['program']} | {row['verdict']} | {u['fix_id']} | not sized | - | "
                f"said at severity info, not tried: {u['fix'].split(';')[0][:110]} | - |"
            )
        for u in row.get("unoffered", []):
            lines.append(
                f"| {row['program']} | {row['verdict']} | ({u['rule_id']}) | - | - | "
                f"said at severity info, not offered: {u['title'][:90]} | - |"
            )
        if not (row["trials"] or row["refused"] or row.get("small") or row.get("unsized")
                or row.get("unoffered")):  # fmt: skip
            lines.append(f"| {row['program']} | {row['verdict']} | (no fix offered) | | | | |")
    share = f"{verified}/{offered}" if offered else "0/0"
    sized = ", ".join(
        f"{row['program']} {row['steps']}"
        for row in rows
        if row.get("steps") is not None and row["steps"] != steps
    )
    lines += [
        "",
        f"Offered fixes verified: {share}; verified and inside their predicted range: {inside}/{offered}. "
        f"Each run: warm-up 5 + {steps} steps"
        + (f" at least (sized by the time they cover: {sized})" if sized else "")
        + ", the script as it is and each fix interleaved.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "programs",
        nargs="*",
        help="program names in ledger_programs/ (default: all), or paths to other scripts",
    )
    p.add_argument("--steps", type=int, default=60, help="--try-fixes N: measured steps a run")
    p.add_argument("--rounds", type=int, default=5, help="--try-rounds: runs of each arm")
    p.add_argument("--budget", type=float, default=400.0, help="--try-budget per program")
    p.add_argument("--json", metavar="PATH")
    p.add_argument("--markdown", metavar="PATH")
    p.add_argument("--from-json", metavar="PATH", nargs="+", help="print the table of saved rows")
    p.add_argument("--reports", metavar="DIR", help="keep each program's report JSON and stderr")
    args = p.parse_args(argv)
    if args.from_json:
        saved = [row for path in args.from_json for row in json.loads(Path(path).read_text())]
        print(markdown(saved, args.steps))
        return 0
    names = args.programs or sorted(f.stem for f in PROGRAMS.glob("*.py"))
    rows = []
    for name in names:
        print(f"ledger: {name} ...", file=sys.stderr, flush=True)
        keep = Path(args.reports) if args.reports else None
        path = Path(name) if name.endswith(".py") else PROGRAMS / f"{name}.py"
        rows.append(_run(path.resolve(), args.steps, args.budget, args.rounds, keep))
        print(json.dumps(rows[-1])[:600], file=sys.stderr, flush=True)
        if args.json:  # after each program: a run cut short keeps what it measured
            Path(args.json).write_text(json.dumps(rows, indent=1))
    text = markdown(rows, args.steps)
    print(text)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    if args.markdown:
        Path(args.markdown).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
