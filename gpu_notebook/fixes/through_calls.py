"""A fix whose edit lands in a function the cell calls, defined before it (``cell.calls``).

The rules read the cell with the user's functions it calls (``train_one_epoch`` of an earlier
cell): a finding may point into one of them. Its fix is applied to that same reading, the
definitions above the cell, and where it changes a definition:

- of an earlier cell: the patched cell holds the patched definition, then the cell, so running
  it redefines the function and runs the cell (in a fresh kernel too, after the cells above it,
  as the two cells ran); definitions the fix leaves as they were are left out;
- of a user's file: no patch (the user's files are never edited): a refusal that says the file,
  the line of the definition and the change, as a diff;
- of a class the cell makes (``model = Lit()``, a LightningModule of an earlier cell whose
  ``train_dataloader`` the fix edits): the patched class, then the cell, which makes its object
  from the class defined again;
- of a class whose object the cell did not make (``trainer`` made in an earlier cell, ``model``
  handed to ``trainer.fit``): a refusal too, with the diff (the object keeps the class it was
  made from).

A fix that changes no definition is the cell's own (``apply_fix`` on the cell alone); where
neither applies, the refusal is the reading's, which saw the lines the finding names.
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
) -> Patch | Refusal:
    """The fix of ``source`` read with ``origins`` above it: where it changes one of them, a
    Patch (of earlier cells) or a Refusal (a user's file, an object made earlier); where it
    changes none, the cell's own patch (``apply_fix`` on ``source``); where the reading refuses
    and the cell alone has no patch either, the reading's refusal (it read the lines the
    finding names: "its total is used as a number", not "no loop in this cell")."""
    own = apply_fix(fix, source, **params)
    if not origins:
        return own
    result = apply_fix(fix, reading(source, origins), **params)
    if isinstance(result, Refusal):
        return own if isinstance(own, Patch) else result
    after = result.source_after
    changed = [o for o in origins if o.text not in after]
    if not changed:
        return own
    in_files = [o for o in changed if o.in_file]
    if in_files:
        return _refused_in_file(result, in_files[0])
    earlier = [o for o in changed if not o.made_here]
    if earlier:
        return _refused_made_earlier(result, earlier[0])
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
    where = f"{origin.filename}, line {origin.first_line}"
    said = (
        f"the change is in `{_name(origin)}` ({where}), a file of yours that gpucheck does not edit"
    )
    diff = _diff_of(patch, origin, origin.filename)
    if diff is None:
        return Refusal(patch.fix_id, said)
    return Refusal(
        patch.fix_id,
        f"{said}: make it there and import it again (importlib.reload):\n{diff}",
        on_script=f"{said}: make it there and run the script again:\n{diff}",
    )


def _refused_made_earlier(patch: Patch, origin: Origin) -> Refusal:
    """A change in the class of an object made before the cell: a class defined again in the
    patched cell would not reach it (the object keeps the class it was made from)."""
    where = f"In[{origin.cell_number}]" if origin.cell_number is not None else "an earlier cell"
    said = (
        f"the change is in class `{origin.function}` ({where}, line {origin.first_line}), and "
        f"`{origin.instance}` was made from it before this cell: a class defined again here "
        f"would not reach it. Make the change there, run that cell, make `{origin.instance}` "
        "again and run this cell"
    )
    diff = _diff_of(patch, origin, origin.function)
    return Refusal(patch.fix_id, said if diff is None else f"{said}:\n{diff}")


def _name(origin: Origin) -> str:
    return f"class {origin.function}" if origin.instance is not None else f"{origin.function}()"


def _diff_of(patch: Patch, origin: Origin, label: str) -> str | None:
    """The fix's change of ``origin``'s definition as a unified diff (None: not found)."""
    new = defined_text(patch.source_after, origin.function)
    if new is None:
        return None
    return "\n".join(
        difflib.unified_diff(
            origin.text.splitlines(),
            new.splitlines(),
            fromfile=f"{label} (from line {origin.first_line})",
            tofile=f"{label} (patched)",
            lineterm="",
        )
    )
