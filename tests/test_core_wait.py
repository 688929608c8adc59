"""The traced steps' wait for a core: read at the window's own step marks, taken out of the host
figures, said as its own item (issue: same code, same answer on a busy machine)."""

from __future__ import annotations

import dataclasses
import gzip
import itertools
import json
import multiprocessing
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from gpu_notebook.analysis.analyze import analyze
from gpu_notebook.analysis.host import host_overhead
from gpu_notebook.analysis.interference import (
    marked_waits,
    own_phase_split,
    wait_share,
    window_waits,
)
from gpu_notebook.analysis.phases import find_host_thread, phase_breakdown
from gpu_notebook.markers import STEP_MARK_PREFIX
from gpu_notebook.records import PhaseBreakdown, ProfileWindow, StepTiming
from gpu_notebook.traces import load_trace

DATA = Path(__file__).parent / "data" / "core_wait"
SCHEDSTAT = Path("/proc/thread-self/schedstat")


def _recorded(label: str) -> tuple[object, dict]:
    meta = json.loads((DATA / "nanogpt_windows.json").read_text())[label]
    return load_trace(str(DATA / f"nanogpt_{label}.trace.json.gz")), meta


def _host(label: str, *, marks: bool):  # type: ignore[no-untyped-def]
    trace, meta = _recorded(label)
    phases = phase_breakdown(trace)
    clock = {int(i): (w or 0.0) / d for i, (d, w) in meta["clock_steps"].items() if d > 0}
    window = ProfileWindow(
        "recorded", 2, 3, first_step=meta["first_step"], recorded_steps=3,
        step_waits_s=tuple(meta["step_waits_s"]),
    )  # fmt: skip
    waits = marked_waits(window) if marks else None
    return host_overhead(trace, phases, find_host_thread(trace), clock, waits), phases, meta


@pytest.mark.parametrize("label", ["loaded_a", "loaded_b"])
def test_a_loaded_window_reads_the_quiet_split_with_its_waits_read_at_its_marks(label: str) -> None:
    """nanogpt_shaped recorded with its thread waiting for a core 70% (quiet, load 10 from
    others) and 88-91% (two spinners beside it) of the traced steps: the step clock's waits,
    mapped to the trace's steps by index, fell a step off (its step 4 held the trace's step
    3's 33 ms), and loaded_b read Python between operators 13% against 24% quiet. Read at the
    trace's own marks, each step's wait is its own: the loaded windows read the quiet
    overhead, and every step's reading stays a share of the step (its range decides near the
    50% line). What stays: a loaded machine runs the code slower on the core too (no wait
    schedstat sees), and gaps count up to 4x their floor: Python between operators reads
    within 10 points of quiet, not equal."""
    quiet, _, _ = _host("quiet", marks=True)
    busy, phases, meta = _host(label, marks=True)
    assert quiet is not None and busy is not None
    overhead = busy.between_ops_share + busy.small_op_share
    assert overhead == pytest.approx(quiet.between_ops_share + quiet.small_op_share, abs=0.03)
    assert busy.between_ops_share == pytest.approx(quiet.between_ops_share, abs=0.10)
    assert 0.5 <= (busy.overhead_share_high or 0.0) <= 1.0
    # The item said beside them is the recorded numbers' own: the waits over the steps' time.
    spans_s = sum(p.duration_us for p in phases.steps) / 1e6
    assert busy.core_wait_share == pytest.approx(sum(meta["step_waits_s"]) / spans_s, rel=1e-6)


def test_without_waits_read_at_the_marks_the_share_is_not_measured() -> None:
    host, _, _ = _host("loaded_b", marks=False)
    assert host is not None and host.core_wait_share is None


