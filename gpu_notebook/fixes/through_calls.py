"""A fix whose edit lands in a function the cell calls, defined before it (``cell.calls``).

The rules read the cell with the user's functions it calls (``train_one_epoch`` of an earlier
cell): a finding may point into one of them. Its fix is applied to that same reading, the
definitions above the cell, and where it changes a definition:

- of an earlier cell: the patched cell holds the patched definition, then the cell, so running
  it redefines the function and runs the cell (in a fresh kernel too, after the cells above it,
  as the two cells ran); definitions the fix leaves as they were are left out;
- of a user's file: no patch (the user's files are never edited): a refusal that says the file,
  the line of the definition and the change, as a diff.

A fix that changes no definition is the cell's own (``apply_fix`` on the cell alone).
"""

from __future__ import annotations

import dataclasses
import difflib

from gpu_notebook.cell.calls import defined_text, reading
from gpu_notebook.cell.facts import Origin
from gpu_notebook.fixes.catalog import _changed_lines, _diff, apply_fix
from gpu_notebook.fixes.records import Fix, ParamValue, Patch, Refusal


def apply_through_calls(
    fix: str | Fix, source: str, origins: tuple[Origin, ...], **params: ParamValue
) -> Patch | Refusal | None:
    """The fix applied to ``source`` read with ``origins`` above it, where it changes one of
    them: a Patch (functions of earlier cells) or a Refusal (a function of a user's file); None
    where it changes none (or does not apply), so the cell's own patch stands."""
    if not origins:
        return None
    result = apply_fix(fix, reading(source, origins), **params)
    if not isinstance(result, Patch):
        return None
    after = result.source_after
    changed = [o for o in origins if o.text not in after]
    if not changed:
        return None
    in_files = [o for o in changed if o.in_file]
    if in_files:
        return _refused_in_file(result, in_files[0])
    for kept in (o for o in origins if o not in changed):
        after = after.replace(kept.text + "\n", "", 1)
    before = reading(source, tuple(changed))
    return dataclasses.replace(
        result,
        source_before=before,
        source_after=after,
        diff=_diff(before, after),
        changed_lines=_changed_lines(before, after),
    )


def _refused_in_file(patch: Patch, origin: Origin) -> Refusal:
    """The change the fix makes in ``origin``'s file, said, never made."""
    new = defined_text(patch.source_after, origin.function)
    where = f"{origin.filename}, line {origin.first_line}"
    if new is None:
        return Refusal(
            patch.fix_id,
            f"the change is in `{origin.function}()` ({where}), a file of yours that gpucheck "
            "does not edit",
        )
    diff = "\n".join(
        difflib.unified_diff(
            origin.text.splitlines(),
            new.splitlines(),
            fromfile=f"{origin.filename} (def on line {origin.first_line})",
            tofile=f"{origin.filename} (patched)",
            lineterm="",
        )
    )
    return Refusal(
        patch.fix_id,
        f"the change is in `{origin.function}()` ({where}), a file of yours that gpucheck does "
        f"not edit: make it there and import it again (importlib.reload):\n{diff}",
    )
