"""The stack sampler: which line and which function the host time goes to, and the exports.

Cells run in the real IPython shell (the ``ip`` fixture) with the sampler on the main thread,
as the capture session will run it: by default that samples from a SIGALRM handler, and the
main results are checked with the fallback sampler thread too. The bounds, the thread lifecycle
and the escaping are checked on plain functions in worker threads (always the thread sampler).
"""

from __future__ import annotations

import json
import re
import signal
import sys
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import jsonschema
import pytest

from gpu_notebook.analysis.lines import (
    hot_functions,
    hot_lines,
    parse_frame_label,
    stack_profile,
    to_collapsed,
    to_speedscope,
)
from gpu_notebook.capture import stacks as stacks_module
from gpu_notebook.capture.stacks import (
    OTHER,
    THREAD_NAME_PREFIX,
    RawStacks,
    StackSampler,
)
from gpu_notebook.capture.threads import live_hidden_threads
from gpu_notebook.cellrun import run_cell_body, run_sync
from gpu_notebook.records import StackProfile
from gpu_notebook.views.flame import flame_svg, line_bars_html
from gpu_notebook.views.wording import describe_line

INTERVAL_S = 0.005

# A cell whose time goes to a pure-Python function called from line 11.
SLOW_PYTHON_CELL = """\
import sys
def slow_sum(n):
    total = 0
    for i in range(n):
        total += i * i
    return total

_cell_file = sys._getframe().f_code.co_filename
x = torch.randn(64, 64)
for _ in range(8):
    s = slow_sum(400_000)
    y = x @ x
"""
SLOW_LINE = 11

# A cell without hot Python: the time is inside a torch op called from line 5.
MATMUL_CELL = """\
import sys
_cell_file = sys._getframe().f_code.co_filename
a = torch.randn(1024, 1024); b = torch.randn(1024, 1024)
for _ in range(10):
    c = a @ b
"""
MATMUL_LINE = 5

# Training loop without an optimizer (its first construction imports torch._dynamo for seconds):
# data wait on line 4 (60 ms a batch), forward on line 5, backward on line 6 (a few ms each).
TRAINING_CELL = """\
import sys
_cell_file = sys._getframe().f_code.co_filename
model = mlp(32, 2048); loss_fn = nn.MSELoss(); loader = DataLoader(SlowDataset(n=128), batch_size=8)
for x, y in loader:
    loss = loss_fn(model(torch.cat([x] * 256)), torch.cat([y] * 256))
    loss.backward()
"""


def sampler_threads() -> list[str]:
    """Our stack sampler threads still running (hidden from threading.enumerate())."""
    return [t.name for t in live_hidden_threads() if t.name.startswith(THREAD_NAME_PREFIX)]


def sample_cell(ip: Any, source: str, **kwargs: Any) -> tuple[RawStacks, str]:
    """Run ``source`` in the shell with the sampler on this (the shell's) thread."""
    with StackSampler(threading.get_ident(), INTERVAL_S, **kwargs) as sampler:
        result = ip.run_cell(source)
        raw = sampler.stop()
    assert result.success, result.error_in_exec
    return raw, ip.user_ns["_cell_file"]


@pytest.fixture(scope="module")
def slow_python(ip: Any) -> tuple[RawStacks, StackProfile]:
    raw, cell_file = sample_cell(ip, SLOW_PYTHON_CELL)
    return raw, stack_profile(raw, cell_file, SLOW_PYTHON_CELL)


@pytest.fixture(scope="module")
def matmul(ip: Any) -> tuple[RawStacks, StackProfile]:
    raw, cell_file = sample_cell(ip, MATMUL_CELL)
    return raw, stack_profile(raw, cell_file, MATMUL_CELL)


def alarm_state() -> tuple[Any, tuple[float, float]]:
    """SIGALRM's handler and the ITIMER_REAL timer: the sampler must never touch either."""
    return signal.getsignal(signal.SIGALRM), signal.getitimer(signal.ITIMER_REAL)


NO_ALARM = (signal.SIG_DFL, (0.0, 0.0))


@pytest.fixture(autouse=True)
def no_sampler_left_behind() -> Iterator[None]:
    yield
    assert sampler_threads() == [], "a stack sampler thread outlived its test"
    assert alarm_state() == NO_ALARM, "a test left a SIGALRM handler or timer behind"


@contextmanager
def running(target: Callable[[threading.Event], None]) -> Iterator[threading.Thread]:
    """A worker thread running ``target(stop)``; stopped and joined on exit, whatever happened."""
    stop = threading.Event()
    thread = threading.Thread(target=target, args=(stop,), daemon=True)
    thread.start()
    try:
        yield thread
    finally:
        stop.set()
        thread.join()


