"""The fix catalog: every fix id with its title, why and docs, and ``apply_fix`` to run one
(a catalog id, or the ``Fix`` a rule module owns beside its check).

``apply_fix`` is the only entry point the rest of the product needs: it protects the cell's
IPython lines, parses it with libcst, runs the codemod, restores the IPython lines, names the fix
in a first comment line, and checks that the result still parses. Anything it cannot do
cleanly comes back as a ``Refusal`` with a reason, never as broken code.
"""

from __future__ import annotations

import difflib
import types
from collections.abc import Mapping

import libcst as cst

from gpu_notebook.cell.ipython import NotPythonCell, ProtectedCell, protect, restore
from gpu_notebook.cell.parse import check_parse, parse_cst
from gpu_notebook.fixes import (
    codemods_autocast,
    codemods_data,
    codemods_inference,
    codemods_model,
    codemods_scaler,
    codemods_syncs,
)
from gpu_notebook.fixes.cst_tools import Declined
from gpu_notebook.fixes.records import Fix, ParamValue, Patch, Refusal
from gpu_notebook.records import FixProposal

HEADER_PREFIX = "# gpucheck fix: "

_TUNING_GUIDE = "https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html"

# The catalog's own fixes. Order: the input pipeline first, as the verdict table reads
# (input-bound, sync-bound, host-bound, gpu-bound, memory, multi-GPU). A rule module may own its
# fix instead (a ``Fix`` beside its check, ``rules/host_tensors.py``): apply_fix takes either.
_TABLE: tuple[Fix, ...] = (
    Fix(
        "dataloader_workers",
        "DataLoader workers and pinned memory",
        (
            "The GPU waits while the main process loads and collates every batch.",
            "Worker processes prepare batches ahead; pinned memory speeds up the copy to the GPU.",
        ),
        "https://pytorch.org/docs/stable/data.html#multi-process-data-loading",
        codemods_data.dataloader_workers,
    ),
    Fix(
        "non_blocking_copies",
        "Non-blocking copies to the GPU",
        (
            "Each .to(device) of a batch makes Python wait until the copy is done.",
            "non_blocking=True (with pinned memory) lets the copy overlap with GPU work.",
        ),
        "https://pytorch.org/tutorials/intermediate/pinmem_nonblock.html",
        codemods_data.non_blocking_copies,
    ),
    Fix(
        "throttle_host_syncs",
        "Read values from the GPU every N steps",
        (
            "Every .item(), float(tensor) or print of a tensor waits for the GPU to finish.",
            "Reading them every N steps lets the CPU queue the next steps while the GPU works.",
        ),
        _TUNING_GUIDE + "#avoid-unnecessary-cpu-gpu-synchronization",
        codemods_syncs.throttle_host_syncs,
    ),
    Fix(
        "log_every_n",
        "Log every N steps",
        (
            "Logging on every step costs Python time and usually a GPU sync.",
            "Logging every N steps keeps the step loop short; the logged steps are unchanged.",
        ),
        _TUNING_GUIDE + "#avoid-unnecessary-cpu-gpu-synchronization",
        codemods_syncs.log_every_n,
    ),
    Fix(
        "torch_compile",
        "Compile the model with torch.compile",
        (
            "Many small kernels leave the GPU idle while Python launches the next one.",
            "torch.compile fuses them into fewer kernels; the first steps are slow: they compile.",
        ),
        "https://pytorch.org/docs/stable/generated/torch.compile.html",
        codemods_model.torch_compile,
    ),
    Fix(
        "bigger_batch",
        "Bigger batch",
        (
            "A small batch leaves the GPU underused and pays the per-step overhead more often.",
            "A bigger batch does more work per step; the learning rate scales with it.",
        ),
        _TUNING_GUIDE,
        codemods_data.bigger_batch,
    ),
    Fix(
        "autocast",
        "Mixed precision with torch.autocast",
        (
            "float32 math leaves the tensor cores idle and doubles activation memory.",
            "autocast runs matmuls and convolutions in bfloat16/float16, often about 2x faster.",
        ),
        "https://pytorch.org/docs/stable/amp.html",
        codemods_autocast.autocast,
    ),
    Fix(
        "drop_grad_scaler",
        "Drop the GradScaler",
        (
            "bfloat16 and float32 gradients do not underflow: loss scaling is for float16 only.",
            "Without the scaler each step skips its inf/nan check, unscale and (on a GPU) sync.",
        ),
        "https://pytorch.org/docs/stable/amp.html#gradient-scaling",
        codemods_scaler.drop_grad_scaler,
    ),
    Fix(
        "backend_flags",
        "cuDNN autotuner and TF32 math",
        (
            "cuDNN picks convolution algorithms by heuristics; float32 matmuls skip tensor cores.",
            "benchmark=True times the algorithms once per shape; TF32 uses tensor cores (Ampere+).",
        ),
        _TUNING_GUIDE + "#enable-cudnn-auto-tuner",
        codemods_model.backend_flags,
    ),
    Fix(
        "foreach_fused_optimizer",
        "Fused optimizer step",
        (
            "The optimizer updates each parameter tensor with its own small kernels.",
            "fused=True updates all of them in a few kernels.",
        ),
        "https://pytorch.org/docs/stable/optim.html#algorithms",
        codemods_model.foreach_fused_optimizer,
    ),
    Fix(
        "inference_mode",
        "Inference without autograd",
        (
            "The inference loop records autograd history it never uses.",
            "torch.inference_mode() skips it; model.eval() switches dropout and batch norm off.",
        ),
        "https://pytorch.org/docs/stable/generated/torch.inference_mode.html",
        codemods_inference.inference_mode,
    ),
    Fix(
        "detach_kept_tensors",
        "Keep values, not graphs",
        (
            "Storing the loss each step keeps its autograd graph alive: memory grows every step.",
            ".detach() keeps the value on the device without the graph (and without a sync).",
        ),
        "https://pytorch.org/docs/stable/notes/faq.html#my-model-reports-cuda-runtime-error-2-out-of-memory",
        codemods_syncs.detach_kept_tensors,
    ),
    Fix(
        "dataparallel_to_ddp",
        "DistributedDataParallel instead of DataParallel",
        (
            "DataParallel drives all GPUs from one Python thread and copies the model every step.",
            "DistributedDataParallel runs one process per GPU and overlaps gradient exchange.",
        ),
        "https://pytorch.org/tutorials/intermediate/ddp_tutorial.html",
        codemods_model.dataparallel_to_ddp,
    ),
)

