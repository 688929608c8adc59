"""--try-fixes' runs keep what happened to them: a run stopped at its limit says how far it got,
a run whose exit hangs keeps its steps (its exit timed and bounded apart), and a fix whose run
did not end its timed steps is "not measured", never "slower" (issue 26: on an H100 the workers
fix of gpu_train read "slower" from one run stopped at its limit, then "only 0 run(s) of the fix
finished", with nothing in the report to say why). Real child processes, real scripts; no
assertion on a duration."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpu_notebook.records import Report
from gpu_notebook.tryfix import trials
from gpu_notebook.tryfix.child import LIMIT_SIGNAL, stacks_file
from gpu_notebook.tryfix.trials import EXIT_GRACE_S, TrialSettings, run_child
from gpu_notebook.views.tryfix_text import render_try_fixes, word_try_fixes

pytestmark = pytest.mark.skipif(LIMIT_SIGNAL is None, reason="no SIGUSR2 here")

# A loop of real optimizer steps; at loop index STALL_AT (when set) it makes STALL_FILE and
# sleeps for good: a step that never ends.
LOOP = """
import os, sys, time, torch
from torch.utils.data import DataLoader, TensorDataset
torch.set_num_threads(1)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
data = TensorDataset(torch.randn(4000, 4), torch.randn(4000, 1))
for i, (x, y) in enumerate(DataLoader(data, batch_size=8)):
    if STALL_AT is not None and i == STALL_AT:
        open(STALL_FILE, "w").close()
        while True:
            time.sleep(1)
    (model(x) - y).pow(2).mean().backward()
    opt.step(); opt.zero_grad()
