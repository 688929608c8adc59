"""A thread of the program's own that spins beside the loop is named, not blamed on the machine.

Seen (unseen round 22, hf_memory_metrics_spin): ``TrainingArguments(skip_memory_metrics=False)``
runs transformers' ``TrainerMemoryTracker.peak_monitor_func`` (``while True`` over the RSS, no
sleep) on a thread for all of ``train()``. On main the loop thread's wait was read as other
programs': "[low] The machine, not your code" twice, the verdict "too busy ... (other programs
held the CPU)", the thread unnamed; by hand ``skip_memory_metrics=True`` was 2.31x faster.

What these hold, whatever the machine's load: the sampler reads each other Python thread's time
on a core and where it stands (its target's qualname and line); a spinner is on a core whenever
it can be, a sleeping heartbeat next to never, so the one is named and the other never is (the
line is a quarter of the loop thread's own rate: both fall together under load); the machine
rules read only the other programs' part of the wait; the Trainer's keyword is the patch.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from gpu_notebook.analysis.own_threads_spin import SIDE_SHARE
from gpu_notebook.cell.scan import cell_facts
from gpu_notebook.records import Report
from gpu_notebook.rules.machine import shared_machine
from gpu_notebook.rules.own_threads_spin import FIX, memory_metrics_off
from gpu_notebook.words.proposals import attach_fixes

RULE = "host.spinning_thread"

# A loop long enough for several sampler ticks (-i 0.05) inside its steps on any load: steps
# are counted, not timed.
SPIN = """\
import threading, time
import torch
stop = False
def spin():
    x = 0
    while not stop:
        x = max(x, 1)
def heartbeat():
    while not stop:
        time.sleep(0.2)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 8))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
side = [threading.Thread(target=f, name=f.__name__ + "_t") for f in (spin, heartbeat)]
for t in side:
    t.start()
