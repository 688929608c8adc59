"""A GradScaler's own operators, found in a profiler trace.

What torch 2.13's own trace shows (recorded on the CPU, i26scaler, 2026-12-05: bf16 autocast,
``torch.amp.GradScaler("cpu")``): each ``scaler.step(opt)`` unscales the gradients and checks
them for inf/nan in one ``aten::_amp_foreach_non_finite_check_and_unscale_``, and each
``scaler.update()`` is one ``aten::_amp_update_scale_``; one of each a step. On a GPU each
launches its kernels (their External id joins them), and ``scaler.step`` reads ``found_inf``
back to the host (a sync) before it steps.

The time counted is those operators' host spans on a CPU run, or their kernels' time on a GPU
one, inside the profiled steps. On the host, where every step ran the same operators, each at
its least over the steps, times the steps: a time slice the machine gave another process lands
in one step's operator, not in the same one of every step (as analysis/recompute floors the
checkpoint's pieces). Summed, a 4 ms slice inside one step's 10-20 us check would read as a
tenth of a 3-step window of ~7 ms steps ("medium"), where the scaler reads 0.1-0.7% of the step
at load 6-8 (48 real runs). Not counted: the loss's multiply by the scale, the inverse
scale's reciprocal and the ``found_inf`` read (ops of ordinary names, not told apart): the
share under-reads the scaler's cost.
"""

from __future__ import annotations

import numpy as np

from gpu_notebook.analysis.ops import launched_kernel_us
from gpu_notebook.records import PhaseBreakdown, ScalerOps
from gpu_notebook.traces.kineto import Trace

__all__ = ["SCALER_OPS", "scaler_ops"]

SCALER_OPS = ("aten::_amp_foreach_non_finite_check_and_unscale_", "aten::_amp_update_scale_")


def scaler_ops(trace: Trace, phases: PhaseBreakdown | None) -> ScalerOps | None:
    """The scaler's operators of the traced steps; None: no steps recorded."""
    if phases is None or phases.source != "trace" or not phases.steps or phases.total_us <= 0:
        return None
    cpu = np.flatnonzero(trace.category_mask("cpu_op"))
    ids = trace.name_ids(lambda n: n in SCALER_OPS)
    rows = cpu[np.isin(trace.name_id[cpu], ids)] if ids.size else cpu[:0]
    spans = [(s.start_us, s.start_us + s.duration_us) for s in phases.steps]
    inside = [int(r) for r in rows if any(a <= float(trace.ts_us[r]) < b for a, b in spans)]
    device = trace.has_gpu_activity
    if device:
        spent = launched_kernel_us(trace, inside)
    else:
        spent = _least_us(trace, inside, spans)
    return ScalerOps(
        calls=len(inside),
        scaler_us=spent,
        steps_us=phases.total_us,
        steps=len(phases.steps),
        on_device=device,
    )


def _least_us(trace: Trace, rows: list[int], spans: list[tuple[float, float]]) -> float:
    """The operators' host time in the steps: each step's operators in order, each at its least
    over the steps, times the steps, where every step ran the same ones; else their sum."""
    by_step: list[list[tuple[int, float]]] = [[] for _ in spans]
    for r in sorted(rows, key=lambda r: float(trace.ts_us[r])):
        k = next(i for i, (a, b) in enumerate(spans) if a <= float(trace.ts_us[r]) < b)
        by_step[k].append((int(trace.name_id[r]), float(trace.end_us[r] - trace.ts_us[r])))
    names = [[n for n, _ in step] for step in by_step]
    if len(spans) < 2 or not names[0] or any(n != names[0] for n in names[1:]):
        return float(sum(d for step in by_step for _, d in step))
    least = np.min([[d for _, d in step] for step in by_step], axis=0)
    return float(least.sum()) * len(spans)
