"""Same code, same answer: planted-truth scenarios run again and again, quiet and under load.

Each scenario is a small training script with one planted truth (a verdict, the top finding, a
straggler or none). It runs ``--runs`` times on the machine as it is ("quiet": on a shared
machine, whatever the others do) and ``--runs`` times while this benchmark keeps every core
busy with processes of its own (started before and stopped after the loaded runs; they are not
children of the measured run). Per scenario it prints the share of runs whose verdict and top
finding match the truth, and the runs that contradicted their own run-wide evidence:

- a verdict that says it "describes the window only" (built from evidence the report calls
  unrepresentative);
- a stall that cites a step our own work disturbed (analysis/own_cost.py);
- input-bound while the run's own data wait (every step's DataLoader time) is under 10% of its
  time, or not input-bound while it is over half.

``--runs 1 --scenarios input,cached_then_slow`` is a quick look; the README's table is the full
run (``--runs 5``). ``--headlines NAME`` prints every loaded run's headline of those
scenarios; ``--keep DIR`` copies each run's report JSON there (``NAME-CONDITION-K.json``, a
job's ``-job`` and ``-rN``) so a miss can be read.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
TORCHRUN = Path(PY).parent / "torchrun"
TIMEOUT_S = 300

SETUP = textwrap.dedent(
    """
    import os, time, torch
    from torch import nn
    from torch.utils.data import DataLoader, Dataset, TensorDataset
    torch.manual_seed(0)
    if os.environ.get("ONE_THREAD", "1") == "1":
        torch.set_num_threads(1)

    def mlp(d=32, hidden=256, depth=1):
        layers = [nn.Linear(d, hidden), nn.ReLU()]
        for _ in range(depth - 1):
            layers += [nn.Linear(hidden, hidden), nn.ReLU()]
        return nn.Sequential(*layers, nn.Linear(hidden, 1))

    class Sleepy(Dataset):
        def __init__(self, n=192, d=32, sleep_s=0.001, cached=0):
            self.x = torch.randn(n, d); self.y = torch.randn(n, 1)
            self.sleep_s = sleep_s; self.cached = cached
        def __len__(self): return len(self.x)
        def __getitem__(self, i):
            if i >= self.cached:
                time.sleep(self.sleep_s)
            return self.x[i], self.y[i]

    def halfway(step, steps):
        if step == steps // 2 and os.environ.get("HALFWAY_FILE"):
            open(os.environ["HALFWAY_FILE"], "w").close()
            time.sleep(0.5)  # the harness starts its load now
    """
)


@dataclass(frozen=True)
class Truth:
    verdicts: tuple[str, ...] = ()  # accepted verdict categories (empty: any)
    top: tuple[str, ...] = ()  # accepted rule-id prefixes of the top finding (empty: see healthy)
    healthy: bool = False  # no finding of a false cause at medium/high
    none_ok: bool = False  # no top finding at all also matches
    straggler: int | None = None  # the job's straggler rank (jobs only)


@dataclass(frozen=True)
class Scenario:
    name: str
    script: str
    truth: Truth
    ranks: int = 1
    env: dict[str, str] = field(default_factory=dict)
    busy_halfway: bool = False
    options: tuple[str, ...] = ()  # gpucheck run's own options (tests/scenarios' window)
    whole: bool = False  # the script is a program of its own (--script): no SETUP before it


FALSE_CAUSES = ("input.", "syncs.", "logging.", "run.drift", "run.periodic_stall", "run.jitter")

SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "input",
        """
model = mlp(32, 256); opt = torch.optim.SGD(model.parameters(), lr=0.01)
for x, y in DataLoader(Sleepy(n=192, sleep_s=0.001), batch_size=8):
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
""",
        Truth(verdicts=("input-bound",), top=("input.",)),
    ),
    Scenario(
        "cached_then_slow",
        """
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for x, y in DataLoader(Sleepy(n=600, sleep_s=0.004, cached=200), batch_size=1):
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
""",
        Truth(verdicts=("input-bound",), top=("input.", "run.drift")),
    ),
    Scenario(
        "host_tiny_ops",
        """
