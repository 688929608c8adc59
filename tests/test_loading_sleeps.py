"""A loader whose items wait on a store (a sleep, a read) rather than compute keeps its workers
offer on a busy machine: its workers wait beside one another and take next to no CPU.

Unseen round 16 (benchmarks/unseen_programs/islice_remote_latency.py: ``time.sleep(0.0015)``
an item, no workers, load 14): "workers may not help on this machine now: 0.0 of 2 core(s) were
free, and the workers' CPU work would share this process's CPU", from the process's CPU use
(torch's second intra-op thread spinning in backward), while the stack samples of the data wait
were on a core 7-10% of their own time. ``rules.input_pipeline.loading_on_core`` reads those
samples. The recorded run (tests/data/unseen) and hand-made stacks of the two kinds of loader."""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path

from gpu_notebook.records import RawStacks, Run, StackCount, from_jsonable
from gpu_notebook.report.build import build_report
from gpu_notebook.rules.input_pipeline import COMPUTING_SHARE, LOADING_SAMPLES, loading_on_core

RECORDED = Path(__file__).parent / "data" / "unseen" / "islice_remote_latency_loaded.run.json.gz"


def _recorded() -> Run:
    return from_jsonable(Run, json.loads(gzip.decompress(RECORDED.read_bytes())))


def _stacks(phase_times: list[tuple[str | None, int, int, int]]) -> RawStacks:
    """One stack a (phase, wall us, cpu us, wait us), 6 samples each."""
    stacks = tuple(
        StackCount(((0, 1),), phase, 6, wall, True, cpu, wait)
        for phase, wall, cpu, wait in phase_times
    )
    return RawStacks(
        1, 0.005, 6 * len(stacks), sum(s.time_us for s in stacks), 1.0, stacks=stacks,
        cpu_us=sum(s.cpu_us for s in stacks), wait_us=sum(s.wait_us for s in stacks),
    )  # fmt: skip


def test_the_recorded_sleeping_loader_reads_off_a_core():
    run = _recorded()
    on_core = loading_on_core(run)
    assert on_core is not None and on_core < COMPUTING_SHARE
    # The process's CPU said the loop computes: the first test of session_share let it through.
    m = build_report(run).analysis.machine
    assert m is not None and m.loop_ours_cores and m.loop_run_wait is not None
    assert m.loop_ours_cores / (1.0 - m.loop_run_wait) >= COMPUTING_SHARE


def test_the_recorded_sleeping_loader_is_offered_workers():
    workers = next(f for f in build_report(_recorded()).findings
                   if f.rule_id == "input.loader_workers")  # fmt: skip
    # main: "[info] ... workers may not help on this machine now", no fix
    assert workers.proposal is not None and workers.proposal.fix_id == "dataloader_workers"
    assert workers.severity != "info"


def test_a_loader_that_computes_reads_on_a_core_and_one_that_sleeps_off_it():
    # The data phase's samples decide; the rest of the step (backward, computing) does not.
    computing = _stacks([("data", 40_000, 30_000, 5_000), ("backward", 60_000, 55_000, 2_000)] * 2)
    sleeping = _stacks([("data", 40_000, 3_000, 5_000), ("backward", 60_000, 55_000, 2_000)] * 2)
    run = _recorded()
    on = loading_on_core(dataclasses.replace(run, stacks=computing, framework_stacks=None))
    off = loading_on_core(dataclasses.replace(run, stacks=sleeping, framework_stacks=None))
    assert on is not None and on > COMPUTING_SHARE
    assert off is not None and off < COMPUTING_SHARE
    # Too few samples of the data wait, or no thread clock: not read.
    few = _stacks([("data", 40_000, 3_000, 5_000)])
    assert few.stacks[0].count < LOADING_SAMPLES
    assert loading_on_core(dataclasses.replace(run, stacks=few, framework_stacks=None)) is None
    unread = dataclasses.replace(sleeping, cpu_us=None, wait_us=None)
    assert loading_on_core(dataclasses.replace(run, stacks=unread, framework_stacks=None)) is None