def sample_thread(
    target: Callable[[threading.Event], None],
    seconds: float,
    until: threading.Event | None = None,
    **kwargs: Any,
) -> RawStacks:
    """Sample a worker running ``target`` for ``seconds`` (its whole stack: no IPython root),
    and then until ``until`` is set: on a loaded machine a sleep says little about progress."""
    kwargs.setdefault("root_codes", ())
    with (
        running(target) as thread,
        StackSampler(thread.ident or 0, INTERVAL_S, **kwargs) as sampler,
    ):
        time.sleep(seconds)
        if until is not None:
            assert until.wait(30), "the worker did not get there within 30 s"
        return sampler.stop()


def spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


# ------------------------------------------------------------------ where the time goes


def test_a_slow_python_function_puts_its_call_line_and_itself_on_top(slow_python):
    _raw, profile = slow_python
    top = hot_lines(profile, 1)[0]
    assert top.line == SLOW_LINE, [describe_line(s) for s in hot_lines(profile, 5)]
    assert top.text.strip() == "s = slow_sum(400_000)"
    assert top.share > 0.7
    best = hot_functions(profile, 1)[0]
    assert (best.function, best.filename, best.first_line) == ("slow_sum", "cell", 2)
    assert best.self_samples > 0.7 * profile.samples
    # Inside the function, the loop body holds the time; the header line holds none of it.
    inner = {stat.line: stat for stat in profile.lines}
    loop_samples = sum(inner[line].samples for line in (4, 5) if line in inner)
    assert loop_samples > 0.6 * profile.samples
    assert 1 not in inner and 2 not in inner


def test_the_stacks_are_rooted_at_the_cell_not_at_ipython(slow_python):
    raw, profile = slow_python
    assert raw.root_filename is not None and raw.root_filename.startswith("<ipython-input-")
    assert all(key.startswith("cell:<module>:") for key in profile.collapsed), profile.collapsed
    assert not any("interactiveshell" in f.filename for f in profile.functions)
    assert not any("test_stacks" in f.filename for f in raw.functions)  # the caller, outside


def test_time_outside_the_cell_is_not_counted_as_the_cells(ip):
    def outside_samples(sampler: StackSampler) -> int:
        with sampler._lock:  # held by the sampler thread for each sample
            return sum(tally[0] for key, tally in sampler._counts.items() if not key[1])

    with StackSampler(threading.get_ident(), INTERVAL_S) as sampler:
        # The caller's own time, before IPython runs the cell: until the sampler caught it
        # three times (a busy machine can leave the sampler thread without a turn for a while).
        deadline = time.perf_counter() + 30.0
        while outside_samples(sampler) < 3:
            assert time.perf_counter() < deadline, "the sampler took no sample in 30 s"
            spin(0.02)
        result = ip.run_cell(MATMUL_CELL)
        raw = sampler.stop()
    assert result.success
    assert raw.outside_samples >= 3 and raw.outside_us > 0
    assert not any(f.function == "spin" for f in raw.functions)
    top = hot_lines(stack_profile(raw, ip.user_ns["_cell_file"], MATMUL_CELL), 1)[0]
    assert (top.line, top.share > 0.8) == (MATMUL_LINE, True)


def test_a_cell_without_hot_python_puts_the_torch_ops_caller_line_on_top(matmul):
    _raw, profile = matmul
    top = hot_lines(profile, 1)[0]
    assert top.line == MATMUL_LINE, [describe_line(s) for s in hot_lines(profile, 5)]
    assert top.share > 0.8
    best = hot_functions(profile, 1)[0]
    assert (best.function, best.filename) == ("<module>", "cell")


def test_the_sampler_never_reports_its_own_frames(matmul, slow_python):
    for raw, profile in (matmul, slow_python):
        assert not any(f.filename == stacks_module.__file__ for f in raw.functions)
        assert not any("capture/stacks.py" in key for key in profile.collapsed)
        assert not any(f.function.startswith("StackSampler") for f in profile.functions)


