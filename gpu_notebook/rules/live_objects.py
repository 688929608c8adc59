"""Facts from the live namespace: the DataLoaders, models and optimizers a cell uses, and torch flags.

A notebook builds its loader in one cell and trains in another, so the training cell's source
often says nothing about ``num_workers``. The objects themselves do: this module reads them
(attributes only, nothing is iterated or called) and, for a loader built elsewhere, writes the
snippet that rebuilds it from its own dataset and arguments with new worker settings.

Only names the cell reads are inspected (an unrelated loader in the namespace is not this
cell's). torch is never imported here: if the user's process has not imported it, no object
can be a DataLoader, and the torch flags are "not known" (None).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class LiveLoader:
    """A ``torch.utils.data.DataLoader`` found under ``name``."""

    name: str
    num_workers: int
    pin_memory: bool
    persistent_workers: bool
    prefetch_factor: int | None
    batch_size: int | None  # None: a custom batch_sampler decides
    drop_last: bool
    shuffle: bool | None  # RandomSampler: True, SequentialSampler: False, custom sampler: None
    sampler_type: str
    custom_batch_sampler: bool
    custom_collate: bool  # not torch's default_collate / default_convert
    worker_init_fn: bool
    generator: bool
    iterable_dataset: bool
    dataset_type: str  # class name of the dataset
    dataset_len: int | None


@dataclass(frozen=True)
class LiveModel:
    """An ``nn.Module`` found under ``name``."""

    name: str
    type_name: str
    training: bool
    data_parallel: bool  # nn.DataParallel
    ddp: bool  # DistributedDataParallel
    compiled: bool  # torch.compile's OptimizedModule
    has_conv: bool
    parameter_tensors: int
    device: str | None  # of the first parameter


@dataclass(frozen=True)
class LiveOptimizer:
    name: str
    type_name: str
    fused: bool | None  # the optimizer's own default setting (None: not a known flag)
    foreach: bool | None
    parameter_tensors: int


@dataclass(frozen=True)
class LiveFacts:
    """What the namespace holds for this cell (empty: no namespace, or torch not imported)."""

    loaders: tuple[LiveLoader, ...] = ()
    models: tuple[LiveModel, ...] = ()
    optimizers: tuple[LiveOptimizer, ...] = ()
    cudnn_benchmark: bool | None = None  # torch.backends.cudnn.benchmark now
    tf32_matmul: bool | None = None  # TF32 allowed for float32 matmuls now
    dynamo_unique_graphs: int | None = None  # cumulative in this process (best-effort)
    dynamo_recompile_limit_hits: int | None = None
    dynamo_recompile_limit: int | None = None
    # Class names of the torch Datasets bound to names the cell reads ("ds" -> "TensorDataset").
    dataset_types: tuple[tuple[str, str], ...] = ()

    def dataset_type(self, name: str) -> str | None:
        return next((t for n, t in self.dataset_types if n == name), None)

    def loader(self, name: str) -> LiveLoader | None:
        return next((ld for ld in self.loaders if ld.name == name), None)


def live_facts(namespace: Mapping[str, Any] | None, names: Iterable[str]) -> LiveFacts:
    """Inspect the objects bound to ``names`` in ``namespace`` (missing names are skipped)."""
    torch = sys.modules.get("torch")
    if namespace is None or torch is None:
        return LiveFacts()
    loaders: list[LiveLoader] = []
    models: list[LiveModel] = []
    optimizers: list[LiveOptimizer] = []
    datasets: list[tuple[str, str]] = []
    data = sys.modules.get("torch.utils.data")
    for name in sorted(set(names)):
        value = namespace.get(name)
        if value is None:
            continue
        if data is not None and isinstance(value, data.DataLoader):
            loaders.append(_loader(name, value, data))
        elif isinstance(value, torch.nn.Module):
            models.append(_model(name, value, torch))
        elif isinstance(value, torch.optim.Optimizer):
            optimizers.append(_optimizer(name, value))
        elif data is not None and isinstance(value, data.Dataset):
            datasets.append((name, type(value).__name__))
    unique, hits, limit = _dynamo_counters()
    return LiveFacts(
        loaders=tuple(loaders),
        models=tuple(models),
        optimizers=tuple(optimizers),
        cudnn_benchmark=bool(torch.backends.cudnn.benchmark),
        tf32_matmul=bool(torch.backends.cuda.matmul.allow_tf32)
        or torch.get_float32_matmul_precision() != "highest",
        dynamo_unique_graphs=unique,
        dynamo_recompile_limit_hits=hits,
        dynamo_recompile_limit=limit,
        dataset_types=tuple(datasets),
    )


def _loader(name: str, loader: Any, data: Any) -> LiveLoader:
    sampler = loader.sampler
    # shuffle=True builds exactly RandomSampler(dataset) (no replacement, no num_samples).
    plain_random = (
        type(sampler) is data.RandomSampler
        and not sampler.replacement
        and getattr(sampler, "_num_samples", None) is None
    )
    if plain_random:
        shuffle: bool | None = True
    elif type(sampler) is data.SequentialSampler:
        shuffle = False
    else:
        shuffle = None
    batch_sampler = loader.batch_sampler
    custom_batch = batch_sampler is not None and type(batch_sampler) is not data.BatchSampler
    collate = getattr(loader, "collate_fn", None)
    # DataLoader picks default_collate (batched) or default_convert (batch_size=None) itself.
    default_collates = (getattr(data, "default_collate", None), getattr(data, "default_convert", None))
    dataset = loader.dataset
    length = _torch_defined_len(dataset)
    return LiveLoader(
        name=name,
        num_workers=int(loader.num_workers),
        pin_memory=bool(loader.pin_memory),
        persistent_workers=bool(getattr(loader, "persistent_workers", False)),
        prefetch_factor=getattr(loader, "prefetch_factor", None),
        batch_size=loader.batch_size,
        drop_last=bool(loader.drop_last),
        shuffle=shuffle,
        sampler_type=type(sampler).__name__,
        custom_batch_sampler=custom_batch,
        custom_collate=all(collate is not d for d in default_collates),
        worker_init_fn=getattr(loader, "worker_init_fn", None) is not None,
        generator=getattr(loader, "generator", None) is not None,
        iterable_dataset=isinstance(dataset, data.IterableDataset),
        dataset_type=type(dataset).__name__,
        dataset_len=length,
    )


def _torch_defined_len(dataset: Any) -> int | None:
    """``len(dataset)`` only where torch itself defines ``__len__`` (TensorDataset, Subset...).

    The report runs after the cell: it must call none of the user's code (a ``__len__`` that
    raises, prints or reads a file would change what the cell did, or fail a good cell).
    """
    length_fn = getattr(type(dataset), "__len__", None)
    module = getattr(length_fn, "__module__", "") or ""
    if length_fn is None or not module.startswith("torch."):
        return None
    try:
        return len(dataset)
    except (TypeError, ValueError, AttributeError):
        return None


def _model(name: str, model: Any, torch: Any) -> LiveModel:
    params = list(model.parameters())
    convs = (torch.nn.modules.conv._ConvNd,)
    return LiveModel(
        name=name,
        type_name=type(model).__name__,
        training=bool(model.training),
        data_parallel=isinstance(model, torch.nn.DataParallel),
        ddp=isinstance(model, torch.nn.parallel.DistributedDataParallel),
        compiled=type(model).__name__ == "OptimizedModule",
        has_conv=any(isinstance(m, convs) for m in model.modules()),
        parameter_tensors=len(params),
        device=str(params[0].device) if params else None,
    )


def _optimizer(name: str, optimizer: Any) -> LiveOptimizer:
    defaults = getattr(optimizer, "defaults", {})
    fused = defaults.get("fused")
    foreach = defaults.get("foreach")
    return LiveOptimizer(
        name=name,
        type_name=type(optimizer).__name__,
        fused=fused if isinstance(fused, bool) else None,
        foreach=foreach if isinstance(foreach, bool) else None,
        parameter_tensors=sum(len(g["params"]) for g in optimizer.param_groups),
    )


def _dynamo_counters() -> tuple[int | None, int | None, int | None]:
    """(unique graphs, recompile-limit hits, the limit): cumulative over the process.

    Only read when the process already imported ``torch._dynamo`` (a cell used torch.compile);
    these are private torch counters, so any missing piece reads as "not known".
    """
    dynamo = sys.modules.get("torch._dynamo")
    utils = sys.modules.get("torch._dynamo.utils")
    if dynamo is None or utils is None:
        return None, None, None
    counters = getattr(utils, "counters", None)
    if counters is None:
        return None, None, None
    unique = counters.get("stats", {}).get("unique_graphs")
    hits = sum(v for k, v in counters.get("unimplemented", {}).items() if "recompile" in k.lower())
    config = getattr(dynamo, "config", None)
    limit = getattr(config, "recompile_limit", None) or getattr(config, "cache_size_limit", None)
    return (
        int(unique) if unique is not None else None,
        int(hits),
        int(limit) if isinstance(limit, int) else None,
    )


def rebuild_loader_source(
    loader: LiveLoader,
    *,
    num_workers: int | None,
    pin_memory: bool = True,
    persistent_workers: bool = True,
    prefetch_factor: int | None = None,
) -> str:
    """One statement that rebinds ``loader.name`` to a DataLoader over the same data, new settings.

    What cannot be written as a literal is taken from the live object itself
    (``loader.dataset``, ``loader.sampler``, ``loader.collate_fn``...), so the snippet works in
    the next cell as long as the old loader is still bound to the same name. ``num_workers``
    None keeps the current count.
    """
    n = loader.name
    workers = loader.num_workers if num_workers is None else num_workers
    args: list[str] = [f"{n}.dataset"]
    if loader.custom_batch_sampler:
        args.append(f"batch_sampler={n}.batch_sampler")
    else:
        args.append(f"batch_size={loader.batch_size}")
        if loader.shuffle is True:
            args.append("shuffle=True")
        elif loader.shuffle is None and not loader.iterable_dataset:
            args.append(f"sampler={n}.sampler")
        if loader.drop_last:
            args.append("drop_last=True")
    if loader.custom_collate:
        args.append(f"collate_fn={n}.collate_fn")
    if loader.worker_init_fn:
        args.append(f"worker_init_fn={n}.worker_init_fn")
    if loader.generator:
        args.append(f"generator={n}.generator")
    args.append(f"num_workers={workers}")
    if pin_memory:
        args.append("pin_memory=True")
    # torch rejects persistent_workers and prefetch_factor without worker processes.
    if workers > 0 and persistent_workers:
        args.append("persistent_workers=True")
    if workers > 0 and prefetch_factor is not None:
        args.append(f"prefetch_factor={prefetch_factor}")
    call = ",\n    ".join(args)
    return f"import torch.utils.data\n{n} = torch.utils.data.DataLoader(\n    {call},\n)\n"


__all__ = [
    "LiveFacts",
    "LiveLoader",
    "LiveModel",
    "LiveOptimizer",
    "live_facts",
    "rebuild_loader_source",
]
