"""The inference_mode codemod: inference loops under ``torch.inference_mode()``, the model in eval."""

from __future__ import annotations

import libcst as cst

from gpu_notebook.cell.names import calls_in, dotted, method_of, receiver_of
from gpu_notebook.fixes.cst_tools import (
    CodemodResult,
    Declined,
    Edited,
    Replacement,
    Tree,
    facts_of,
    for_loops,
    main_model_name,
    put_before,
    statement,
    tree_of,
    with_block,
    with_torch_import,
)
from gpu_notebook.fixes.records import Fix


def inference_mode(module: cst.Module, *, model_name: str | None = None) -> CodemodResult:
    """Wrap each inference loop in ``with torch.inference_mode():`` and call ``model.eval()``.

    An inference loop is a ``for`` loop that calls the model and never ``.backward()``, not
    already under a grad-mode context. ``model.eval()`` is added before it unless the same block
    already switches to eval after its last ``.train()``; in a cell that also trains,
    ``model.train()`` follows the loop so later training steps keep dropout and batch norm on.
    """
    tree = tree_of(module)
    facts = facts_of(module, model_name)
    models = set(facts.model_names)
    main = model_name or main_model_name(module)
    # The loops of the facts that call a model and never .backward() (the rule's reading),
    # outermost first; those already under a grad mode are the user's choice.
    found = [loop for loop in facts.loops if not loop.trains and loop.calls_model]
    candidates = for_loops(module, found)
    outermost = [
        loop for loop in candidates if not any(a in candidates for a in tree.ancestors(loop))
    ]
    if not outermost:
        return Declined("no loop in this cell calls the model without .backward()")
    free = [loop for loop in outermost if not candidates[loop].under_grad_mode]
    if not free:
        return Declined(
            "every inference loop already runs under torch.no_grad() or inference_mode()"
        )
    trains = any(loop.trains for loop in facts.loops)
    edits: dict[cst.CSTNode, Replacement] = {}
    named: list[str] = []
    for loop in free:
        model = _model_called(loop, models, main)
        needs_eval = model is not None and not _eval_before(tree, loop, model)
        edits[loop] = _inference_wrap(model if needs_eval else None, restore=trains)
        if model is not None and model not in named:
            named.append(model)
    return Edited(with_torch_import(module, edits), ", ".join(named))


INFERENCE_MODE = Fix(
    "inference_mode",
    "Inference without autograd",
    (
        "The inference loop records autograd history it never uses.",
        "torch.inference_mode() skips it; model.eval() switches dropout and batch norm off.",
    ),
    "https://pytorch.org/docs/stable/generated/torch.inference_mode.html",
    inference_mode,
)


def _model_called(loop: cst.For, models: set[str], main: str | None) -> str | None:
    called = [dotted(c.func) for c in calls_in(loop.body) if dotted(c.func) in models]
    if main in called:
        return main
    return called[0] if called else None


def _eval_before(tree: Tree, loop: cst.For, model: str) -> bool:
    """``model.eval()`` inside the loop, or earlier in its block after the last ``.train()``."""
    if any(method_of(c) == "eval" and dotted(receiver_of(c)) == model for c in calls_in(loop.body)):
        return True
    for stmt in reversed(tree.around(loop)[0]):
        for call in reversed(list(calls_in(stmt))):
            if dotted(receiver_of(call)) == model and method_of(call) in ("eval", "train"):
                return method_of(call) == "eval"
    return False


def _inference_wrap(eval_model: str | None, *, restore: bool) -> Replacement:
    def apply(loop: cst.For) -> cst.FlattenSentinel[cst.BaseStatement]:
        with_node = with_block("torch.inference_mode()", [loop])
        out: list[cst.BaseStatement] = [with_node]
        if eval_model is not None:
            out = put_before(statement(f"{eval_model}.eval()\n"), with_node)
            if restore:
                # The cell trains too: give dropout and batch norm back to the next training step.
                out.append(statement(f"{eval_model}.train()\n"))
        return cst.FlattenSentinel(out)

    return apply