model = mlp(16, 16); opt = torch.optim.SGD(model.parameters(), lr=0.01, fused=True)
loader = DataLoader(TensorDataset(torch.randn(512, 16), torch.randn(512, 1)), batch_size=4)
for x, y in loader:
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
""",
        Truth(verdicts=("host-bound",), top=("launch.tiny_ops", "input.in_memory_batches")),
    ),
    Scenario(
        # tests/test_magic_nvml's short cell: a timed 0.8 s of tiny steps (a few thousand), one
        # profiled window near its start; it read 'unknown' in a loaded CI (issue 26).
        "tiny_steps",
        """
model = mlp(32, 256); opt = torch.optim.SGD(model.parameters(), lr=0.01); xs = torch.randn(64, 32)
t_end = time.perf_counter() + 0.8
while time.perf_counter() < t_end:
    model(xs).sum().backward(); opt.step(); opt.zero_grad()
""",
        Truth(verdicts=("host-bound", "cpu-only")),
    ),
    Scenario(
        "healthy_compute",
        """
model = mlp(256, 1024, depth=2); opt = torch.optim.SGD(model.parameters(), lr=0.01, fused=True)
xs = torch.randn(30, 256, 256); ys = torch.randn(30, 256, 1)
for step in range(30):
    loss = nn.functional.mse_loss(model(xs[step]), ys[step])
    opt.zero_grad(); loss.backward(); opt.step()
""",
        Truth(verdicts=("cpu-only",), healthy=True),
    ),
    Scenario(
        # tests/scenarios' unfused_optimizer cell and window: its level read low under load
        # where the optimizer share's interval reached under 20% (f24ae10, issue 26).
        "unfused_optimizer",
        """
