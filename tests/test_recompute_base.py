"""The checkpointing finding reads one base: the shares it says, its gain bound and its least
gain are all over the step in the terms the checkpoint's pieces were read in (each at its least
over the traced steps, ``Recompute.floored``: the whole step floored alike, ``floor_ratio``).

On main the least gain divided the floored recompute by the traced steps' unfloored own time
(a loaded machine's slices, which the pieces leave out, in the denominator only): with the
recompute said as 30% of the step the finding's range began at 1.22x, not the 1.43x the
recompute alone removes of that step; and a base that was only floored was worded "a step
without the profiler".
"""

from __future__ import annotations

import dataclasses

import pytest

from gpu_notebook.records import Recompute
from gpu_notebook.rules import run_rules
from gpu_notebook.rules.checkpointing import CheckpointingUnneeded
from tests.scenarios import synthetic as syn
from tests.test_rule_checkpointing import CELL, RULE, _analysis
from tests.test_rules import only, rules_for

# A loaded host run: the steps' own time 100 ms, floored as the pieces are 60 ms.
FLOORED = Recompute(16, 18_000.0, 100_000.0, 0, 3, forward_overhead_us=4_000.0,
                    backward_overhead_us=2_000.0, floored=True,
                    floor_steps_us=60_000.0)  # fmt: skip


def _finding(rec: Recompute):
    return only(
        rules_for(syn.make_run(CELL), dataclasses.replace(_analysis(), recompute=rec)), RULE
    )


def _said(rec: Recompute) -> CheckpointingUnneeded:
    analysis = dataclasses.replace(_analysis(), recompute=rec)
    said = only(run_rules(syn.make_run(CELL), analysis, syn.VERDICT), RULE).said
    assert isinstance(said, CheckpointingUnneeded)
    return said


def test_the_least_gain_is_over_the_same_floored_step_as_the_shares() -> None:
    f, said = _finding(FLOORED), _said(FLOORED)
    assert FLOORED.base_us == pytest.approx(60_000.0) and FLOORED.floor_ratio == 0.6
    assert said.recompute_share == pytest.approx(0.30) and said.share == pytest.approx(0.40)
    assert f.gain_bound == pytest.approx(1 / (1 - said.share))
    # The recompute alone, as the finding says it: 30% of the step.
    assert f.gain_low == pytest.approx(1 / (1 - said.recompute_share))
    assert f.gain_low <= f.gain_bound


def test_a_floored_base_is_not_worded_as_an_unprofiled_step() -> None:
    f, said = _finding(FLOORED), _said(FLOORED)
    assert said.unprofiled_step_us is None and said.floored_base
    assert not any("without the profiler" in e for e in f.evidence), f.evidence
    assert "each at their least over the profiled steps" in f.evidence[1]
    assert "(30% of the step)" in f.evidence[0], f.evidence[0]


def test_an_unprofiled_floored_base_keeps_the_least_gain_on_the_longer_traced_step() -> None:
    """The unprofiled step (80 ms) floored alike (48 ms) is the shares' base; the least gain
    reads the traced step in the same terms (60 ms): longer, so the smaller share."""
    rec = dataclasses.replace(FLOORED, unprofiled_steps_us=80_000.0)
    f, said = _finding(rec), _said(rec)
    assert rec.base_us == pytest.approx(48_000.0) and rec.traced_base_us == pytest.approx(60_000.0)
    assert f.gain_bound == pytest.approx(1 / (1 - 24 / 48))
    assert f.gain_low == pytest.approx(1 / (1 - 18 / 60))
    assert said.unprofiled_step_us == pytest.approx(16_000.0)
    assert "of a step without the profiler)" in f.evidence[0], f.evidence[0]
    assert "of a step without the profiler (16.00 ms" in f.evidence[1], f.evidence[1]


def test_unfloored_bases_are_as_they_were() -> None:
    """Not floored (one step, or steps that do not repeat): the traced steps' own time for the
    least gain, the unprofiled step for the shares where read."""
    rec = dataclasses.replace(FLOORED, floored=False, unprofiled_steps_us=80_000.0)
    f = _finding(rec)
    assert rec.floor_ratio == 1.0 and rec.traced_base_us == 100_000.0
    assert f.gain_low == pytest.approx(1 / (1 - 18 / 100))
    assert f.gain_bound == pytest.approx(1 / (1 - 24 / 80))