def test_samples_that_catch_the_thread_inside_the_sampler_api_are_dropped():
    """A thread blocked in a sampler's stop() (joining it) is the sampler's cost, not the cell's."""

    def slow_provider() -> str | None:
        time.sleep(0.3)  # holds the inner sampler's lock: its stop() waits inside stacks.py
        return None

    spun = threading.Event()

    def work(stop: threading.Event) -> None:
        inner = StackSampler(threading.get_ident(), INTERVAL_S, phase_provider=slow_provider)
        inner.start()
        time.sleep(0.02)
        inner.stop()
        spin(0.1)
        spun.set()
        stop.wait()

    raw = sample_thread(work, 0.0, until=spun)
    # ~60 samples of 5 ms fall in the 0.3 s stop(); a few suffice for the mechanism, however
    # many turns a busy machine gave the sampler thread.
    assert raw.own_samples >= 3
    assert not any(f.filename == stacks_module.__file__ for f in raw.functions)
    assert any(f.function == "spin" for f in raw.functions)


class _Frame:
    """A frame as the sampler walks it (code, last instruction, caller): a recorded sample."""

    def __init__(self, code: Any, back: Any = None) -> None:
        self.f_code, self.f_lasti, self.f_back = code, 0, back


def test_time_is_weighted_so_pure_python_is_not_undersampled():
    """Pure Python holds the GIL for whole switch intervals, so its samples come late and few
    (unweighted counts gave a loop 54% instead of 77%): each sample weighs the wall time since
    the previous one. Driven by a recorded sequence of samples (how much the lowered switch
    interval buys on a live thread moves with the load: benchmarks/sampler_switch_interval.py)."""

    def spin_here() -> None: ...

    def sleep_here() -> None: ...

    spinning, sleeping = _Frame(spin_here.__code__), _Frame(sleep_here.__code__)
    sampler = StackSampler(threading.get_ident(), INTERVAL_S, root_codes=())
    sampler._last_sample_ns = now_ns = 1_000_000_000
    # 120 samples 5 ms apart while the loop held the GIL (0.6 s), then 200 samples 1 ms apart
    # while it slept (0.2 s): by count the loop is 37.5%, by time 75%.
    for frame, gap_ms, count in ((spinning, 5, 120), (sleeping, 1, 200)):
        for _ in range(count):
            now_ns += gap_ms * 1_000_000
            sampler._sample_frame(frame, 0, now_ns)  # type: ignore[arg-type]
    raw = sampler._resolve(thread_alive=False)
    by_function = {raw.functions[c.function].function: c for c in raw.function_counts}
    spin_ = next(c for name, c in by_function.items() if name.endswith("spin_here"))
    sleep_ = next(c for name, c in by_function.items() if name.endswith("sleep_here"))
    assert (spin_.total_samples, sleep_.total_samples) == (120, 200)
    assert (spin_.total_us, sleep_.total_us, raw.time_us) == (600_000, 200_000, 800_000)
    assert spin_.total_us / raw.time_us == 0.75
    # The views read the weighted time: the loop's function is on top with its share of it.
    profile = stack_profile(raw)
    best = hot_functions(profile, 1)[0]
    assert best.function.endswith("spin_here"), profile.functions
    assert best.self_samples / profile.samples == pytest.approx(0.75, abs=0.01)


def test_lines_and_phases_of_a_training_loop_read_from_torch_frames(ip):
    raw, cell_file = sample_cell(ip, TRAINING_CELL)
    profile = stack_profile(raw, cell_file, TRAINING_CELL)
    lines = {stat.line: stat for stat in profile.lines}

    def main_phase(line: int) -> str:
        phases = lines[line].phase_samples
        return max(phases, key=phases.__getitem__) if phases else "none"

    assert main_phase(4) == "data", lines[4]
    assert main_phase(5) == "forward", lines[5]
    assert main_phase(6) == "backward", lines[6]
    assert "(mostly data)" in describe_line(lines[4])


def test_a_phase_provider_labels_each_sample():
    phase: list[str | None] = [None]

    def work(stop: threading.Event) -> None:
        while not stop.is_set():
            phase[0] = "data"
            spin(0.01)
            phase[0] = "forward"
            time.sleep(0.01)

    raw = sample_thread(work, 0.5, phase_provider=lambda: phase[0])
    by_line = {(c.filename, c.line): c for c in raw.lines}
    spin_line = work.__code__.co_firstlineno + 3
    sleep_line = work.__code__.co_firstlineno + 5
    spin_phases = by_line[(__file__, spin_line)].phase_time_us
    sleep_phases = by_line[(__file__, sleep_line)].phase_time_us
    assert spin_phases.get("data", 0) > 0.8 * sum(spin_phases.values())
    assert sleep_phases.get("forward", 0) > 0.8 * sum(sleep_phases.values())


