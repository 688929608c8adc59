"""Gates on a count of stack samples read by the interval the count gives (helper flips).

A hard count (30 samples before a line's share is read; 5 samples and half of the wait before
the user's sampler speaks for it) gave one program two answers when its count sat at the gate
on a busy machine: the same share read off 29 samples said one thing, off 30 another. Each gate
now reads the share's low end (``analysis.uncertainty.sampled_share_low``, Wilson 95%), which
moves with the count instead of jumping: the evidence either side of the old count decides
alike. Each test builds the borderline evidence both ways and asserts one answer."""

from __future__ import annotations

import dataclasses

import pytest

from gpu_notebook.analysis.uncertainty import sampled_share_low
from gpu_notebook.cell.scan import scan_source
from gpu_notebook.records import FunctionStat, LineStat, StackProfile
from gpu_notebook.rules.syncs import MIN_LINE_SAMPLES, lines_share, removable_share
from tests.scenarios import synthetic as syn
from tests.test_rules import CLOSURE_SYNC_CELL, SAMPLER_TRAIN, only, rules_for

PRINT_LINE = 7  # CLOSURE_SYNC_CELL's print, a cell line (line 1 is the magic line)
SHARES = {"sync": 0.002, "other": 0.10, "unattributed": 0.15}


def _print_sampled(samples: int, share: float) -> StackProfile:
    """``samples`` stack samples, ``share`` of them on the closure's per-step print."""
    on = round(samples * share)
    lines = (LineStat(PRINT_LINE, "", on, on / samples), LineStat(3, "", samples - on, 0.0))
    return StackProfile(0.005, samples, samples * 0.005, lines=lines)


@pytest.mark.parametrize("share", [0.6, 0.3])
def test_a_lines_share_reads_alike_a_sample_either_side_of_the_count(share):
    # A print in an optimizer closure on the CPU: only the sampler measures it (no step-clock
    # superset holds it). Main read nothing off 29 samples ("not measured", info, nothing
    # offered) and the share off 30 (a throttle offered): one program, two answers.
    analysis = syn.make_analysis(SHARES)
    found = []
    for samples in (MIN_LINE_SAMPLES - 1, MIN_LINE_SAMPLES):
        stacks = _print_sampled(samples, share)
        here = dataclasses.replace(analysis, stacks=stacks)
        reads = tuple(scan_source(CLOSURE_SYNC_CELL, line_offset=1).syncs)
        assert lines_share(here, reads) is not None, samples
        f = only(rules_for(syn.make_run(CLOSURE_SYNC_CELL), here), "syncs.per_step")
        found.append((f.fix_id is not None, f.gain_bound is not None))
        _, how = removable_share(here, reads)
        assert how in ("lines", "both"), (samples, how)
    assert found[0] == found[1] == (True, True)


def test_a_lines_share_under_the_count_is_its_low_end_and_none_when_that_says_nothing():
    analysis = syn.make_analysis(SHARES)
    reads = tuple(scan_source(CLOSURE_SYNC_CELL, line_offset=1).syncs)
    at = dataclasses.replace(analysis, stacks=_print_sampled(29, 0.6))
    assert lines_share(at, reads) == pytest.approx(sampled_share_low(0.6, 29), abs=0.02)
    # A small share off few samples, or any share off under 10, is still not read.
    assert lines_share(dataclasses.replace(analysis, stacks=_print_sampled(20, 0.1)), reads) is None
    assert lines_share(dataclasses.replace(analysis, stacks=_print_sampled(9, 1.0)), reads) is None
    # From the count on, the share as sampled (0% is a measurement there).
    full = dataclasses.replace(analysis, stacks=_print_sampled(300, 0.0))
    assert lines_share(full, reads) == 0.0


def _sampler_stacks(held: int, total: int) -> StackProfile:
    functions = (
        FunctionStat("Balanced.__iter__", "cell", 3, 1, held),
        FunctionStat("_BaseDataLoaderIter.__next__", "torch/utils/data/dataloader.py", 720, 0,
                     total),
    )  # fmt: skip
    return StackProfile(0.005, total + 4, 0.06, functions=functions)


