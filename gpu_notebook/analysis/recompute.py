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
kernels its operators launched (a trace with GPU activity), inside the profiled steps.

Turning checkpointing off also removes the checkpoint's own cost (issue 26: the recompute alone
read "up to 1.23x" for a measured 1.25x), counted on the host where the trace shows it:

- in the forward, the time around each checkpointed block's operators in which no operator runs:
  from the operator before the block to the block's first one, and from its last one to the
  operator after it (the wrapper: ``checkpoint``'s checks, the RNG state saved, the inputs kept,
  the autograd Function or the saved-tensor hooks entered and left). Reentrant: the block is the
  ``CheckpointFunction`` record's children, and the time in that record outside them is the
  Function's own. Non-reentrant leaves no record in the forward: its block is found from the
  backward, the forward operator whose ``Sequence number`` is the recomputing node's, with the
  operators before it that match the recompute's, in order. That time also holds the Python of
  the loop and of the block's module calls, which stay: the count errs high, as a bound may.
- in the backward, the node's time beside the recompute and the gradients: reentrant, the
  ``CheckpointFunctionBackward`` span less the recompute and the nested backward's frames (the
  inputs detached, the RNG state restored, ``torch.autograd.backward`` called); non-reentrant,
  the unpacking node's time before the recompute and between its end and the node's own formula
  (the unpack hook's setup and its check of what was recomputed), and each other node the
  block's forward made (its ``Sequence number``) before its formula's first operator (its saved
  tensors unpacked through the hook, in Python).

On the host each of these times is read in pieces (each recomputed operator, each gap between
two, each piece of a node's time beside its recompute, each step's time around the blocks'
forward) and each piece at its least over the traced steps, times the steps (``_floor_us``):
the steps repeat, and a time slice the machine gave another process lands in one step's piece,
not in the same piece of all three. Summed, a loaded machine's slices counted as the
checkpoint's wherever they fell: one program read "up to" 1.15x-1.90x at load 12-27 (a profiled
step of 170 ms for 13 ms of its own). The analysis then sets the steps' time to theirs less the
wait for a core read at their marks (``Recompute.floored``). Steps that do not repeat (another
number of recomputes, another shape): summed as they are.

The non-reentrant pack hook's time inside each forward operator that saves a tensor has no
record apart from the operator's own (about 3.7 us a saved tensor on a CPU, 80 a step in
act_checkpoint_nonreentrant: ckptmiss): it is counted as the blocks' nodes' unpack hooks read
in the backward (``Recompute.pack_us``), one Python call per saved tensor each way.

