"""A straggler is the run's, not the window's: every step's split says which rank's own work the
others wait for; two equal ranks on a busy host trade who waits and their splits agree.

Seeded per-step series of two ranks in lockstep (the step clock's phases, each step's wait for a
core and time on a core), and the window facts of a recorded miss: mechanisms, never timing.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from gpu_notebook.records import RankFacts, RankInfo, StepClockRecord, StepTiming
from gpu_notebook.report.build import build_report
from gpu_notebook.report.job import find_straggler, job_report, rank_facts
from tests.test_run_shape import make_run

STEPS = 40


def _clock(rows: list[dict[str, float]], timed: bool = True) -> StepClockRecord:
    """Steps from per-step seconds: the clock's phases, "rest" beyond them, ``wait`` for a core
    and ``cpu`` on one (both read at every step end)."""
    out, t = [], 0.0
    for i, p in enumerate(rows):
        parts = [p.get(k, 0.0) for k in ("data", "forward", "backward", "optimizer")]
        dur = sum(parts) + p.get("rest", 0.0)
        out.append(
            StepTiming(i, t, dur, *parts, 1, 1, 8, timed=timed, wait_s=p["wait"], cpu_s=p["cpu"])
        )
        t += dur
    return StepClockRecord("optimizer", len(out), tuple(out))


def _lockstep(
    seed: int,
    *,
    late_s: tuple[float, float] = (0.0, 0.0),
    late_phase: str = "rest",
    core_wait_s: tuple[float, float] = (0.0, 0.0),
    cpu_s: tuple[float, float] = (0.0004, 0.0004),
) -> list[list[dict[str, float]]]:
    """Two ranks of a DDP loop: in each step a rank's own work is 0.3 ms of compute, its own
    ``late_s`` (in ``late_phase``) and a random preemption (its wait for a core, up to
    ``core_wait_s``, which lands in its compute); the gradient all-reduce in backward makes the
    earlier rank wait for the later one, so both steps last as long as the later rank's."""
    rng = np.random.default_rng(seed)
    ranks: list[list[dict[str, float]]] = [[], []]
    for _ in range(STEPS):
        noise = [float(rng.uniform(0.0, 0.004)) for _ in range(2)]  # the host's other work
        waits = [float(rng.uniform(0.0, core_wait_s[k])) for k in range(2)]
        own = [0.0003 + late_s[k] + noise[k] + waits[k] for k in range(2)]
        end = max(own)
        for k in range(2):
            row = {"data": 0.00005, "forward": 0.0001, "backward": 0.0002, "optimizer": 0.00003}
            row["rest"] = 0.0
            row[late_phase] = row.get(late_phase, 0.0) + late_s[k]
            # The rank's preemption and the host's noise stretch its backward compute; its
            # wait for the peer (the all-reduce) is in backward too.
            row["backward"] += noise[k] + waits[k] + (end - own[k])
            row["wait"] = waits[k]
            row["cpu"] = cpu_s[k] + float(rng.uniform(0.0, 0.0001))
            ranks[k].append(row)
    return ranks


def _facts(rows: list[list[dict[str, float]]], timed: bool = True) -> list[RankFacts]:
    return [
        rank_facts(build_report(make_run(_clock(r, timed))), RankInfo(k, 2, k, "vm"))
        for k, r in enumerate(rows)
    ]


def _window(run: list[RankFacts], window: list[dict[str, float]]) -> list[RankFacts]:
    """The ranks' run facts with what their profiled window read (comm wait per step and its
    spread over the window's steps, the profiled step, the sampler's waited share)."""
    return [dataclasses.replace(r, **w) for r, w in zip(run, window, strict=True)]  # type: ignore[arg-type]


# Recorded: ddp_no_straggler, loaded, 2026-12-04 (run 2): no straggler planted. In the three
# profiled steps rank 0 waited 6.05 ms a step in the all-reduce and rank 1 1.04 ms (rank 1's
# backward read 3.5 ms, rank 0's 0.3 ms: a preempted rank); every guard of the window passed.
MISS = [
    {
        "step_s": 0.00502,
        "comm_s": 0.00605,
        "comm_p10_s": 0.00336,
        "comm_p90_s": 0.01045,
        "step_p10_s": 0.004,
        "step_p90_s": 0.00797,
        "run_step_s": 0.00531,
        "run_wait_share": 0.00829,
        "host_busy_share": 1.0,
        "phase_s": {"forward": 0.00013, "backward": 0.00031, "comm": 0.00605},
    },
    {
        "step_s": 0.00531,
        "comm_s": 0.00104,
        "comm_p10_s": 0.00022,
        "comm_p90_s": 0.00205,
        "step_p10_s": 0.004,
        "step_p90_s": 0.00799,
        "run_step_s": 0.00531,
        "run_wait_share": 0.3724,
        "host_busy_share": 1.0,
        "phase_s": {"forward": 0.00012, "backward": 0.00346, "comm": 0.00104},
    },
]