def test_a_gpucheck_body_keeps_notebook_line_numbers(ip):
    """Through cellrun, line 1 is the %%gpucheck line: the body's line k is cell line k + 1."""
    with StackSampler(threading.get_ident(), INTERVAL_S) as sampler:
        outcome = run_sync(run_cell_body(ip, MATMUL_CELL, "%%gpucheck"))
        raw = sampler.stop()
    assert outcome.status == "ok"
    profile = stack_profile(raw, None, MATMUL_CELL, first_line=2)
    top = hot_lines(profile, 1)[0]
    assert top.line == MATMUL_LINE + 1
    assert top.text == "    c = a @ b"
    assert describe_line(top).startswith(f"line {MATMUL_LINE + 1} `c = a @ b`: ")


# ------------------------------------------------------------------ bounds and lifecycle


def test_distinct_stacks_stay_bounded_and_the_rest_folds_into_other():
    def recurse(depth: int) -> None:
        if depth == 0:
            spin(0.002)
        else:
            recurse(depth - 1)

    def work(stop: threading.Event) -> None:
        depth = 0
        while not stop.is_set():
            recurse(depth % 40)
            depth += 1

    with (
        running(work) as thread,
        StackSampler(thread.ident or 0, INTERVAL_S, max_stacks=8, root_codes=()) as sampler,
    ):
        # 0.6 s, and on until a sample past the 8 stacks was folded: a busy machine can give
        # the sampler fewer than 9 turns in 0.6 s (the deadline only bounds the wait).
        time.sleep(0.6)
        deadline = time.perf_counter() + 30.0
        while True:
            with sampler._lock:
                folded = sampler._other[0]
            if folded or time.perf_counter() > deadline:
                break
            time.sleep(0.01)
        assert sampler.distinct_stacks <= 8
        raw = sampler.stop()
    assert len(raw.stacks) <= 8
    assert raw.other_samples > 0
    assert sum(s.count for s in raw.stacks) + raw.other_samples == raw.samples
    # Functions and lines are still counted exactly, folded samples included: every sample has
    # one innermost function, and every sample ran inside ``work`` on one of its loop lines.
    assert sum(c.self_samples for c in raw.function_counts) == raw.samples
    work_counts = [
        c for c in raw.function_counts if raw.functions[c.function].function.endswith("work")
    ]
    assert work_counts[0].total_samples == raw.samples
    loop = work.__code__.co_firstlineno
    assert (
        sum(c.samples for c in raw.lines if loop < c.line <= loop + 4 and c.filename == __file__)
        == raw.samples
    )
    profile = stack_profile(raw)
    assert OTHER in profile.collapsed
    assert profile.collapsed[OTHER] > 0


def test_no_sampler_thread_remains_after_stop():
    sampler = StackSampler(threading.get_ident(), INTERVAL_S)
    try:
        sampler.start()
        thread = sampler._thread
        assert thread is not None and thread.is_alive()
        spin(0.05)
    finally:
        first = sampler.stop()
    assert not thread.is_alive()
    assert sampler_threads() == []
    assert sampler.stop() is first  # idempotent
    with pytest.raises(RuntimeError):
        sampler.start()


def test_pause_stops_sampling_and_its_time_is_not_counted():
    def work(stop: threading.Event) -> None:
        while not stop.is_set():
            spin(0.01)

    # Each active span is bracketed by clock reads just outside (t0, t1...) and just inside
    # (i0, i1...) the resume()/pause() calls: the sampler's own duration lies between the two,
    # however long a busy machine keeps this thread off a core between a read and a call.
    with running(work) as thread:
        sampler = StackSampler(thread.ident or 0, INTERVAL_S, root_codes=())
        sampler.start(paused=True)
        try:
            time.sleep(0.2)
            t0 = time.perf_counter()
            sampler.resume()
            i0 = time.perf_counter()
            time.sleep(0.3)
            i1 = time.perf_counter()
            sampler.pause()
            t1 = time.perf_counter()
            time.sleep(0.4)  # not counted
            t2 = time.perf_counter()
            sampler.resume()
            i2 = time.perf_counter()
            time.sleep(0.2)
            i3 = time.perf_counter()
        finally:
            raw = sampler.stop()
            t3 = time.perf_counter()
    outer_s, inner_s = (t1 - t0) + (t3 - t2), (i1 - i0) + (i3 - i2)
    assert inner_s <= raw.duration_s <= outer_s  # the paused 0.4 s (and more) is left out
    # The samples stand for active time only: each weighs the time since the previous sample
    # or the resume, never the pause.
    assert raw.samples > 0
    assert 0 < raw.time_us / 1e6 <= raw.duration_s + 0.001


