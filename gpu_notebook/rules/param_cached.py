"""A parametrized weight computed anew on each of its reads within one forward.

``parametrizations.weight_norm`` / ``spectral_norm`` / ``orthogonal`` (any
``register_parametrization``) make ``module.weight`` a property that computes the weight from its
parts on every read. A hand-written RNN that applies its recurrent layer once a time step, a
weight shared by several layers, reads it many times a forward: T weights computed, T chains for
the backward to run back through. ``with torch.nn.utils.parametrize.cached():`` around the
forward (and its loss) computes each once for the block, with the same values and gradients
(spectral norm: one power iteration a forward, not one a read). Unseen round 22
(rnn_weightnorm_uncached: 48 time steps): 48 ``_weight_norm_interface`` calls a step in the trace,
no finding; by hand ``cached()`` was 1.64x of the loop (medians of 3 pairs).

Flagged where the models the cell names hold parametrized tensors (read live, cell/param_cached)
and the traced steps call the operator each read of that kind calls once (analysis/param_cached)
at least ``READS`` times a forward per tensor (a forward: a backward call of the step; a step
that accumulates micro-batches reads each weight once a forward, which ``cached()`` cannot
cut). A module applied once a step never is. The range: of the reads' time, all but one read a
forward goes (1 - 1/r). Their forward time read two ways, the sampled share under parametrize's
property (Wilson's interval, 95%) and the trace's operators (summed over the steps' wall
time): the lesser the low end, the greater the high. Their backward: the nodes torch names for
them (weight_norm's), in both ends; where none is named, up to twice the forward in the high
end only. Patch: the training loop's forward statements, from the first that runs the model to
the last before ``.backward()``, under ``with torch.nn.utils.parametrize.cached():`` (the
backward and the optimizer step stay outside: a step inside would leave the cached weight
stale).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpu_notebook.analysis.uncertainty import sampled_share_low
from gpu_notebook.cell.facts import SourceFacts
from gpu_notebook.cell.loops import forward_lines
from gpu_notebook.fixes.records import Fix
from gpu_notebook.records import Analysis, Finding, ParamKindOps, ParamOps, Run, Said
from gpu_notebook.rules.common import found, gain_range, severity_of
from gpu_notebook.rules.restacked_bank import _share_high

if TYPE_CHECKING:
    import libcst as cst

    from gpu_notebook.fixes.cst_tools import CodemodResult, Declined, Replacement, Tree

# Reads a forward of each parametrized tensor from which the finding stands: a module applied
# once a step reads it once (1.0); two reads already do twice the work.
READS = 1.5
# Where torch names no backward node for a kind: its backward at most this many times its
# forward (the high end only).
BACKWARD_AT_MOST = 2.0
CONTEXT = "torch.nn.utils.parametrize.cached()"


@dataclass(frozen=True)
class RecomputedParametrization(Said):
    """Parametrized tensors read ``reads`` times a forward, each read computing them anew."""

    model: str  # the live model that holds the most of them
    paths: tuple[str, ...]  # the parametrized tensors of the kinds read so (``model.rec.weight``)
    kinds: tuple[str, ...]  # "weight_norm", ...
    calls: int  # their operators' calls in the traced steps
    forwards: int  # the traced steps' forwards (backward calls; steps where none)
    reads: float  # reads a forward of each tensor
    sampled: float | None  # the sampled share under parametrize's property (all reads)
    traced: float | None  # the operators' share of the traced steps
    backward: float | None  # their named backward nodes' share (None: none named)
    low: float | None
    bound: float | None
    line: int | None  # the training loop's first forward statement (where the block starts)


def _tensors(facts: SourceFacts) -> tuple[str, dict[str, list[str]]] | None:
    """The model that holds the most parametrized tensors, and every model's parametrized
    tensors by kind (``model.rec.weight``; each tensor once over the names the cell reads)."""
    seen: set[tuple[int, str]] = set()
    by_kind: dict[str, list[str]] = {}
    held: dict[str, int] = {}
    for model in facts.live.models:
        for t in model.parametrized:
            key = (t.owner, t.path.rsplit(".", 1)[-1])
            if key in seen:
                continue
            seen.add(key)
            held[model.name] = held.get(model.name, 0) + 1
            for kind in dict.fromkeys(t.kinds):
                by_kind.setdefault(kind, []).append(f"{model.name}.{t.path}")
    if not held:
        return None
    return max(held, key=lambda name: held[name]), by_kind


def _forward_line(facts: SourceFacts) -> int | None:
    tree = facts.tree
    for loop in facts.training_loops() if tree is not None else ():
        assert tree is not None
        forward, _ = forward_lines(tree, loop)
        if forward:
            return min(tree.line_of(s) for s in forward)
    return None


def recomputed_parametrization(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """Parametrized tensors computed anew on each of many reads a forward."""
    ops = analysis.param_ops
    held = _tensors(facts)
    if ops is None or held is None:
        return None
    model, by_kind = held
    forwards = max(ops.backwards, 0) or ops.steps
    read = [
        (k, by_kind[k.kind])
        for k in ops.kinds
        if k.kind in by_kind and k.calls / (forwards * len(by_kind[k.kind])) >= READS
    ]
    if not read or forwards <= 0:
        return None
    calls = sum(k.calls for k, _ in read)
    paths = tuple(p for _, ps in read for p in ps)
    reads = calls / (forwards * len(paths))
    kept = 1.0 - 1.0 / reads
    low_share, high_share, traced, backward = _shares(ops, read, kept)
    low, bound = gain_range(low_share, high_share, analysis)
    said = RecomputedParametrization(
        model, paths, tuple(k.kind for k, _ in read), calls, forwards, reads, ops.sampled_share,
        traced, backward, low, bound, _forward_line(facts),
    )  # fmt: skip
    severity = severity_of(low_share, low=0.0) or "low"
    return found("host.parametrization_recomputed", severity, said, phase_share=high_share,
                 bound=bound, low=low, line=said.line, fix=FIX,
                 fix_params={"model_name": model})  # fmt: skip


def _shares(
    ops: ParamOps, read: list[tuple[ParamKindOps, list[str]]], kept: float
) -> tuple[float | None, float | None, float | None, float | None]:
    """(the least and the most of the step the cache removes, the operators' traced share,
    their named backward's share)."""
    kinds = [k for k, _ in read]
    total = ops.steps_us
    traced = sum(k.forward_us for k in kinds) / total if total > 0 else None
    named = [k for k in kinds if k.backward_us > 0]
    backward = sum(k.backward_us for k in named) / total if named and total > 0 else None
    sampled = ops.sampled_share if ops.samples else None
    lows = [v for v in (traced, sampled_share_low(sampled, ops.samples) if sampled else None)
            if v is not None]  # fmt: skip
    highs = [v for v in (traced, _share_high(sampled, ops.samples) if sampled else None)
             if v is not None]  # fmt: skip
    if not lows or not highs:
        return None, None, traced, backward
    forward_low, forward_high = min(lows), max(highs)
    unnamed = len(named) < len(kinds)
    back_high = (backward or 0.0) + (BACKWARD_AT_MOST * forward_high if unnamed else 0.0)
    return (
        kept * (forward_low + (backward or 0.0)),
        min(1.0, kept * (forward_high + back_high)),
        traced,
        backward,
    )


def cached_forward(module: cst.Module, *, model_name: str | None = None) -> CodemodResult:
    """Each training loop's forward statements (the first that runs the model or computes the
    loss to the last before ``.backward()``) under ``parametrize.cached()``."""
    from gpu_notebook.fixes.cst_tools import (
        Declined,
        Edited,
        facts_of,
        no_training_loop_reason,
        nodes_of,
        training_loops,
        tree_of,
        with_torch_import,
    )

    loops = training_loops(module)
    if not loops:
        return Declined(no_training_loop_reason(module))
    facts = facts_of(module, model_name)
    if facts.tree is None:
        return Declined("the cell did not parse")
    tree = tree_of(module)
    edits: dict[cst.CSTNode, Replacement] = {}
    for loop_facts in facts.training_loops():
        calls = nodes_of(module, list(loop_facts.backward_calls))
        forward, run_model = (
            set(nodes_of(module, lines)) for lines in forward_lines(facts.tree, loop_facts)
        )
        plan = _plan(tree, calls, forward | run_model)
        if isinstance(plan, Declined):
            return plan
        block, first, last = plan
        edits[block] = _cached_block(first, last)
    return Edited(with_torch_import(module, edits), f"{len(edits)} forward(s) under cached()")


def _plan(
    tree: Tree, backward_calls: list[cst.Call], forward: set[cst.CSTNode]
) -> tuple[cst.IndentedBlock, int, int] | Declined:
    """(block, first and last statement index to wrap): the statements of ``.backward()``'s
    block before it that hold a forward line, compound ones (a loop over time) included."""
    from gpu_notebook.fixes.cst_tools import Declined, backward_block

    found_at = backward_block(tree, backward_calls)
    if isinstance(found_at, Declined):
        return found_at
    block, at = found_at
    body = list(block.body)
    found = [
        i
        for i, stmt in enumerate(body[:at])
        if any(node is stmt or tree.inside(node, stmt) for node in forward)
    ]
    if not found:
        return Declined(
            "the forward pass is not in the same block as .backward(); put it under "
            f"`with {CONTEXT}:` by hand"
        )
    return block, found[0], found[-1]


def _cached_block(first: int, last: int) -> Replacement:
    def apply(block: cst.IndentedBlock) -> cst.IndentedBlock:
        from gpu_notebook.fixes.cst_tools import with_block

        body = list(block.body)
        wrapped = with_block(CONTEXT, body[first : last + 1])
        return block.with_changes(body=[*body[:first], wrapped, *body[last + 1 :]])

    return apply


FIX = Fix(
    "parametrize_cached",
    "Compute each parametrized weight once a forward with parametrize.cached()",
    (
        "A parametrized weight is computed anew on each read; under parametrize.cached() the",
        "first read of the block computes it and the others reuse it: the same values.",
    ),
    "https://pytorch.org/docs/stable/generated/torch.nn.utils.parametrize.cached.html",
    cached_forward,
)
RULES = (recomputed_parametrization,)
