"""The verdict where the steps' wait for a core is mostly this program's own thread's.

On main a spinning thread of the program (a ``while running:`` poll with no sleep, the Trainer's
memory tracker) that held most of the loop thread's wait still left the verdict "Too busy to
judge ... rerun on a quieter machine" with "more GPUs" unknown: no quieter machine removes that
wait. From ``analysis.own_wait_verdict.OWN_WAIT_MOST`` of the wait the verdict is host-bound by
the thread, "more GPUs" no; under it the wait stays the machine's, the thread's part said.

The runs are test_too_busy's step records (each step waited 60% of its time, the data share
either side of its line with that wait put anywhere) with the analysis' own-thread figures
(``SideThreads``) set: the verdict and its words run on them; no clock is read.
"""

from __future__ import annotations

import dataclasses

from gpu_notebook.analysis.analyze import analyze
from gpu_notebook.analysis.own_wait_verdict import OWN_WAIT_MOST
from gpu_notebook.records import Report, SideThread, SideThreads, Verdict
from gpu_notebook.words.verdict import word_verdict
from tests.scenarios import synthetic as syn
from tests.test_too_busy import _run as too_busy_run


def _verdict(held: float, *, wait_s: float = 0.015, **run_kwargs) -> Verdict:
    run = too_busy_run(wait_s, **run_kwargs)
    spin = SideThread("spin_t", "poll", "/home/u/train.py", 7, cpu_s=0.3, span_s=0.35)
    side = SideThreads((spin,), loop_cores=0.4, others_cores=0.5, wait_share=0.6, held=held)
    return syn.verdict(run, dataclasses.replace(analyze(run), side_threads=side))


def test_a_wait_mostly_the_programs_own_thread_is_host_bound_by_it_not_too_busy():
    verdict = _verdict(0.8)
    assert verdict.category == "host-bound", verdict
    wait = verdict.core_wait
    assert wait is not None and wait.own_mostly and wait.own_function == "poll"
    assert not wait.judged and wait.found == "input-bound"  # the split as read, kept
    assert not verdict.headline.startswith("Too busy")
    assert "this program's own thread `poll`" in verdict.headline
    assert "about 80% of it" in verdict.headline
    assert verdict.more_gpus.startswith("No:")
    assert "quieter machine" not in verdict.more_gpus
    said = " ".join(verdict.evidence)
    assert "held about 80% of it, other programs the rest" in said
    assert "gives input-bound" in said or "give input-bound" in said
    # Worded once, and read back from a report's JSON the same: worded again, the same.
    assert word_verdict(verdict) == verdict
    report = dataclasses.replace(syn.make_report("", step_median_s=0.01), verdict=verdict)
    back = Report.from_json(report.to_json()).verdict
    assert back == verdict and word_verdict(back) == back


def test_the_line_is_half_the_wait():
    assert OWN_WAIT_MOST == 0.5
    assert _verdict(OWN_WAIT_MOST).category == "host-bound"
    under = _verdict(0.3)
    assert under.category == "unknown" and under.headline.startswith("Too busy to judge")
    wait = under.core_wait
    assert wait is not None and not wait.own_mostly and wait.own_held == 0.3
    # The thread's part said, the rest the machine's; stop the thread first.
    assert "held about 30% of it, other programs the rest" in under.headline
    assert "Stop this program's own `poll` thread first" in under.more_gpus


def test_all_of_the_wait_the_threads_says_so():
    verdict = _verdict(1.0)
    assert verdict.category == "host-bound"
    assert "all of it this thread's" in verdict.headline


def test_a_verdict_the_wait_cannot_move_keeps_its_category_and_names_the_thread_not_a_quieter_machine():
    # test_too_busy's data-heavy steps: the data wait over its line wherever the wait went.
    verdict = _verdict(0.8, wait_s=0.04, data_s=0.02, in_data=True)
    assert verdict.category == "input-bound", verdict
    wait = verdict.core_wait
    assert wait is not None and wait.judged and wait.own_mostly
    line = next(e for e in verdict.evidence if "for a core" in e)
    assert "the loop without the `poll` thread would read" in line
    assert "quieter machine" not in line
    # Under the line, the machine's wording stands.
    under = _verdict(0.3, wait_s=0.04, data_s=0.02, in_data=True)
    assert any("a quieter machine would read" in e for e in under.evidence)
