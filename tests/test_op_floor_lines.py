"""Per-call host lines read in this machine's small-operator floor (analysis.floor_lines).

A line that stands for a CPU's per-call cost (an operator too small to be work: 30 us; a
compiled graph's guards and wrappers: 60 us a call and 5 us a tensor; a worker's handoff of a
batch: 0.5 ms) was a number of microseconds measured on one 2-core machine. On a CPU three
times as slow, or one whose cores three times the load share, the same program's calls run
three times as long: its 25 us matmuls read 75 us, past the 30 us line, and "ops too small"
went away though nothing in the program changed. The lines keep their values where the run's
small operator costs what the reference machine's does (``REFERENCE_FLOOR_US``) and move with
it past that. Mechanisms, not timings: hand-built traces whose every time is scaled, planted
host figures, and a real run's own trace read at its speed and at three times it.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from gpu_notebook import markers
from gpu_notebook.analysis.floor_lines import (
    REFERENCE_FLOOR_US,
    floor_scale,
    settled_small_line,
)
from gpu_notebook.analysis.host import SMALL_OP_US, host_bound, host_overhead
from gpu_notebook.analysis.phases import find_host_thread, phase_breakdown
from gpu_notebook.cell.facts import SourceFacts
from gpu_notebook.records import HostOverhead, PhaseBreakdown, RunPhase, StepPhases
from gpu_notebook.report.from_trace import report_from_trace
from gpu_notebook.rules import run_rules
from gpu_notebook.rules.launch import compile_gain, tiny_ops
from gpu_notebook.traces import load_trace_dict
from gpu_notebook.words import word_findings
from tests import trace_fixtures as tf
from tests.scenarios import synthetic as syn

SLOWER = 3.0  # a CPU three times as slow, or one shared with three times the load


def _steps(speed: float, steps: int = 6, small_us: float = 6.0, matmul_us: float = 25.0) -> dict:
    """CPU steps of a forward: two addmm of ``matmul_us`` (the heaviest matmul) and twenty
    add_ of ``small_us`` (the small operator: the reference band's top by default), 5 us of
    Python before each; every time ``speed`` times as long."""
    events: list[dict] = []
    t = 0.0
    for k in range(steps):
        events.append(tf.step_mark(k, t))
        t0 = t
        for i in range(22):
            t += 5.0 * speed
            dur = (matmul_us if i in (0, 11) else small_us) * speed
            events.append(tf.op("aten::addmm" if i in (0, 11) else "aten::add_", t, dur))
            t += dur
        events.append(tf.annotation(markers.FORWARD_PREFIX + "Net", t0 + 1.0, t - t0))
        t += 5.0 * speed
    events.append(tf.step_mark(steps, t))
    return tf.trace_dict(events)


def _read(tmp_path: Path, trace: dict, name: str):
    loaded = load_trace_dict(trace)
    host = host_overhead(loaded, phase_breakdown(loaded), find_host_thread(loaded))
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(trace))
    report, _, _ = report_from_trace(path)
    found = tiny_ops(report.run, report.analysis, SourceFacts(parsed=False))
    return host, found, report


def test_the_same_trace_three_times_as_slow_reads_the_same_tiny_ops(tmp_path: Path) -> None:
    """The 25 us matmuls beside 6 us add_ are tiny ops (under 30 us); the same program on a
    CPU three times as slow runs them at 75 us beside 18 us add_: main read the heaviest matmul
    past the 30 us line and the finding went away. In this machine's floors the line is 90 us
    there, and the finding, its level and its fix are the same; the shares too (ratios of
    times)."""
    here, found_here, report_here = _read(tmp_path, _steps(1.0), "here")
    slow, found_slow, report_slow = _read(tmp_path, _steps(SLOWER), "slow")
    assert here is not None and slow is not None
    assert here.op_floor_us == pytest.approx(6.0) and here.small_op_us == SMALL_OP_US
    assert here.floor_scale == 1.0
    assert slow.op_floor_us == pytest.approx(6.0 * SLOWER)
    assert slow.small_op_us == pytest.approx(SMALL_OP_US * SLOWER)
    assert slow.floor_scale == pytest.approx(SLOWER)
    assert slow.small_op_share == pytest.approx(here.small_op_share)
    assert slow.between_ops_share == pytest.approx(here.between_ops_share)
    assert slow.median_op_us == pytest.approx(here.median_op_us * SLOWER)
    assert found_here is not None and found_slow is not None
    assert (found_slow.severity, found_slow.fix_id) == (found_here.severity, found_here.fix_id)
    assert host_bound(slow, report_slow.analysis.top_ops) == host_bound(
        here, report_here.analysis.top_ops
    )
    assert report_slow.verdict.category == report_here.verdict.category


def test_matmuls_of_real_work_stay_work_at_any_speed(tmp_path: Path) -> None:
    """The other side of the line: matmuls of 300 us (50 floors) beside the same add_ are the
    work on the reference machine and on one three times as slow: no tiny-ops finding."""
    for speed in (1.0, SLOWER):
        host, found, _ = _read(tmp_path, _steps(speed, matmul_us=300.0), f"work{speed}")
        assert host is not None and host.heaviest_matmul_us is not None
        assert host.heaviest_matmul_us >= host.small_op_us
        assert found is None


def _gpu_steps(op_us: float, steps: int = 6) -> dict:
    """Each step: 10 host ops of ``op_us``, each launching a 2 us kernel, Python between."""
    events: list[dict] = []
    corr = 1
    for k in range(steps + 1):
        t0 = 20.0 * op_us * k
        events.append(tf.step_mark(k, t0))
        if k == steps:
            break
        for i in range(10):
            t = t0 + 2.0 + 1.5 * op_us * i
            events.append(tf.op("aten::add", t, op_us))
            events.append(tf.launch(t + 0.5, corr, dur=2.0))
            events.append(tf.kernel("void add_kernel()", t + op_us, 2.0, corr))
            corr += 1
    return tf.trace_dict(events)


def test_a_gpu_run_keeps_the_launch_gap_line() -> None:
    """On a GPU run the 30 us line is the device's launch gap (HTA's kernel wait), which the
    host's speed does not move: host calls of 12 us (twice the reference band's top) read
    against 30 us, and no scale is read."""
    trace = load_trace_dict(_gpu_steps(12.0))
    host = host_overhead(trace, phase_breakdown(trace), find_host_thread(trace))
    assert host is not None and host.op_floor_us == pytest.approx(12.0)
    assert host.small_op_us == SMALL_OP_US and host.floor_scale is None


def test_the_line_and_the_floor_read_each_other() -> None:
    """The line settles where the floor under it reads it: in the reference band the reference
    line stands (today's readings on this machine), past it the calls scaled k times settle at
    k times the line, the same calls under it."""
    import numpy as np

    low, high = REFERENCE_FLOOR_US
    calls = np.array([high] * 20 + [25.0] * 2 + [300.0])
    assert settled_small_line(calls, SMALL_OP_US) == (SMALL_OP_US, high)
    for k in (2.0, 3.0, 7.5):
        line, floor = settled_small_line(calls * k, SMALL_OP_US)
        assert line == pytest.approx(SMALL_OP_US * k) and floor == pytest.approx(high * k)
    fast, floor = settled_small_line(np.array([low / 2] * 20 + [14.0] * 2), SMALL_OP_US)
    assert floor == low / 2 and fast == pytest.approx(SMALL_OP_US / 2)
    assert floor_scale(None) == 1.0 and floor_scale((low + high) / 2) == 1.0
    assert settled_small_line(np.zeros(0), SMALL_OP_US) == (SMALL_OP_US, None)


# The compiled graph's own cost, planted: no DataLoader to enlarge, so tiny ops offer compile.
LOOP = """\
for step in range(200):
    loss = loss_fn(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
"""
SPLIT = {"forward": 600.0, "backward": 1000.0, "optimizer": 200.0, "other": 200.0}


def _window(speed: float, gaps_us: float = 600.0, steps: int = 12):
    """A CPU window (``SPLIT`` a step) with ``gaps_us`` between the model's operators and
    200 us of matmuls, every time ``speed`` times as long, and a small operator of the
    reference band's top times ``speed``."""
    split = {p: us * speed for p, us in SPLIT.items()}
    step_us = sum(split.values())
    rows = tuple(StepPhases(i, step_us * i, step_us, dict(split)) for i in range(steps))
    totals = {p: us * steps for p, us in split.items()} | {"data": 0.0}
    window = PhaseBreakdown("trace", rows, step_us * steps, totals, (*totals,))
    floor = REFERENCE_FLOOR_US[1] * speed
    host = HostOverhead(40.0, 8.0 * speed, 0.3, 0.4, SMALL_OP_US * floor_scale(floor),
                        matmul_floor_us=200.0 * speed, model_gaps_us=gaps_us * speed,
                        op_floor_us=floor, floor_scale=floor_scale(floor))  # fmt: skip
    return dataclasses.replace(syn.make_analysis(phase_split=window), host=host)


def _compile_finding(analysis, calls: int):
    steps = dataclasses.replace(syn.steps_record(backward_calls=calls), grad_tensors=6)
    run = syn.make_run(LOOP, steps=steps)
    findings = word_findings(run_rules(run, analysis, syn.VERDICT))
    return {f.rule_id: f for f in findings}["launch.tiny_ops"]


@pytest.mark.parametrize("calls", [1, 2])
def test_the_compiled_graph_s_own_cost_is_read_in_this_machine_s_floors(calls: int) -> None:
    """0.60 ms of gaps less 3 x 90 us of the graph's own cost (6 tensors) a call: offered with
    one call, within what two runs differ by with two (info, not offered). Three times as
    slow, every host time three times as long: main kept the 90 us and offered the two-call
    loop (1.8 ms of gaps less 0.54 ms); in the machine's floors the cost is 270 us a call and
    the offer, the level and the figures are the reference machine's."""
    here, slow = _window(1.0), _window(SLOWER)
    at_here, at_slow = compile_gain(here, 6, calls), compile_gain(slow, 6, calls)
    assert at_here is not None and at_slow is not None
    assert at_slow.floors == pytest.approx(SLOWER) and at_here.floors == 1.0
    assert at_here.own_us is not None and at_slow.own_us is not None
    assert at_slow.own_us == pytest.approx(at_here.own_us * SLOWER)
    assert at_slow.sure == pytest.approx(at_here.sure)
    a, b = _compile_finding(here, calls), _compile_finding(slow, calls)
    assert (b.severity, b.fix_id) == (a.severity, a.fix_id)
    assert (a.fix_id == "torch_compile") is (calls == 1), a.fix


def _loader_window(batch_s: float, speed: float):
    """A tokenizing loader's data wait (tests/test_rules' text classifier), a batch of
    ``batch_s``, on a machine whose host calls run ``speed`` times as long."""
    split = syn.phases({"data": 0.075}, step_us=5000.0 * speed)
    floor = REFERENCE_FLOOR_US[1] * speed
    host = HostOverhead(40.0, 8.0 * speed, 0.3, 0.4, SMALL_OP_US * floor_scale(floor),
                        op_floor_us=floor, floor_scale=floor_scale(floor))  # fmt: skip
    return dataclasses.replace(
        syn.make_analysis(phase_split=split),
        run_data=RunPhase(
            0.08, 354, batch_s * speed, 0.00375 * speed, low_share=0.075, high_share=0.085
        ),
        host=host,
    )


CELL = """\
class Tokens(Dataset):
    def __getitem__(self, i): return seqs[i]
model = Net(); opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
loader = DataLoader(Tokens(), batch_size=32, collate_fn=pad)
for x, y in loader:
    loss = loss_fn(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
"""


@pytest.mark.parametrize("batch_s", [0.0003, 0.00081])
def test_a_worker_s_handoff_is_read_in_this_machine_s_floors(batch_s: float) -> None:
    """A batch of 0.30 ms loads faster than a worker hands one over (0.5 ms): the in-memory
    reading, no workers; one of 0.81 ms is the workers rule's. Three times as slow the first
    reads 0.90 ms, and main took it past the 0.5 ms handoff as though workers would pay; the
    handoff is host calls too (1.5 ms there), and both batches read as they do here."""
    run = syn.make_run(CELL, cpu_count=8)
    readings = []
    for speed in (1.0, SLOWER):
        findings = word_findings(run_rules(run, _loader_window(batch_s, speed), syn.VERDICT))
        memory = [f for f in findings if f.rule_id == "input.in_memory_batches"]
        readings.append(bool(memory))
        if memory and speed == SLOWER:
            said = " ".join(memory[0].evidence)
            assert "1.5 ms" in said and "3.0x the measured machine's" in said, said
    assert readings[0] is (batch_s < 0.0005)
    assert readings[1] == readings[0]


def _real_loop(path: Path) -> None:
    """A real batch-1 MLP loop profiled on this machine, one thread (tests/test_host_overhead)."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, record_function

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    xs, ys = torch.randn(12, 1, 16), torch.randn(12, 1, 1)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for i in range(12):
                with record_function(f"{markers.PROFILER_STEP_PREFIX}{i}"):
                    loss = torch.nn.functional.mse_loss(model(xs[i]), ys[i])
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
        prof.export_chrome_trace(str(path))
    finally:
        torch.set_num_threads(threads)


def test_a_real_run_read_three_times_as_slow_keeps_its_reading(tmp_path: Path) -> None:
    """This machine's own trace of a batch-1 loop, and the same trace with every time three
    times as long: the floor read about three times as long, the line where its floor puts
    it, and the same verdict (host-bound). Its floor read about 2 us here, inside the
    reference band: three times that is just past the band's top, so the line moved little and
    fewer of its calls read small (22% of the step against 32%); exact only past the band."""
    here_path, slow_path = tmp_path / "here.json", tmp_path / "slow.json"
    _real_loop(here_path)
    here_trace = json.loads(here_path.read_text())
    for event in here_trace["traceEvents"]:
        for key in ("ts", "dur"):
            if isinstance(event.get(key), (int, float)):
                event[key] = event[key] * SLOWER
    slow_path.write_text(json.dumps(here_trace))
    hosts = []
    for path in (here_path, slow_path):
        report, _, _ = report_from_trace(path)
        host = report.analysis.host
        assert host is not None and host.op_floor_us is not None
        assert host.small_op_us == pytest.approx(SMALL_OP_US * floor_scale(host.op_floor_us))
        hosts.append((host, report.verdict.category))
    (here, here_verdict), (slow, slow_verdict) = hosts
    assert here.op_floor_us is not None and slow.op_floor_us is not None
    # Three times as long, less what of the calls under the line the line (moved by its floor
    # only past the reference band) leaves out.
    assert here.op_floor_us * 2 < slow.op_floor_us <= here.op_floor_us * SLOWER * 1.01
    assert slow_verdict == here_verdict == "host-bound"
