"""Steps our own work disturbed: they are ours to explain, never the user's code.

The capture does work inside the user's steps: torch.profiler starts at a step boundary (up to
1.4 s the first time: Kineto, dynamo's imports), records a few steps at a cost of its own, stops
(post-processing of every event) and, after the window, the stack sampler wakes at 200 Hz over
a few steps. A later window repeats all of it. Those steps are *ours*:

- a step whose boundary listener did more than its fast path (``StepTiming.ours_s > 0``);
- every profiled step of every window and the step that ended the window (the stop runs there);
- the steps the stack sampler followed the first window with (``lines="window"``).

They are left out of the run's median, jitter, drift and stalls (analysis.run_trend), and the
hook-timed phase split is corrected by the measured cost (analysis.steps). The profiled windows
themselves are still what the trace figures come from: there the profiler's cost is the known
price of the detail, and the run-wide checks say when the window is unlike the run.
``instrumentation_factor`` says how much longer a profiled step took than an unprofiled one
(the rules' note on the shares they read).
"""

from __future__ import annotations

from gpu_notebook.records import Run

__all__ = ["disturbed_steps", "instrumentation_factor"]


def disturbed_steps(run: Run) -> frozenset[int]:
    """Indices of the steps that contain our own work (see the module docstring)."""
    out: set[int] = {s.index for s in run.steps.steps if s.ours_s > 0}
    follow = run.window.profile_steps if run.stacks is not None else 0
    # No index past the run's last step: -s asks for a count, and a loop shorter than it
    # (-s 10**8 on a 3-step cell) would otherwise make a set of every index asked for.
    end = run.steps.step_count + 1
    for k, (first, n) in enumerate(run.window_ranges):
        # The profiled steps, the one the stop ran in, and (after the first window only) the
        # steps the stack sampler followed it with.
        extra = follow if k == 0 else 0
        out.update(range(first, min(first + n + 1 + extra, end)))
    return frozenset(out)


def instrumentation_factor(run: Run) -> float | None:
    """How much longer a profiled step is than an unprofiled one: median timed / median lean.

    The phase shares come from the profiled steps, where the profiler and the step clock's
    hooks add time to every operator and module call; after the window the clock goes lean
    and steps run at full speed, and a measured speedup counts those steps. None when the cell
    had no lean steps (the window covered it all) or the ratio says nothing (<= 1).
    """
    steady = [s for s in run.steps.steps if s.index >= run.window.warmup_steps]
    timed = sorted(s.duration_s for s in steady if s.timed)
    lean = sorted(s.duration_s for s in steady if not s.timed)
    if len(timed) < 2 or len(lean) < 2:
        return None
    factor = timed[len(timed) // 2] / lean[len(lean) // 2]
    return factor if factor > 1.0 else None