step, until = 0, time.perf_counter() + 1.0  # 400 steps and a second at least: on any load
while step < 400 or time.perf_counter() < until:  # the steps span the ticks MIN_SPAN_S asks
    loss = model(torch.randn(32, 64)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    step += 1
stop = True
for t in side:
    t.join()
"""
# The loop's lines (`while not stop:`, `x = max(x, 1)`), the cell's (the %%gpucheck line first):
# the cell is compiled so.
SPIN_LINES = (7, 8)

HEARTBEAT_ONLY = SPIN.replace("(spin, heartbeat)", "(heartbeat,)")


def _run(ip, body: str) -> Report:
    ip.user_ns.pop("rep", None)
    result = ip.run_cell(f"%%gpucheck -q -i 0.05 -o rep\n{body}")
    assert result.success, result.error_in_exec
    return ip.user_ns["rep"]


def _thread(rep: Report, name: str):
    (t,) = [t for t in rep.run.samples.threads if t.name == name]
    return t


def _cpu(thread) -> float:
    return thread.readings[-1][1] - thread.readings[0][1]


def test_a_spinning_thread_is_read_named_and_holds_its_share_of_the_wait(ip):
    rep = _run(ip, SPIN)
    spinner, beat = _thread(rep, "spin_t"), _thread(rep, "heartbeat_t")
    # Where each stood, from its frame: its target's qualname and the line it loops on.
    at = spinner.spots[0].line
    assert spinner.spots[0].function == "spin" and at in SPIN_LINES
    assert beat.spots[0].function == "heartbeat"
    # Its time on a core read per thread: the spinner is on a core whenever it can be, the
    # heartbeat sleeps (under any load the spinner gets some, the sleeper next to none).
    assert _cpu(spinner) > 0 and _cpu(beat) < 0.1 * _cpu(spinner)
    # Not the loop thread, not ours.
    assert not any(t.name.startswith("gpu_notebook") for t in rep.run.samples.threads)
    side = rep.analysis.side_threads
    assert side is not None and [t.name for t in side.threads] == ["spin_t"]
    assert side.loop_cores is not None and side.threads[0].cores >= SIDE_SHARE * side.loop_cores
    assert 0 < side.held <= 1
    (f,) = [f for f in rep.findings if f.rule_id == RULE]
    assert f.line == at and f.fix_id is None and "spin" in f.title
    assert "sleep" in f.fix and f"line {at}" in f.fix
    assert any("this program's own thread `spin_t`" in e for e in f.evidence)
    # The machine rules read the other programs' part of the wait only.
    facts = cell_facts(rep.run.cell_source, None)
    shared = shared_machine(rep.run, rep.analysis, facts)
    wait = rep.analysis.shape.run_wait_share if rep.analysis.shape is not None else None
    if shared is not None and shared.said.wait is not None:
        assert wait is not None and shared.said.wait <= wait * (1 - side.held) + 1e-9
    # A verdict that says the steps waited names the thread as this program's own.
    if rep.verdict.core_wait is not None:
        wait = rep.verdict.core_wait
        assert wait.own_function == "spin"
        assert "this program's own thread `spin`" in " ".join(rep.verdict.evidence)
        # Most of the wait the thread's: no "too busy", the thread's host-bound, more GPUs no
        # (analysis/own_wait_verdict; tests/test_own_wait_verdict.py reads each side of it).
        if wait.own_mostly and not wait.judged:
            assert rep.verdict.category == "host-bound"
            assert rep.verdict.more_gpus.startswith("No:")


def test_a_kernel_holding_many_idle_threads_still_reads_the_cell_s_spinner(ip):
    """The fresh-clone CI of 71964f5: after ~1,500 tests in one shell, the spinner test read no
    `spin_t` at all: the watch reads ``MAX_THREADS`` threads, and the shell's earlier threads
    (loaders, monitors, pools, older cells') had filled it, oldest first. A long-lived kernel is
    the same. When full, an idle thread (no time on a core since its first reading) makes room."""
    from gpu_notebook.capture.own_threads_spin import MAX_THREADS

    ip.user_ns["idle_go"] = idle_go = threading.Event()
    idle = [threading.Thread(target=idle_go.wait, name=f"idle_{i}") for i in range(MAX_THREADS + 4)]
    for t in idle:
        t.start()
    try:
        rep = _run(ip, SPIN)
    finally:
        idle_go.set()
        for t in idle:
            t.join()
    spinner = _thread(rep, "spin_t")
    assert spinner.spots[0].function == "spin" and _cpu(spinner) > 0
    assert len(rep.run.samples.threads) <= MAX_THREADS


def test_a_sleeping_heartbeat_is_never_blamed(ip):
    rep = _run(ip, HEARTBEAT_ONLY)
    beat = _thread(rep, "heartbeat_t")
    assert beat.spots[0].function == "heartbeat"
    assert rep.analysis.side_threads is None
    assert RULE not in {f.rule_id for f in rep.findings}
    if rep.verdict.core_wait is not None:
        assert rep.verdict.core_wait.own_function is None


# A thread subclass of the user's that polls in ``while self.running:`` (another shape), under
# `gpucheck run`: the line is the script's.
POLLER = """\
import threading
import time
import torch

class Poller(threading.Thread):
    def __init__(self):
        super().__init__(name="poller", daemon=True)
        self.running = True
        self.peak = 0.0

    def run(self):
        while self.running:
            self.peak = max(self.peak, 1.0)

model = torch.nn.Linear(64, 8)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
poller = Poller()
poller.start()
step, until = 0, time.perf_counter() + 1.0  # 400 steps and a second at least: on any load
while step < 400 or time.perf_counter() < until:
    loss = model(torch.randn(32, 64)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    step += 1
poller.running = False
poller.join()
"""


def test_a_polling_thread_subclass_is_named_at_its_line_under_gpucheck_run(tmp_path: Path):
    script = tmp_path / "poll.py"
    script.write_text(POLLER)
    out = tmp_path / "rep.json"
    res = subprocess.run(
        [sys.executable, "-m", "gpu_notebook", "run", "-q", "-i", "0.05", "--json", str(out),
         str(script)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    data = json.loads(out.read_text())
    (poller,) = [t for t in data["run"]["samples"]["threads"] if t["name"] == "poller"]
    spot = poller["spots"][0]
    assert spot["function"] == "Poller.run" and spot["file"] == str(script)
    assert spot["line"] in (12, 13)  # `while self.running:`, `self.peak = max(...)`
    (f,) = [f for f in data["findings"] if f["rule_id"] == RULE]
    assert f["line"] == spot["line"] and f["fix_id"] is None
    assert f"line {spot['line']}" in f["fix"]


HF = """\
import torch
from torch import nn
from transformers import Trainer, TrainingArguments
class Rows(torch.utils.data.Dataset):
    def __init__(self, n):
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, 32, generator=g)
        self.y = (self.x[:, :4] * 3).argmax(1)
    def __len__(self):
        return len(self.x)
    def __getitem__(self, i):
        return {"x": self.x[i], "labels": self.y[i]}
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
    def forward(self, x, labels=None):
        return {"loss": nn.functional.cross_entropy(self.net(x), labels)}
args = TrainingArguments("/tmp/own_threads_spin_hf", per_device_train_batch_size=16,
                         max_steps=300, report_to=[], use_cpu=True, save_strategy="no",
                         disable_tqdm=True, logging_steps=1000,
                         skip_memory_metrics=False)
Trainer(model=Net(), args=args, train_dataset=Rows(4096)).train()
"""
HF_LINE = 23  # skip_memory_metrics=False: line 22 of the body


def test_the_trainers_memory_tracker_is_named_and_its_keyword_patched(ip):
    pytest.importorskip("transformers")
    rep = _run(ip, HF)
    side = rep.analysis.side_threads
    assert side is not None
    assert side.threads[0].function == "TrainerMemoryTracker.peak_monitor_func"
    assert side.threads[0].file.endswith("trainer_utils.py")
    (f,) = [f for f in rep.findings if f.rule_id == RULE]
    assert f.line == HF_LINE and f.fix_id == FIX.fix_id
    assert "skip_memory_metrics=True" in f.fix
    (fixed,) = attach_fixes([f], HF)
    assert fixed.proposal is not None and fixed.proposal.source_after is not None
    after = fixed.proposal.source_after
    assert "skip_memory_metrics=True)" in after and "skip_memory_metrics=False" not in after
    assert "logging_steps=1000" in after  # the call's other arguments stand


def test_the_keyword_patch_declines_without_the_keyword_off():
    import libcst as cst

    from gpu_notebook.fixes.cst_tools import Declined

    for src in (
        "args = TrainingArguments('o', skip_memory_metrics=True)\n",
        "args = TrainingArguments('o')\n",
        "args = Other('o', skip_memory_metrics=False)\n",
    ):
        assert isinstance(memory_metrics_off(cst.parse_module(src)), Declined)


def test_a_report_with_its_threads_reads_back_from_json(ip):
    rep = _run(ip, HEARTBEAT_ONLY)
    back = Report.from_json(rep.to_json())
    assert back.run.samples.threads == rep.run.samples.threads
    assert dataclasses.asdict(back.run.samples)["threads"]


def _side_run(spin_rate: float, beat_rate: float, cpu_s: float = 0.005, wait_s: float = 0.002):
    """100 steps of 10 ms (``cpu_s`` on a core, ``wait_s`` waiting for one) from 1 s; a spinner
    and a heartbeat read every 0.1 s over 0.5-2.5 s at the given rates (cores)."""
    from gpu_notebook.records import OwnThread, SampleSeries, ThreadSpot
    from tests.scenarios import synthetic as syn

    steps = syn.steps_record(100)
    steps = dataclasses.replace(
        steps,
        steps=tuple(
            dataclasses.replace(s, start_s=1.0 + 0.01 * i, duration_s=0.01, cpu_s=cpu_s,
                                wait_s=wait_s)
            for i, s in enumerate(steps.steps)
        ),
    )  # fmt: skip
    ticks = [0.5 + 0.1 * k for k in range(21)]

    def thread(name: str, rate: float) -> OwnThread:
        spot = ThreadSpot(name, "/home/u/train.py", 7, 20)
        return OwnThread(name, 1, tuple((t, rate * t) for t in ticks), (spot,))

    series = SampleSeries(0.1, 0.1, threads=(thread("spin", spin_rate), thread("beat", beat_rate)))
    return syn.make_run("", steps=steps, series=series)


def test_the_figures_hold_the_spinners_share_of_the_wait_and_its_bound():
    from gpu_notebook.analysis.own_threads_spin import side_threads
    from gpu_notebook.records import MachineFacts

    machine = MachineFacts(
        cores=2, others_median_cores=0.3, others_p90_cores=0.3, steal_pct=None,
        gpu_other_processes=None, torch_threads=1, workers=0, ours_median_cores=1.3,
        loop_others_cores=0.3,
    )  # fmt: skip
    side = side_threads(_side_run(0.6, 0.001), machine)
    assert side is not None and [t.name for t in side.threads] == ["spin"]
    (spin,) = side.threads
    assert spin.cores == pytest.approx(0.6) and spin.span_s == pytest.approx(1.0, rel=0.1)
    assert side.loop_cores == pytest.approx(0.5) and side.wait_share == pytest.approx(0.2)
    # With the spinner's 0.6 cores the loop (0.5) would need half of each step less: more than
    # its 20% wait, all of it the spinner's.
    assert side.held == pytest.approx(1.0)
    # The larger of: each step keeps its 5 ms on a core (2x); the loop's 0.5 core takes the
    # spinner's 0.6, at most one core (2x).
    assert side.bound == pytest.approx(2.0)
    # A loaded machine (the round's memory tracker): the loop at 0.125 cores waiting 80% of
    # each step, the spinner at 0.125, other programs at 1.75.
    loaded = dataclasses.replace(machine, loop_others_cores=1.75)
    side = side_threads(_side_run(0.125, 0.001, cpu_s=0.00125, wait_s=0.008), loaded)
    assert side is not None and side.wait_share == pytest.approx(0.8)
    # By the cores alone 0.125 / 1.875 of the wait; with the spinner's cores the loop needs half
    # of each step less: 0.5 / 0.8 of its wait.
    assert side.held == pytest.approx(0.625)
    # Each step keeps its 1.25 ms on a core and the others' 3 ms of its wait (2.35x); the loop
    # takes the spinner's cores (2x).
    assert side.bound == pytest.approx(10 / (1.25 + 0.375 * 8))
    # Under a quarter of the loop's rate: not named.
    assert side_threads(_side_run(0.1, 0.001), machine) is None


# --------------------------------------------------------------------------------------------
# A user's function run by a library's thread (a pool's worker, a Timer) is named from the
# innermost frame of the user's own code; a library's thread that never enters it is not.
# --------------------------------------------------------------------------------------------


def _watched(thread_name: str) -> tuple:
    """Two readings of the watch (the loop: this thread) and ``thread_name``'s places."""
    from gpu_notebook.capture.own_threads_spin import ThreadWatch

    watch = ThreadWatch(threading.get_native_id())
    watch.read(0.0)
    watch.read(0.1)
    (track,) = [t for t in watch.records() if t.name == thread_name]
    return track.spots


def _waits_in_user_code(entered: threading.Event, release: threading.Event) -> None:
    entered.set()
    release.wait()  # threading's frames inside: the innermost of the user's is this one


def test_a_pool_workers_and_a_timers_user_function_is_named_not_the_librarys_worker():
    from concurrent.futures import ThreadPoolExecutor

    from gpu_notebook.analysis.own_threads_spin import _library

    entered, release = threading.Event(), threading.Event()
    pool = ThreadPoolExecutor(1, thread_name_prefix="own_pool")
    timer = threading.Timer(0.0, _waits_in_user_code, (threading.Event(), release))
    timer.name = "own_timer"
    try:
        pool.submit(_waits_in_user_code, entered, release)
        assert entered.wait(60)
        timer.start()
        assert timer.args[0].wait(60)
        for name in ("own_pool_0", "own_timer"):
            spots = _watched(name)
            assert [s.function for s in spots] == ["_waits_in_user_code"], (name, spots)
            assert spots[0].file == __file__ and not _library(spots[0].file)
    finally:
        release.set()
        pool.shutdown()
        timer.join()


def test_a_library_thread_that_never_enters_user_code_is_not_named_the_users():
    import statistics
    from concurrent.futures import ThreadPoolExecutor

    from gpu_notebook.analysis.own_threads_spin import _library

    stop = threading.Event()
    pool = ThreadPoolExecutor(1, thread_name_prefix="lib_pool")
    try:
        # The standard library's code alone on the worker, on a core until ``stop``: fmean over
        # ``stop.is_set()``'s answers (statistics' and threading's frames, none of this file's).
        done = pool.submit(statistics.fmean, iter(stop.is_set, True))
        spots = _watched("lib_pool_0")
    finally:
        stop.set()
        pool.shutdown()
    assert done.result() == 0.0
    assert spots and all(s.file != __file__ for s in spots)
    # Named by its target, the library's worker: left out as the pipeline's machinery.
    assert all(_library(s.file) for s in spots), spots


POOL_SPIN = """\
import threading, time
from concurrent.futures import ThreadPoolExecutor
import torch
stop = threading.Event()
def spin():
    x = 0
    while not stop.is_set():
        x = max(x, 1)
pool = ThreadPoolExecutor(1)
done = pool.submit(spin)
model = torch.nn.Linear(64, 8)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
step, until = 0, time.perf_counter() + 1.0  # 400 steps and a second at least: on any load
while step < 400 or time.perf_counter() < until:
    loss = model(torch.randn(32, 64)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    step += 1
stop.set()
done.result()
pool.shutdown()
"""
POOL_SPIN_LINES = (8, 9)  # `while not stop.is_set():`, `x = max(x, 1)` (the %%gpucheck line first)


def test_a_users_function_spinning_in_a_pool_worker_is_named_at_its_line(ip):
    rep = _run(ip, POOL_SPIN)
    (worker,) = [t for t in rep.run.samples.threads if t.name.startswith("ThreadPoolExecutor")]
    assert worker.spots[0].function == "spin" and worker.spots[0].line in POOL_SPIN_LINES
    side = rep.analysis.side_threads
    assert side is not None and side.threads[0].function == "spin"
    (f,) = [f for f in rep.findings if f.rule_id == RULE]
    assert f.line == worker.spots[0].line and "spin" in f.title