model = mlp(128, 256, depth=8); opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
xs = torch.randn(20, 64, 128); ys = torch.randn(20, 64, 1)
for step in range(20):
    loss = ((model(xs[step]) - ys[step]) ** 2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
""",
        Truth(top=("launch.unfused_optimizer",)),
        options=("-w", "2", "-s", "8"),
    ),
    Scenario(
        "syncs",
        """
model = mlp(64, 256); opt = torch.optim.SGD(model.parameters(), lr=0.01, fused=True)
xs = torch.randn(40, 32, 64); ys = torch.randn(40, 32, 1)
for step in range(40):
    out = model(xs[step])
    loss = nn.functional.mse_loss(out, ys[step])
    opt.zero_grad(); loss.backward(); opt.step()
    print("step", step, "loss", loss, "pred", out[:6, 0])
""",
        Truth(top=("syncs.", "logging.")),
    ),
    Scenario(
        "logging_validation",
        """
model = mlp(32, 256); opt = torch.optim.SGD(model.parameters(), lr=0.01, fused=True)
xs = torch.randn(30, 32, 32); ys = torch.randn(30, 32, 1)
xv = torch.randn(2048, 32); yv = torch.randn(2048, 1)
for step in range(30):
    loss = nn.functional.mse_loss(model(xs[step]), ys[step])
    opt.zero_grad(); loss.backward(); opt.step()
    with torch.no_grad():
        val = nn.functional.mse_loss(model(xv), yv)
""",
        Truth(top=("logging.", "inference.")),
    ),
    Scenario(
        "drift_kept_tensors",
        """
model = mlp(64, 256); opt = torch.optim.SGD(model.parameters(), lr=0.01, fused=True)
xs = torch.randn(512, 64); ys = torch.randn(512, 1)
losses = []
for step in range(300):
    loss = nn.functional.mse_loss(model(xs), ys)
    opt.zero_grad(); loss.backward(); opt.step()
    losses.append(loss)
""",
        Truth(
            verdicts=("cpu-only", "host-bound"), top=("run.memory_creep", "memory.", "run.drift")
        ),
    ),
    Scenario(
        "closure_lbfgs",
        """
model = mlp(32, 128); opt = torch.optim.LBFGS(model.parameters(), lr=0.1, max_iter=4)
x = torch.randn(256, 32); y = torch.randn(256, 1)
for step in range(30):
    def closure():
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        return loss
    opt.step(closure)
""",
        # LBFGS reads the loss on the host every iteration; the MLP is small: both are true.
        Truth(verdicts=("cpu-only", "host-bound"), top=("syncs.", "launch."), none_ok=True),
    ),
    Scenario(
        "grad_accumulation",
        """
model = mlp(128, 512); opt = torch.optim.SGD(model.parameters(), lr=0.01, fused=True)
xs = torch.randn(160, 64, 128); ys = torch.randn(160, 64, 1)
for step in range(160):
    loss = nn.functional.mse_loss(model(xs[step]), ys[step]) / 4
    loss.backward()
    if step % 4 == 3:
        opt.step(); opt.zero_grad()
""",
        Truth(verdicts=("cpu-only", "host-bound"), healthy=True),
    ),
    Scenario(
        "oversubscribed",
        """
torch.set_num_threads(4)
model = mlp(256, 1024, depth=2); opt = torch.optim.SGD(model.parameters(), lr=0.01, fused=True)
xs = torch.randn(30, 256, 256); ys = torch.randn(30, 256, 1)
for step in range(30):
    loss = nn.functional.mse_loss(model(xs[step]), ys[step])
    opt.zero_grad(); loss.backward(); opt.step()
""",
        Truth(top=("machine.oversubscribed",)),
    ),
    Scenario(
        "busy_halfway",
        """
model = mlp(128, 512); opt = torch.optim.SGD(model.parameters(), lr=0.01, fused=True)
xs = torch.randn(64, 128); ys = torch.randn(64, 1)
for step in range(600):
    halfway(step, 600)
    loss = nn.functional.mse_loss(model(xs), ys)
    opt.zero_grad(); loss.backward(); opt.step()
""",
        Truth(verdicts=("cpu-only", "host-bound"), healthy=True),
        busy_halfway=True,
    ),
)

DDP = textwrap.dedent(
    """
    import os, time
    import torch, torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DataLoader, Dataset
    torch.set_num_threads(1)
    SLOW = int(os.environ.get("SLOW_RANK", "-1"))
    dist.init_process_group("gloo")
    rank = dist.get_rank()

    class Data(Dataset):
        def __len__(self): return 8 * 32
        def __getitem__(self, i): return torch.randn(32), torch.randn(1)

    torch.manual_seed(0)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(32, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step, (x, y) in enumerate(DataLoader(Data(), batch_size=8)):
        if rank == SLOW:
            time.sleep(0.03)
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
    dist.destroy_process_group()
    """
)

JOBS: tuple[Scenario, ...] = (
    Scenario("ddp_straggler", DDP, Truth(straggler=1), ranks=2, env={"SLOW_RANK": "1"}),
    Scenario("ddp_no_straggler", DDP, Truth(straggler=None), ranks=2, env={"SLOW_RANK": "-1"}),
)
ALL = {s.name: s for s in (*SCENARIOS, *JOBS)}


# ----------------------------------------------------------------------------- load


def _spin(stop: multiprocessing.synchronize.Event) -> None:  # pragma: no cover - a load process
    x = 0
    while not stop.is_set():
        for _ in range(100_000):
            x += 1


class Load:
    """One busy process per core, started and stopped by the benchmark (never the run's child)."""

    def __init__(self) -> None:
        self._stop = multiprocessing.Event()
        self._procs: list[multiprocessing.Process] = []

    def start(self) -> None:
        if self._procs:
            return
        self._stop.clear()
        for _ in range(os.cpu_count() or 1):
            p = multiprocessing.Process(target=_spin, args=(self._stop,), daemon=True)
            p.start()
            self._procs.append(p)

    def stop(self) -> None:
        self._stop.set()
        for p in self._procs:
            p.join(timeout=5)
            if p.is_alive():
                p.terminate()
        self._procs.clear()


# ----------------------------------------------------------------------------- one run


@dataclass
class Outcome:
    match: bool
    contradiction: str | None
    headline: str
    verdict: str
    top: str | None
    severities: dict[str, str] = field(default_factory=dict)  # rule id -> severity


def _env(extra: dict[str, str]) -> dict[str, str]:
    path = os.environ.get("PYTHONPATH", "")
    return {**os.environ, "PYTHONPATH": f"{REPO_ROOT}{os.pathsep}{path}", **extra}


# Findings about the measurement, not a cause in the code: never "the top finding".
NOT_CAUSES = ("run.window_unrepresentative", "machine.busy", "machine.slowed", "machine.shared")


def _top(findings: list[dict]) -> dict | None:
    return next(
        (f for f in findings if f["severity"] != "info" and f["rule_id"] not in NOT_CAUSES), None
    )


def _contradiction(report_json: str) -> str | None:
    from gpu_notebook.analysis.own_cost import disturbed_steps
    from gpu_notebook.analysis.steps import steady_steps
    from gpu_notebook.records import Report

    rep = Report.from_json(report_json)
    if any("describes the window only" in e for e in rep.verdict.evidence):
        return "verdict from a window the report calls unrepresentative"
    shape = rep.analysis.shape
    for stalls in (shape.stalls, shape.own.stalls if shape.own else None) if shape else ():
        cited = set(stalls.steps) & disturbed_steps(rep.run) if stalls is not None else set()
        if cited:
            return f"stall cites steps we disturbed: {sorted(cited)[:5]}"
    steps = steady_steps(rep.run.steps, rep.run.window.warmup_steps)
    if rep.run.steps.lean_data and steps and rep.run.steps.event_counts.get("dataloader"):
        total = sum(s.duration_s for s in steps)
        data = sum(s.data_s for s in steps) / total if total > 0 else 0.0
        if rep.verdict.category == "input-bound" and data < 0.10:
            return f"input-bound while the run's data wait is {data:.0%}"
        if rep.verdict.category != "input-bound" and data > 0.5:
            return f"{rep.verdict.category} while the run's data wait is {data:.0%}"
    return None


def _keep(out: Path, keep: Path | None, label: str) -> None:
    """Copy a run's report JSON to ``keep`` (a miss can then be read after the run's folder is gone)."""
    if keep is not None and out.exists():
        keep.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(out, keep / f"{label}.json")


def run_single(
    s: Scenario, tmp: Path, load: Load | None, keep: Path | None = None, label: str = ""
) -> Outcome:
    script = tmp / f"{s.name}.py"
    script.write_text(s.script if s.whole else SETUP + textwrap.dedent(s.script))
    out = tmp / f"{s.name}.json"
    flag = tmp / f"{s.name}.half"
    flag.unlink(missing_ok=True)
    env = _env({**s.env, "HALFWAY_FILE": str(flag) if s.busy_halfway else ""})
    cmd = [PY, "-m", "gpu_notebook", "run", "-q", *s.options, "--json", str(out), str(script)]
    proc = subprocess.Popen(
        cmd, env=env, cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    started_here = False
    if s.busy_halfway and load is not None:
        deadline = time.monotonic() + TIMEOUT_S
        while proc.poll() is None and not flag.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        if proc.poll() is None and flag.exists():
            load.start()
            started_here = True
    try:
        _, err = proc.communicate(timeout=TIMEOUT_S)
    finally:
        if started_here and load is not None:
            load.stop()
    if proc.returncode != 0 or not out.exists():
        return Outcome(False, f"run failed: {err.decode()[-300:]}", "", "failed", None)
    _keep(out, keep, label or s.name)
    text = out.read_text()
    data = json.loads(text)
    verdict = data["verdict"]["category"]
    findings = data.get("findings", [])
    top = _top(findings)
    ok = _matches(s.truth, verdict, findings)
    headline = f"{verdict}: {data['verdict']['headline']} | top: " + (
        f"[{top['severity']}] {top['title']}" if top else "none"
    )
    severities = {f["rule_id"]: f["severity"] for f in findings}
    return Outcome(
        ok, _contradiction(text), headline, verdict, top["rule_id"] if top else None, severities
    )


def _agreement(outs: list[Outcome]) -> str:
    """How often the runs agree: the most common verdict's count, and per finding (every rule id
    any run found) the most common severity's count, a run without the finding reading '-'."""
    if not outs:
        return "no runs"

    def most(values: list[str]) -> str:
        top = max(set(values), key=values.count)
        counts = ", ".join(f"{v} {values.count(v)}" for v in sorted(set(values)))
        return f"{values.count(top)}/{len(values)} ({counts})"

    parts = [f"verdict {most([o.verdict for o in outs])}"]
    for rule in sorted({r for o in outs for r in o.severities}):
        parts.append(f"{rule} {most([o.severities.get(rule, '-') for o in outs])}")
    return "; ".join(parts)


def _matches(t: Truth, verdict: str, findings: list[dict]) -> bool:
    """The verdict and the top finding are the planted truth (and a healthy loop is blamed
    for no false cause at medium or high)."""
    top = _top(findings)
    ok = not t.verdicts or verdict in t.verdicts
    if t.top:
        ok = ok and (
            (top is not None and top["rule_id"].startswith(t.top)) or (top is None and t.none_ok)
        )
    if t.healthy:
        ok = ok and not any(
            f["severity"] in ("medium", "high") and f["rule_id"].startswith(FALSE_CAUSES)
            for f in findings
        )
    return ok


def rejudge(folder: Path) -> None:
    """Each kept report of a single run judged again by this code's rules on the same recorded
    steps, with the steps' per-step wait for a core and without it (the sampler's readings
    alone, as before that reading existed): what the per-step reading changes, run by run."""
    import dataclasses

    from gpu_notebook.analysis.run_trend import run_shape
    from gpu_notebook.records import Report, to_jsonable
    from gpu_notebook.rules import cell_facts, run_rules
    from gpu_notebook.words import word_findings

    counts: dict[str, list[int]] = {}
    for path in sorted(folder.glob("*.json")):
        name = path.stem.rsplit("-", 2)[0]
        if name not in ALL or ALL[name].ranks > 1:
            continue
        rep = Report.from_json(path.read_text())
        unread = tuple(dataclasses.replace(st, wait_s=None) for st in rep.run.steps.steps)
        said = []
        for run in (rep.run, dataclasses.replace(rep.run, steps=dataclasses.replace(
                rep.run.steps, steps=unread))):  # fmt: skip
            analysis = dataclasses.replace(rep.analysis, shape=run_shape(run))
            facts = cell_facts(run.cell_source, None, line_offset=run.first_line - 1)
            found = run_rules(
                run, analysis, rep.verdict, line_offset=run.first_line - 1, facts=facts
            )
            findings = [to_jsonable(f) for f in word_findings(found)]
            top = _top(findings)
            ok = _matches(ALL[name].truth, rep.verdict.category, findings)
            said.append((ok, f"[{top['severity']}] {top['title']}" if top else "none"))
        per_step = rep.run.steps.steps and all(
            st.wait_s is not None for st in rep.run.steps.steps[rep.run.window.warmup_steps :]
        )
        row = counts.setdefault(name, [0, 0, 0])
        row[0] += said[0][0]
        row[1] += said[1][0]
        row[2] += 1
        print(f"  {path.stem}: per-step wait {'read' if per_step else 'NOT read'}; "
              f"with it {'ok' if said[0][0] else 'MISS'} {said[0][1]}; "
              f"readings alone {'ok' if said[1][0] else 'MISS'} {said[1][1]}")  # fmt: skip
    for name, (with_wait, alone, n) in counts.items():
        print(f"{name:<20} with per-step wait {with_wait}/{n}, readings alone {alone}/{n}")
    rejudge_jobs(folder)


def rejudge_jobs(folder: Path) -> None:
    """Each kept job report judged again by this code from its ranks' kept reports (each rank's
    summary rebuilt, then the job's straggler), beside the straggler the run recorded."""
    from gpu_notebook.records import RankInfo, Report
    from gpu_notebook.report.job import job_report, rank_facts

    counts: dict[str, list[int]] = {}
    for path in sorted(folder.glob("*-job.json")):
        base = path.name[: -len("-job.json")]
        name = base.rsplit("-", 2)[0]
        if name not in ALL:
            continue
        recorded = json.loads(path.read_text())
        world = recorded["world_size"]
        hosts = {r["rank"]: r["host"] for r in recorded["ranks"]}
        facts = []
        for rank in range(world):
            rep = Report.from_json((folder / f"{base}-r{rank}.json").read_text())
            facts.append(rank_facts(rep, RankInfo(rank, world, rank, hosts.get(rank, ""))))
        found = job_report(facts, world, source="run").straggler
        was = recorded.get("straggler")
        ok = (found.rank if found else None) == ALL[name].truth.straggler
        row = counts.setdefault(name, [0, 0])
        row[0] += ok
        row[1] += 1
        then = f"rank {was['rank']} ({was['phase']})" if was else "none"
        now = f"rank {found.rank} ({found.phase})" if found else "none"
        print(f"  {base}: recorded {then}; now {now} {'ok' if ok else 'MISS'}")
    for name, (ok, n) in counts.items():
        print(f"{name:<20} job rejudged {ok}/{n}")


def run_job(s: Scenario, tmp: Path, keep: Path | None = None, label: str = "") -> Outcome:
    script = tmp / f"{s.name}.py"
    script.write_text(s.script)
    out = tmp / s.name
    out.mkdir(exist_ok=True)
    job = out / "job.json"
    job.unlink(missing_ok=True)
    cmd = [str(TORCHRUN), "--nproc_per_node", str(s.ranks), "-m", "gpu_notebook", "run", "-q",
           "--json", str(out / "r{rank}.json"), "--job-json", str(job), str(script)]  # fmt: skip
    env = _env({**s.env, "OMP_NUM_THREADS": "1", "GPUCHECK_GATHER_TIMEOUT_S": "60"})
    res = subprocess.run(cmd, env=env, cwd=tmp, capture_output=True, text=True, timeout=TIMEOUT_S)
    if res.returncode != 0 or not job.exists():
        return Outcome(False, f"job failed: {res.stderr[-300:]}", "", "failed", None)
    _keep(job, keep, f"{label or s.name}-job")
    for rank in range(s.ranks):
        _keep(out / f"r{rank}.json", keep, f"{label or s.name}-r{rank}")
    data = json.loads(job.read_text())
    straggler = data.get("straggler")
    named = straggler["rank"] if straggler else None
    ok = named == s.truth.straggler
    headline = (
        f"straggler: rank {named} ({straggler['phase']})" if straggler else "no straggler"
    ) + "".join(
        f" | note: ranks {', '.join(map(str, h['ranks']))} share host {h['host']} "
        f"({h['busy_share']:.0%} busy)"
        for h in data.get("saturated_hosts", [])
    )
    return Outcome(ok, None, headline, "job", f"straggler {named}")


# ----------------------------------------------------------------------------- table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="runs per scenario and condition")
    parser.add_argument("--scenarios", default="", help="comma-separated names (default: all)")
    parser.add_argument("--conditions", default="quiet,loaded")
    parser.add_argument("--headlines", default="cached_then_slow,ddp_no_straggler")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--keep",
        type=Path,
        default=None,
        help="copy each run's report JSON into this folder (NAME-CONDITION-K.json) to read misses",
    )
    parser.add_argument(
        "--rejudge",
        type=Path,
        default=None,
        help="judge the reports kept in this folder again, with and without per-step waits",
    )
    parser.add_argument(
        "--script",
        type=Path,
        action="append",
        default=[],
        help="also run this program as a scenario named by its file (no planted truth: its "
        "match is any answer; read the agreement), e.g. benchmarks/ledger_programs/nanogpt_shaped.py",
    )
    args = parser.parse_args(argv)
    for path in args.script:
        ALL[path.stem] = Scenario(path.stem, path.read_text(), Truth(), whole=True)
        args.scenarios = ",".join(n for n in (args.scenarios, path.stem) if n)
    if args.rejudge is not None:
        rejudge(args.rejudge)
        return 0
    names = [n for n in args.scenarios.split(",") if n] or list(ALL)
    unknown = [n for n in names if n not in ALL]
    if unknown:
        parser.error(f"unknown scenarios: {', '.join(unknown)} (known: {', '.join(ALL)})")
    conditions = [c for c in args.conditions.split(",") if c]
    load = Load()
    rows: dict[str, dict[str, list[Outcome]]] = {n: {c: [] for c in conditions} for n in names}
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    with tempfile.TemporaryDirectory(prefix="gpucheck-stability-") as folder:
        tmp = Path(folder)
        for condition in conditions:
            steady_load = condition == "loaded"
            if steady_load:
                load.start()
            try:
                for k in range(args.runs):
                    for name in names:  # interleaved: every scenario once per round
                        s = ALL[name]
                        label = f"{name}-{condition}-{k + 1}"
                        o = (
                            run_job(s, tmp, args.keep, label)
                            if s.ranks > 1
                            else run_single(s, tmp, None if steady_load else load, args.keep, label)
                        )
                        rows[name][condition].append(o)
                        print(f"  {condition} {k + 1}/{args.runs} {name}: "
                              f"{'ok' if o.match else 'MISS'} {o.headline[:150]}"
                              + (f" CONTRADICTION: {o.contradiction}" if o.contradiction else ""),
                              flush=True)  # fmt: skip
            finally:
                if steady_load:
                    load.stop()
    print(f"\nstability: {args.runs} run(s) per scenario and condition, started {started}")
    header = f"{'scenario':<20}" + "".join(f"{c + ' match':>14}" for c in conditions)
    print(header + f"{'contradictions':>16}")
    table = []
    for name in names:
        cells = []
        bad = 0
        for c in conditions:
            outs = rows[name][c]
            share = sum(o.match for o in outs) / len(outs) if outs else 0.0
            cells.append(f"{share:>13.0%} ")
            bad += sum(o.contradiction is not None for o in outs)
        print(f"{name:<20}" + "".join(cells) + f"{bad:>16}")
        table.append(
            {
                "scenario": name,
                **{
                    c: {
                        "match": sum(o.match for o in rows[name][c]),
                        "runs": len(rows[name][c]),
                        "headlines": [o.headline for o in rows[name][c]],
                        "contradictions": [
                            o.contradiction for o in rows[name][c] if o.contradiction
                        ],
                    }
                    for c in conditions
                },
            }
        )
    print("\nagreement over every run of a scenario (quiet and loaded together):")
    for name in names:
        outs = [o for c in conditions for o in rows[name][c]]
        print(f"  {name}: {_agreement(outs)}")
    for name in [n for n in args.headlines.split(",") if n in rows]:
        for c in conditions:
            print(f"\n{name}, {c}:")
            for o in rows[name][c]:
                print(f"  {o.headline}")
    if args.json is not None:
        args.json.write_text(json.dumps({"started": started, "rows": table}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