def test_the_switch_interval_is_lowered_while_sampling_and_restored_after():
    """What the lowering buys (the share of a short pure-Python stretch the sampler sees) moves
    with the machine's load: it is measured in benchmarks/sampler_switch_interval.py."""
    before = sys.getswitchinterval()
    sampler = StackSampler(threading.get_ident(), INTERVAL_S, switch_interval_s=0.0002)
    sampler.start(paused=True)
    try:
        assert sys.getswitchinterval() == before
        sampler.resume()
        assert sys.getswitchinterval() == pytest.approx(0.0002)
        sampler.pause()
        assert sys.getswitchinterval() == before
        sampler.resume()
    finally:
        sampler.stop()
    assert sys.getswitchinterval() == before


def test_a_brief_switch_sampler_lowers_the_interval_only_for_each_sample_and_restores_it():
    """The sparse sampler over the rest of a run (issue 26): on a jittered clock, the switch
    interval lowered only from just before each sample until it is taken, so a sample waits at
    most ours for the GIL and falls where the clock says, not on the program's next
    GIL-releasing call. The program's own value is back between samples and after the sampler;
    one the program sets meanwhile is kept."""
    before = sys.getswitchinterval()
    at_samples: list[float] = []

    def provider() -> str | None:  # called by the sampler thread as it takes each sample
        at_samples.append(sys.getswitchinterval())
        return None

    sampler = StackSampler(threading.get_ident(), 0.04, phase_provider=provider, brief_switch=True)
    sampler.start()
    seen: set[float] = set()
    try:
        assert sys.getswitchinterval() == before  # not lowered when sampling starts
        while len(at_samples) < 3:  # pure Python: only the lowered interval lets a sample in
            seen.add(sys.getswitchinterval())
    finally:
        raw = sampler.stop()
    assert sys.getswitchinterval() == before
    assert at_samples and all(v == pytest.approx(0.0002) for v in at_samples), at_samples
    assert before in seen  # the program's own between the samples
    assert raw.clocked and raw.samples >= 3
    # The program sets its own while sampling: kept, never overwritten by our restore.
    sampler = StackSampler(threading.get_ident(), INTERVAL_S, brief_switch=True).start()
    try:
        sys.setswitchinterval(0.003)
        spin(0.1)
    finally:
        sampler.stop()
        now = sys.getswitchinterval()
        sys.setswitchinterval(before)
    assert now == pytest.approx(0.003)


def test_a_sampler_that_never_resumed_reports_nothing():
    sampler = StackSampler(threading.get_ident(), INTERVAL_S)
    sampler.start(paused=True)
    try:
        spin(0.1)
    finally:
        raw = sampler.stop()
    assert (raw.samples, raw.duration_s, raw.stacks) == (0, 0.0, ())
    assert stack_profile(raw).samples == 0


def test_a_failing_phase_provider_is_raised_by_stop_and_the_sampler_ends():
    def provider() -> str | None:
        raise LookupError("provider bug")

    sampler = StackSampler(threading.get_ident(), INTERVAL_S, phase_provider=provider)
    sampler.start()
    spin(0.05)
    with pytest.raises(LookupError, match="provider bug"):
        sampler.stop()
    assert sampler_threads() == []


@pytest.mark.parametrize("interval_s", [0.0, -1.0, 5.0])
def test_an_interval_outside_the_sane_range_is_refused(interval_s):
    with pytest.raises(ValueError, match="interval_s"):
        StackSampler(threading.get_ident(), interval_s)


@pytest.mark.parametrize(
    "cell, line, share", [("slow", SLOW_LINE, 0.7), ("matmul", MATMUL_LINE, 0.8)]
)
def test_the_thread_sampler_finds_the_top_line(ip, cell, line, share):
    source = SLOW_PYTHON_CELL if cell == "slow" else MATMUL_CELL
    with StackSampler(threading.get_ident(), INTERVAL_S) as sampler:
        result = ip.run_cell(source)
        raw = sampler.stop()
    assert result.success
    top = hot_lines(stack_profile(raw, ip.user_ns["_cell_file"], source), 1)[0]
    assert (top.line, top.share > share) == (line, True), top


# ------------------------------------------------------------------ exports