"""


def _script(tmp_path: Path, stall_at: int | None, name: str = "t.py") -> Path:
    script = tmp_path / name
    stall = tmp_path / f"{name}.stalled"
    script.write_text(f"STALL_AT = {stall_at!r}\nSTALL_FILE = {str(stall)!r}\n" + LOOP)
    return script


def test_a_child_at_its_limit_ends_where_it_is_and_says_how_far_it_got(tmp_path):
    # Warm-up 3; the loop stalls in its loop index 5: steps 3->4 and 4->5 were timed.
    script = _script(tmp_path, stall_at=5)
    out = tmp_path / "out.json"
    proc = subprocess.Popen([sys.executable, "-m", "gpu_notebook.tryfix.child", str(out), "3",
                             "30", str(script), str(script)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        while not (tmp_path / "t.py.stalled").exists():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        os.kill(proc.pid, LIMIT_SIGNAL)  # what the runner sends at the run's limit
        assert proc.wait(timeout=120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    data = json.loads(out.read_text())
    assert data["ended"] == "limit" and not data["stopped"] and data["error"] is None
    assert data["steps_s"] == []  # never compared
    assert len(data["partial_steps_s"]) == 2 and data["steps_seen"] == 5
    assert 0 < data["first_step_s"] <= data["warm_s"] <= data["wall_s"]
    # Where it was when the limit came, from the signal handler itself (a thread blocked in C
    # says so too, and a run killed with no result keeps it): the script's stalled line. The
    # record carries it (TrialRun.stacks); on main nothing said where a run was.
    stacks = trials.thread_stacks(stacks_file(str(out)))
    stall_line = script.read_text().splitlines().index("            time.sleep(1)") + 1
    assert stacks and stacks[0].startswith(f"current: t.py:{stall_line} <module>"), stacks


# Two ways a run's exit outlasts its steps, after its result: a thread that is no daemon and
# never ends, and a child process that is no daemon and never ends (multiprocessing's exit
# joins it). Persistent loader workers that ignore SIGTERM were the second until the child
# ended live loaders' workers itself after its result (they stop when told, at once: see
# test_a_run_s_loader_workers_end_before_the_interpreter_s_exit_hooks).
HANGING_EXITS = {
    "thread": "import threading\nthreading.Thread(target=lambda: time.sleep(10**6)).start()\n",
    "process": (
        "import multiprocessing, signal\n"
        "def _deaf():\n    signal.signal(signal.SIGTERM, signal.SIG_IGN)\n    time.sleep(10**6)\n"
        "multiprocessing.Process(target=_deaf).start()\n"
    ),
}


@pytest.mark.parametrize("how", sorted(HANGING_EXITS))
def test_a_run_whose_exit_hangs_keeps_its_steps_and_its_exit_is_bounded_apart(tmp_path, how):
    script = tmp_path / "t.py"
    body = LOOP.replace("for i, (x, y)", HANGING_EXITS[how] + "for i, (x, y)")
    script.write_text(f"STALL_AT = None\nSTALL_FILE = ''\n{body}")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    runner = run_child(TrialSettings(steps=5, budget_s=600, warmup=3))
    # The limit is ample for 8 steps of a linear model, and shorter than the exit's hang.
    r = runner(script, script, [], 120.0, scratch, 5)
    assert not r.broke and not r.timed_out and r.stopped and r.ended == "stopped"
    assert len(r.steps_s) == 5
    assert r.exit_killed and r.exit_s is not None and r.exit_s >= EXIT_GRACE_S
    assert r.first_step_s is not None and r.warm_s is not None
    assert r.first_step_s <= r.warm_s <= r.wall_s
    if how == "process":
        assert r.processes is not None and r.processes >= 1


REPORT = Path(__file__).parent / "data/gpu/2026-12-04-nvidia-h200-cli/gpu_bound.report.json"


def test_a_fix_whose_run_never_ends_its_timed_steps_is_not_measured_with_its_run_record(
    tmp_path, monkeypatch
):
    # The patched copy stalls in its timed steps (loop index 5, warm-up 3): its run is stopped
    # at its limit. On main it read "slower" ("its timed steps did not end within 30 s").
    script = _script(tmp_path, stall_at=None, name="train.py")
    stalling = _script(tmp_path, stall_at=5, name="fix.py").read_text()
    report = Report.from_json(REPORT.read_text())
    offered = next(f for f in report.findings if f.proposal and f.proposal.source_after)
    fix = dataclasses.replace(offered, proposal=dataclasses.replace(
        offered.proposal, source_after=stalling))  # fmt: skip
    report = dataclasses.replace(report, findings=(fix,))
    monkeypatch.setattr(trials, "MIN_RUN_TIMEOUT_S", 20.0)
    settings = TrialSettings(steps=5, budget_s=1200, warmup=3, rounds=2)
    raw = trials.try_fixes(report, script, [], settings, runner=run_child(settings))
    tf = word_try_fixes(raw)
    (t,) = tf.trials
    assert (tmp_path / "fix.py.stalled").exists()  # the fix's run reached its stall
    assert t.verdict == "not measured" and not t.recommended and t.speedup is None
    assert "did not end its timed steps" in t.note and "no measurement" in t.note
    said = render_try_fixes(tf)
    assert "SLOWER" not in said and "stopped at its limit; " in said
    # Every run's record: the script as it is stopped with its steps; the fix at its limit,
    # warm, with the 2 steps it timed, and not run again.
    fix_runs = [r for r in raw.runs if r.arm]
    assert [r.ended for r in fix_runs] == ["limit"]
    (f,) = fix_runs
    assert f.steps_timed == 2 and f.warm_s is not None and not f.budget_limited
    assert f.limit_s >= 20.0 and f.exit_s is not None
    # Where it was at its limit: the patched copy's stalled loop (the copy keeps the name).
    assert f.stacks and f.stacks[0].startswith("current: train.py:"), f.stacks
    assert "at its limit in train.py:" in said
    base = [r for r in raw.runs if not r.arm]
    assert base and all(r.ended == "stopped" and r.steps_timed == r.steps_asked for r in base)
    # The JSON carries the records.
    data = json.loads(dataclasses.replace(report, try_fixes=tf).to_json())
    assert [r["ended"] for r in data["try_fixes"]["runs"] if r["arm"]] == ["limit"]
    Report.from_json(dataclasses.replace(report, try_fixes=tf).to_json())
    assert signal.SIGUSR2 == LIMIT_SIGNAL


# A loader whose worker is started by spawn (as Python 3.14's default forkserver starts it):
# the worker writes what its module-level MARK says. The patched copy says "patched".
SPAWNED = """
import sys, torch
from torch.utils.data import DataLoader, Dataset
MARK = "original"
class Marks(Dataset):
    def __len__(self): return 10000
    def __getitem__(self, i):
        if i == 0:
            with open(sys.argv[1], "w") as f:
                f.write(MARK)
        return torch.randn(4), torch.randn(1)