def _recorded_run(label: str, *, marks: bool):  # type: ignore[no-untyped-def]
    """The recorded window as a run: its trace, its marks' waits (or none: a record from before
    them), the step clock's steps 0-4 with their own readings (steps 0-1 of the warm-up quiet,
    at the window's median pace)."""
    from tests.scenarios import synthetic as syn

    trace, meta = _recorded(label)
    clock = {int(i): (d, w) for i, (d, w) in meta["clock_steps"].items()}
    pace = sorted(d for d, _ in clock.values())[1]
    steps, t = [], 0.0
    for i in range(5):
        d, w = clock.get(i, (pace, 0.0))
        steps.append(StepTiming(i, t, d, 0.0, 0.0, 0.0, 0.0, 1, 1, 64, wait_s=w))
        t += d
    window = ProfileWindow(
        "recorded", 2, 3, first_step=meta["first_step"], recorded_steps=3,
        trace_path=str(DATA / f"nanogpt_{label}.trace.json.gz"),
        step_waits_s=tuple(meta["step_waits_s"]) if marks else None,
    )  # fmt: skip
    record = dataclasses.replace(syn.steps_record(5), steps=tuple(steps))
    run = dataclasses.replace(syn.make_run(steps=record), window=window)
    return run, phase_breakdown(trace), meta


@pytest.mark.parametrize("label", ["quiet", "loaded_a", "loaded_b"])
def test_the_windows_phases_take_out_each_steps_wait_read_at_its_marks(label: str) -> None:
    """nanogpt_shaped's recorded windows: the step clock read the trace's step 2's wait partly
    in its step 2 and the trace's step 3's in its step 4 (loaded_a: 58, 0, 33 ms against the
    marks' 32, 33, 27 ms), and the phases' own time, placed from the clock, read every step
    alike (3.0 ms each). Read at the marks, each traced step's own time is its wall time less
    its own wait, and the wait taken out of the window is the marks' sum."""
    run, wall, meta = _recorded_run(label, marks=True)
    phases = analyze(run).phases
    assert phases is not None and phases.source == "trace"
    marked = dict(zip(itertools.count(meta["first_step"]), meta["step_waits_s"], strict=False))
    assert [p.index for p in phases.steps] == [p.index for p in wall.steps]
    for own, step in zip(phases.steps, wall.steps, strict=True):
        assert own.duration_us == pytest.approx(step.duration_us - marked[step.index] * 1e6)
    assert phases.waited_share == pytest.approx(sum(meta["step_waits_s"]) * 1e6 / wall.total_us)


@pytest.mark.parametrize("label", ["quiet", "loaded_a"])
def test_a_window_recorded_before_the_marks_reads_the_clocks_waits_as_before(label: str) -> None:
    """No marks (an older record, no schedstat): each traced step's wait is the clock's share of
    its step of the same index, placed over the window (``window_waits``), as before."""
    run, wall, _ = _recorded_run(label, marks=False)
    phases = analyze(run).phases
    assert phases is not None
    expected = _clock_own_us(wall, run.steps.steps)
    assert [p.duration_us for p in phases.steps] == pytest.approx(list(expected))


def _clock_own_us(wall: PhaseBreakdown, steps: Sequence[StepTiming]) -> np.ndarray:
    """Each traced step's own time (us) on the step clock's waits, recomputed: the clock's share
    of its step of the same index, placed over the window (``window_waits``), off what each
    phase spent beyond its least (``own_phase_split``)."""
    names = sorted({k for p in wall.steps for k in p.phase_us})
    rows = np.array(
        [[*(p.phase_us.get(k, 0.0) for k in names),
          max(0.0, p.duration_us - sum(p.phase_us.values()))] for p in wall.steps]
    )  # fmt: skip
    clock = {s.index: s for s in steps}
    matched = np.array([wait_share(clock[p.index]) * p.duration_us for p in wall.steps])
    clock_us = {s.index: (s.wait_s or 0.0) * 1e6 for s in steps}
    waits = window_waits(rows, [p.index for p in wall.steps], matched, clock_us)
    own: np.ndarray = own_phase_split(rows, waits).sum(axis=1)
    return own


# The later window's steps: loaded_b's recorded trace, its step marks moved 64 steps on.
LATER = 64