# The parts of speedscope's file-format-schema.json a "sampled" file must satisfy (File, Frame,
# SampledProfile, ValueUnit), written out here: the tests run offline.
SPEEDSCOPE_SAMPLED_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["$schema", "profiles", "shared"],
    "properties": {
        "$schema": {"enum": ["https://www.speedscope.app/file-format-schema.json"]},
        "shared": {
            "type": "object",
            "required": ["frames"],
            "properties": {
                "frames": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["name"],
                        "properties": {
                            "name": {"type": "string"},
                            "file": {"type": "string"},
                            "line": {"type": "number"},
                            "col": {"type": "number"},
                        },
                    },
                }
            },
        },
        "profiles": {
            "type": "array",
            "items": {
                "type": "object",
                "required": [
                    "endValue",
                    "name",
                    "samples",
                    "startValue",
                    "type",
                    "unit",
                    "weights",
                ],
                "properties": {
                    "type": {"enum": ["sampled"]},
                    "name": {"type": "string"},
                    "unit": {
                        "enum": [
                            "bytes",
                            "microseconds",
                            "milliseconds",
                            "nanoseconds",
                            "none",
                            "seconds",
                        ]
                    },
                    "startValue": {"type": "number"},
                    "endValue": {"type": "number"},
                    "samples": {
                        "type": "array",
                        "items": {"type": "array", "items": {"type": "number"}},
                    },
                    "weights": {"type": "array", "items": {"type": "number"}},
                },
            },
        },
        "name": {"type": "string"},
        "activeProfileIndex": {"type": "number"},
        "exporter": {"type": "string"},
    },
}


def test_speedscope_export_validates_and_keeps_the_time(slow_python):
    _raw, profile = slow_python
    doc = json.loads(json.dumps(to_speedscope(profile)))
    jsonschema.validate(doc, SPEEDSCOPE_SAMPLED_SCHEMA)
    sampled = doc["profiles"][0]
    frames = doc["shared"]["frames"]
    assert len(sampled["samples"]) == len(sampled["weights"]) == len(profile.collapsed)
    assert all(0 <= i < len(frames) for stack in sampled["samples"] for i in stack)
    total = sum(profile.collapsed.values()) * profile.interval_s
    assert sampled["endValue"] == pytest.approx(total)
    names = {frame["name"] for frame in frames}
    assert "slow_sum" in names
    assert {"name": "slow_sum", "file": "cell", "line": 5} in frames


def test_collapsed_output_parses_back_to_the_same_stacks(slow_python):
    _raw, profile = slow_python
    text = to_collapsed(profile)
    parsed: dict[str, int] = {}
    for row in text.splitlines():
        match = re.fullmatch(r"(\S.*) (\d+)", row)
        assert match, row
        stack, count = match.group(1), int(match.group(2))
        for label in stack.split(";"):
            file, function, line = parse_frame_label(label)
            assert label == OTHER or (file and function and line is not None), label
        parsed[stack] = count
    assert parsed == dict(profile.collapsed)
    assert text.endswith("\n")


# ------------------------------------------------------------------ views


SCRIPT = "<script>alert(1)</script>"


def test_views_escape_names_and_source_from_the_stacks():
    source = f"x = '{SCRIPT}'\nwhile not stop.is_set():\n    evil()  # {SCRIPT}\n"
    filename = f"{SCRIPT}.py"

    def evil() -> None:
        spin(0.01)

    evil.__code__ = evil.__code__.replace(co_name=SCRIPT, co_qualname=SCRIPT)
    code = compile(source, filename, "exec")

    def work(stop: threading.Event) -> None:
        exec(code, {"stop": stop, "evil": evil})

    raw = sample_thread(work, 0.3)
    profile = stack_profile(raw, filename, source)
    assert any(SCRIPT in key for key in profile.collapsed)  # the name did reach the views
    assert any(SCRIPT in stat.text for stat in profile.lines)

    svg = flame_svg(profile)
    html = line_bars_html(profile, source) + line_bars_html(profile)
    for out in (svg, html):
        assert "<script" not in out.lower()
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in out
    root = ET.fromstring(svg)  # well-formed: the escaping did not break the markup
    titles = [el.text or "" for el in root.iter("{http://www.w3.org/2000/svg}title")]
    assert any(SCRIPT in title for title in titles)


def test_flame_graph_widths_follow_time(matmul):
    _raw, profile = matmul
    root = ET.fromstring(flame_svg(profile, width_px=1000))
    ns = "{http://www.w3.org/2000/svg}"
    widths = {}
    for group in root.iter(f"{ns}g"):
        title = group.find(f"{ns}title")
        rect = group.find(f"{ns}rect")
        assert title is not None and rect is not None
        widths.setdefault((title.text or "").split("\n")[0], []).append(float(rect.get("width", 0)))
    assert max(widths["<module>"]) > 0.8 * 1000  # the cell's frame spans (almost) everything