if __name__ == "__main__":
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(Marks(), batch_size=8, num_workers=1, multiprocessing_context="spawn")
    for x, y in loader:
        (model(x) - y).pow(2).mean().backward()
        opt.step(); opt.zero_grad()
"""


def test_a_spawned_worker_runs_the_patched_copy_not_the_user_s_script(tmp_path):
    # Before: the child's __main__ names the user's script (its __file__), so a spawn or
    # forkserver worker re-ran the user's unpatched file as __mp_main__ and unpickled its
    # classes: a fix to the dataset was measured without it.
    script = tmp_path / "train.py"
    script.write_text(SPAWNED)
    copy = tmp_path / "fix1" / "train.py"
    copy.parent.mkdir()
    copy.write_text(SPAWNED.replace('MARK = "original"', 'MARK = "patched"'))
    out, seen = tmp_path / "out.json", tmp_path / "seen.txt"
    subprocess.run([sys.executable, "-m", "gpu_notebook.tryfix.child", str(out), "2", "3",
                    str(copy), str(script), str(seen)], check=True, timeout=300,
                   capture_output=True)  # fmt: skip
    assert json.loads(out.read_text())["stopped"]
    assert seen.read_text() == "patched"


# A loader whose workers outlive the loop: persistent (the workers fix sets it), or a
# non-persistent iterator the script keeps. At the loop's first index the script registers an
# exit hook where torch up to 2.11 registers its own for a pinned persistent loader (after
# torch's and multiprocessing's, so it runs before them): it writes whether each worker is
# still alive there.
KEPT_WORKERS = {
    "persistent": (
        "loader = DataLoader(data, batch_size=8, num_workers=2, persistent_workers=True)\n"
        "it = loader\n"
    ),
    "kept iterator": "it = iter(DataLoader(data, batch_size=8, num_workers=2))\n",
}
AT_EXIT = """
import atexit, json
def _alive_at_exit(workers):
    with open(ALIVE_FILE, "w") as f:
        json.dump([w.is_alive() for w in workers], f)
"""


@pytest.mark.parametrize("how", sorted(KEPT_WORKERS))
def test_a_run_s_loader_workers_end_before_the_interpreter_s_exit_hooks(tmp_path, how):
    # Issue 26: on the H100 (torch 2.11) the workers fix's run never ended: torch joins each
    # persistent worker of a pinned loader from an atexit hook, one by one, 5 s each, none told
    # to stop (pytorch#81794): 12 workers, ~60 s of exit. The child now ends the workers of
    # every live loader iterator after its result, as ``del loader`` would (all told, then
    # joined), so at the interpreter's exit hooks no worker is left. On main: all alive.
    alive = tmp_path / "alive.json"
    loop = LOOP.replace("enumerate(DataLoader(data, batch_size=8))", "enumerate(it)")
    loop = loop.replace(
        "    if STALL_AT",
        "    if i == 0:\n        atexit.register(_alive_at_exit, list(WORKERS()))\n    if STALL_AT",
    )
    loop = loop.replace("for i, (x, y)", KEPT_WORKERS[how] + "for i, (x, y)")
    workers = "loader._iterator._workers" if how == "persistent" else "it._workers"
    script = tmp_path / "t.py"
    script.write_text(
        f"STALL_AT = None\nSTALL_FILE = ''\nALIVE_FILE = {str(alive)!r}\n{AT_EXIT}\n"
        f"def WORKERS():\n    return {workers}\n{loop}"
    )
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    runner = run_child(TrialSettings(steps=5, budget_s=600, warmup=3))
    r = runner(script, script, [], 120.0, scratch, 5)
    assert r.stopped and r.ended == "stopped" and len(r.steps_s) == 5, r
    assert r.processes is not None and r.processes >= 2  # the workers ran the steps
    assert json.loads(alive.read_text()) == [False, False]
    assert not r.exit_killed


# ------------------------------------------------- no run of the script that nothing is compared with

# Real optimizer steps of ~30 ms (a sleep: the runs are sized on the recorded report's 31.7 ms
# step, so they stop at their boundary, not at the script's end); each run writes its ARM into
# the log first: the log counts the runs, in their order.
COUNTED = """
import sys, time, torch
with open(sys.argv[1], "a") as log:
    log.write(ARM + "\\n")
