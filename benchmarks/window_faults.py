"""How many captured runs read an update that stopped faulting because of our profiler window.

Why (issue 26, faultsmisc): the step clock counts an unfused CPU update's page faults (the
fused bound's high end takes them). In 3 of 18 captured runs of zip_two_loaders every step after
the first profiler window read 0 faults, which no plain run did for more than ~12 steps: the
window's buffers, freed under what the program allocated meanwhile, leave the heap in a state
where the update's temporaries reuse mapped pages. Since faultsmisc the faults are read up to
the end of the first window only (its profiled updates included).

Each round runs ``gpucheck run --json`` on zip_two_loaders (benchmarks/unseen_programs) with a
probe added: the loop's own ``getrusage(RUSAGE_THREAD)`` around each ``opt.step()``, which is
what the program did whatever the step clock read. Per tree (``--base PATH``: another checkout,
main, interleaved with this one, the order alternating by round) and per run: the step clock's
AdamW faults a step and the steps read, where its reading ended, and the program's own faults a
step after the window. A run *goes zero* where two thirds or more of the program's own steps
after the window made under 5 faults (it stopped faulting: the window's state; without a window
no run of 12 did, plain runs have streaks of 5-40 such steps); a reading *reads zero* where the
step clock's figure is under a quarter of the program's own steps up to the window's end (the
figure the fused bound would take). ``python benchmarks/window_faults.py --base
/path/to/main --rounds 8``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO_ROOT, median, parse_args

PROGRAM = REPO_ROOT / "benchmarks" / "unseen_programs" / "zip_two_loaders.py"
PROBE_HEAD = (
    "import resource as _r, sys as _s, json as _j\n"
    "_F = lambda: _r.getrusage(_r.RUSAGE_THREAD).ru_minflt\n"
    "_LOG = []\n"
)


def probe_source() -> str:
    """zip_two_loaders with each ``opt.step()``'s faults logged to stderr at the end."""
    src = PROGRAM.read_text()
    step = "        opt.step()\n"
    assert step in src, "zip_two_loaders changed: its opt.step() line is not found"
    src = src.replace(step, "        _f0 = _F(); opt.step(); _LOG.append(_F() - _f0)\n")
    return PROBE_HEAD + src + "\nprint('FAULTS', _j.dumps(_LOG), file=_s.stderr)\n"


def one_run(tree: Path, script: Path, out: Path) -> dict[str, object]:
    env = os.environ | {"PYTHONPATH": str(tree)}
    done = subprocess.run(
        [sys.executable, "-m", "gpu_notebook", "run", "-q", "--json", str(out), str(script)],
        capture_output=True, text=True, env=env, cwd=tree, timeout=600,
    )  # fmt: skip
    own = json.loads(done.stderr.split("FAULTS ", 1)[1].splitlines()[0])
    report = json.loads(out.read_text())
    steps, window = report["run"]["steps"], report["run"]["window"]
    end = (window.get("first_step") or 0) + (window.get("recorded_steps") or 0)
    faults, read = steps.get("optimizer_faults", {}).get("AdamW", (0, 0))
    before = own[1 : end + 1]  # step 0 makes the optimizer's state
    after = own[end + 1 :]
    before_mean = sum(before) / max(1, len(before))
    after_mean = sum(after) / max(1, len(after))
    zero_share = sum(1 for f in after if f < 5) / max(1, len(after))
    reading = faults / read if read else None
    return {
        "reading": reading,
        "read": read,
        "off": steps.get("faults_off_step"),
        "window_end": end,
        "own_before": before_mean,
        "own_after": after_mean,
        "zero_share": zero_share,
        "goes_zero": zero_share >= 2 / 3,
        "reads_zero": reading is not None and reading < 0.25 * before_mean,
    }


def main() -> None:
    argv = sys.argv[1:]
    base = None
    if "--base" in argv:
        i = argv.index("--base")
        base = Path(argv[i + 1]).resolve()
        argv = argv[:i] + argv[i + 2 :]
    args = parse_args(__doc__ or "", argv)
    rounds = args.rounds or (1 if args.quick else 8)
    trees = {"this": REPO_ROOT} | ({"base": base} if base is not None else {})
    rows: dict[str, list[dict[str, object]]] = {name: [] for name in trees}
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "zip_probe.py"
        script.write_text(probe_source())
        for r in range(rounds):
            order = list(trees) if r % 2 == 0 else list(trees)[::-1]
            for name in order:
                row = one_run(trees[name], script, Path(tmp) / f"{name}{r}.json")
                row["load"] = os.getloadavg()[0]
                rows[name].append(row)
                reading = row["reading"]
                print(
                    f"{name} round {r}: step clock AdamW "
                    f"{'not read' if reading is None else f'{reading:.0f}'} a step over "
                    f"{row['read']} steps (reading ended at step {row['off']}); the program's "
                    f"own: {row['own_before']:.0f} a step to the window's end (step "
                    f"{row['window_end']}), {row['own_after']:.0f} after ({row['zero_share']:.0%} "
                    f"of those steps under 5); load {row['load']:.1f}",
                    flush=True,
                )
    for name, got in rows.items():
        zero = sum(1 for g in got if g["goes_zero"])
        read_zero = sum(1 for g in got if g["reads_zero"])
        readings = [float(g["reading"]) for g in got if g["reading"] is not None]  # type: ignore[arg-type]
        print(
            f"RESULT {name}: {zero}/{len(got)} runs went zero after the window (the program's own "
            f"faults); {read_zero}/{len(got)} readings read zero; reading median "
            f"{median(readings):.0f} a step ({len(readings)} read)"
        )
    if args.json_path is not None:
        args.json_path.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
