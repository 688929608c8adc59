"""Same code, same answer: a run-wide share near a severity line.

The step clock's bootstrap interval over a run of ~500 steps is a point or two wide, while
the load that moves between two runs of the same program moves the share more (the unseen
accel_log_gather's data wait read 10% and 12% at the 10% line: [low] in one run, [medium] in
the next; compile_graph_break's optimizer 21% and 26% at 20%). Each fifth of a run's steps is
a run of its own under the load of its time: the level is given where the fifths clear the
line too (``rules.common.share_range``, the one reading every rule grades a share by), so a
share near a line reads the level below in both runs.
"""

from __future__ import annotations

import dataclasses

from gpu_notebook.analysis.steps import run_phase
from gpu_notebook.records import RunPhase, StepClockRecord, StepTiming
from gpu_notebook.rules.common import WARN, run_optimizer, severity_in
from tests.scenarios import synthetic as syn
from tests.test_rules import TRAIN, only, rules_for

TOKENS = "class Tokens(Dataset):\n    def __getitem__(self, i): return seqs[i]\n" + TRAIN.replace(
    "DataLoader(ds, batch_size=32)", "DataLoader(Tokens(), batch_size=32, collate_fn=pad)"
)


def _data_run(share: float, fifths: tuple[float, float]) -> RunPhase:
    """A data wait over 490 steps: its bootstrap interval one point wide, its fifths wider."""
    return RunPhase(share, 490, 0.0003, 0.003, low_share=share - 0.005, high_share=share + 0.005,
                    fifths_low=fifths[0], fifths_high=fifths[1])  # fmt: skip


def _in_memory_level(whole: RunPhase) -> str:
    analysis = dataclasses.replace(
        syn.make_analysis(phase_split=syn.phases({"data": 0.11}, step_us=3000.0)),
        run_data=whole,
    )
    return only(rules_for(syn.make_run(TOKENS, cpu_count=8), analysis),
                "input.in_memory_batches").severity  # fmt: skip


def test_a_data_wait_near_the_10_percent_line_reads_one_level_in_two_runs():
    # Two runs of one program under a load that changed within each: 10.2% and 12%, each
    # with fifths reaching under the line. main: [low] and [medium].
    one = _in_memory_level(_data_run(0.102, (0.085, 0.125)))
    other = _in_memory_level(_data_run(0.12, (0.095, 0.14)))
    assert one == other == "low"


def test_a_share_whose_fifths_all_clear_the_line_keeps_its_level():
    # A steady load: every fifth over the line, the level is the point's.
    assert _in_memory_level(_data_run(0.13, (0.122, 0.138))) == "medium"
    # No fifths read (an old record): the bootstrap interval alone, as before.
    steady = dataclasses.replace(_data_run(0.13, (0.0, 0.0)), fifths_low=None, fifths_high=None)
    assert _in_memory_level(steady) == "medium"


def _optimizer_level(whole: RunPhase) -> str | None:
    analysis = dataclasses.replace(syn.make_analysis({"optimizer": 0.2}), run_optimizer=whole)
    point = whole.share
    return severity_in(analysis, "optimizer", point, low=WARN, medium=0.20, high=0.20)


def test_an_optimizer_share_near_the_20_percent_line_reads_one_level_in_two_runs():
    # compile_graph_break: 21% and 26% over ~490 steps, [low] and [medium] on main.
    one = RunPhase(0.21, 490, 0.002, 0.01, low_share=0.205, high_share=0.215,
                   fifths_low=0.18, fifths_high=0.24)  # fmt: skip
    other = RunPhase(0.26, 490, 0.002, 0.01, low_share=0.255, high_share=0.265,
                     fifths_low=0.19, fifths_high=0.29)  # fmt: skip
    assert _optimizer_level(one) == _optimizer_level(other) == "low"


def _loaded_halves(n: int = 200) -> StepClockRecord:
    """A CPU run whose update is 2 ms of CPU every step, its steps' own time 10 ms in the first
    half and 14 ms in the second (a load that came halfway, and took the caches with it)."""
    rows, t = [], 0.0
    for i in range(n):
        own = 0.010 if i < n // 2 else 0.014
        rows.append(StepTiming(i, t, own, 0.0, own - 0.002, 0.0, 0.002, 1, 1, 32, timed=True,
                               wait_s=0.0))  # fmt: skip
        t += own
    return StepClockRecord(
        "optimizer",
        n,
        tuple(rows),
        event_counts={"optimizer": n, "forward": n, "backward": n},
        lean_optimizer=True,
        optimizer_cpu={"Adam": (0.002 * (n - 1), n - 1)},
    )


def test_the_updates_cpu_share_carries_what_its_fifths_read():
    whole = run_phase(_loaded_halves(), 2, "optimizer", cpu_clock=True)
    assert whole is not None and whole.cpu_share is not None
    assert whole.cpu_fifths_low is not None and whole.cpu_fifths_high is not None
    # The first fifths: 2 of 10 ms; the last: 2 of 14 ms.
    assert abs(whole.cpu_fifths_high - 0.2) < 1e-6
    assert abs(whole.cpu_fifths_low - 2 / 14) < 1e-6
    # The rules read the update's share on its CPU clock with those fifths, not the wall's.
    read = run_optimizer(dataclasses.replace(syn.make_analysis(), run_optimizer=whole))
    assert read is not None
    assert (read.fifths_low, read.fifths_high) == (whole.cpu_fifths_low, whole.cpu_fifths_high)
    # 17% over the run, its bootstrap interval clear of the 15% line on its own, its fifths
    # not: the level below.
    assert whole.cpu_low_share is not None and whole.cpu_low_share > 0.15
    analysis = dataclasses.replace(syn.make_analysis({"optimizer": 0.17}), run_optimizer=whole)
    level = severity_in(analysis, "optimizer", whole.cpu_share, low=WARN, medium=0.15, high=0.3)
    assert level == "low"


def test_a_fifth_of_steps_with_no_own_time_reads_the_whole_share_not_a_division_by_zero():
    # nb_lbfgs_closure under load (1 run in 4): the steps of one fifth read no own time (their
    # length all ours or all a wait for a core), and the update's CPU share divided by it.
    loaded = _loaded_halves()
    rows = tuple(
        dataclasses.replace(s, duration_s=0.0, forward_s=0.0, optimizer_s=0.0)
        if s.index < 45
        else s
        for s in loaded.steps
    )
    whole = run_phase(dataclasses.replace(loaded, steps=rows), 2, "optimizer", cpu_clock=True)
    assert whole is not None and whole.cpu_share is not None
    assert whole.cpu_fifths_low == whole.cpu_fifths_high == whole.cpu_share
