"""Activation checkpointing's recomputed forward, found in the backward of a profiler trace.

What torch 2.13's own trace shows (recorded on the CPU, i26ckpt, 2026-12-05):

- reentrant ``checkpoint(..., use_reentrant=True)``: the block's forward runs again inside the
  ``CheckpointFunctionBackward`` node (an autograd Function), before the nested backward of the
  recomputed graph (``autograd::engine::evaluate_function: ...`` frames under it). The
  recompute is the node's direct children that are not those frames (nor its ``detach``).
- non-reentrant ``checkpoint(..., use_reentrant=False)`` (and HF's gradient checkpointing, which
  calls it): no marker of its own. The first backward node that unpacks a tensor the block saved
  reruns the block from the saved-tensor hook, so the forward's operators (``aten::linear``,
  ``aten::gelu``, ...) appear inside that ``...Backward0`` frame before the node's own formula;
  each recomputed operator that saves a tensor calls ``aten::detach`` under it (the checkpoint's
  pack hook keeps a detached copy). A node's own formula never does. The recompute is the
  node's children from its first up to the last one with such a ``detach`` under it (an op
  that saves nothing in between, a residual add, is recomputed too; early stop ends the
  recompute at the last saved tensor).

The time counted is each recompute's span on the host, from its first operator's start to its
last one's end (a CPU run: the blocks' Python between them is recomputed too), or the device
kernels its operators launched (a trace with GPU activity), inside the profiled steps. Not
counted: the checkpoint's own cost in the forward (its hooks, the saved inputs), which the fix
also removes: the bound may under-read the gain.
"""

from __future__ import annotations

import re

import numpy as np

from gpu_notebook.analysis.ops import launched_kernel_us
from gpu_notebook.records import PhaseBreakdown, Recompute
from gpu_notebook.trace.kineto import Trace

__all__ = ["recompute"]

_REENTRANT = "CheckpointFunctionBackward"
_ENGINE = "autograd::engine::evaluate_function: "
_NODE = re.compile(r"Backward\d*$")
_DETACH = ("aten::detach", "detach")


def recompute(trace: Trace, phases: PhaseBreakdown | None) -> Recompute | None:
    """The recomputed forward of the traced steps; None: no steps, or no backward recorded."""
    if phases is None or phases.source != "trace" or not phases.steps or phases.total_us <= 0:
        return None
    ops = np.flatnonzero(trace.category_mask("cpu_op"))
    if ops.size == 0:
        return None
    names = trace.names
    node_ids = {i for i, n in enumerate(names) if _NODE.search(n) and not n.startswith(_ENGINE)}
    skip_ids = {i for i, n in enumerate(names) if n.startswith(_ENGINE) or n in _DETACH}
    detach_ids = {i for i, n in enumerate(names) if n in _DETACH}
    reentrant_id = next((i for i, n in enumerate(names) if n == _REENTRANT), -1)
    groups: list[list[int]] = []  # one recompute each: its top-level operators, in order
    reentrant: list[int] = []
    for rows in _by_thread(trace, ops, node_ids):
        children = _children(trace, rows)
        for parent, kids in children.items():
            name_id = int(trace.name_id[parent])
            if name_id == reentrant_id:
                reentrant.append(parent)
                groups.append([k for k in kids if int(trace.name_id[k]) not in skip_ids])
            elif name_id in node_ids:
                saving = [
                    i
                    for i, k in enumerate(kids)
                    if int(trace.name_id[k]) not in detach_ids
                    and _saves(trace, k, children, detach_ids)
                ]
                if saving:
                    groups.append(kids[: saving[-1] + 1])
    spans = [(s.start_us, s.start_us + s.duration_us) for s in phases.steps]
    inside = [g for g in groups if g and _within(float(trace.ts_us[g[0]]), spans)]
    device = trace.has_gpu_activity
    if device:
        spent = launched_kernel_us(trace, [r for g in inside for r in g])
    else:
        # From a recompute's first operator's start to its last one's end: the Python between
        # them (the blocks' own forward code) is recomputed too.
        spent = float(sum(float(trace.end_us[g[-1]] - trace.ts_us[g[0]]) for g in inside))
    return Recompute(
        ops=sum(len(g) for g in inside),
        recompute_us=spent,
        steps_us=phases.total_us,
        reentrant_nodes=sum(1 for r in reentrant if _within(float(trace.ts_us[r]), spans)),
        on_device=device,
    )


def _by_thread(trace: Trace, ops: np.ndarray, node_ids: set[int]) -> list[list[int]]:
    """The host operators of each thread that ran a backward node, in start order (outer first
    at equal starts)."""
    if not node_ids:
        return []
    is_node = np.isin(trace.name_id[ops], np.fromiter(node_ids, dtype=np.int64))
    out = []
    for pid, tid in {
        (int(p), int(t))
        for p, t in zip(trace.pid[ops[is_node]], trace.tid[ops[is_node]], strict=True)
    }:
        rows = ops[(trace.pid[ops] == pid) & (trace.tid[ops] == tid)]
        order = np.lexsort((-trace.dur_us[rows], trace.ts_us[rows]))
        out.append(rows[order].tolist())
    return out


def _children(trace: Trace, rows: list[int]) -> dict[int, list[int]]:
    """Each operator's direct children, by nesting of their spans on one thread."""
    starts = trace.ts_us[rows].tolist()
    ends = trace.end_us[rows].tolist()
    children: dict[int, list[int]] = {}
    stack: list[tuple[int, float]] = []
    for r, start, end in zip(rows, starts, ends, strict=True):
        while stack and stack[-1][1] <= start:
            stack.pop()
        if stack:
            children.setdefault(stack[-1][0], []).append(r)
        stack.append((r, end))
    return children


def _saves(trace: Trace, row: int, children: dict[int, list[int]], detach_ids: set[int]) -> bool:
    """A ``detach`` anywhere under ``row``: the checkpoint's pack hook keeping what it saved."""
    todo = list(children.get(row, ()))
    while todo:
        k = todo.pop()
        if int(trace.name_id[k]) in detach_ids:
            return True
        todo.extend(children.get(k, ()))
    return False


def _within(ts_us: float, spans: list[tuple[float, float]]) -> bool:
    return any(a <= ts_us < b for a, b in spans)