def _two_windows(tmp_path: Path, *, marks: bool):  # type: ignore[no-untyped-def]
    """A 100-step run profiled twice: loaded_a's window at steps 2-4, loaded_b's (its marks
    renamed 66-68, a copy in ``tmp_path``) at 66-68, each with its marks' waits (or none) and
    the step clock's own readings of its steps; the steps around them quiet at 3.1 ms (the
    windows' own pace)."""
    from tests.scenarios import synthetic as syn

    meta = json.loads((DATA / "nanogpt_windows.json").read_text())
    text = gzip.decompress((DATA / "nanogpt_loaded_b.trace.json.gz").read_bytes()).decode()
    for i in (5, 4, 3, 2):  # downwards: a renamed mark is never renamed again
        text = text.replace(f'"{STEP_MARK_PREFIX}{i}"', f'"{STEP_MARK_PREFIX}{i + LATER}"')
    later = tmp_path / "later.trace.json.gz"
    later.write_bytes(gzip.compress(text.encode()))
    a, b = meta["loaded_a"], meta["loaded_b"]
    windows = tuple(
        ProfileWindow(
            "recorded",
            2,
            3,
            first_step=first,
            recorded_steps=3,
            trace_path=path,
            step_waits_s=tuple(m["step_waits_s"]) if marks else None,
        )
        for first, path, m in (
            (2, str(DATA / "nanogpt_loaded_a.trace.json.gz"), a),
            (2 + LATER, str(later), b),
        )
    )
    clock = {int(i): v for i, v in a["clock_steps"].items()}
    clock |= {int(i) + LATER: v for i, v in b["clock_steps"].items()}
    steps, t = [], 0.0
    for i in range(100):
        d, w = clock.get(i, (0.0031, 0.0))
        steps.append(StepTiming(i, t, d, 0.0, 0.0, 0.0, 0.0, 1, 1, 64, wait_s=w))
        t += d
    record = dataclasses.replace(syn.steps_record(100), steps=tuple(steps))
    run = dataclasses.replace(
        syn.make_run(steps=record), window=windows[0], more_windows=windows[1:]
    )
    return run, phase_breakdown(load_trace(str(later))), b


@pytest.mark.parametrize("marks", [True, False])
def test_a_later_windows_steps_stand_in_the_runs_split_on_their_own_time(
    tmp_path: Path, marks: bool
) -> None:
    """The run's split from several windows weighs each on its steps' own time; a later
    window's steps were left on their wall time (loaded_b: 32, 35, 20 ms, 28, 32, 17 ms of it
    waiting), so its waits spoke as whichever phase they fell in. Each window's steps now stand
    as the first window's do: less the waits read at their marks, or the step clock's where
    there are none. The combined steps are scaled per window: their proportions are the test."""
    run, wall, meta = _two_windows(tmp_path, marks=marks)
    phases = analyze(run).phases
    assert phases is not None and phases.source == "trace"
    later = [p.duration_us for p in phases.steps if p.index >= LATER]
    assert len(later) == 3
    if marks:
        own = np.array([p.duration_us for p in wall.steps]) - np.array(meta["step_waits_s"]) * 1e6
    else:
        own = _clock_own_us(wall, run.steps.steps)
    assert np.array(later) / sum(later) == pytest.approx(own / own.sum(), rel=1e-6)


@pytest.mark.parametrize("marks", [True, False])
def test_the_runs_split_from_windows_that_mostly_waited_says_so(
    tmp_path: Path, marks: bool
) -> None:
    """Both recorded windows' steps waited 88-91% of their time for a core; the run's split
    combined from them read 0% waited, so the verdict took it as a split read from the whole
    of its steps (verdict.run_data_overrules, ``WINDOW_WAITED``) and had no wall split for
    analysis.too_busy. It carries the windows' wall time, scaled as their splits are: its
    share waited lies between the two windows' own, its wall split is the windows' walls."""
    from gpu_notebook.analysis.verdict import WINDOW_WAITED

    run, later, _ = _two_windows(tmp_path, marks=marks)
    first, _ = _recorded("loaded_a")
    waited = []
    for wall, w in zip((phase_breakdown(first), later), run.windows, strict=True):
        if marks:
            waited.append(sum(w.step_waits_s or ()) * 1e6 / wall.total_us)
        else:
            waited.append(1.0 - _clock_own_us(wall, run.steps.steps).sum() / wall.total_us)
    phases = analyze(run).phases
    assert phases is not None and len({p.index >= LATER for p in phases.steps}) == 2
    assert min(waited) - 1e-9 <= phases.waited_share <= max(waited) + 1e-9
    assert phases.waited_share >= WINDOW_WAITED
    assert phases.wall_total_us == pytest.approx(phases.total_us / (1.0 - phases.waited_share))
    walls = [phase_breakdown(first).share("optimizer"), later.share("optimizer")]
    assert min(walls) - 1e-9 <= (phases.wall_share("optimizer") or 0.0) <= max(walls) + 1e-9


