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
(``cell.calls``).
"""

from __future__ import annotations

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


def bf16_autocast_kind(call: Any) -> Bf16Kind | None:
    """Which of the five spellings ``call`` is (either tree), None: none of them."""
    name = last(dotted(call.func) or "")
    if name == "autocast":
        return "autocast" if _bf16_autocast(call) else None
    if name in ("Trainer", "Fabric") and not _hf_trainer(call):
        return "lightning" if _given(call, "precision") in LIGHTNING_BF16 else None
    if name.endswith("TrainingArguments"):
        return "hf" if _given(call, "bf16") is True else None
    if name == "Accelerator":
        return "accelerate" if _given(call, "mixed_precision") == "bf16" else None
    return None


def _bf16_autocast(call: Any) -> bool:
    if _given(call, "enabled") is False:
        return False
    path = f".{dotted(call.func) or ''}."
    if ".cuda." in path:
        return False
    positional = _positional(call)
    device_node = _node(call, "device_type") or (positional[0] if positional else None)
    on_cpu = ".cpu." in path or (device_node is not None and _literal(device_node) == "cpu")
    dtype_node = _node(call, "dtype")
    if dtype_node is None and ".cpu." not in path and len(positional) > 1:
        dtype_node = positional[1]
    if dtype_node is None:
        return on_cpu  # the CPU's autocast defaults to bfloat16
    if last(dotted(dtype_node) or "") != "bfloat16":
        return False
    # An explicit bfloat16 whose device is not a literal: the run's device, the CPU here.
    return on_cpu or (device_node is not None and _literal(device_node) is NOT_LITERAL)


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


def _given(call: Any, name: str) -> object:
    """The literal ``name=`` holds (a string too, either tree), NOT_LITERAL otherwise."""
    node = _node(call, name)
    return NOT_LITERAL if node is None else _literal(node)


def _literal(node: Any) -> object:
    if type(node).__name__ == "SimpleString":  # libcst's string literal
        value = node.evaluated_value
        return value if isinstance(value, str) else NOT_LITERAL
    return literal_of(node)