FIXES: Mapping[str, Fix] = types.MappingProxyType({fix.fix_id: fix for fix in _TABLE})


def apply_fix(fix: str | Fix, source: str, **params: ParamValue) -> Patch | Refusal:
    """Apply one fix (a catalog id, or a rule's own ``Fix``) to a cell's source: a Patch to
    insert as a new cell, or a Refusal.

    Raises ValueError for an unknown fix id or a bad parameter value and TypeError for an
    unknown parameter name: those are bugs in the caller, not properties of the cell.
    """
    if isinstance(fix, str):
        fix = describe(fix)  # ValueError for an unknown id
    fix_id = fix.fix_id
    known = {p.name for p in fix.params}
    unknown = sorted(set(params) - known)
    if unknown:
        raise TypeError(
            f"{fix_id} takes no parameter {', '.join(unknown)}; "
            f"it takes: {', '.join(sorted(known)) or 'none'}"
        )
    try:
        cell = protect(source)
    except NotPythonCell as exc:
        return Refusal(fix_id, str(exc))
    module = _parse(cell)
    if isinstance(module, str):
        return Refusal(fix_id, module)
    result = fix.codemod(module, **params)
    if isinstance(result, Declined):
        return Refusal(fix_id, result.reason)
    new_code = result.module.code
    if new_code == cell.code:
        return Refusal(fix_id, "nothing to change in this cell")
    newline = "\r\n" if "\r\n" in source else "\n"
    header = HEADER_PREFIX + fix.title + (f" ({result.detail})" if result.detail else "")
    try:
        after = restore(new_code, cell, header=header + newline)
    except ValueError as exc:
        return Refusal(fix_id, f"internal error, please report this cell: {exc}")
    try:
        checked = protect(after, ours=True)
        if checked.originals:  # IPython lines: the body with placeholders must parse too
            check_parse(checked.code)
    except (NotPythonCell, SyntaxError, ValueError) as exc:
        return Refusal(fix_id, f"internal error, the patched cell would not parse: {exc}")
    return _patch(fix, source, after)