def test_the_runs_split_tells_equal_ranks_on_a_busy_host_from_a_planted_delay():
    for seed in range(5):
        run = _facts(_lockstep(seed, core_wait_s=(0.0, 0.004)))
        ranks = _window(run, MISS)
        assert find_straggler(ranks) is None, seed
        assert run[0].run_split_s and run[1].run_split_s
        job = job_report(ranks, 2, source="run")
        assert job.straggler is None and job.saturated_hosts
        # The same window without the run's split (an older summary): the window's rules alone
        # name rank 1, as recorded.
        older = [dataclasses.replace(r, run_split_s={}) for r in ranks]
        found = find_straggler(older)
        assert found is not None and found.rank == 1
    for seed in range(5):
        # Rank 1 sleeps 30 ms every step among the same noise; its window: rank 0 waits for it.
        run = _facts(_lockstep(seed, late_s=(0.0, 0.030), core_wait_s=(0.0, 0.004)))
        window = [
            {**MISS[0], "comm_s": 0.031, "comm_p10_s": 0.029, "comm_p90_s": 0.034},
            {**MISS[1], "comm_s": 0.001, "comm_p10_s": 0.0002, "comm_p90_s": 0.002},
        ]
        for w in window:
            w.update(step_s=0.035, run_step_s=0.035, step_p10_s=0.033, step_p90_s=0.039)
        found = find_straggler(_window(run, window))
        assert found is not None and found.rank == 1 and found.reason == "waits-least", seed


def test_a_rank_whose_own_phase_is_its_wait_for_a_core_is_the_machines():
    # Rank 1's data phase holds 6 ms more than rank 0's every step, and its thread waited for a
    # core those 6 ms (read at every step end; the sampler's run-wide share not read): the host
    # held it back. The same excess with no wait for a core: named.
    rows = _lockstep(1, late_s=(0.0, 0.006), late_phase="data")
    for row in rows[1]:
        row["wait"] = 0.006
    window = [
        {**MISS[0], "comm_s": 0.0065, "comm_p10_s": 0.006, "comm_p90_s": 0.007},
        {**MISS[1], "comm_s": 0.0005, "comm_p10_s": 0.0, "comm_p90_s": 0.001},
    ]
    for w in window:
        w.update(step_s=0.009, run_step_s=0.009, step_p10_s=0.0085, step_p90_s=0.0095)
        w["run_wait_share"] = None
    assert find_straggler(_window(_facts(rows), window)) is None
    for row in rows[1]:
        row["wait"] = 0.0
    found = find_straggler(_window(_facts(rows), window))
    assert found is not None and found.rank == 1


def test_a_straggler_whose_cause_is_in_the_collectives_phase_is_named_by_its_time_on_a_core():
    # Rank 1 computes 6 ms more of backward every step (uneven work): in lockstep both ranks'
    # backward lasts alike, rank 0's holding the wait; rank 1's thread spends the 6 ms on a core.
    rows = _lockstep(2, cpu_s=(0.0004, 0.0064))
    for k in (0, 1):
        for row in rows[k]:
            row["backward"] += 0.006
    window = [
        {**MISS[0], "comm_s": 0.0065, "comm_p10_s": 0.006, "comm_p90_s": 0.007},
        {**MISS[1], "comm_s": 0.0005, "comm_p10_s": 0.0, "comm_p90_s": 0.001},
    ]
    for w in window:
        w.update(step_s=0.009, run_step_s=0.009, step_p10_s=0.0085, step_p90_s=0.0095)
        w.pop("run_wait_share")
    found = find_straggler(_window(_facts(rows), window))
    assert found is not None and found.rank == 1
    # Equal time on a core: nothing in the run tells the ranks apart.
    for row in rows[1]:
        row["cpu"] = 0.0004
    assert find_straggler(_window(_facts(rows), window)) is None


def test_a_lean_clock_gives_no_split_and_the_windows_rules_decide():
    run = _facts(_lockstep(0, core_wait_s=(0.0, 0.004)), timed=False)
    assert not run[0].run_split_s and not run[1].run_split_s
    found = find_straggler(_window(run, MISS))
    assert found is not None and found.rank == 1
