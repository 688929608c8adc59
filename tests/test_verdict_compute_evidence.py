"""A CPU run is called "compute" (a GPU would help) only on the run's own evidence.

The fallback verdict used to say "its time goes to compute" whenever no wait and no host overhead
fired: a loop that sleeps 20 ms a step read so in 1 of 6 runs on a loaded machine (issue 22).
Now the loop thread's time on a core over every read step (schedstat per step:
``StepTiming.cpu_s`` against the wall time less ``wait_s``) or, where it was not read, the
operators' share of the step must show compute. Recorded series, seeded ranges, no timing.
"""

from __future__ import annotations

import dataclasses

import pytest

from gpu_notebook.analysis.on_cpu import on_cpu
from gpu_notebook.records import StepClockRecord, StepTiming
from gpu_notebook.report.consistency import contradictions
from tests.scenarios import synthetic as syn

CELL = "for i in range(120):\n    step()\n"


def _steps(
    on_core: list[float], *, step_s: float = 0.02, wait_s: float = 0.0, read: bool = True
) -> StepClockRecord:
    """Steps of ``step_s`` wall time, ``wait_s`` of it waiting for a core, and each step's own
    time on a core as a share of the rest (seeded: the readings of a real thread, tick-rounded)."""
    rows = tuple(
        StepTiming(
            index=i,
            start_s=i * step_s,
            duration_s=step_s,
            data_s=0.0,
            forward_s=0.0,
            backward_s=0.0,
            optimizer_s=0.0,
            forward_calls=1,
            backward_calls=1,
            wait_s=wait_s if read else None,
            cpu_s=share * (step_s - wait_s) if read else None,
        )
        for i, share in enumerate(on_core)
    )
    return StepClockRecord("optimizer", len(rows), rows, event_counts={"optimizer": len(rows)})


def _series(share: float, n: int = 100, seed: int = 0) -> list[float]:
    import numpy as np

    rng = np.random.default_rng(seed)
    return [float(x) for x in np.clip(rng.normal(share, 0.05, n), 0.0, 1.0)]


def _verdict(steps: StepClockRecord, shares: dict[str, float] | None = None):
    run = syn.make_run(CELL, steps=steps)
    return syn.verdict(run, syn.make_analysis(shares or {}))


def test_a_sleeping_loop_is_never_called_compute():
    # 20 ms steps, the thread on a core ~3% of them: time.sleep. The window's trace reads all
    # operators (the sleep fell between windows): the run's own readings decide.
    verdict = _verdict(_steps(_series(0.03)))
    assert verdict.category == "host-bound"
    assert "compute" not in verdict.more_gpus.split(":")[0] and verdict.more_gpus.startswith("No")
    assert "waits on something outside torch" in verdict.headline
    assert any(e.startswith("loop thread on a core 4%") for e in verdict.evidence), verdict.evidence
    assert contradictions(verdict, ()) == ()


def test_waiting_for_a_core_is_the_machines_not_a_wait_of_the_loop():
    # A compute loop on a loaded machine: half of each step's wall time waiting for a core, the
    # rest on one. Its own time is compute: a busy machine does not turn it into "waiting".
    verdict = _verdict(_steps(_series(0.97), wait_s=0.01))
    assert verdict.category == "cpu-only", verdict.evidence
    assert verdict.more_gpus.startswith("A GPU would help")


def test_a_real_compute_loop_is_still_cpu_only():
    verdict = _verdict(_steps(_series(0.97)))
    assert verdict.category == "cpu-only"
    assert "computing on the CPU" in verdict.headline
    assert any(e.startswith("loop thread on a core 96%") for e in verdict.evidence), (
        verdict.evidence
    )
    assert verdict.confidence != "low"


def test_a_share_across_the_line_says_both_answers():
    # On a core about half the time, and the steps differ widely: the range straddles 50%.
    import numpy as np

    rng = np.random.default_rng(1)
    shares = [float(x) for x in rng.choice([0.05, 0.95], size=12)]
    verdict = _verdict(_steps(shares))
    on = on_cpu(_steps(shares).steps)
    assert on is not None and on.low < 0.5 <= on.high
    assert verdict.confidence == "low"
    note = next(e for e in verdict.evidence if "within the uncertainty" in e)
    assert "cpu-only (compute)" in note and "host-bound (waiting)" in note