def _patch(info: Fix, before: str, after: str) -> Patch:
    """The Patch of one fix from ``before`` to ``after``: its catalog entry, diff, lines."""
    return Patch(
        fix_id=info.fix_id,
        title=info.title,
        why=info.why,
        doc_url=info.doc_url,
        source_before=before,
        source_after=after,
        diff=_diff(before, after),
        changed_lines=_changed_lines(before, after),
    )


def _parse(cell: ProtectedCell) -> cst.Module | str:
    """The parsed body, or why it does not parse (a message for the user)."""
    try:
        return parse_cst(cell.code)
    except cst.ParserSyntaxError as exc:
        offset = 1 if cell.magic_line else 0
        return (
            f"this cell is not valid Python (line {exc.raw_line + offset}: {exc.message}); "
            "fix it and run it first"
        )


def _diff(before: str, after: str) -> str:
    lines = difflib.unified_diff(
        before.splitlines(), after.splitlines(), fromfile="before", tofile="after", lineterm=""
    )
    return "\n".join(lines) + "\n"


def _changed_lines(before: str, after: str) -> tuple[int, ...]:
    matcher = difflib.SequenceMatcher(None, before.splitlines(), after.splitlines(), autojunk=False)
    changed: list[int] = []
    for tag, _, _, j1, j2 in matcher.get_opcodes():
        if tag in ("replace", "insert"):
            changed.extend(range(j1 + 1, j2 + 1))
    return tuple(changed)


def prepended_patch(fix_id: str, source: str, note: str, snippet: str) -> Patch:
    """``source`` with ``snippet`` put before its body (after a ``%%gpucheck`` line), headed by
    the fix's line naming it and ``note``: fixes made from live objects (a loader or framework
    object from an earlier cell), where the cell itself has nothing to rewrite."""
    return inserted_patch(fix_id, source, note, snippet, 1 if source.startswith("%%") else 0)


def inserted_patch(fix_id: str, source: str, note: str, snippet: str, after_line: int) -> Patch:
    """``source`` with ``snippet`` put right after its line ``after_line`` (1-based, the cell as
    given): where the cell itself binds the object the snippet sets (``dm = DM()`` then
    ``dm.num_workers = 2``), so the setting reaches the object the loop uses and every name the
    snippet reads is bound by then in a fresh kernel too. The binding is a top-level statement
    (see the caller): the snippet takes no indentation."""
    info = describe(fix_id)
    lines = source.splitlines(keepends=True)
    head = "".join(lines[:after_line])
    if head and not head.endswith("\n"):
        head += "\n"
    block = f"{HEADER_PREFIX}{info.title} ({note})\n" + snippet
    return _patch(info, source, head + block + "".join(lines[after_line:]))


def to_proposal(result: Patch | Refusal, info: Fix | None = None) -> FixProposal:
    """The report's record of a fix (``gpu_notebook.records.FixProposal``) for a Finding;
    ``info``: the entry of a rule's own fix (the catalog's are found by id)."""
    info = info if info is not None else describe(result.fix_id)
    patch = result if isinstance(result, Patch) else None
    return FixProposal(
        fix_id=result.fix_id,
        title=info.title,
        why=info.why,
        doc_url=info.doc_url,
        source_after=patch.source_after if patch else None,
        diff=patch.diff if patch else None,
        refusal=result.reason if isinstance(result, Refusal) else None,
    )


def describe(fix_id: str) -> Fix:
    """The catalog entry of one fix (ValueError for an unknown id)."""
    info = FIXES.get(fix_id)
    if info is None:
        raise ValueError(f"unknown fix {fix_id!r}; known fixes: {', '.join(FIXES)}")
    return info