BREAK
torch.set_num_threads(1)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(8, 4), torch.randn(8, 1)
for i in range(80):
    (model(x) - y).pow(2).mean().backward()
    opt.step(); opt.zero_grad()
    time.sleep(0.03)
"""


def _counted(arm: str, broken: bool = False) -> str:
    breaks = "raise RuntimeError('the patch broke it')" if broken else ""
    return f"ARM = {arm!r}\n" + COUNTED.replace("BREAK", breaks)


def _counted_report(*fixes: str) -> Report:
    """The recorded report, its offered fix repeated once per patched source in ``fixes``."""
    report = Report.from_json(REPORT.read_text())
    offered = next(f for f in report.findings if f.proposal and f.proposal.source_after)
    found = tuple(
        dataclasses.replace(
            offered,
            fix_id=f"fix{i}",
            proposal=dataclasses.replace(offered.proposal, source_after=source),
        )
        for i, source in enumerate(fixes, 1)
    )
    return dataclasses.replace(report, findings=found)


def test_no_fix_kept_runs_nothing_past_the_first_run_and_says_why(tmp_path):
    # Issue 26: with the budget holding no fix's runs beside the script's (0 fixes kept), the
    # planner still ran the script as it is again, compared with nothing (37 s of a CPU run).
    # Each run here is read as taking 100 s of a 300 s budget (real runs, their time inflated
    # on the budget's clock): 3 runs, under the 4 a fix needs beside the script's.
    script = tmp_path / "train.py"
    script.write_text(_counted("base"))
    log = tmp_path / "runs.log"
    report = _counted_report(_counted("fix"))
    settings = TrialSettings(steps=5, budget_s=300, warmup=3, rounds=3)
    real = run_child(settings)
    now = [0.0]

    def runner(*args):  # type: ignore[no-untyped-def]
        r = real(*args)
        now[0] += 100.0
        return dataclasses.replace(r, wall_s=100.0)

    raw = trials.try_fixes(report, script, [str(log)], settings, runner=runner,
                           clock=lambda: now[0])  # fmt: skip
    assert log.read_text().split() == ["base"]  # the first run only: it measured a run's time
    tf = word_try_fixes(raw)
    (t,) = tf.trials
    assert t.verdict == "skipped" and not t.recommended
    assert any("none of the 1 offered fixes fit" in n and "--try-budget 400" in n
               for n in tf.notes), tf.notes  # fmt: skip
    assert [r.arm for r in raw.runs] == [""]


def test_no_run_of_the_script_once_every_fix_broke(tmp_path):
    # The same waste in the loop: after the only fix broke in round 1, the script as it is ran
    # in rounds 2 and 3 beside nothing.
    script = tmp_path / "train.py"
    script.write_text(_counted("base"))
    log = tmp_path / "runs.log"
    report = _counted_report(_counted("fix", broken=True))
    settings = TrialSettings(steps=5, budget_s=1200, warmup=3, rounds=3)
    raw = trials.try_fixes(report, script, [str(log)], settings, runner=run_child(settings))
    assert log.read_text().split() == ["base", "fix"]
    (t,) = raw.trials
    assert t.verdict == "broke the script" and "the patch broke it" in " ".join(t.error_lines)


def test_the_script_still_runs_beside_a_fix_left_when_another_broke(tmp_path):
    # Another shape: two fixes, the first breaks; the second is still compared, so the script
    # as it is runs in every round beside it (2 rounds: first, fix1 broke, fix2, fix2, base).
    script = tmp_path / "train.py"
    script.write_text(_counted("base"))
    log = tmp_path / "runs.log"
    report = _counted_report(_counted("fix1", broken=True), _counted("fix2"))
    settings = TrialSettings(steps=5, budget_s=1200, warmup=3, rounds=2)
    raw = trials.try_fixes(report, script, [str(log)], settings, runner=run_child(settings))
    seen = log.read_text().split()
    assert seen[:5] == ["base", "fix1", "fix2", "fix2", "base"]
    assert "fix1" not in seen[2:]  # any added rounds are the script's and fix2's
    first, second = raw.trials
    assert first.verdict == "broke the script"
    assert len(second.baseline_steps_s) == 2 == len(second.variant_steps_s)


# ------------------------------------------------- a pin-memory thread's join is bounded


def test_a_cpu_loader_with_pin_memory_starts_no_pin_thread_and_its_workers_end():
    # Torch starts a pin-memory thread only with an accelerator: on this CPU-only machine
    # pin_memory=True makes none (it warns), and the child's teardown ends the workers as before.
    import warnings

    import torch
    from torch.utils.data import DataLoader, TensorDataset

    from gpu_notebook.tryfix.child import _end_loader_workers

    data = TensorDataset(torch.randn(64, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "no accelerator is found"
        it = iter(DataLoader(data, batch_size=8, num_workers=2, pin_memory=True))
    next(it)
    if torch.accelerator.is_available():
        pytest.skip("an accelerator: torch starts a pin thread here")
    assert "_pin_memory_thread" not in it.__dict__
    workers = list(it._workers)
    assert _end_loader_workers() >= 1
    assert it._shutdown and not any(w.is_alive() for w in workers)


@pytest.mark.parametrize("pin", ["ends when told", "blocked"])
def test_a_pin_memory_thread_is_joined_for_a_bounded_time_then_the_workers_end(pin, monkeypatch):
    # Torch joins a loader's pin-memory thread with no timeout before it tells the workers to
    # stop; one blocked in a CUDA call (a pinned allocation) held the child's exit until the
    # parent's 15 s cap killed it. No accelerator here, so no real pin thread: a thread stands in
    # for it at that boundary (the real iterator and workers are torch's), either ending once its
    # stop event is set, as torch's loop does, or blocked until the test lets it go.
    # On main: "blocked" never returns from the teardown (joined without a timeout).
    import threading

    import torch
    from torch.utils.data import DataLoader, TensorDataset

    from gpu_notebook.tryfix import child

    it = iter(DataLoader(TensorDataset(torch.randn(64, 4)), batch_size=8, num_workers=2))
    next(it)
    done, release = threading.Event(), threading.Event()

    def pin_loop() -> None:
        if pin == "blocked":
            release.wait()
        else:
            done.wait()

    thread = threading.Thread(target=pin_loop, daemon=True)
    thread.start()
    it._pin_memory_thread_done_event = done
    it._pin_memory_thread = thread
    workers = list(it._workers)
    monkeypatch.setattr(child, "PIN_JOIN_S", 0.2)
    teardown = threading.Thread(target=child._end_loader_workers, daemon=True)
    try:
        teardown.start()
        teardown.join(120)  # a guard against a hang, not a duration: the bound is 0.2 s
        assert not teardown.is_alive(), "the teardown is still joining the pin thread"
        assert done.is_set()  # told to stop, as torch tells it
        assert thread.is_alive() == (pin == "blocked")  # left only where it did not end
        assert it._shutdown and not any(w.is_alive() for w in workers)
        assert it._worker_result_queue._closed
    finally:
        release.set()
