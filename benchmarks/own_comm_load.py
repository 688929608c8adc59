"""The host's wait in collectives quiet and busy, before and after, from the same runs (owncomm).

Each run is ``torchrun --nproc_per_node 2 -m gpu_notebook run -q --json`` of one program (gloo
on the CPU). Per rank it prints ``before``: the traced steps' comm share as main read it (the
phase split's "comm" over the traced steps' own time, ``analysis.phases``) and its Amdahl bound;
``after``: the share the verdict and ``distributed.own_collectives`` read now (analysis/host_comm:
the loop thread off a core, not waiting for one, over its read steps' own time) and the rule's
bound; and the traced comm's part inside backward. Busy runs start two spinners of our own
(``yes > /dev/null``, as /work/wt/burn.sh) in a session of their own, stopped by its process
group right after; quiet runs have none of ours (other programs on the machine still load it:
the load average is printed with every run). Quiet and busy alternate, their order reversed
each round. Then per program and condition the median (range) over runs and ranks.

``python benchmarks/own_comm_load.py [ROUNDS] [PROGRAM...]`` (default 2 rounds of
``ddp_allreduce_log`` and ``ddp_gather_barrier``); ``... reread FOLDER`` reads a kept folder
again with the code as it is now. A measurement, not a test: the figures move
with the machine's load.
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROGRAMS = {
    name: HERE / "unseen_programs" / f"{name}.py"
    for name in ("ddp_allreduce_log", "ddp_gather_barrier")
}
TORCHRUN = Path(sys.executable).parent / "torchrun"


def _spinners() -> subprocess.Popen[bytes]:
    """Two busy loops in a session of their own (stopped by its process group)."""
    return subprocess.Popen(
        ["bash", "-c", "yes > /dev/null & yes > /dev/null & wait"],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
    )


def _load() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def _run(program: Path, out: Path, busy: bool) -> None:
    spin = _spinners() if busy else None
    try:
        env = {**os.environ, "PYTHONPATH": str(HERE.parent)}
        cmd = [str(TORCHRUN), "--nproc_per_node", "2", "-m", "gpu_notebook", "run", "-q",
               "--json", str(out / "r{rank}.json"), str(program)]  # fmt: skip
        subprocess.run(cmd, env=env, check=True, capture_output=True, timeout=600)
    finally:
        if spin is not None:
            os.killpg(spin.pid, signal.SIGTERM)
            spin.wait()


def _amdahl(share: float | None) -> float | None:
    return None if share is None or share >= 1 else 1.0 / (1.0 - share)


def read(path: Path) -> dict[str, float | None]:
    """One rank's readings from its JSON report, the "after" figures computed by the code as it
    is now (``reread`` reads a kept folder again)."""
    from gpu_notebook.analysis.host_comm import host_comm
    from gpu_notebook.cell.scan import cell_facts
    from gpu_notebook.records import Report
    from gpu_notebook.rules.distributed import own_collectives

    report = Report.from_json(path.read_text())
    run, analysis = report.run, report.analysis
    before = analysis.phases.share("comm") if analysis.phases is not None else None
    facts = cell_facts(run.cell_source, None, line_offset=run.first_line - 1)
    finding = own_collectives(run, analysis, facts)
    comm = host_comm(run, analysis)
    return {
        "before": before,
        "before_bound": _amdahl(before),
        "after": comm.share if comm is not None else None,
        "after_bound": finding.gain_bound if finding is not None else None,
        "in_backward": comm.in_backward if comm is not None else None,
    }


def _fmt(x: float | None, pct: bool = True) -> str:
    if x is None:
        return "  n/a"
    return f"{100 * x:4.0f}%" if pct else f"{x:5.2f}x"


def _summary(values: list[float | None], pct: bool = True) -> str:
    got = [v for v in values if v is not None]
    if not got:
        return "n/a"
    return f"{_fmt(statistics.median(got), pct).strip()} ({_fmt(min(got), pct).strip()}-" \
           f"{_fmt(max(got), pct).strip()})"  # fmt: skip


def main(argv: list[str]) -> None:
    if len(argv) > 1 and argv[0] == "reread":
        return reread(Path(argv[1]))
    rounds = int(argv[0]) if argv and argv[0].isdigit() else 2
    names = [a for a in argv if not a.isdigit()] or list(PROGRAMS)
    folder = Path(tempfile.mkdtemp(prefix="own_comm_load."))
    print(f"reports in {folder}")
    rows: Rows = {}
    for r in range(rounds):
        for name in names:
            for busy in (False, True) if r % 2 == 0 else (True, False):
                cond = "busy" if busy else "quiet"
                out = folder / f"{name}.{cond}.{r}"
                out.mkdir()
                load0 = _load()
                _run(PROGRAMS[name], out, busy)
                (out / "load").write_text(f"{load0} {_load()}")
                _rows(out, rows)
    table(rows)


Rows = dict[tuple[str, str], list[dict[str, float | None]]]


def _rows(out: Path, rows: Rows) -> None:
    """Read and print the two ranks of the run kept in ``out`` (NAME.CONDITION.ROUND)."""
    name, cond, r = out.name.split(".")
    load0, load1 = (float(v) for v in (out / "load").read_text().split())
    for rank in (0, 1):
        got = read(out / f"r{rank}.json")
        rows.setdefault((name, cond), []).append(got)
        print(f"{name:20s} {cond:5s} round {r} rank {rank} load {load0:5.1f}->{load1:5.1f}  "
              f"before {_fmt(got['before'])} {_fmt(got['before_bound'], False)}  after "
              f"{_fmt(got['after'])} {_fmt(got['after_bound'], False)}  in backward "
              f"{_fmt(got['in_backward'])}", flush=True)  # fmt: skip


def reread(folder: Path) -> None:
    """The table again from the reports a run left in ``folder`` (the code read as it is now)."""
    rows: Rows = {}
    for out in sorted(p for p in folder.iterdir() if p.is_dir()):
        _rows(out, rows)
    table(rows)


def table(rows: Rows) -> None:
    print("\nmedian (range) over runs and ranks (after: no finding under 10%, its bound n/a):")
    for (name, cond), got in rows.items():
        print(f"{name:20s} {cond:5s} before {_summary([g['before'] for g in got])} "
              f"bound {_summary([g['before_bound'] for g in got], False)} | after "
              f"{_summary([g['after'] for g in got])} "
              f"bound {_summary([g['after_bound'] for g in got], False)}")  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
