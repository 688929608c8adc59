"""The fix catalog: every fix id with its title, why and docs (the ``Fix`` beside each codemod,
found in the ``codemods_*`` modules), and ``apply_fix`` to run one (a catalog id, or the ``Fix``
a rule module owns beside its check).

``apply_fix`` is the only entry point the rest of the product needs: it protects the cell's
IPython lines, parses it with libcst, runs the codemod, restores the IPython lines, names the fix
in a first comment line, and checks that the result still parses. Anything it cannot do
cleanly comes back as a ``Refusal`` with a reason, never as broken code.
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil
import types
from collections.abc import Mapping

import libcst as cst

import gpu_notebook.fixes as fixes_package
from gpu_notebook.cell.ipython import NotPythonCell, ProtectedCell, protect, restore
from gpu_notebook.cell.parse import check_parse, parse_cst
from gpu_notebook.fixes.cst_tools import Declined
from gpu_notebook.fixes.records import Fix, ParamValue, Patch, Refusal
from gpu_notebook.records import FixProposal

HEADER_PREFIX = "# gpucheck fix: "


def _catalog() -> Mapping[str, Fix]:
    """Every module-level ``Fix`` of this package's ``codemods_*`` modules, by id: a shared fix
    is its codemod and its ``Fix`` beside it, listed nowhere else (found as rules/ finds its
    families). A rule module may own its fix instead (a ``Fix`` beside its check,
    ``rules/host_tensors.py``): apply_fix takes either."""
    modules = [
        importlib.import_module(f"{__package__}.{info.name}")
        for info in pkgutil.iter_modules(fixes_package.__path__)
        if info.name.startswith("codemods_")
    ]
    found = {fix.fix_id: fix for m in modules for fix in vars(m).values() if isinstance(fix, Fix)}
    return types.MappingProxyType({fix_id: found[fix_id] for fix_id in sorted(found)})


FIXES = _catalog()


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
        return Refusal(fix_id, result.reason, result.on_script)
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
