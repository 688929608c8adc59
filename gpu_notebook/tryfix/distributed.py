"""``--try-fixes`` under torchrun: every rank runs the same variant at the same time.

Rank 0 decides everything (which fixes, how many rounds, what the budget leaves) from its own
report and measurements, exactly as a single process does. Before each of its runs it posts
the run's command in the job's c10d store (the one ``gather`` uses): the code to run (the
patched source, or none for the script as it is), the time limit, the measured steps (rank 0
sizes them), and a fresh port. Every other
rank follows the commands in order and starts the same variant with the same port, so the
trial processes of one run form their own job (``MASTER_PORT`` is that port; the launcher's
agent store is not reused, so no key of the real job's rendezvous is touched). Rank 0 posts
"done" at the end. The verdicts are rank 0's (data-parallel ranks run in lockstep).
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from gpu_notebook.records import Report, TryFixes
from gpu_notebook.tryfix.said import FollowerRank
from gpu_notebook.tryfix.trials import Runner, RunResult, TrialSettings, run_child

__all__ = ["follow", "job_runner", "world"]

_FOLLOW_SLACK_S = 120.0  # a follower waits this long past the budget for rank 0's next command


def world() -> tuple[int, int]:
    """(rank, world size) of a torchrun job; (0, 1) outside one."""
    from gpu_notebook.capture.ranks import from_env

    info = from_env()
    return (0, 1) if info is None else (info.rank, info.world_size)


def _store(settings: TrialSettings) -> Any:
    import torch.distributed as dist

    from gpu_notebook import gather

    store, _how = gather._store(settings.budget_s + _FOLLOW_SLACK_S)
    store.set_timeout(timedelta(seconds=settings.budget_s + _FOLLOW_SLACK_S))
    return dist.PrefixStore(gather._namespace() + "tryfix/", store)


def _trial_env(port: int) -> dict[str, str]:
    env = dict(os.environ)
    env["MASTER_PORT"] = str(port)
    env["TORCHELASTIC_USE_AGENT_STORE"] = "False"  # the trial job hosts its own store
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


def job_runner(report: Report, settings: TrialSettings) -> Runner | None:
    """Rank 0 of a job: a runner that posts each run for the other ranks. Alone: None."""
    _rank, size = world()
    if size <= 1:
        return None
    store = _store(settings)
    counter = iter(range(1_000_000))

    def run(
        code: Path, script: Path, args: Sequence[str], timeout_s: float, scratch: Path, steps: int
    ) -> RunResult:
        n = next(counter)
        port = _free_port()
        source = None if code.resolve() == script.resolve() else code.read_text()
        cmd = {"source": source, "timeout_s": timeout_s, "port": port, "steps": steps}
        store.set(f"cmd/{n}", json.dumps(cmd))
        return run_child(settings, _trial_env(port))(code, script, args, timeout_s, scratch, steps)

    def done() -> None:
        store.set(f"cmd/{next(counter)}", json.dumps({"done": True}))

    run.done = done  # type: ignore[attr-defined]
    return run


def follow(script: Path, args: Sequence[str], settings: TrialSettings) -> TryFixes:
    """A rank other than 0: run what rank 0 posts, in order, until it says done."""
    store = _store(settings)
    runs = 0
    with tempfile.TemporaryDirectory(prefix="gpucheck-tryfix-") as tmp:
        scratch = Path(tmp)
        while True:
            key = f"cmd/{runs}"
            store.wait([key])
            cmd = json.loads(store.get(key))
            if cmd.get("done"):
                break
            code = script.resolve()
            if cmd["source"] is not None:
                folder = scratch / f"run{runs}"
                folder.mkdir(mode=0o700)
                code = folder / script.name
                fd = os.open(code, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "w") as f:
                    f.write(cmd["source"])
            runner = run_child(settings, _trial_env(int(cmd["port"])))
            steps = int(cmd.get("steps", settings.steps))
            runner(code, script, args, float(cmd["timeout_s"]), scratch, steps)
            runs += 1
    return TryFixes(settings.warmup, settings.steps, 0, settings.budget_s, 0.0, (),
                    said=(FollowerRank(runs),))  # fmt: skip