def test_without_readings_the_operators_time_decides():
    unread = _steps(_series(0.03), read=False)
    # Torch's operators hold the step (the default synthetic split): compute, from the trace.
    computes = _verdict(unread)
    assert computes.category == "cpu-only"
    assert any("torch operators" in e and "not read" in e for e in computes.evidence)
    # Most of the step is Python outside any operator: the cell's own code, not compute.
    own = _verdict(unread, {"unattributed": 0.8})
    assert own.category == "host-bound" and "outside torch's operators" in own.headline
    assert own.more_gpus.startswith("No")
    # Neither: no evidence either way, and the verdict says what would separate them.
    neither = _verdict(unread, {"unattributed": 0.3, "data": 0.15, "sync": 0.15})
    assert neither.category == "unknown" and neither.confidence == "low"
    assert "time on a core" in neither.more_gpus


def test_our_own_profiler_steps_and_short_readings_are_not_evidence():
    steps = _steps(_series(0.03))
    ours = dataclasses.replace(
        steps, steps=tuple(dataclasses.replace(s, ours_s=0.001) for s in steps.steps)
    )
    assert on_cpu(ours.steps) is None
    assert on_cpu(_steps(_series(0.03, n=3)).steps) is None  # 60 ms of readings: a few ticks


@pytest.mark.parametrize("inference", [False, True])
def test_the_compute_answer_needs_evidence_for_inference_too(inference: bool):
    steps = _steps(_series(0.03))
    analysis = syn.make_analysis({})
    if inference:
        assert analysis.phases is not None
        analysis = dataclasses.replace(
            analysis, phases=dataclasses.replace(analysis.phases, workload="inference")
        )
    verdict = syn.verdict(syn.make_run(CELL, steps=steps), analysis)
    assert verdict.category == "host-bound"


def test_a_gpu_run_with_no_busy_reading_gets_no_default_verdict():
    # A GPU is visible, but no trace kernel and no NVML reading measured how busy it was, and
    # no wait or host overhead fired: "the host sets the pace" would be a default, not a reading.
    run = syn.make_run(CELL, gpus=[syn.gpu()])
    verdict = syn.verdict(run, syn.make_analysis({}))
    assert verdict.category == "unknown" and verdict.confidence == "low"
    assert "gpu-bound" in verdict.more_gpus and "host-bound" in verdict.more_gpus
    # With a reading, the reading decides.
    busy = syn.verdict(run, syn.make_analysis({}, util=syn.utilization(gpu_util_pct=95.0)))
    idle = syn.verdict(run, syn.make_analysis({}, util=syn.utilization(gpu_util_pct=30.0)))
    assert busy.category == "gpu-bound" and idle.category == "host-bound"


def _with_process_cpu(steps: StepClockRecord, cores: float) -> StepClockRecord:
    return dataclasses.replace(steps, process_cpu=syn.process_cpu(steps.steps, cores))


def test_a_loop_thread_waiting_for_torchs_other_threads_is_compute():
    # torch's intra-op pool with more threads than cores: the loop's thread waits at the end of
    # each parallel region (off a core 60% of its own time) while the pool's other threads
    # compute; the process used 1.45 cores. That is compute, not a sleep.
    steps = _with_process_cpu(_steps(_series(0.4)), 1.45)
    on = on_cpu(steps.steps, steps.process_cpu)
    assert on is not None and on.share < 0.5 and on.process is not None and on.process > 1.4
    verdict = _verdict(steps)
    assert verdict.category == "cpu-only", verdict.evidence
    assert any("this process's threads on a core" in e for e in verdict.evidence)
    # The same loop thread in a process that used no more than it: a wait, as before.
    alone = _verdict(_with_process_cpu(_steps(_series(0.4)), 0.4))
    assert alone.category == "host-bound" and "waits on something" in alone.headline


def test_our_own_work_in_the_steps_is_not_the_process_computing():
    # A sleeping loop (3% on a core) whose steps held a profiler start of ours: the process's
    # CPU time over those steps is our work's, taken out with it.
    steps = _steps(_series(0.03))
    rows = list(steps.steps)
    for i in (10, 11):
        rows[i] = dataclasses.replace(rows[i], ours_s=rows[i].duration_s)
    steps = dataclasses.replace(steps, steps=tuple(rows))
    readings = _with_process_cpu(steps, 0.03).process_cpu
    # Our profiler's 2 steps of CPU on top of the loop's own 3%.
    ours_cpu = 2 * 0.02
    readings = tuple(
        dataclasses.replace(r, process_cpu_s=r.process_cpu_s + (ours_cpu if r.index >= 11 else 0))
        for r in readings
    )
    on = on_cpu(steps.steps, readings)
    assert on is not None and on.process is not None and on.process < 0.2
    verdict = _verdict(dataclasses.replace(steps, process_cpu=readings))
    assert verdict.category == "host-bound"