def _reading(held: int, total: int | None) -> str:
    """What the in-memory finding says holds the wait: the sampler, the dataset's reads, or
    that it cannot tell (``total`` None: no stacks sampled)."""
    cell = SAMPLER_TRAIN.replace("LOADER", "batch_size=32, sampler=Balanced(w)")
    stacks = _sampler_stacks(held, total) if total is not None else None
    analysis = dataclasses.replace(syn.make_analysis({"data": 0.80}), stacks=stacks)
    f = only(rules_for(syn.make_run(cell, cpu_count=8), analysis), "input.in_memory_batches")
    if "cannot tell" in f.title:
        return "cannot tell"
    return "sampler" if "sampler" in f.title else "dataset"


def _names_sampler(held: int, total: int) -> bool:
    return _reading(held, total) == "sampler"


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ((4, 4), (5, 5)),  # all of the wait in the sampler: main's count of 5 said no, then yes
        ((9, 19), (10, 19)),  # half the wait: main's share of one half said no, then yes
        ((14, 30), (15, 30)),  # near half of many samples: the same
    ],
)
def test_the_users_sampler_speaks_for_the_wait_alike_either_side_of_the_old_gates(one, other):
    assert _names_sampler(*one) == _names_sampler(*other)


def test_the_users_sampler_is_named_where_its_samples_show_it_holds_most_of_the_wait():
    assert _names_sampler(7, 8)  # the unseen program's windows: at least 59%
    assert _names_sampler(6, 7)  # at least 55%
    assert _names_sampler(3, 3)
    assert not _names_sampler(2, 2)  # 2 samples show little: at least 43%
    assert not _names_sampler(10, 19)  # about half: not shown to be most
    assert _names_sampler(15, 19)


@pytest.mark.parametrize(
    ("held", "total"),
    [(4, 5), (2, 2), (1, 1), (10, 19), (8, 20), (1, 5), (0, 0)],
)
def test_too_few_samples_to_show_either_say_it_cannot_tell(held, total):
    # The unseen python_sampler named the dataset's reads at 4 of 5 samples (42% to 95%) and
    # the sampler at 5 of 5: neither is shown at 4 of 5.
    assert _reading(held, total) == "cannot tell"


def test_the_dataset_is_named_only_where_the_samples_show_the_sampler_holds_under_half():
    assert _reading(0, 5) == "dataset"  # at most 35%
    assert _reading(2, 10) == "dataset"  # at most 46%
    assert _reading(5, 30) == "dataset"
    assert _reading(5, 5) == "sampler"
    assert _reading(0, None) == "cannot tell"  # no stacks: nothing read


FLOAT_CELL = CLOSURE_SYNC_CELL.replace('print("loss", loss.item())', "seen.append(float(loss))")


@pytest.mark.parametrize("samples", [8, 20, 29])
def test_a_read_sampled_too_few_times_is_unmeasured_not_its_calls_time(samples):
    # The unseen hf_callback_metrics (`float(w.norm())` in a callback, CPU): off 8 samples the
    # line was not read and the trace's ~0% in .item() stood for it ("0% of the step", info,
    # "Small"); off 50 the line held 26% ([high], a throttle). The call's time is the read's
    # least, not what gating the line removes: undecided off too few samples, said so.
    stacks = _print_sampled(samples, 0.0)
    analysis = dataclasses.replace(syn.make_analysis(SHARES), stacks=stacks)
    reads = tuple(scan_source(FLOAT_CELL, line_offset=1).syncs)
    assert reads and not any(s.logged for s in reads)
    f = only(rules_for(syn.make_run(FLOAT_CELL), analysis), "syncs.per_step")
    assert f.fix_id is None and f.gain_bound is None
    assert any("not measured: too few stack samples" in e for e in f.evidence)
    # Sampled enough, the line's 0% is a measurement: small, said as such.
    many = dataclasses.replace(analysis, stacks=_print_sampled(300, 0.0))
    g = only(rules_for(syn.make_run(FLOAT_CELL), many), "syncs.per_step")
    assert g.severity == "info" and not any("not measured" in e for e in g.evidence)
