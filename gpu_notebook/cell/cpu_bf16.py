"""Where the code asks for bfloat16 autocast, read on either tree: the rule
``precision.cpu_bf16`` reads the facts' :mod:`ast` nodes and its fix edits the libcst ones
with the same reading, so both mean the same calls.

Five spellings of one setting, the literal and the frameworks' keywords:

- ``torch.autocast("cpu", dtype=torch.bfloat16)``, ``torch.autocast(device_type="cpu")``
  (the CPU's default is bfloat16), ``torch.cpu.amp.autocast()``, ``torch.amp.autocast("cpu",
  torch.bfloat16)``; a device that is not a literal counts with an explicit bfloat16 (a CPU-only
  run has no other device). Off: ``enabled=False``.
- Lightning ``Trainer(precision="bf16-mixed")`` (or ``"bf16"``), Fabric's the same.
- HF ``TrainingArguments(bf16=True)`` (any ``...TrainingArguments``; ``use_cpu=True`` or none:
  on a CPU-only run the Trainer autocasts the CPU).
- accelerate ``Accelerator(mixed_precision="bf16")`` (``cpu=True`` or none, as above).

Where the call sits does not matter: the cell, a class's method, a function the cell calls
(``cell.calls``). A keyword may name a module-level constant assigned once (``PRECISION =
"bf16-mixed"`` above ``Trainer(precision=PRECISION)``, unseen round 21's script): read through
``module_constants``; the fix then sets the keyword's literal at the call.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any, Literal

from gpu_notebook.cell.names import NOT_LITERAL, dotted, keyword_of, literal_of
from gpu_notebook.cell.words import last

Bf16Kind = Literal["autocast", "lightning", "hf", "accelerate"]

LIGHTNING_BF16 = ("bf16-mixed", "bf16")  # Lightning's autocast precisions ("bf16-true" casts all)
OFF: dict[Bf16Kind, tuple[str, object]] = {
    # The keyword each kind is switched off by, and its value.
    "autocast": ("enabled", False),
    "lightning": ("precision", "32-true"),
    "hf": ("bf16", False),
    "accelerate": ("mixed_precision", "no"),
}


def bf16_autocast_kind(call: Any, constants: Mapping[str, object] | None = None) -> Bf16Kind | None:
    """Which of the five spellings ``call`` is (either tree), None: none of them.
    ``constants``: the module's constants (``module_constants``) a keyword may name."""
    known = constants or {}
    name = last(dotted(call.func) or "")
    if name == "autocast":
        return "autocast" if _bf16_autocast(call, known) else None
    if name in ("Trainer", "Fabric") and not _hf_trainer(call):
        return "lightning" if _given(call, "precision", known) in LIGHTNING_BF16 else None
    if name.endswith("TrainingArguments"):
        return "hf" if _given(call, "bf16", known) is True else None
    if name == "Accelerator":
        return "accelerate" if _given(call, "mixed_precision", known) == "bf16" else None
    return None


def module_constants(module: Any) -> dict[str, object]:
    """``NAME = literal`` at the top of a module (either tree: the facts' ``ast.Module`` or the
    fix's libcst one), for names bound there once: a string, a bool or a number."""
    seen: dict[str, object] = {}
    twice: set[str] = set()
    for statement in module.body:
        for name, value in _assignments(statement):
            if name in seen:
                twice.add(name)
            seen[name] = _literal(value) if value is not None else NOT_LITERAL
    return {k: v for k, v in seen.items() if k not in twice and v is not NOT_LITERAL}


def _assignments(statement: Any) -> list[tuple[str, Any]]:
    """(name, value) of a top-level plain-name assignment; value None where not one target."""
    if isinstance(statement, ast.Assign):
        names = [t.id for t in statement.targets if isinstance(t, ast.Name)]
        one = len(statement.targets) == 1 and len(names) == 1
        return [(n, statement.value if one else None) for n in names]
    if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
        return [(statement.target.id, statement.value)]
    out: list[tuple[str, Any]] = []
    for small in (
        getattr(statement, "body", ()) if type(statement).__name__ == "SimpleStatementLine" else ()
    ):
        if type(small).__name__ == "Assign":
            targets = [t.target for t in small.targets]
            names = [t.value for t in targets if type(t).__name__ == "Name"]
            one = len(targets) == 1 and len(names) == 1
            out.extend((n, small.value if one else None) for n in names)
        elif type(small).__name__ == "AnnAssign" and type(small.target).__name__ == "Name":
            out.append((small.target.value, small.value))
    return out


def _bf16_autocast(call: Any, known: Mapping[str, object]) -> bool:
    if _given(call, "enabled", known) is False:
        return False
    path = f".{dotted(call.func) or ''}."
    if ".cuda." in path:
        return False
    positional = _positional(call)
    device_node = _node(call, "device_type") or (positional[0] if positional else None)
    device = _value(device_node, known) if device_node is not None else None
    on_cpu = ".cpu." in path or device == "cpu"
    dtype_node = _node(call, "dtype")
    if dtype_node is None and ".cpu." not in path and len(positional) > 1:
        dtype_node = positional[1]
    if dtype_node is None:
        return on_cpu  # the CPU's autocast defaults to bfloat16
    if last(dotted(dtype_node) or "") != "bfloat16":
        return False
    # An explicit bfloat16 whose device is not a literal: the run's device, the CPU here.
    return on_cpu or (device_node is not None and device is NOT_LITERAL)


def _hf_trainer(call: Any) -> bool:
    """HF's ``Trainer(model=..., args=...)`` shares Lightning's class name (cell.setup)."""
    return any(keyword_of(call, k) is not None for k in ("model", "args", "train_dataset"))


def _positional(call: Any) -> list[Any]:
    """The call's positional arguments, either tree (libcst keeps keywords in ``args``)."""
    return [
        a if not hasattr(a, "keyword") else a.value
        for a in call.args
        if getattr(a, "keyword", None) is None and getattr(a, "star", "") == ""
    ]


def _node(call: Any, name: str) -> Any:
    kw = keyword_of(call, name)
    return None if kw is None else kw.value


def _given(call: Any, name: str, known: Mapping[str, object]) -> object:
    """The literal ``name=`` holds (a string too, either tree), or the constant it names;
    NOT_LITERAL otherwise."""
    node = _node(call, name)
    return NOT_LITERAL if node is None else _value(node, known)


def _value(node: Any, known: Mapping[str, object]) -> object:
    if type(node).__name__ == "Name":
        name = node.id if isinstance(node, ast.Name) else node.value
        if name in known:
            return known[name]
    return _literal(node)


def _literal(node: Any) -> object:
    if type(node).__name__ == "SimpleString":  # libcst's string literal
        value = node.evaluated_value
        return value if isinstance(value, str) else NOT_LITERAL
    return literal_of(node)
