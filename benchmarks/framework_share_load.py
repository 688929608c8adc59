"""The framework's logging share quiet and busy, before and after, from the same runs (issue 26).

Each run is ``gpucheck run -q --json`` of one program; ``rules.step_logging.framework_overhead``
then reads the run three ways: ``before`` as main read it (each sample the wall time since the
previous one, our own capture's samples counted as the loop's), ``wall`` with our own code's
samples left out (``analysis.framework_stacks.without_ours``), and ``after`` as shipped (ours
left out, and on a CPU run each sample the loop thread's CPU time since the previous one,
``framework_stacks.share_clock``). Busy runs start two spinners of our own (``yes >
/dev/null``, as /work/wt/burn.sh), stopped right after; quiet runs have none of ours (other
programs on the machine still load it: the load average is printed before and after every
run). Quiet and busy alternate, their order reversed each round. Printed: every run, then per
program and condition the median (range) of the shares and of the loop thread's time on a core
over its sampled wall time. The reports stay in a folder (printed first):
``python benchmarks/framework_share_load.py reread FOLDER`` reads them again.

``python benchmarks/framework_share_load.py [ROUNDS] [PROGRAM...]`` (default 3 rounds of
``lightning_sync_every_step`` and ``hf_callback_metrics``; stdout to a file). This is a
measurement, not a test: the figures move with the machine's load.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from gpu_notebook.analysis import framework_stacks as fs
from gpu_notebook.cell.scan import cell_facts
from gpu_notebook.records import RawStacks, Report, Run
from gpu_notebook.rules.step_logging import FrameworkOverhead, framework_overhead

HERE = Path(__file__).resolve().parent
PROGRAMS = {
    "lightning_sync_every_step": HERE / "unseen_programs" / "lightning_sync_every_step.py",
    "hf_callback_metrics": HERE / "unseen_programs" / "hf_callback_metrics.py",
}


def _spinners() -> subprocess.Popen[bytes]:
    """Two busy loops in a session of their own (stopped by its process group)."""
    return subprocess.Popen(
        ["bash", "-c", "yes > /dev/null & yes > /dev/null & wait"],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
    )


def _load() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def _wall(raw: RawStacks | None) -> RawStacks | None:
    """``raw`` without its thread clock: each sample the wall time since the previous one."""
    return None if raw is None else dataclasses.replace(raw, cpu_us=None, wait_us=None)


def _share(run: Run, report: Report, *, ours: bool = False) -> float | None:
    """The rule's share of ``run``; ``ours``: our own code's samples counted as the loop's, as
    main did (``framework_stacks.without_ours`` kept out)."""
    if ours:
        saved, fs.OWN_CODE = fs.OWN_CODE, "\0"
        try:
            return _share(run, report)
        finally:
            fs.OWN_CODE = saved
    facts = cell_facts(run.cell_source, None, line_offset=run.first_line - 1)
    finding = framework_overhead(run, report.analysis, facts)
    said = finding.said if finding is not None else None
    return said.overhead if isinstance(said, FrameworkOverhead) else None


def measure(program: Path, busy: bool, out: Path) -> dict[str, float | None]:
    """One run of ``program`` (``busy``: with two spinners of ours), its report kept at ``out``."""
    spin = _spinners() if busy else None
    try:
        load0 = _load()
        with open(out.with_suffix(".out"), "wb") as sink:
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "gpu_notebook",
                    "run",
                    "-q",
                    "--json",
                    str(out),
                    str(program),
                ],
                cwd=out.parent,
                stdout=sink,
                stderr=subprocess.STDOUT,
                check=False,
            )
        load1 = _load()
    finally:
        if spin is not None:
            os.killpg(spin.pid, signal.SIGTERM)
            spin.wait()
    return {"load0": load0, "load1": load1, **read(out)}


def read(out: Path) -> dict[str, float | None]:
    """The framework share of the run whose report is ``out``, both ways."""
    report = Report.from_json(out.read_text())
    run = report.run
    raws = [r for r in (run.stacks, run.framework_stacks) if r is not None]
    wall_us = sum(r.time_us for r in raws)
    on_core = sum(r.cpu_us or 0 for r in raws) / wall_us if wall_us else None
    before = dataclasses.replace(
        run, stacks=_wall(run.stacks), framework_stacks=_wall(run.framework_stacks)
    )
    return {
        "before": _share(before, report, ours=True),
        "wall": _share(before, report),
        "after": _share(run, report),
        "on_core": on_core,
        "samples": float(sum(r.samples for r in raws)),
    }


def _fmt(values: list[float | None]) -> str:
    got = [v for v in values if v is not None]
    if not got:
        return "-"
    return f"{statistics.median(got):.3f} ({min(got):.3f}-{max(got):.3f})"


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "reread":
        return reread(Path(sys.argv[2]))
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    names = sys.argv[2:] or list(PROGRAMS)
    rows: dict[tuple[str, bool], list[dict[str, float | None]]] = {}
    folder = Path(tempfile.mkdtemp(prefix="fwshare_"))  # the reports stay: re-read them
    print(f"reports in {folder}", flush=True)
    for k in range(rounds):
        for name in names:
            program = PROGRAMS.get(name, Path(name))
            for busy in (False, True) if k % 2 == 0 else (True, False):
                condition = "busy" if busy else "quiet"
                out = folder / f"{program.stem}.{condition}.{k}.json"
                row = measure(program, busy, out)
                (out.with_suffix(".load")).write_text(f"{row['load0']} {row['load1']}")
                rows.setdefault((program.stem, busy), []).append(row)
                print(f"round {k} {name} {condition}: "
                      + " ".join(f"{key}={v:.3f}" if v is not None else f"{key}=-"
                                 for key, v in row.items()), flush=True)  # fmt: skip
    table(rows)


def reread(folder: Path) -> None:
    """The table again from the reports a run left in ``folder`` (the code read as it is now)."""
    rows: dict[tuple[str, bool], list[dict[str, float | None]]] = {}
    for out in sorted(folder.glob("*.json")):
        stem, condition, _k = out.name.rsplit(".", 3)[:3]
        load = out.with_suffix(".load")
        loads = [float(v) for v in load.read_text().split()] if load.exists() else [None, None]
        row = {"load0": loads[0], "load1": loads[1], **read(out)}
        rows.setdefault((stem, condition == "busy"), []).append(row)
        print(out.name, " ".join(f"{k}={v:.3f}" for k, v in row.items() if v is not None))
    table(rows)


def table(rows: dict[tuple[str, bool], list[dict[str, float | None]]]) -> None:
    print("\nprogram | condition | load (start-end) | before (main: wall, our frames in) | wall, "
          "ours out | after (ours out, the thread's CPU) | loop thread on a core / sampled wall "
          "| runs")  # fmt: skip
    for (name, busy), got in sorted(rows.items()):
        loads = [v for r in got for v in (r["load0"], r["load1"]) if v is not None]
        span = f"{min(loads):.1f}-{max(loads):.1f}" if loads else "-"
        print(
            f"{name} | {'busy' if busy else 'quiet'} | {span} | "
            + " | ".join(_fmt([r[k] for r in got]) for k in ("before", "wall", "after"))
            + f" | {_fmt([r['on_core'] for r in got])} | {len(got)}"
        )


if __name__ == "__main__":
    main()