def _spin(stop: multiprocessing.synchronize.Event) -> None:  # pragma: no cover - a load process
    while not stop.is_set():
        pass


@pytest.mark.skipif(not SCHEDSTAT.exists(), reason="no Linux schedstat here")
def test_the_window_reads_run_delay_at_each_mark_beside_real_busy_processes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A real profiler window on this thread, one busy process per core beside it: the window
    reads the thread's schedstat at each step mark, and each recorded step's wait is the
    difference of the readings around it (whatever the load made them)."""
    import torch

    from gpu_notebook.capture import profiler

    readings: list[int | None] = []
    real = profiler.run_delay_ns

    def recording() -> int | None:
        readings.append(real())
        return readings[-1]

    monkeypatch.setattr(profiler, "run_delay_ns", recording)
    stop = multiprocessing.get_context("spawn").Event()
    spinners = [
        multiprocessing.get_context("spawn").Process(target=_spin, args=(stop,), daemon=True)
        for _ in range(os.cpu_count() or 1)
    ]
    for p in spinners:
        p.start()
    try:
        # No CPU cap: a loaded machine's steps must not cut the window short.
        window = profiler.ProfilerWindow(warmup=1, profile_steps=3, cuda=False, max_cpu_s=600.0)
        x = torch.randn(16, 16)
        for step in range(5):
            window.on_boundary(step)
            for _ in range(5):
                x = torch.tanh(x @ x.T / 16)
        record = window.close()
    finally:
        stop.set()
        for p in spinners:
            p.join(timeout=10)
    assert record.status == "recorded" and record.recorded_steps == 3
    assert len(readings) == 4 and all(isinstance(r, int) for r in readings)
    ns = [r for r in readings if r is not None]
    assert record.step_waits_s == tuple((b - a) / 1e9 for a, b in itertools.pairwise(ns))


def test_where_schedstat_cannot_be_read_the_window_carries_no_waits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """macOS and Windows have no /proc: the window records as before, its waits not measured."""
    import torch

    from gpu_notebook.capture import profiler

    monkeypatch.setattr(profiler, "run_delay_ns", lambda: None)
    window = profiler.ProfilerWindow(warmup=1, profile_steps=2, cuda=False)
    x = torch.randn(8, 8)
    for step in range(4):
        window.on_boundary(step)
        x = x @ x.T / 8
    record = window.close()
    assert record.status == "recorded" and record.step_waits_s is None


def _tiny_ops_evidence(core_wait_share: float | None) -> tuple[str, ...]:
    from gpu_notebook.records import HostOverhead
    from gpu_notebook.rules.launch import TinyOps
    from gpu_notebook.words.launch import tiny_ops

    host = HostOverhead(
        ops_per_step=311, median_op_us=1.0, between_ops_share=0.25, small_op_share=0.26,
        small_op_us=30.0, core_wait_share=core_wait_share,
    )  # fmt: skip
    said = TinyOps(
        tiny=False, sized_us=40.0, heaviest_us=40.0, host=host, residual=0.25, phases=None,
        median_s=0.002, batch=8, factor=2, bound=1.5, outcome="compile", compiled=False,
    )  # fmt: skip
    return tiny_ops(said).evidence


def test_the_wait_for_a_core_is_its_own_item_and_not_measured_is_said() -> None:
    loaded = [e for e in _tiny_ops_evidence(0.88) if "waiting for a core" in e]
    assert len(loaded) == 1 and "88%" in loaded[0] and "other processes" in loaded[0]
    assert not [e for e in _tiny_ops_evidence(0.01) if "waiting for a core" in e]
    unread = [e for e in _tiny_ops_evidence(None) if "waiting for a core" in e]
    assert len(unread) == 1 and "not measured" in unread[0]
