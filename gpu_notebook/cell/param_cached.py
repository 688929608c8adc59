"""The parametrized tensors of a live model (``torch.nn.utils.parametrize``), read from its own dicts.

A parametrization (``parametrizations.weight_norm``, ``spectral_norm``, ``orthogonal``, any
``register_parametrization``) turns ``module.weight`` into a property that computes the weight
from its parts on every read, unless ``parametrize.cached()`` is on. A module carries them as a
``ModuleDict`` named ``parametrizations`` (what ``parametrize.is_parametrized`` reads): one
``ParametrizationList`` a tensor, whose modules are the parametrizations in order. Read here from
torch's own ``_modules`` dicts: nothing of the user's runs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

# torch's own parametrizations by class name (torch/nn/utils/parametrizations.py): the kind the
# trace's operators are read for (analysis/param_cached); a user's own is "custom".
KINDS = {
    "_WeightNorm": "weight_norm",
    "_SpectralNorm": "spectral_norm",
    "_Orthogonal": "orthogonal",
}


@dataclass(frozen=True)
class ParametrizedTensor:
    """One parametrized tensor of a model: ``path`` (``rec.weight``) and its parametrizations'
    kinds in order (``("weight_norm",)``)."""

    path: str
    kinds: tuple[str, ...]
    # id() of the module that holds it: one module reached through two names is counted once.
    owner: int = dataclasses.field(default=0, compare=False, repr=False)


def _own(obj: Any, name: str) -> Any:
    try:
        return object.__getattribute__(obj, "__dict__").get(name)
    except AttributeError:
        return None


def parametrized_tensors(
    modules: Iterable[tuple[str, Any]], torch: Any
) -> tuple[ParametrizedTensor, ...]:
    """The parametrized tensors of ``modules`` (each with its path in the model)."""
    out: list[ParametrizedTensor] = []
    for prefix, module in modules:
        children = _own(module, "_modules")
        held = children.get("parametrizations") if type(children) is dict else None
        if held is None or not issubclass(type(held), torch.nn.ModuleDict):
            continue
        lists = _own(held, "_modules")
        for name, chain in dict.items(lists) if type(lists) is dict else ():
            steps = _own(chain, "_modules")
            kinds = tuple(
                KINDS.get(type(p).__name__, "custom")
                for p in (dict.values(steps) if type(steps) is dict else ())
            )
            path = f"{prefix}.{name}" if prefix else name
            out.append(ParametrizedTensor(path, kinds, id(module)))
    return tuple(out)