def test_line_bars_show_every_source_line_and_the_hot_share(matmul):
    _raw, profile = matmul
    html = line_bars_html(profile, MATMUL_CELL)
    assert html.count("<tr") == len(MATMUL_CELL.splitlines())
    top = hot_lines(profile, 1)[0]
    assert f"{top.share:.1%}" in html


def test_empty_profile_renders_a_message_not_an_error():
    empty = StackProfile(interval_s=INTERVAL_S, samples=0, duration_s=0.0)
    assert "no stack samples" in flame_svg(empty)
    assert "<table" in line_bars_html(empty, "x = 1\n")
    assert to_collapsed(empty) == ""
    jsonschema.validate(to_speedscope(empty), SPEEDSCOPE_SAMPLED_SCHEMA)


# ------------------------------------------------------------------ no signals, no visible thread


def test_sampling_installs_no_signal_handler_and_arms_no_timer(ip):
    """The sampler delivers nothing into the program: SIGALRM and ITIMER_REAL stay the user's."""
    seen = []
    with StackSampler(threading.get_ident(), INTERVAL_S):
        for _ in range(3):
            seen.append(alarm_state())
            spin(0.01)
    assert seen == [NO_ALARM] * 3


def test_the_sampler_thread_is_not_in_threading_enumerate():
    """A program that joins every other thread at its end must not wait for ours."""
    with StackSampler(threading.get_ident(), INTERVAL_S) as sampler:
        spin(0.02)
        listed = [t.name for t in threading.enumerate()]
        assert threading.active_count() == len(listed)
        assert not [n for n in listed if n.startswith("gpu_notebook")]
        sampler.stop()


def test_a_cells_own_alarm_timeout_never_fires_under_the_magic(ip):
    """A SIGALRM timeout the cell arms for 60 s must not fire during 0.5 s of work (it did:
    our ticks reached its handler). 60 s, not 5: a starved machine may hold the cell off its
    core for seconds, and only our ticks may be what fires it."""
    result = ip.run_cell(
        "%%gpucheck -q --lines all\n"
        "import signal, time\n"
        "fired = []\n"
        "def on_timeout(signum, frame):\n"
        "    fired.append(signum)\n"
        "    raise TimeoutError('step took too long')\n"
        "signal.signal(signal.SIGALRM, on_timeout)\n"
        "signal.alarm(60)\n"
        "t0 = time.perf_counter()\n"
        "while time.perf_counter() - t0 < 0.5:\n"
        "    sum(range(2000))\n"
        "signal.alarm(0)\n"
        "signal.signal(signal.SIGALRM, signal.SIG_DFL)\n"
    )
    assert result.success, result.error_in_exec
    assert ip.user_ns["fired"] == []


def test_signal_pause_waits_for_the_cells_own_alarm(ip):
    """``signal.pause()`` returns on the cell's alarm, not on a tick of ours: exactly one
    handler call, and the pause ends only after the alarm was delivered."""
    result = ip.run_cell(
        "%%gpucheck -q --lines all\n"
        "import signal\n"
        "calls = []\n"
        "signal.signal(signal.SIGALRM, lambda s, f: calls.append(s))\n"
        "signal.setitimer(signal.ITIMER_REAL, 0.3)\n"
        "signal.pause()\n"
        "after_pause = list(calls)\n"
        "signal.signal(signal.SIGALRM, signal.SIG_DFL)\n"
    )
    assert result.success, result.error_in_exec
    assert ip.user_ns["after_pause"] == [signal.SIGALRM]


def test_a_caller_that_completes_while_a_sample_walks_its_stack_leaves_no_unknown_code():
    """The sampled thread runs on while the sampler walks its frames: the chain met by the walk
    can change under it (a caller completing). The codes kept for a new stack are those of the
    walk that made its key, so resolving never meets an id without its code (a KeyError at
    stop() once failed a user's `gpucheck run --lines all` in CI)."""
    import threading

    from gpu_notebook.capture.stacks import StackSampler

    def inner() -> None: ...

    def outer() -> None: ...

    class Frame:
        """A frame whose caller is there for the first walk only (it completes right after)."""

        def __init__(self, code, back=None):
            self.f_code, self.f_lasti, self._back, self._reads = code, 0, back, 0

        @property
        def f_back(self):
            self._reads += 1
            return self._back if self._reads == 1 else None

    top = Frame(inner.__code__, back=Frame(outer.__code__))
    sampler = StackSampler(threading.get_ident(), root_codes=())
    sampler._sample_frame(top, 0, 1_000_000, weight_us=1000)  # type: ignore[arg-type]
    raw = sampler._resolve(thread_alive=False)
    names = {f.function.rsplit(".", 1)[-1] for f in raw.functions}
    assert {"inner", "outer"} <= names, names


