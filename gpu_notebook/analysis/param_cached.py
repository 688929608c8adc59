"""Parametrized tensors recomputed on every read, found in a profiler trace and the sampled stacks.

A parametrization (``torch.nn.utils.parametrize``) computes its tensor anew on each read of
``module.weight``; a hand-written RNN's recurrent weight read once a time step is computed T
times a forward, and backed through T times. Each read of one of torch's own parametrizations
calls one operator, counted here in the traced steps: ``weight_norm``'s ``aten::_weight_norm``
(``_weight_norm_interface`` within it), ``spectral_norm``'s ``aten::vdot`` (sigma, after its power
iteration), ``orthogonal``'s ``matrix_exp`` / ``householder_product`` / ``linalg_solve`` (Cayley).
Beside them the backward nodes torch names for them (``WeightNormInterfaceBackward0``), and the
steps' backward calls (a step that accumulates four micro-batches reads each weight four times,
once a forward). Unseen round 22 (rnn_weightnorm_uncached, 48 time steps): 48
``_weight_norm_interface`` calls a step, 175 ms of them and 67 ms of their backward beside
``aten::mm``'s 526 ms.

The time of a read, of any parametrization: the sampled stacks' share under parametrize.py's
``get_parametrized`` (the property every read goes through: the parametrization's Python and
operators; its backward runs in the engine, not there).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from gpu_notebook.markers import BACKWARD
from gpu_notebook.records import ParamKindOps, ParamOps, PhaseBreakdown, RawStacks
from gpu_notebook.traces.kineto import Trace

__all__ = ["PARAM_OPS", "param_ops", "parametrized_share"]

# kind -> (the operators one read calls once, the backward nodes named for them)
PARAM_OPS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "weight_norm": (("aten::_weight_norm",), ("WeightNormInterfaceBackward0",)),
    "spectral_norm": (("aten::vdot",), ()),
    "orthogonal": (
        ("aten::linalg_matrix_exp", "aten::matrix_exp", "aten::linalg_householder_product",
         "aten::linalg_solve"),
        ("LinalgMatrixExpBackward0", "LinalgHouseholderProductBackward0"),
    ),
}  # fmt: skip
_EVALUATE = "autograd::engine::evaluate_function: "
_PROPERTY = ("torch/nn/utils/parametrize.py", "get_parametrized")


def param_ops(
    trace: Trace, phases: PhaseBreakdown | None, raw: RawStacks | None = None
) -> ParamOps | None:
    """The parametrizations' operators of the traced steps; None: no steps recorded, or none."""
    if phases is None or phases.source != "trace" or not phases.steps or phases.total_us <= 0:
        return None
    spans = [(s.start_us, s.start_us + s.duration_us) for s in phases.steps]
    kinds = []
    for kind, (forward, backward) in PARAM_OPS.items():
        rows = trace.outermost(_rows_in(trace, frozenset(forward).__contains__, spans))
        if not rows:
            continue
        nodes = frozenset(_EVALUATE + b for b in backward)
        back = _rows_in(trace, nodes.__contains__, spans, category=None)
        kinds.append(
            ParamKindOps(
                kind,
                calls=len(rows),
                forward_us=float(sum(float(trace.dur_us[r]) for r in rows)),
                backward_us=float(sum(float(trace.dur_us[r]) for r in trace.outermost(back))),
            )
        )
    if not kinds:
        return None
    backwards = len(_rows_in(trace, lambda n: n == BACKWARD, spans, category=None))
    share = parametrized_share(raw)
    return ParamOps(
        kinds=tuple(kinds),
        steps=len(spans),
        backwards=backwards,
        steps_us=phases.wall_total_us or phases.total_us,
        sampled_share=share,
        samples=raw.samples if raw is not None and share is not None else 0,
    )


def parametrized_share(raw: RawStacks | None) -> float | None:
    """The share of the sampled time under parametrize's ``get_parametrized`` (every read of a
    parametrized tensor); None: nothing sampled."""
    if raw is None or raw.time_us <= 0:
        return None
    wanted = {
        i
        for i, ref in enumerate(raw.functions)
        if ref.filename.replace("\\", "/").endswith(_PROPERTY[0])
        and ref.function.rsplit(".", 1)[-1] == _PROPERTY[1]
    }
    spent = sum(c.total_us for c in raw.function_counts if c.function in wanted)
    return spent / raw.time_us


def _rows_in(
    trace: Trace,
    picks: Callable[[str], bool],
    spans: list[tuple[float, float]],
    category: str | None = "cpu_op",
) -> list[int]:
    """The events ``picks`` takes by name (of ``category``; None: any) that start in the steps."""
    ids = trace.name_ids(picks)
    if not ids.size:
        return []
    rows = np.flatnonzero(np.isin(trace.name_id, ids))
    if category is not None:
        rows = rows[trace.category_mask(category)[rows]]
    return [int(r) for r in rows if any(a <= float(trace.ts_us[r]) < b for a, b in spans)]
