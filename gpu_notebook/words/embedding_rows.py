"""Words of the embedding-table rule (rules/embedding_rows.py)."""

from __future__ import annotations

from gpu_notebook.formatting import fmt_share
from gpu_notebook.rules.embedding_rows import DenseTableUpdate
from gpu_notebook.words.common import Words, worder, words

TITLE = "A large embedding table is updated whole every step for the few rows a batch touches"
SOURCE = "torch.nn.Embedding(sparse=True), torch.optim.SparseAdam (PyTorch docs)"


@worder(DenseTableUpdate)
def dense_table(s: DenseTableUpdate) -> Words:
    named = ", ".join(
        f"`{t.module}` ({t.kind}, {t.rows:,} rows x {t.dim}, sparse=False)" for t in s.tables
    )
    evidence = [
        f"{named}: each step's gradient is the whole table (zeros but the batch's rows), and "
        f"`{s.optimizer}` ({s.optimizer_class}) reads and writes every row"
        + ("" if s.same_maths else " and its state"),
        f"optimizer step: {fmt_share(s.update)} of the step; the table(s) about "
        f"{fmt_share(s.part)} of what it updates",
    ]
    if s.backward is not None:
        evidence.append(
            f"backward: {fmt_share(s.backward)} of the step, where the table's dense gradient is "
            "made (the range's high end counts it whole: not timed apart)"
        )
    if s.gpu:
        evidence.append(
            "fused=True / foreach=True make the same full-table passes in fewer kernels: "
            "the untouched rows are still read and written"
        )
    if s.same_maths:
        fix = (
            f"Make the table(s) `sparse=True`: {s.optimizer_class} takes sparse gradients and, with "
            "neither momentum nor weight decay in the table's group, leaves a row with a zero "
            "gradient as it is: the same update, for the batch's rows alone. Code that reads the "
            "table's .grad as a dense tensor (gradient clipping, `torch.compile`, DDP) is to "
            "check. No patch: try it and compare."
        )
        return words(TITLE, evidence, fix, SOURCE)
    fix = (
        "Update only the rows a batch touches: make the table(s) `sparse=True` and step their "
        "weights with `torch.optim.SparseAdam` (a second, dense optimizer for every other "
        "parameter; step and zero both). This changes the maths: SparseAdam updates only the "
        "touched rows' moments (lazy Adam), where dense Adam decays every row's moments and "
        "moves untouched rows by them each step"
    )
    if "Adam" not in s.optimizer_class:
        fix += f" (torch has no sparse {s.optimizer_class}: SparseAdam is another optimizer)"
    fix += (
        "; SparseAdam takes no weight decay (the table's group has it: drop it for the table, "
        "or apply it to the touched rows yourself)."
        if s.weight_decay
        else "; it takes no weight decay."
    )
    fix += (
        " Or keep dense gradients and update the touched rows by hand (`index_select` the "
        "batch's unique ids, update those rows and their state, `index_copy_` them back). "
        "No patch: the optimizer is split in two, a change of recipe to try and compare."
    )
    return words(TITLE, evidence, fix, SOURCE)
