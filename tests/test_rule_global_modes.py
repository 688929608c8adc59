"""Process-wide modes set outside the measured cell (rules/global_modes.py): read live by the
step clock while the loop runs, reported from that reading, and left as the user set them."""

from __future__ import annotations

import dataclasses

import torch

from gpu_notebook.records import MachineFacts, OpStat
from tests.scenarios import synthetic as syn
from tests.test_rules import ids, only, rules_for

MODEL_CELL = """\
import torch
gm_model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
gm_opt = torch.optim.SGD(gm_model.parameters(), lr=0.05)
"""
LOOP = """\
for _ in range(30):
    x = torch.randn(16, 8)
    loss = gm_model(x).pow(2).mean()
    loss.backward()
    gm_opt.step()
    gm_opt.zero_grad()
"""


def _measured(ip, body: str):
    import gc

    ip.user_ns.pop("rep", None)
    gc.collect()
    result = ip.run_cell(f"%%gpucheck -q -o rep\n{body}")
    assert result.success, result.error_in_exec
    return ip.user_ns["rep"]


def _one(rep, rule_id: str):
    from gpu_notebook.views.text import render_text

    found = [f for f in rep.findings if f.rule_id == rule_id]
    assert len(found) == 1, render_text(rep)
    return found[0]


def test_deterministic_algorithms_switched_on_in_an_earlier_cell_are_read_live_and_left_on(ip):
    assert ip.run_cell(MODEL_CELL).success
    assert ip.run_cell("torch.use_deterministic_algorithms(True, warn_only=True)").success
    try:
        rep = _measured(ip, LOOP)
        # The user's mode, exactly as they left it: read, never set.
        assert torch.are_deterministic_algorithms_enabled()
        assert torch.is_deterministic_algorithms_warn_only_enabled()
    finally:
        torch.use_deterministic_algorithms(False)
    clock = rep.run.steps
    assert clock.deterministic_backwards > 0
    assert clock.deterministic_warn_only_backwards == clock.deterministic_backwards
    f = _one(rep, "modes.deterministic")
    # A CPU run: its operators are the same either way: said, not claimed as a gain.
    assert f.severity == "info" and f.gain_bound is None and f.fix_id is None and f.line is None
    text = " ".join(f.evidence)
    assert "set outside this cell" in text and "warn_only=True" in text


def test_a_float64_default_dtype_from_an_earlier_cell_is_read_live_and_left_as_set(ip):
    before = torch.get_default_dtype()
    assert ip.run_cell("torch.set_default_dtype(torch.float64)").success
    try:
        assert ip.run_cell(MODEL_CELL).success  # its parameters are float64
        rep = _measured(ip, LOOP)
        assert torch.get_default_dtype() is torch.float64  # theirs: left as the cell found it
    finally:
        torch.set_default_dtype(before)
    clock = rep.run.steps
    assert clock.double_default_backwards > 0
    assert clock.grad_bytes and clock.double_grad_bytes == clock.grad_bytes
    f = _one(rep, "modes.float64_default")
    assert f.severity == "medium" and f.gain_bound is None and f.fix_id is None
    text = " ".join(f.evidence)
    assert "set outside this cell" in text and "are float64" in text


def test_a_mode_the_cell_sets_itself_is_advised_at_that_line(ip):
    """A cell that sets float64 on its first line and makes its model after it (unseen
    notebooks, nb8) was told "its parameters are made already" and to set float32 "where
    float64 is set, before the model": that line is the cell's own, and the fix is there."""
    before = torch.get_default_dtype()
    try:
        rep = _measured(ip, "torch.set_default_dtype(torch.float64)\n" + MODEL_CELL + LOOP)
    finally:
        torch.set_default_dtype(before)
    f = _one(rep, "modes.float64_default")
    assert f.line == 2  # the magic's line is the cell's first
    assert "made already" not in f.fix and "on line 2 instead" in f.fix
    assert "set outside this cell" not in f.title + " ".join(f.evidence)


