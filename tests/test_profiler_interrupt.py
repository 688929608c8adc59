"""A Stop pressed while gpucheck's profiler window starts or stops leaves no profiler recording."""

from __future__ import annotations

import pytest
import torch

from gpu_notebook.capture.profiler import ProfilerWindow, profiler_active


def _stop_pressed() -> None:
    # Where the user's KeyboardInterrupt lands: our own code at the window's end (the session's
    # on_stop), the first thing the window's stop runs after taking the profiler out.
    raise KeyboardInterrupt


def _steps(window: ProfilerWindow, count: int) -> None:
    x = torch.randn(8, 8)
    for step in range(count):
        window.on_boundary(step)
        x = torch.tanh(x @ x.T / 8)


def test_a_stop_landing_in_the_windows_stop_leaves_no_profiler_on():
    """Kineto went on recording after the cell (unseen round 14, nb 28: the Stop caught by the
    loop, ~1 press in 20 near a window), and every later window stepped aside for it."""
    assert not profiler_active()
    window = ProfilerWindow(warmup=1, profile_steps=2, cuda=False, max_cpu_s=600.0)
    window.on_stop = _stop_pressed
    with pytest.raises(KeyboardInterrupt):
        _steps(window, 5)
    assert profiler_active()  # the interrupt cut the stop short
    record = window.close()  # the session closes every window, whatever the cell did
    assert not profiler_active()
    assert record.trace_path is None and record.recorded_steps == 0


def test_the_cells_own_interrupt_while_recording_leaves_no_profiler_on():
    """The other shape: the interrupt lands in the cell's step while the window records; the
    window's close stops it (as before) and the next window starts on a free profiler."""
    window = ProfilerWindow(warmup=1, profile_steps=50, cuda=False, max_cpu_s=600.0)
    _steps(window, 4)
    assert window.recording
    window.close()
    assert not profiler_active()
    again = ProfilerWindow(warmup=0, profile_steps=1, cuda=False, max_cpu_s=600.0)
    _steps(again, 3)
    assert again.close().status == "recorded"