Not counted: on a trace with device activity the wrapper's host time (``None``: the step is
timed by kernels); the backward's nodes running slower after a recompute and the engine's
frames around them (ckptmiss: 0.3-0.6 ms of a 11-13 ms step, noisy; no record tells them from
the nodes' own work).
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from gpu_notebook.analysis.ops import launched_kernel_us
from gpu_notebook.records import PhaseBreakdown, Recompute
from gpu_notebook.traces.kineto import Trace

__all__ = ["recompute", "with_own_steps"]

_REENTRANT = "CheckpointFunctionBackward"
_WRAPPER = "CheckpointFunction"  # the reentrant checkpoint's forward: its Function's record
_ENGINE = "autograd::engine::evaluate_function: "
_NODE = re.compile(r"Backward\d*$")
_DETACH = ("aten::detach", "detach")


def recompute(trace: Trace, phases: PhaseBreakdown | None) -> Recompute | None:
    """The recomputed forward of the traced steps, and the checkpoint's own cost around it;
    None: no steps, or no backward recorded."""
    if phases is None or phases.source != "trace" or not phases.steps or phases.total_us <= 0:
        return None
    ops = np.flatnonzero(trace.category_mask("cpu_op"))
    if ops.size == 0:
        return None
    names = trace.names
    node_ids = {i for i, n in enumerate(names) if _NODE.search(n) and not n.startswith(_ENGINE)}
    skip_ids = {i for i, n in enumerate(names) if n.startswith(_ENGINE) or n in _DETACH}
    engine_ids = {i for i, n in enumerate(names) if n.startswith(_ENGINE)}
    detach_ids = {i for i, n in enumerate(names) if n in _DETACH}
    reentrant_id = next((i for i, n in enumerate(names) if n == _REENTRANT), -1)
    wrapper_id = next((i for i, n in enumerate(names) if n == _WRAPPER), -1)
    spans = [(s.start_us, s.start_us + s.duration_us) for s in phases.steps]
    device = trace.has_gpu_activity
    ts, end, name_id = trace.ts_us, trace.end_us, trace.name_id
    groups: list[list[int]] = []  # one recompute each: its top-level operators, in order
    reentrant: list[int] = []
    # The checkpoint's backward time beside each recompute, in pieces (``_floor_us``), by the
    # traced step it fell in, in the order the recomputes ran.
    backward: dict[int, list[list[float]]] = {}
    # Time with no operator running around the checkpointed blocks' forward: one interval
    # before and one after each block; two blocks in a row share the one between them. By step.
    around: dict[int, list[tuple[float, float]]] = {}
    # Non-reentrant: the blocks' nodes' unpack hooks, by step (``Recompute.pack_us``).
    packs: dict[int, list[list[float]]] = {}
    blocks = 0
    forests: list[_Forest] = []  # each thread's: the whole step is read from them if needed
    for rows in _by_thread(trace, ops, node_ids | {wrapper_id}):
        forest = _Forest(trace, rows)
        forests.append(forest)
        for parent, kids in forest.children.items():
            nid = int(name_id[parent])
            step = _step_of(float(ts[parent]), spans)
            if nid == wrapper_id:
                # The reentrant checkpoint's forward: the block runs inside the Function's record.
                if step is not None and not device:
                    inner = (float(ts[kids[0]]), float(end[kids[-1]]))
                    around.setdefault(spans.index(step), []).extend(
                        forest.around(parent, parent, inner, step)
                    )
                    blocks += 1
                continue
            if nid == reentrant_id:
                group = [k for k in kids if int(name_id[k]) not in skip_ids]
                reentrant.append(parent)
                groups.append(group)
                if step is not None and not device:
                    nested = sum(float(trace.dur_us[k]) for k in kids if name_id[k] in engine_ids)
                    done = _span(trace, group) + nested
                    backward.setdefault(spans.index(step), []).append(
                        [max(0.0, float(trace.dur_us[parent]) - done)]
                    )
            elif nid in node_ids:
                saving = [
                    i
                    for i, k in enumerate(kids)
                    if int(name_id[k]) not in detach_ids and forest.saves(k, detach_ids)
                ]
                if not saving:
                    continue
                last = saving[-1]
                group = kids[: last + 1]
                block = forest.forward_block(
                    group,
                    int(trace.sequence[parent]),
                    float(ts[parent]),
                    step[0] if step is not None else -np.inf,
                    node_ids | engine_ids,
                )
                if block is not None:
                    # The recompute reruns the block up to its last saved tensor, which the
                    # recomputing node's operator saved: the kids that match the block's
                    # operators past the last ``detach`` are recomputed too.
                    rerun = forest.between(*block)
                    if [int(name_id[k]) for k in kids[: len(rerun)]] == [
                        int(name_id[r]) for r in rerun
                    ]:
                        last = max(last, len(rerun) - 1)
                        group = kids[: last + 1]
                groups.append(group)
                if step is None or device:
                    continue
                # The unpack hook's setup before the recompute, its checks after it, up to the
                # node's own formula (or the node's end).
                formula = float(ts[kids[last + 1]]) if last + 1 < len(kids) else float(end[parent])
                pieces = [
                    max(0.0, float(ts[group[0]] - ts[parent])),
                    max(0.0, formula - float(end[group[-1]])),
                    0.0,
                ]
                if block is not None:
                    first, final = block
                    inner = (float(ts[first]), float(end[final]))
                    around.setdefault(spans.index(step), []).extend(
                        forest.around(first, final, inner, step)
                    )
                    blocks += 1
                    pieces[2] = forest.unpacking(first, final, node_ids, parent, step)
                backward.setdefault(spans.index(step), []).append(pieces)
                packs.setdefault(spans.index(step), []).append([pieces[2]])
    inside = [g for g in groups if g and _step_of(float(ts[g[0]]), spans) is not None]
    floored = False
    pack_us: float | None = None
    floor_steps_us: float | None = None
    if device:
        spent = launched_kernel_us(trace, [r for g in inside for r in g])
        forward_us = backward_us = None
    else:
        # From a recompute's first operator's start to its last one's end: the Python between
        # them (the blocks' own forward code) is recomputed too. Each recompute in pieces (its
        # operators and the gaps between them), each piece at its least over the traced steps.
        by_step: dict[int, list[list[float]]] = {}
        for g in inside:
            step = _step_of(float(ts[g[0]]), spans)
            assert step is not None
            by_step.setdefault(spans.index(step), []).append(_pieces(trace, g))
        least = _floor_us(by_step, len(spans))
        spent = least if least is not None else float(sum(_span(trace, g) for g in inside))
        unions = {k: [[_union_us(v)]] for k, v in around.items()}
        least_forward = _floor_us(unions, len(spans))
        forward_us = (
            least_forward
            if least_forward is not None
            else _union_us([i for v in around.values() for i in v])
        )
        least_backward = _floor_us(backward, len(spans))
        backward_us = (
            least_backward
            if least_backward is not None
            else float(sum(sum(p) for v in backward.values() for p in v))
        )
        if packs:
            # Each saved tensor went through the checkpoint's pack hook in the forward, inside
            # the operator that saved it (no record of its own), as it goes through its unpack
            # hook in the backward: one Python call per saved tensor each way (torch 2.13, CPU,
            # ckptmiss/ckptfix: the pack about 3.7 us a saved tensor unprofiled; the unpack read
            # here 3.5-4.7 us). The unpack is read (``unpacking``): the pack is counted as much.
            # The recomputing nodes' own saved tensors (2 of a block's 10 here) are left out.
            least_packs = _floor_us(packs, len(spans))
            pack_us = (
                least_packs
                if least_packs is not None
                else float(sum(p[0] for v in packs.values() for p in v))
            )
        floored = least is not None
        # The whole step floored as the checkpoint's pieces are: their least leaves out the
        # slices another process took and the slowing its sharing the cores brings between
        # them, which the steps' own time keeps (issue 26: at load 16-21 the bound read
        # 1.41x for 1.65x measured). None: the steps do not repeat piece for piece.
        if floored:
            # The loop thread's step in fine pieces, by step (the thread with the most).
            whole: dict[int, list[list[float]]] = {}
            for forest in forests:
                for k, pieces in enumerate(forest.step_pieces(spans)):
                    if pieces and len(pieces) > len(whole.get(k, [[]])[0]):
                        whole[k] = [pieces]
            floor_steps_us = _floor_us(whole, len(spans))
    return Recompute(
        ops=sum(len(g) for g in inside),
        recompute_us=spent,
        steps_us=phases.total_us,
        reentrant_nodes=sum(1 for r in reentrant if _step_of(float(ts[r]), spans) is not None),
        steps=len(spans),
        on_device=device,
        forward_overhead_us=forward_us,
        backward_overhead_us=backward_us,
        forward_blocks=blocks,
        floored=floored,
        pack_us=pack_us,
        floor_steps_us=floor_steps_us,
    )


def _by_thread(trace: Trace, ops: np.ndarray, marker_ids: set[int]) -> list[list[int]]:
    """The host operators of each thread that ran a backward node or a checkpoint's forward, in
    start order (outer first at equal starts)."""
    if not marker_ids:
        return []
    is_marker = np.isin(trace.name_id[ops], np.fromiter(marker_ids, dtype=np.int64))
    out = []
    for pid, tid in {
        (int(p), int(t))
        for p, t in zip(trace.pid[ops[is_marker]], trace.tid[ops[is_marker]], strict=True)
    }:
        rows = ops[(trace.pid[ops] == pid) & (trace.tid[ops] == tid)]
        order = np.lexsort((-trace.dur_us[rows], trace.ts_us[rows]))
        out.append(rows[order].tolist())
    return out


class _Forest:
    """One thread's operators nested by their spans: each one's parent, children, and place
    among its siblings (the roots are siblings too)."""

    def __init__(self, trace: Trace, rows: list[int]) -> None:
        self.trace = trace
        self.rows = rows  # in start order, outer first
        self.children: dict[int, list[int]] = {}
        self.parent: dict[int, int] = {}
        self.roots: list[int] = []
        starts = trace.ts_us[rows].tolist()
        ends = trace.end_us[rows].tolist()
        stack: list[tuple[int, float]] = []
        for r, start, end in zip(rows, starts, ends, strict=True):
            while stack and stack[-1][1] <= start:
                stack.pop()
            if stack:
                self.children.setdefault(stack[-1][0], []).append(r)
                self.parent[r] = stack[-1][0]
            else:
                self.roots.append(r)
            stack.append((r, end))
        self.place: dict[int, tuple[list[int], int]] = {}
        for siblings in (self.roots, *self.children.values()):
            for i, r in enumerate(siblings):
                self.place[r] = (siblings, i)
        seq = trace.sequence[rows].tolist()
        self.by_sequence: dict[int, list[int]] = {}
        for r, s in zip(rows, seq, strict=True):
            if s >= 0:
                self.by_sequence.setdefault(int(s), []).append(r)

    def saves(self, row: int, detach_ids: set[int]) -> bool:
        """A ``detach`` anywhere under ``row``: the checkpoint's pack hook keeping what it
        saved."""
        todo = list(self.children.get(row, ()))
        while todo:
            k = todo.pop()
            if int(self.trace.name_id[k]) in detach_ids:
                return True
            todo.extend(self.children.get(k, ()))
        return False

    def around(
        self, first: int, last: int, inner: tuple[float, float], step: tuple[float, float]
    ) -> list[tuple[float, float]]:
        """The time no operator runs from the operator before ``first`` (else its parent's
        start, else the step's) to ``inner``'s start, and from ``inner``'s end to the operator
        after ``last`` (else the parent's end, else the step's), kept inside the step."""
        ts, end = self.trace.ts_us, self.trace.end_us
        siblings, i = self.place[first]
        parent = self.parent.get(first)
        if i > 0:
            before = float(end[siblings[i - 1]])
        else:
            before = float(ts[parent]) if parent is not None else step[0]
        siblings, j = self.place[last]
        if j + 1 < len(siblings):
            after = float(ts[siblings[j + 1]])
        else:
            after = float(end[parent]) if parent is not None else step[1]
        return [(max(before, step[0]), inner[0]), (inner[1], min(after, step[1]))]

    def step_pieces(self, spans: list[tuple[float, float]]) -> list[list[float]]:
        """Each step in fine pieces: each operator with none under it (a leaf) and the gap
        before it, in order, and the gap to the step's end. Fine, as the checkpoint's pieces
        are: a slice another process took lands in one of them, not in the same one of every
        step (a top-level operator spanning the whole backward is hit in every step)."""
        trace = self.trace
        leaves = np.array([r for r in self.rows if r not in self.children], dtype=np.int64)
        starts = trace.ts_us[leaves] if leaves.size else np.zeros(0)
        out: list[list[float]] = []
        for a, b in spans:
            lo, hi = np.searchsorted(starts, a, "left"), np.searchsorted(starts, b, "left")
            pieces: list[float] = []
            reach = a
            for r in leaves[lo:hi].tolist():
                start, end = float(trace.ts_us[r]), min(float(trace.end_us[r]), b)
                pieces += [max(0.0, start - reach), max(0.0, end - start)]
                reach = max(reach, end)
            if pieces:
                pieces.append(max(0.0, b - reach))
            out.append(pieces)
        return out

    def between(self, first: int, last: int) -> list[int]:
        """``first``, ``last`` and the siblings between them."""
        siblings, i = self.place[first]
        return siblings[i : self.place[last][1] + 1]

    def unpacking(
        self, first: int, last: int, node_ids: set[int], recomputing: int, step: tuple[float, float]
    ) -> float:
        """The time the backward nodes made by the block's forward operators (``first`` to
        ``last`` and all under them) spend before their formula's first operator: unpacking
        their saved tensors, each through the checkpoint's unpack hook (Python). The node that
        recomputes is counted apart."""
        trace = self.trace
        todo, made = self.between(first, last), set()
        while todo:
            r = todo.pop()
            if trace.sequence[r] >= 0:
                made.add(int(trace.sequence[r]))
            todo.extend(self.children.get(r, ()))
        forward_end = float(trace.end_us[last])
        total = 0.0
        for seq in made:
            for node in self.by_sequence.get(seq, ()):
                if node == recomputing or int(trace.name_id[node]) not in node_ids:
                    continue
                if not (forward_end <= trace.ts_us[node] < step[1]):
                    continue
                kids = self.children.get(node)
                total += float(
                    trace.ts_us[kids[0]] - trace.ts_us[node] if kids else trace.dur_us[node]
                )
        return total

    def forward_block(
        self,
        group: list[int],
        sequence: int,
        node_us: float,
        since_us: float,
        backward_ids: set[int],
    ) -> tuple[int, int] | None:
        """The forward operators of the block a non-reentrant recompute reran, first and last.
        The last: the forward operator that made the recomputing node (its ``Sequence number``,
        before the node, not a node or engine frame, which carry it too; an operator that makes
        no node may show the same number, so each is tried, latest first), or its ancestor at
        the recompute's level. The first: the nearest sibling before it from which the
        siblings match the recompute's operators in order (the recompute may stop before the
        block's end: a last saved tensor that needs no grad leaves no ``detach``), from
        ``since_us`` on. None: not found."""
        if sequence < 0:
            return None
        name_id = self.trace.name_id
        made = [
            r
            for r in self.by_sequence.get(sequence, ())
            if self.trace.ts_us[r] < node_us and int(name_id[r]) not in backward_ids
        ]
        want = [int(name_id[g]) for g in group]
        for row in sorted(made, key=lambda r: float(self.trace.ts_us[r]), reverse=True):
            at: int | None = row
            while at is not None:
                siblings, i = self.place[at]
                # Back from the operator, no further than the step's start: a long trace's
                # roots are many, and the block is near.
                for first in range(i - len(want) + 1, -1, -1):
                    if self.trace.ts_us[siblings[first]] < since_us:
                        break
                    if all(int(name_id[siblings[first + k]]) == w for k, w in enumerate(want)):
                        return siblings[first], at
                at = self.parent.get(at)
        return None


def _pieces(trace: Trace, group: list[int]) -> list[float]:
    """A recompute's span in pieces: each operator's time and the gap after it, in order."""
    starts, ends = trace.ts_us[group], trace.end_us[group]
    out = []
    for k in range(len(group)):
        out.append(float(ends[k] - starts[k]))
        if k + 1 < len(group):
            out.append(max(0.0, float(starts[k + 1] - ends[k])))
    return out


def _floor_us(by_step: dict[int, list[list[float]]], steps: int) -> float | None:
    """The time of ``steps`` steps whose parts (``by_step``: each step's parts in the order
    they ran, each part in pieces) repeat from step to step, each piece at its least over the
    steps. A machine's time slice lands in a piece of one step and not in the same piece of
    every other: the least is the code's. None: fewer than two steps, or a step whose parts
    differ from the others' in number or shape (the steps did not repeat)."""
    if steps < 2 or len(by_step) != steps:
        return None
    rows = list(by_step.values())
    shape = [len(p) for p in rows[0]]
    if any([len(p) for p in r] != shape for r in rows[1:]):
        return None
    least = sum(float(np.min([r[j] for r in rows], axis=0).sum()) for j in range(len(shape)))
    return least * steps


def _union_us(intervals: list[tuple[float, float]]) -> float:
    """The time the intervals cover, each instant once (empty or reversed ones: none)."""
    total, reach = 0.0, -np.inf
    for a, b in sorted(i for i in intervals if i[1] > i[0]):
        if b > reach:
            total += b - max(a, reach)
            reach = b
    return float(total)


def _span(trace: Trace, group: list[int]) -> float:
    """From the first operator's start to the last one's end (0: none)."""
    return float(trace.end_us[group[-1]] - trace.ts_us[group[0]]) if group else 0.0


def _step_of(ts_us: float, spans: list[tuple[float, float]]) -> tuple[float, float] | None:
    return next(((a, b) for a, b in spans if a <= ts_us < b), None)


def with_own_steps(rec: Recompute, phases: PhaseBreakdown) -> Recompute:
    """``rec`` with the steps' time set to their own (``phases``: the window's steps less the
    wait for a core read at their marks), where its pieces were floored over those same steps
    and the steps waited. Not where that own time is no more than what the trace read of the
    checkpoint (its pieces, each at its least, times the steps): the wait was read over what
    the pieces left of it (every step of a loaded window waited inside every piece too), and
    a share over it reads 1 or more, and the rule says nothing of a recompute the trace holds
    (at load 6-12 the own time was 2.8x-7x what the pieces read, its steps waiting 83-95%:
    a little more wait and the checkpointing finding was gone, as seen 1 run in 8 at load
    4-12). The steps' wall time then stays the base, floored as the pieces are
    (``Recompute.base_us``)."""
    if not rec.floored or phases.waited_share <= 0 or len(phases.steps) != rec.steps:
        return rec
    if phases.total_us <= rec.recompute_us + rec.overhead_us:
        return rec
    return dataclasses.replace(rec, steps_us=phases.total_us)
