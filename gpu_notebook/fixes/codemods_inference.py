"""The inference_mode codemod: inference loops under ``torch.inference_mode()``, the model in eval."""

from __future__ import annotations

import libcst as cst

from gpu_notebook.cell.loops import eval_before, model_run
from gpu_notebook.fixes.cst_tools import (
    CodemodResult,
    Declined,
    Edited,
    Replacement,
    facts_of,
    for_loops,
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
    cell = facts.tree
    main = model_name or facts.trained_model()
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
        # The facts' loop: which model it runs and whether it is in eval already, read there.
        assert cell is not None  # it has loop facts: it parsed
        model = model_run(cell, candidates[loop], main)
        needs_eval = model is not None and not eval_before(cell, candidates[loop], model)
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
