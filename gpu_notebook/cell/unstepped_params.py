"""Parameters the backward computes a gradient for and that no optimizer steps, read live.

A linear probe trains only its head (``SGD(head.parameters())``) but never freezes the
backbone: every backward computes the backbone's weight gradients (and the input gradients
through it) for nothing. Read after the cell ran, from the objects themselves: each model's
parameters with ``requires_grad`` whose ``.grad`` is set (the backward reached them) and that
are in no optimizer's ``param_groups`` found in the namespace (its values, the items of its
lists, tuples and dicts, and the instance attributes of its objects: a scheduler's or a
trainer's optimizer). Parameters are compared as objects, so tied weights count once and a
deepcopy's are not the original's. Nothing of the user's is called.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class UnsteppedModel:
    """A model under ``name``: its trainable parameters (numel) and those no optimizer steps."""

    name: str
    type_name: str
    trainable: int  # numel of its parameters with requires_grad
    unstepped: int  # numel of those with a gradient set that no found optimizer holds
    tensors: int  # how many parameter tensors that is
    # The submodules (dotted paths, "" the model itself) that hold every unstepped parameter and
    # no stepped one; None where no such set of whole submodules covers them exactly.
    parts: tuple[str, ...] | None


def optimizer_params(namespace: Mapping[str, Any], torch: Any) -> tuple[set[int], int]:
    """The ids of every parameter in an optimizer the namespace reaches, and how many optimizers."""
    optimizer = torch.optim.Optimizer
    seen: dict[int, Any] = {}

    def visit(value: Any, depth: int) -> None:
        kind = type(value)
        if issubclass(kind, optimizer):
            seen[id(value)] = value
        elif depth == 0:
            return
        elif kind in (list, tuple):
            for item in value[:1000]:
                visit(item, depth - 1)
        elif kind is dict:
            for item in list(value.values())[:1000]:
                visit(item, depth - 1)
        elif not issubclass(kind, (type, torch.nn.Module, torch.Tensor)):
            # The instance's own dict, past the class's ``__getattribute__`` (torch.distributed's
            # deprecated ``reduce_op`` warns from its own: a cell importing ``torch.distributed``
            # got a FutureWarning of ours after it).
            try:
                held = object.__getattribute__(value, "__dict__")
            except AttributeError:
                held = None
            if type(held) is dict:
                for item in list(held.values())[:1000]:
                    visit(item, depth - 1)

    for value in list(namespace.values()):
        try:
            visit(value, 2)
        except Exception:  # noqa: BLE001 -- an object we cannot read holds no optimizer we can see
            continue
    params = {
        id(p) for o in seen.values() for group in o.param_groups for p in group.get("params", ())
    }
    return params, len(seen)


def unstepped_models(
    namespace: Mapping[str, Any], names: Iterable[str], torch: Any
) -> tuple[UnsteppedModel, ...]:
    """One record per model under ``names`` with trainable parameters; nothing where the
    namespace reaches no optimizer (a hand-written update, a framework's own: not ours to say)."""
    stepped, count = optimizer_params(namespace, torch)
    if count == 0:
        return ()
    out = []
    for name in names:
        model = namespace.get(name)
        if model is None or not issubclass(type(model), torch.nn.Module):
            continue
        unique = {id(p): p for p in model.parameters()}
        trainable = [p for p in unique.values() if p.requires_grad]
        if not trainable:
            continue
        loose = [p for p in trainable if p.grad is not None and id(p) not in stepped]
        out.append(
            UnsteppedModel(
                name, type(model).__name__, sum(p.numel() for p in trainable),
                sum(p.numel() for p in loose), len(loose),
                _parts(model, {id(p) for p in loose}, stepped) if loose else (),
            )
        )  # fmt: skip
    return tuple(out)


def _parts(
    module: Any, loose: set[int], stepped: set[int], path: str = ""
) -> tuple[str, ...] | None:
    """The whole submodules holding every id of ``loose`` and none of ``stepped``."""
    ids = {id(p) for p in module.parameters()}
    if not ids & loose:
        return ()
    if not ids & stepped:
        return (path,)
    own = {id(p) for p in module.parameters(recurse=False)}
    if own & loose:
        return None  # a parameter of a module that also holds stepped ones
    parts: list[str] = []
    for child_name, child in module.named_children():
        found = _parts(child, loose, stepped, f"{path}.{child_name}" if path else child_name)
        if found is None:
            return None
        parts += found
    return tuple(dict.fromkeys(parts))
