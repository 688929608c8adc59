"""The host's wait in collectives: read on the loop thread's own clock, from the typical steps,
and told apart between the gradient exchange (in backward) and the loop's own collectives.

ddp_allreduce_log (torchrun, 2 ranks, gloo, 2 cores) read its traced comm share at 33% / 26%
quiet and 81% / 46% under two spinning loops (a gain bound of 1.48x to 5.25x for the same code);
a rank whose window was unlike the run read HOST-BOUND ("waits on something outside torch":
the hooks' split has no comm phase); and the verdict's advice was DDP's overlap whatever the
ranks waited in. The traces under tests/data/distributed are that program's two ranks (load
~12 on 2 cores, this branch).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from gpu_notebook.analysis import verdict_said as said
from gpu_notebook.analysis.host_comm import host_comm
from gpu_notebook.analysis.phases import phase_breakdown
from gpu_notebook.analysis.verdict import decide
from gpu_notebook.records import PHASES, Analysis, Run, StepTiming
from gpu_notebook.rules import run_rules
from gpu_notebook.traces.kineto import load_trace
from gpu_notebook.words import word_findings
from tests.scenarios import synthetic as syn

DATA = Path(__file__).parent / "data" / "distributed"

LOOP = """import torch
import torch.distributed as dist
for step, (x, y) in enumerate(loader):
    loss = loss_fn(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    logged = loss.detach().clone()
    dist.all_reduce(logged)
"""


def clocked_run(off_core: float, *, steps: int = 40, waited: float = 0.3) -> Run:
    """A run whose loop thread was read at every step end: ``waited`` of each 10 ms step
    waiting for a core, and off a core (blocked) ``off_core`` of the rest."""
    own_s = 0.01 * (1.0 - waited)
    rows = tuple(
        StepTiming(
            i,
            i * 0.01,
            0.01,
            0.0,
            0.0,
            0.0,
            0.0,
            1,
            1,
            32,
            wait_s=0.01 * waited,
            cpu_s=own_s * (1.0 - off_core),
        )
        for i in range(steps)
    )
    record = dataclasses.replace(syn.steps_record(steps), steps=rows)
    return syn.make_run(LOOP, steps=record, cpu_count=2)


def traced(comm: float, *, other: float = 0.0, source: str = "trace") -> Analysis:
    measured = PHASES if source == "trace" else tuple(p for p in PHASES if p != "comm")
    split = syn.phases({"comm": comm, "other": other}, measured=measured, source=source)
    return syn.make_analysis(phase_split=split)


def own_collective(run: Run, analysis: Analysis):
    found = word_findings(run_rules(run, analysis, syn.VERDICT))
    return next(f for f in found if f.rule_id == "distributed.own_collectives")


def test_the_share_is_the_loop_threads_time_off_a_core_whatever_the_traced_wall_share():
    # The same loop read by its thread's clock, its traced steps at 30% (quiet) or 80% (a peer
    # lost its core in a traced step): one share, one bound.
    run = clocked_run(0.6)
    readings = [host_comm(run, traced(c)) for c in (0.3, 0.8)]
    assert [r.share for r in readings if r] == pytest.approx([0.6, 0.6])
    assert [r.traced for r in readings if r] == pytest.approx([0.3, 0.8])
    bounds = [own_collective(run, traced(c)).gain_bound for c in (0.3, 0.8)]
    assert bounds == pytest.approx([2.5, 2.5])
    verdicts = [decide(run, traced(c)) for c in (0.3, 0.8)]
    assert {v.category for v in verdicts} == {"comm-bound"}
    assert [v.answer for v in verdicts] == [said.HostComm(pytest.approx(0.6))] * 2
    assert all(isinstance(v.lines[0], said.CommClock) for v in verdicts)
    # Steps that hold our own work (the profiler starting or stopping) are left out, however
    # much of the run's time they hold (under load, over half of it).
    ours = [dataclasses.replace(s, duration_s=1.0, ours_s=0.5, cpu_s=0.5, wait_s=0.0)
            for s in run.steps.steps[:2]]  # fmt: skip
    slow = dataclasses.replace(run.steps, steps=(*ours, *run.steps.steps[2:]))
    assert host_comm(dataclasses.replace(run, steps=slow), traced(0.3)).share == pytest.approx(0.6)
    # Without the clock's readings, the traced share as read.
    unread = syn.make_run(LOOP, cpu_count=2)
    assert own_collective(unread, traced(0.3)).phase_share == pytest.approx(0.3)
    # Where the host thread sleeps mostly elsewhere (a loader's workers), its time off a core
    # is not the collectives': the traced share stands.
    split = syn.phases({"comm": 0.15, "data": 0.4})
    assert host_comm(run, syn.make_analysis(phase_split=split)).share == pytest.approx(0.15)


def test_a_rank_whose_window_is_unlike_the_run_is_judged_on_its_typical_steps():
    # The run's split is the hooks' (no comm phase: the all-reduce after opt.step() is
    # "other"); the unlike window's trace says the thread waits in collectives.
    hooks = traced(0.0, other=0.6, source="hooks")
    analysis = dataclasses.replace(hooks, window_phases=traced(0.5).phases)
    verdict = decide(clocked_run(0.7), analysis)
    assert verdict.category == "comm-bound"
    assert verdict.answer == said.HostComm(pytest.approx(0.7), None)
    assert "off a core" in " ".join(syn.verdict(clocked_run(0.7), analysis).evidence)
    # No clock readings: the typical steps did not read the wait, and the verdict says so
    # rather than judging from the window or calling the wait host overhead.
    unread = decide(syn.make_run(LOOP, cpu_count=2), analysis)
    assert unread.category != "comm-bound"
    assert any(isinstance(x, said.NotMeasured) and "comm" in x.phases for x in unread.lines)


@pytest.mark.parametrize("rank", [0, 1])
def test_the_trace_tells_the_gradient_exchanges_wait_from_the_loops_own(rank):
    # Ranks in lockstep wait at whichever collective the other reaches late: rank 0 of the
    # recorded run waited mostly at the logging all_reduce (after opt.step()), rank 1 mostly
    # at DDP's all-reduce at the end of backward.
    split = phase_breakdown(load_trace(DATA / f"ddp_allreduce_log.rank{rank}.trace.json.gz"))
    assert split is not None and "comm" in split.measured
    part = split.comm_in_backward
    assert part is not None and 0.0 < part < 1.0
    assert (part < 0.5) if rank == 0 else (part > 0.5)


def test_the_verdicts_words_follow_where_the_wait_was_measured():
    from gpu_notebook.words.verdict_answers import answer_words

    own, _ = answer_words(said.HostComm(0.6, 0.1))
    own_fix = answer_words(said.HostComm(0.6, 0.1))[1]
    assert "loop's own collectives" in own and "overlap the all-reduce" not in own_fix
    grads, grads_fix = answer_words(said.HostComm(0.6, 0.9))
    assert "in backward" in grads and "overlap the all-reduce with backward" in grads_fix
    assert "overlap the all-reduce with backward" in answer_words(said.HostComm(0.6))[1]
    # The rule says the same of its share.
    run = clocked_run(0.6)
    analysis = traced(0.5)
    split = dataclasses.replace(analysis.phases, comm_in_backward=0.25)
    text = " ".join(own_collective(run, dataclasses.replace(analysis, phases=split)).evidence)
    assert "75% of that wait outside backward" in text and "own clock over 40 steps" in text


def test_windows_combined_keep_the_part_of_their_wait_in_backward():
    # One window waits 40% of its steps in collectives, all in backward; the other 10%, none
    # in backward: the part is the first window's share of the combined comm time.
    from gpu_notebook.analysis.run_trend import combine_windows

    rows = tuple(StepTiming(i, i * 0.01, 0.01, 0.0, 0.0, 0.0, 0.0, 1, 1, 32) for i in range(40))
    record = dataclasses.replace(syn.steps_record(40), steps=rows)
    grads = dataclasses.replace(syn.phases({"comm": 0.4}, steps=3), comm_in_backward=1.0)
    own = dataclasses.replace(syn.phases({"comm": 0.1}, steps=3), comm_in_backward=0.0)
    combined = combine_windows(record, 2, [(2, 3, grads), (30, 3, own)])
    assert combined is not None
    comm = [p.phase_us["comm"] for p in combined.steps]
    assert 0.0 < combined.comm_in_backward < 1.0
    assert combined.comm_in_backward == pytest.approx(sum(comm[:3]) / sum(comm))
    unread = dataclasses.replace(own, comm_in_backward=None)
    assert combine_windows(record, 2, [(2, 3, grads), (30, 3, unread)]).comm_in_backward is None
