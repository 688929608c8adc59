"""The embedding tables a live optimizer steps densely: read from the models and optimizers the
cell names (``cell.live``), attributes only, none of the user's code run.

An ``nn.Embedding``/``nn.EmbeddingBag`` made with ``sparse=False`` (torch's default) gets a
gradient the size of the whole table every step, zeros but the batch's rows, and a dense
optimizer then reads and writes every row (and its state) for the few rows a batch touched.
This module says which tables that is, the optimizer's numel they are part of, and whether
the table's parameter group changes rows whose gradient is zero (state that decays, weight
decay, momentum): where it does not (plain SGD, Adagrad without weight decay, both of which take
sparse gradients) ``sparse=True`` is the same update; where it does, a sparse optimizer is
another algorithm. What ``rules.embedding_rows`` judges.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Optimizer classes of torch.optim whose update of a row with a zero gradient still changes it
# or its state (moments or averages that decay), whatever their group's settings.
ROW_STATE_OPTIMIZERS = frozenset(
    {"Adam", "AdamW", "Adamax", "NAdam", "RAdam", "RMSprop", "Adadelta", "ASGD"}
)
# Classes that take sparse gradients and leave a zero-gradient row as it is, unless the group
# adds weight decay or momentum (SGD's ``add_``; Adagrad's accumulator adds the square of 0).
SPARSE_READY = frozenset({"SGD", "Adagrad"})


@dataclass(frozen=True)
class DenseTable:
    """One embedding table a live optimizer steps with dense gradients."""

    module: str  # the module's path in its model ("items", "encoder.embed_tokens")
    kind: str  # "Embedding" | "EmbeddingBag"
    rows: int
    dim: int
    # The table's parameter group changes rows whose gradient is zero: a class with per-row
    # state that decays (``ROW_STATE_OPTIMIZERS``), or momentum or weight decay in the group.
    # False: ``sparse=True`` under the same optimizer is the same update (``SPARSE_READY``).
    row_state: bool
    weight_decay: bool  # the group's weight_decay is not 0
    # The weight is also a parameter of another module (an LM head tied to the embeddings):
    # that module's gradient is dense over every row, so no sparse gradient can stand in.
    tied: bool

    @property
    def numel(self) -> int:
        return self.rows * self.dim


def optimizer_tables(
    optimizer: Any, models: list[Any], torch: Any
) -> tuple[int, tuple[DenseTable, ...]]:
    """(the optimizer's parameters' numel, each one once; the dense-gradient embedding tables among
    them, found in ``models``' module trees)."""
    groups = _held(optimizer, "param_groups")
    if type(groups) is not list:
        return 0, ()
    group_of: dict[int, dict[str, Any]] = {}
    numel = 0
    for group in groups:
        params = group.get("params") if type(group) is dict else None
        for p in params if type(params) is list else ():
            if id(p) in group_of or not issubclass(type(p), torch.Tensor):
                continue
            group_of[id(p)] = group
            with torch._C.DisableTorchFunction():
                numel += int(torch.Tensor.numel(p))
    kind = type(optimizer).__name__
    tables: dict[int, DenseTable] = {}
    # An optimizer of unknown maths (a user's, LBFGS) is not judged; an Adam of another
    # library's (8-bit, apex) keeps moments as torch's does.
    known = kind in ROW_STATE_OPTIMIZERS or kind in SPARSE_READY or "Adam" in kind
    if not known or kind == "SparseAdam":
        return numel, ()
    for model in models:
        holders = _parameter_holders(model)
        for path, module in _modules(model):
            cls = type(module)
            if not issubclass(cls, (torch.nn.Embedding, torch.nn.EmbeddingBag)):
                continue
            weight = _held(module, "_parameters", {}).get("weight")
            if weight is None or id(weight) not in group_of or id(weight) in tables:
                continue
            if _held(module, "sparse") is not False or not _requires_grad(weight, torch):
                continue
            with torch._C.DisableTorchFunction():
                shape = tuple(torch.Tensor.size(weight))
            if len(shape) != 2:
                continue
            group = group_of[id(weight)]
            decay = _nonzero(group.get("weight_decay"))
            momentum = _nonzero(group.get("momentum"))
            tables[id(weight)] = DenseTable(
                module=path or type(model).__name__,
                kind="EmbeddingBag" if issubclass(cls, torch.nn.EmbeddingBag) else "Embedding",
                rows=int(shape[0]),
                dim=int(shape[1]),
                row_state=kind not in SPARSE_READY or momentum or decay,
                weight_decay=decay,
                tied=any(h is not module for h in holders.get(id(weight), ())),
            )
    return numel, tuple(tables.values())


def _nonzero(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value != 0


def _requires_grad(weight: Any, torch: Any) -> bool:
    with torch._C.DisableTorchFunction():
        return bool(torch.Tensor.requires_grad.__get__(weight))


def _modules(model: Any) -> list[tuple[str, Any]]:
    """(path, module) over the tree from torch's own ``_modules`` dicts, each module once."""
    out: list[tuple[str, Any]] = []
    todo: list[tuple[str, Any]] = [("", model)]
    seen: set[int] = set()
    while todo:
        path, m = todo.pop()
        if id(m) in seen:
            continue
        seen.add(id(m))
        out.append((path, m))
        children = _held(m, "_modules")
        if type(children) is dict:
            for name, child in reversed(list(dict.items(children))):
                if child is not None:
                    todo.append((f"{path}.{name}" if path else str(name), child))
    return out


def _parameter_holders(model: Any) -> dict[int, list[Any]]:
    """Each parameter's id to the modules holding it as their own (a tied weight: several)."""
    holders: dict[int, list[Any]] = {}
    for _path, m in _modules(model):
        own = _held(m, "_parameters")
        for p in dict.values(own) if type(own) is dict else ():
            if p is not None:
                holders.setdefault(id(p), []).append(m)
    return holders


def _held(obj: Any, name: str, default: Any = None) -> Any:
    """``obj.name`` from the object's own ``__dict__``: no property or ``__getattr__`` runs."""
    try:
        return object.__getattribute__(obj, "__dict__").get(name, default)
    except AttributeError:
        return default