def test_a_one_thread_pool_the_cell_sets_itself_is_advised_at_that_line():
    """As for float64: a call at the top of the cell would be undone by the cell's own
    torch.set_num_threads(1) below it."""
    from gpu_notebook.rules.common import found
    from gpu_notebook.rules.global_modes import OneThread
    from gpu_notebook.words import word_finding

    said = OneThread(16, 12.0, 0, 0.9, 8, None)
    outside = word_finding(found("modes.one_thread", "low", said))
    own = word_finding(found("modes.one_thread", "low", dataclasses.replace(said, cell_line=3)))
    assert "at the top of the cell" in outside.fix
    assert "at the top of the cell" not in own.fix and "on line 3 in place of" in own.fix


def test_a_loop_with_torchs_default_modes_reads_them_off_and_has_no_finding(ip):
    assert ip.run_cell(MODEL_CELL).success
    rep = _measured(ip, LOOP)
    clock = rep.run.steps
    assert clock.anomaly_backward_reads > 0
    assert clock.deterministic_backwards == 0 and clock.double_default_backwards == 0
    assert clock.double_grad_bytes == 0
    found = {f.rule_id for f in rep.findings}
    assert not found & {"modes.deterministic", "modes.float64_default"}


def _clock(**modes: int):
    return dataclasses.replace(syn.steps_record(), anomaly_backward_reads=10, **modes)


def test_deterministic_mode_on_a_gpu_trace_names_the_operators_it_changes():
    ops = (OpStat("aten::index_add_", 20, 40.0, 40.0), OpStat("aten::mm", 20, 400.0, 400.0))
    analysis = syn.make_analysis(gpu_timeline=syn.timeline(), ops=ops)
    run = syn.make_run(
        "for b in loader:\n    step(b)\n",
        gpus=[syn.gpu()],
        steps=_clock(deterministic_backwards=10),
    )
    f = only(rules_for(run, analysis), "modes.deterministic")
    assert f.severity == "low" and f.gain_bound is None
    assert f.said is None and "aten::index_add_" in " ".join(f.evidence)


def test_cudnns_deterministic_flag_alone_says_nothing_on_a_cpu_run():
    run = syn.make_run(
        "for b in loader:\n    step(b)\n", steps=_clock(cudnn_deterministic_backwards=10)
    )
    assert "modes.deterministic" not in ids(rules_for(run, syn.make_analysis()))


def test_a_mode_on_in_a_one_off_backward_beside_the_loop_is_not_the_loops():
    run = syn.make_run(
        "for b in loader:\n    step(b)\n",
        steps=_clock(deterministic_backwards=1, double_default_backwards=1),
    )
    found = ids(rules_for(run, syn.make_analysis()))
    assert "modes.deterministic" not in found and "modes.float64_default" not in found


def _recording() -> bool:
    return bool(torch._C._autograd._profiler_enabled())


def test_a_profiler_started_in_an_earlier_cell_is_said_and_left_recording(ip):
    assert ip.run_cell(MODEL_CELL).success
    assert ip.run_cell("gm_prof = torch.profiler.profile()\ngm_prof.start()").success
    try:
        rep = _measured(ip, LOOP)
        # Theirs, exactly as they left it: still recording after the cell.
        assert torch.autograd.profiler._is_profiler_enabled and _recording()
    finally:
        assert ip.run_cell("gm_prof.stop()").success
    assert not _recording()
    assert rep.run.window.status == "stepped-aside" and rep.run.window.profiler_before_cell
    f = _one(rep, "modes.profiler_on")
    assert f.severity == "medium" and f.gain_bound is None and f.fix_id is None
    assert "set outside this cell" in f.title
    assert "include its cost" in " ".join(f.evidence)