def test_a_failure_of_our_stack_sampler_is_a_note_not_the_users_error(monkeypatch, tmp_path):
    """Whatever goes wrong in our sampler at stop, the measured code's outcome stays its own:
    the capture closes (hooks gone, sampler joined) and the run says why it has no hot lines."""
    from gpu_notebook.capture.session import CaptureOptions, CaptureSession
    from gpu_notebook.capture.stacks import StackSampler

    def broken_resolve(self, *, thread_alive):
        raise KeyError(12345)  # where the CI failure was raised: after the thread is joined

    monkeypatch.setattr(StackSampler, "_resolve", broken_resolve)
    with CaptureSession(CaptureOptions(lines="all", profile=False), "loop") as session:
        sum(i * i for i in range(10_000))
    run_ = session.finish("ok", None, scratch=str(tmp_path))
    assert run_.stacks is None
    assert any(n.startswith("line sampling failed (KeyError: 12345)") for n in run_.notes)


class _LateClock:
    """Stands in for ``time`` in the stack sampler: every sleep comes back ``late_s`` past its
    end (a busy machine, or a loop thread holding the GIL); records the delays asked for."""

    def __init__(self, late_s: float) -> None:
        self.now_s = 1000.0
        self.late_s = late_s
        self.delays: list[float] = []

    def perf_counter(self) -> float:
        return self.now_s

    def perf_counter_ns(self) -> int:
        return int(self.now_s * 1e9)

    def thread_time(self) -> float:
        return 0.0

    def sleep(self, delay_s: float) -> None:
        self.delays.append(delay_s)
        self.now_s += delay_s + self.late_s
        time.sleep(0.0005)  # the real thread still gives the GIL away


def _sleeps_of(monkeypatch, late_s: float, *, back_off: bool) -> tuple[list[float], int]:
    clock = _LateClock(late_s)
    monkeypatch.setattr(stacks_module, "time", clock)
    monkeypatch.setattr(sys, "getswitchinterval", lambda: 0.005)
    sampler = StackSampler(threading.get_ident(), 0.04, root_codes=(), switch_interval_s=None,
                           back_off=back_off)  # fmt: skip
    sampler.start()
    while len(clock.delays) < 12:
        time.sleep(0.001)
    sampler.stop()
    return clock.delays[:12], sampler.late_wakes


def test_a_backing_off_sampler_stretches_its_interval_while_its_wakes_come_late(monkeypatch):
    """Each wake later than the program's switch interval forced the loop thread to hand the GIL
    over (and to sleep until our thread had a core): the sparse samplers wake less often then,
    up to 8 intervals apart; the others keep their interval."""
    delays, late = _sleeps_of(monkeypatch, 0.010, back_off=True)
    assert late >= 11
    assert max(delays) == pytest.approx(8 * 0.04 - 0.010, abs=1e-6)  # the step less the lateness
    assert delays[-1] == max(delays)
    kept, late_kept = _sleeps_of(monkeypatch, 0.010, back_off=False)
    assert late_kept == 0
    assert max(kept[1:]) == pytest.approx(0.04 - 0.010, abs=1e-6)  # the first: before any wake


def test_a_backing_off_sampler_keeps_its_interval_while_its_wakes_are_timely(monkeypatch):
    delays, late = _sleeps_of(monkeypatch, 0.001, back_off=True)
    assert late == 0
    assert max(delays[1:]) == pytest.approx(0.04 - 0.001, abs=1e-6)


def test_back_off_doubles_on_late_wakes_and_halves_back_on_timely_ones():
    back_off = stacks_module._BackOff()
    factors = [back_off.after_wake(late_ns, 5_000_000) for late_ns in
               (6_000_000, 6_000_000, 9_000_000, 7_000_000, 5_500_000, 1_000, 0, 4_999_999, 0)]  # fmt: skip
    assert factors == [2, 4, 8, 8, 8, 4, 2, 1, 1]
    assert back_off.late_wakes == 5


def test_the_sparse_and_edge_samplers_back_off_and_the_dense_one_does_not():
    from gpu_notebook.capture.session import CaptureOptions, CaptureSession

    with CaptureSession(CaptureOptions(), "loop") as session:
        assert session._stacks is not None and session._stacks.back_off is None
        assert session._edges is not None and session._edges.back_off is not None
        assert session._new_trickle().back_off is not None
