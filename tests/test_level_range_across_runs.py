"""Same code, same answer: two runs whose shares differ within the run's margin give levels
that overlap, never contradict.

A rule levels a share by the low end of its 90% interval (``rules.common.severity_in``). Two runs
of one program differ by more than either run's own interval shows: the unseen
compile_graph_break's optimizer read 19% in one run and 26-30% in two others, at the 20% line,
[low] in one and [medium] in the others; a data wait near the 10% line read [low] and [medium].
The level is now a range (``analysis.level_range``, decided in ``level_in``, the one place a share
is levelled): its top is the level the interval's high end reaches widened by what two runs of
this code differ by here (``compare_samples.run_margin``, at least ``RUN_TO_RUN``). The lower
run says "low-medium", the higher "medium": they overlap. The severity a finding is ranked and
gated by stays the one read (what the run has shown), so no rule moves under load for it.
"""

from __future__ import annotations

import dataclasses

import pytest

from gpu_notebook.analysis.level_range import ORDER, reach
from gpu_notebook.records import Finding, RunPhase
from gpu_notebook.views.wording import level_label
from tests.scenarios import synthetic as syn
from tests.test_rules import TRAIN, only, rules_for

TOKENS = "class Tokens(Dataset):\n    def __getitem__(self, i): return seqs[i]\n" + TRAIN.replace(
    "DataLoader(ds, batch_size=32)", "DataLoader(Tokens(), batch_size=32, collate_fn=pad)"
)


def _overlap(a: tuple[str, str], b: tuple[str, str]) -> bool:
    """Two level ranges (lowest first) share a level."""
    return max(ORDER.index(a[0]), ORDER.index(b[0])) <= min(ORDER.index(a[1]), ORDER.index(b[1]))


def _phase(share: float, spread: float = 0.005, fifths: tuple[float, float] | None = None):
    """A phase timed over 490 steps: its bootstrap interval ``spread`` each side of the share,
    its fifths as given (None: they read the interval)."""
    lo, hi = fifths if fifths is not None else (share - spread, share + spread)
    return RunPhase(share, 490, 0.0003, 0.003, low_share=share - spread, high_share=share + spread,
                    fifths_low=lo, fifths_high=hi)  # fmt: skip


def _data_finding(whole: RunPhase, margin: float | None = None) -> Finding:
    analysis = dataclasses.replace(
        syn.make_analysis(phase_split=syn.phases({"data": 0.11}, step_us=3000.0)),
        run_data=whole,
        run_margin=margin,
    )
    return only(rules_for(syn.make_run(TOKENS, cpu_count=8), analysis), "input.in_memory_batches")


def _optimizer_finding(whole: RunPhase, margin: float | None = None) -> Finding:
    run = syn.make_run(TRAIN, gpus=[syn.gpu()])
    analysis = dataclasses.replace(
        syn.make_analysis({"optimizer": whole.share}), run_optimizer=whole, run_margin=margin
    )
    return only(rules_for(run, analysis), "launch.unfused_optimizer")


@pytest.mark.parametrize("margin", [None, 0.08])
def test_an_optimizer_share_either_side_of_the_20_percent_line_reads_overlapping_levels(margin):
    # compile_graph_break's two runs: 19% (its fifths 17-21%) and 26% (fifths 24-30%). Main:
    # [low] and [medium], contradicting; each run's interval alone does not reach the other.
    one = _optimizer_finding(_phase(0.19, fifths=(0.17, 0.21)), margin)
    other = _optimizer_finding(_phase(0.26, fifths=(0.24, 0.30)), margin)
    # What each run has shown is unchanged: it ranks and gates as before.
    assert (one.severity, other.severity) == ("low", "medium")
    assert one.level_range == ("low", "medium")
    assert _overlap(one.level_range, other.level_range)
    assert level_label(one) == "low-medium"


def test_a_data_wait_either_side_of_the_10_percent_line_reads_overlapping_levels():
    # 9.5% in one run, 12.5% in the next, each interval a point wide: main [low] and [medium].
    one = _data_finding(_phase(0.095))
    other = _data_finding(_phase(0.125))
    assert (one.severity, other.severity) == ("low", "medium")
    assert _overlap(one.level_range, other.level_range)
    assert level_label(one) == "low-medium" and level_label(other) == "medium"


@pytest.mark.parametrize(
    ("rule", "low", "line"),
    [(_data_finding, 0.05, 0.10), (_data_finding, 0.05, 0.20), (_optimizer_finding, 0.10, 0.20)],
)
def test_any_two_shares_within_the_runs_margin_never_contradict(rule, low, line):
    # Shares either side of a line, the higher within what two runs differ by (``reach``): at
    # the quiet 5% and at a loaded run's 15%.
    for margin in (0.05, 0.15):
        for below in (line - 0.002, line - 0.01, line - 0.03):
            above = reach(below + 0.005, margin) - 0.006
            if below < low or above <= line:
                continue
            a = rule(_phase(below), margin)
            b = rule(_phase(above), margin)
            assert _overlap(a.level_range, b.level_range), (margin, below, above)


def test_a_share_clear_of_its_lines_reads_one_level():
    # 13.5% of data wait: the next run may read 18%, under the 20% line: "medium", no range.
    steady = _data_finding(_phase(0.135))
    assert steady.level_range == ("medium", "medium") and level_label(steady) == "medium"
    # The run's own margin, where larger, reaches further: a loaded run's 10% takes it past 20%.
    loaded = _data_finding(_phase(0.135), margin=0.10)
    assert loaded.level_range == ("medium", "high")


def test_a_finding_said_at_info_has_no_range():
    # A small or unsized gain (rules._small_gain, _unsized) says info whatever its share read.
    finding = Finding("x", "t", "info", (), 0.19, None, "", severity_reach="high")
    assert finding.level_range == ("info", "info") and level_label(finding) == "info"


def _retained_finding(backward: float) -> Finding:
    from tests.test_rule_backward_passes import CELL

    run = syn.make_run(CELL)
    analysis = syn.make_analysis({"forward": 0.3, "backward": backward, "optimizer": 0.1})
    return only(rules_for(run, analysis), "backward.retained")


def test_a_point_share_either_side_of_a_line_reads_overlapping_levels():
    # A share read without an interval (the window's phases: two backward passes, one of them
    # removable): 19.5% and 21% of the step, either side of the 20% line. Main: [medium] and
    # [high]; the point's top is widened by the run's margin as an interval's is.
    one, other = _retained_finding(0.39), _retained_finding(0.42)
    assert (one.severity, other.severity) == ("medium", "high")
    assert one.level_range == ("medium", "high")
    assert _overlap(one.level_range, other.level_range)