def test_a_profiler_the_cell_itself_starts_is_not_one_from_outside(ip):
    assert ip.run_cell(MODEL_CELL).success
    rep = _measured(
        ip,
        "with torch.profiler.profile():\n"
        + "".join("    " + ln + "\n" for ln in LOOP.splitlines()),
    )
    assert rep.run.window.status == "stepped-aside" and not rep.run.window.profiler_before_cell
    assert "modes.profiler_on" not in [f.rule_id for f in rep.findings]
    # Said as the cell's own (unseen round 15): its cost is in every figure, at its line.
    assert rep.run.window.profiler_in_cell
    f = _one(rep, "modes.profiler_in_cell")
    assert f.severity == "low" and f.gain_bound is None and f.fix_id is None
    assert f.line == 2 and "line 2: the cell starts its own torch profiler" in f.evidence
    assert "include its cost" in " ".join(f.evidence)


def test_a_profiler_the_cell_starts_by_hand_on_a_schedule_is_the_cells_own(ip):
    # A second shape: made apart, started and stopped by hand, stepped on a schedule; the
    # window steps aside at its warm-up's _prepare_trace, steps before it records.
    assert ip.run_cell(MODEL_CELL).success
    body = (
        "sched = torch.profiler.schedule(wait=3, warmup=1, active=2, repeat=1)\n"
        "gm_p = torch.profiler.profile(schedule=sched, on_trace_ready=lambda p: None)\n"
        "gm_p.start()\n"
        + LOOP.replace("    gm_opt.zero_grad()\n", "    gm_opt.zero_grad()\n    gm_p.step()\n")
        + "gm_p.stop()\n"
    )
    rep = _measured(ip, body)
    assert not _recording()
    assert rep.run.window.profiler_in_cell and not rep.run.window.profiler_before_cell
    f = _one(rep, "modes.profiler_in_cell")
    assert f.line == 3  # `gm_p = torch.profiler.profile(...)`, the magic's line being 1


def test_a_cell_without_a_profiler_of_its_own_says_nothing_of_one(ip):
    assert ip.run_cell(MODEL_CELL).success
    rep = _measured(ip, LOOP)
    assert not rep.run.window.profiler_in_cell
    assert "modes.profiler_in_cell" not in [f.rule_id for f in rep.findings]


def _cpu_run(workers: int = 0, others: float = 0.5, threads: int = 1, cores: int = 8):
    machine = MachineFacts(
        cores=cores, others_median_cores=others, others_p90_cores=others, steal_pct=None,
        gpu_other_processes=None, torch_threads=threads, workers=workers, ours_median_cores=1.0,
    )  # fmt: skip
    shares = {"forward": 0.35, "backward": 0.4, "optimizer": 0.1, "data": 0.15}
    analysis = dataclasses.replace(syn.make_analysis(shares), machine=machine)
    return syn.make_run("for b in loader:\n    step(b)\n", cpu_count=cores), analysis


def test_one_thread_on_a_many_core_cpu_run_says_the_threads_to_try():
    run, analysis = _cpu_run(workers=2)
    f = only(rules_for(run, analysis), "modes.one_thread")
    assert f.severity == "low" and f.gain_bound is None and f.line is None
    # 8 cores, 0.5 busy elsewhere, 2 workers: 5 threads to try.
    assert "torch.set_num_threads(5)" in f.fix and "set outside this cell" in f.title


def test_one_thread_is_not_flagged_where_the_cores_are_taken_or_the_pool_is_larger():
    for run, analysis in (
        _cpu_run(workers=5),  # the workers use the cores
        _cpu_run(others=6.0),  # other processes do
        _cpu_run(threads=4),  # not one thread
        _cpu_run(cores=2),  # not a many-core run
    ):
        assert "modes.one_thread" not in ids(rules_for(run, analysis))


def test_one_thread_set_in_an_earlier_cell_is_read_after_the_cell_and_left_as_set(ip):
    before = torch.get_num_threads()
    assert ip.run_cell(MODEL_CELL).success
    assert ip.run_cell("torch.set_num_threads(1)").success
    try:
        rep = _measured(ip, LOOP)
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
    assert rep.run.env.torch_threads == 1
    assert rep.analysis.machine is not None and rep.analysis.machine.torch_threads == 1
