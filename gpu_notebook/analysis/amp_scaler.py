"""A GradScaler's own operators, found in a profiler trace.

What torch 2.13's own trace shows (recorded on the CPU, i26scaler, 2026-12-05: bf16 autocast,
``torch.amp.GradScaler("cpu")``): each ``scaler.step(opt)`` unscales the gradients and checks
them for inf/nan in one ``aten::_amp_foreach_non_finite_check_and_unscale_``, and each
``scaler.update()`` is one ``aten::_amp_update_scale_``; one of each a step. On a GPU each
launches its kernels (their External id joins them), and ``scaler.step`` reads ``found_inf``
back to the host (a sync) before it steps.

The time counted is those operators' host spans on a CPU run, or their kernels' time on a GPU
one, inside the profiled steps. Not counted: the loss's multiply by the scale, the inverse
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
        spent = float(sum(float(trace.end_us[r] - trace.ts_us[r]) for r in inside))
    return ScalerOps(
        calls=len(inside),
        scaler_us=spent,
        steps_us=phases.total_us,
        steps=len(phases.steps),
        on_device=device,
    )
