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

import ast
import dataclasses
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gpu_notebook.cell.embedding_tables import DenseTable, optimizer_tables
from gpu_notebook.cell.ipython import binding_cell
from gpu_notebook.cell.names import dotted, int_or_none, keyword_value, method_of
from gpu_notebook.cell.param_cached import ParametrizedTensor, parametrized_tensors
from gpu_notebook.cell.unstepped_params import UnsteppedModel, unstepped_models


@dataclass(frozen=True)
class LiveLoader:
    """A ``torch.utils.data.DataLoader`` found under ``name``."""

    name: str
    num_workers: int
    pin_memory: bool
    persistent_workers: bool
    batch_size: int | None  # None: a custom batch_sampler decides
    drop_last: bool
    shuffle: bool | None  # RandomSampler: True, SequentialSampler: False, custom sampler: None
    custom_batch_sampler: bool
    custom_collate: bool  # not torch's default_collate / default_convert
    worker_init_fn: bool
    generator: bool
    iterable_dataset: bool
    dataset_type: str  # class name of the dataset
    dataset_len: int | None
    loader_class: str = "torch.utils.data.DataLoader"  # module.qualname (accelerate wraps it)
    # Made before the cell ran (an earlier cell); False: a script's global, bound as it ran.
    made_before: bool = True
    made_in: int | None = None  # the earlier cell that bound the name (In[N]), where known
    # The dataset is handed a whole batch's indices in one call (``whole_batch_fetch``).
    whole_batch_fetch: bool = False


@dataclass(frozen=True)
class LiveModel:
    """An ``nn.Module`` found under ``name``."""

    name: str
    type_name: str
    training: bool
    data_parallel: bool  # nn.DataParallel
    compiled: bool  # torch.compile's OptimizedModule
    has_conv: bool
    parameter_tensors: int
    device: str | None  # of the first parameter
    # Every layer is torch.nn's own and none reads ``training`` (no dropout, batch or instance
    # norm, RReLU, RNN or attention dropout): train mode changes nothing. False: unknown.
    mode_blind: bool = False
    # Its parametrized tensors (``torch.nn.utils.parametrize``): computed anew on every read.
    parametrized: tuple[ParametrizedTensor, ...] = ()


@dataclass(frozen=True)
class LiveOptimizer:
    name: str
    type_name: str
    fused: bool | None  # the optimizer's own default setting (None: not a known flag)
    foreach: bool | None
    one_pass: bool = False  # SGD without momentum or weight decay: one add_ a tensor
    made_before: bool = True  # as LiveLoader's
    made_in: int | None = None  # as LiveLoader's
    numel: int = 0  # its parameters' elements, each tensor once (0: not read)
    # The embedding tables it steps with dense gradients, found in the models the cell names.
    tables: tuple[DenseTable, ...] = ()
    # The same optimizer under other names the cell reads (``for o in opts``): they keep no
    # numel or tables of their own, so it is counted once.
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class LiveDataHook:
    """A framework object that builds the DataLoader itself, found under ``name``.

    Lightning: a ``LightningDataModule`` (or a ``LightningModule`` that defines
    ``train_dataloader``); HF: a ``transformers.Trainer``, which builds it from its
    ``TrainingArguments``.
    """

    name: str
    kind: str  # "lightning-datamodule" | "lightning-module" | "hf-trainer"
    type_name: str
    num_workers: int | None  # the setting as it stands now, when readable without calling code
    method_source: str | None = None  # train_dataloader's source (dedented), when findable
    workers_attribute: str | None = None  # train_dataloader passes num_workers=self.<this>
    framework: str = ""  # "Lightning" | "Hugging Face Trainer"
    on_class: bool = (
        False  # ``name`` holds the class (``fit(lit, datamodule=DM())``), not an instance
    )


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
    data_hooks: tuple[LiveDataHook, ...] = ()
    # Names bound to a list or tuple of numpy arrays (its first item read, nothing called): a
    # ``torch.tensor([rows[i] for i in idx])`` over it parses every number in Python.
    array_lists: frozenset[str] = frozenset()
    # Names we could not read, and why ("odd", "TypeError"): their findings are missing, so the
    # report says which (a note, never a failure).
    skipped: tuple[tuple[str, str], ...] = ()
    # Types whose size we leave unread, as reading it would run code of theirs (a container that
    # asks the user's datasets, a tensor subclass with its own dispatch): named, never asked.
    unread: tuple[str, ...] = ()
    # Names bound to a plain int in a namespace made before the cell (``log_every = 16`` of an
    # earlier cell, read by a function the cell calls): what a ``% log_every`` gate reads.
    ints: tuple[tuple[str, int], ...] = ()
    # Read from a namespace made before the cell (a notebook's); False: a script's globals, so
    # process-wide counters (Dynamo's) are the script's run, not a kernel's history.
    made_before: bool = True
    # The models with trainable parameters, and which of those no optimizer steps (read after
    # the cell ran; empty where the namespace reaches no optimizer): cell/unstepped_params.
    unstepped: tuple[UnsteppedModel, ...] = ()

    def notes(self) -> tuple[str, ...]:
        """One line per skipped object and per type left unread, for the report's notes."""
        return tuple(
            f"'{name}' was not read for the findings ({why}): it is skipped, nothing else changes"
            for name, why in self.skipped
        ) + tuple(f"not read: {kind}, its size needs its own code" for kind in self.unread)

    def dataset_type(self, name: str) -> str | None:
        return next((t for n, t in self.dataset_types if n == name), None)

    def loader(self, name: str) -> LiveLoader | None:
        return next((ld for ld in self.loaders if ld.name == name), None)


def live_facts(
    namespace: Mapping[str, Any] | None, names: Iterable[str], *, made_before: bool = True
) -> LiveFacts:
    """Inspect the objects bound to ``names`` in ``namespace`` (missing names are skipped).

    ``made_before``: the namespace held them before the cell ran (a notebook's earlier cells);
    False for a script's globals (``gpucheck run``), which the script itself bound as it ran."""
    torch = sys.modules.get("torch")
    if namespace is None or torch is None:
        return LiveFacts()
    loaders: list[LiveLoader] = []
    models: list[LiveModel] = []
    optimizers: list[LiveOptimizer] = []
    datasets: list[tuple[str, str]] = []
    hooks: list[LiveDataHook] = []
    array_lists: set[str] = set()
    skipped: list[tuple[str, str]] = []
    unread: list[str] = []
    ints: list[tuple[str, int]] = []
    live_models: list[Any] = []
    live_optimizers: list[Any] = []
    data = sys.modules.get("torch.utils.data")
    for name in sorted(set(names)):
        value = namespace.get(name)
        if value is None:
            continue
        kind = type(value)  # never isinstance(): it may read a __class__ property of theirs
        if kind is int:  # exactly int: a bool or a subclass of theirs is no period
            ints.append((name, value))
            continue
        try:
            wrapped = _wrapped_loader(value, data) if data is not None else None
            if data is not None and issubclass(kind, data.DataLoader):
                loaders.append(_loader(name, value, data, unread))
            elif wrapped is not None:
                loaders.append(_loader(name, wrapped, data, unread, wrapper=kind))
            elif issubclass(kind, torch.nn.Module):
                models.append(_model(name, value, torch))
                live_models.append(value)
            elif issubclass(kind, torch.optim.Optimizer):
                optimizers.append(_optimizer(name, value))
                live_optimizers.append(value)
            elif data is not None and issubclass(kind, data.Dataset):
                datasets.append((name, kind.__name__))
            elif _holds_arrays(value):
                array_lists.add(name)
            hook = _data_hook(name, value)
        except Exception as exc:  # noqa: BLE001 -- an object we cannot read is ours to skip, never the cell's failure
            skipped.append((name, f"a {kind.__name__}; reading it raised {type(exc).__name__}"))
            continue
        if hook is not None:
            hooks.append(hook)
    hooks.sort(key=lambda h: h.on_class)  # an instance the cell names is the one it trains on
    optimizers = _with_tables(optimizers, live_optimizers, live_models, torch, skipped)
    if not made_before:
        loaders = [dataclasses.replace(ld, made_before=False) for ld in loaders]
        optimizers = [dataclasses.replace(o, made_before=False) for o in optimizers]
    else:  # a kernel's: the cell that made each, where its history says
        loaders = [dataclasses.replace(ld, made_in=binding_cell(ld.name)) for ld in loaders]
        optimizers = [dataclasses.replace(o, made_in=binding_cell(o.name)) for o in optimizers]
    unique, hits, limit = _dynamo_counters()
    try:
        unstepped = unstepped_models(namespace, [m.name for m in models], torch)
    except Exception:  # noqa: BLE001 -- a parameter we cannot read: no unstepped finding
        unstepped = ()
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
        data_hooks=tuple(hooks),
        array_lists=frozenset(array_lists),
        skipped=tuple(skipped),
        unread=tuple(dict.fromkeys(unread)),
        ints=tuple(ints) if made_before else (),
        made_before=made_before,
        unstepped=unstepped,
    )


def _with_tables(
    optimizers: list[LiveOptimizer], values: list[Any], models: list[Any], torch: Any,
    skipped: list[tuple[str, str]],
) -> list[LiveOptimizer]:  # fmt: skip
    """Each optimizer with its numel and the dense embedding tables it steps
    (``cell.embedding_tables``); one that cannot be read keeps none, and is named."""
    out: list[LiveOptimizer] = []
    first: dict[int, int] = {}  # each object's first record, by position in ``out``
    for record, value in zip(optimizers, values, strict=True):
        if id(value) in first:
            held = first[id(value)]
            out[held] = dataclasses.replace(out[held], aliases=(*out[held].aliases, record.name))
            out.append(record)
            continue
        first[id(value)] = len(out)
        try:
            numel, tables = optimizer_tables(value, models, torch)
        except Exception as exc:  # noqa: BLE001 -- as live_facts': ours to skip, never the cell's
            skipped.append(
                (record.name, f"its parameters' tables; reading raised {type(exc).__name__}")
            )
            out.append(record)
            continue
        out.append(dataclasses.replace(record, numel=numel, tables=tables))
    return out


def _holds_arrays(value: Any) -> bool:
    """A built-in list or tuple whose first item is a numpy array (exact types: a subclass of
    list may run code of its own on indexing)."""
    numpy = sys.modules.get("numpy")
    if numpy is None or type(value) not in (list, tuple) or not value:
        return False
    return issubclass(type(value[0]), numpy.ndarray)


def _data_hook(name: str, value: Any) -> LiveDataHook | None:
    """The framework object behind ``name`` that builds a DataLoader, read without calling it."""
    # transformers loads its submodules on first attribute access (``transformers.Trainer``
    # imports the trainer, accelerate and more, and their warning filters): read the class only
    # from a trainer module the user's code already imported.
    hf_trainer = sys.modules.get("transformers.trainer")
    trainer_cls = hf_trainer.__dict__.get("Trainer") if hf_trainer is not None else None
    if trainer_cls is not None and issubclass(type(value), trainer_cls):
        setting = _held(_held(value, "args"), "dataloader_num_workers")
        return LiveDataHook(
            name, "hf-trainer", type(value).__name__,
            setting if isinstance(setting, int) else None, framework="Hugging Face Trainer",
        )  # fmt: skip
    # A class the cell names (``trainer.fit(lit, datamodule=DM())``): its method is the hook.
    on_class = issubclass(type(value), type)
    cls = value if on_class else type(value)
    for module_name in ("lightning.pytorch", "pytorch_lightning"):
        pl = sys.modules.get(module_name)
        if pl is None:
            continue
        datamodule, lightning_module = (
            getattr(pl, "LightningDataModule", None),
            getattr(pl, "LightningModule", None),
        )
        if datamodule is not None and issubclass(cls, datamodule):
            kind, base = "lightning-datamodule", datamodule
        elif lightning_module is not None and issubclass(cls, lightning_module):
            kind, base = "lightning-module", lightning_module
        else:
            continue
        method = getattr(cls, "train_dataloader", None)
        if method is None or method is getattr(base, "train_dataloader", None):
            return None  # the loader comes from elsewhere (a datamodule, fit's arguments)
        source = _source_of(method)
        given = _dataloader_keyword(source) if source is not None else None
        self_held = isinstance(given, ast.Attribute) and dotted(given.value) == "self"
        attribute = given.attr if isinstance(given, ast.Attribute) and self_held else None
        workers = int_or_none(given, None)
        if attribute is not None and on_class:
            # Each instance sets its own (``__init__``): a class attribute would be hidden.
            attribute = None
        elif attribute is not None:
            held = vars(value).get(attribute)  # instance dict only: no property is run
            workers = held if isinstance(held, int) and not isinstance(held, bool) else None
        return LiveDataHook(
            name, kind, cls.__name__, workers, source, attribute, framework="Lightning",
            on_class=on_class,
        )  # fmt: skip
    return None


def _source_of(function: Any) -> str | None:
    """Source of a function from linecache (IPython registers every cell there); no code runs."""
    import inspect
    import textwrap

    try:
        return textwrap.dedent(inspect.getsource(function))
    except (OSError, TypeError):
        return None


def _dataloader_keyword(source: str) -> ast.expr | None:
    try:
        tree = ast.parse(source)  # a method's source, not the cell: not the cell's one parse
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and (method_of(node) or dotted(node.func)) == "DataLoader":
            return keyword_value(node, "num_workers") or ast.Constant(0)  # torch's default
    return None


def _held(obj: Any, name: str, default: Any = None) -> Any:
    """``obj.name`` from the object's own ``__dict__``: no property or ``__getattr__`` runs."""
    try:
        return object.__getattribute__(obj, "__dict__").get(name, default)
    except AttributeError:
        return default


def _wrapped_loader(value: Any, data: Any) -> Any:
    """The DataLoader a wrapper holds in its own ``__dict__`` (accelerate's ``DataLoaderShard``
    keeps it as ``base_dataloader`` and passes ``isinstance`` only through a ``__class__``
    property of its own, which we never run), or None."""
    base = _held(value, "base_dataloader")
    return base if base is not None and issubclass(type(base), data.DataLoader) else None


def _loader(
    name: str, loader: Any, data: Any, unread: list[str], wrapper: type | None = None
) -> LiveLoader:
    # DataLoader keeps its settings in the instance's __dict__; a subclass's properties (and an
    # accelerate wrapper's __getattr__) are never run.
    sampler = _held(loader, "sampler")
    # shuffle=True builds exactly RandomSampler(dataset) (no replacement, no num_samples).
    plain_random = (
        type(sampler) is data.RandomSampler
        and not _held(sampler, "replacement", False)
        and _held(sampler, "_num_samples") is None
    )
    if plain_random:
        shuffle: bool | None = True
    elif type(sampler) is data.SequentialSampler:
        shuffle = False
    else:
        shuffle = None
    batch_sampler = _held(loader, "batch_sampler")
    custom_batch = batch_sampler is not None and type(batch_sampler) is not data.BatchSampler
    collate = _held(loader, "collate_fn")
    # DataLoader picks default_collate (batched) or default_convert (batch_size=None) itself.
    default_collates = (
        getattr(data, "default_collate", None),
        getattr(data, "default_convert", None),
    )
    dataset = _held(loader, "dataset")
    workers = _held(loader, "num_workers", 0)
    batch_size = _held(loader, "batch_size")
    return LiveLoader(
        name=name,
        num_workers=workers if type(workers) is int else 0,
        pin_memory=_held(loader, "pin_memory") is True,
        persistent_workers=_held(loader, "persistent_workers") is True,
        batch_size=batch_size if type(batch_size) is int else None,
        drop_last=_held(loader, "drop_last") is True,
        shuffle=shuffle,
        custom_batch_sampler=custom_batch,
        custom_collate=all(collate is not d for d in default_collates),
        worker_init_fn=_held(loader, "worker_init_fn") is not None,
        generator=_held(loader, "generator") is not None,
        iterable_dataset=issubclass(type(dataset), data.IterableDataset),
        dataset_type=type(dataset).__name__,
        dataset_len=_torch_defined_len(dataset, data, unread),
        loader_class=f"{(wrapper or type(loader)).__module__}.{(wrapper or type(loader)).__qualname__}",
        whole_batch_fetch=whole_batch_fetch(loader, data),
    )


def whole_batch_fetch(loader: Any, data: Any) -> bool:
    """The dataset builds each batch in one call, not sample by sample: the loader does not
    batch (``batch_size=None``) and its sampler is a ``BatchSampler`` (each index it yields is a
    batch's list, handed to ``__getitem__`` at once: torch's documented batched indexing), or the
    dataset's own class defines ``__getitems__`` (the DataLoader then calls it with each batch's
    indices). Read from the objects' and classes' ``__dict__``: none of the user's code runs."""
    sampler = _held(loader, "sampler")
    unbatched = _held(loader, "batch_size") is None and _held(loader, "batch_sampler") is None
    if unbatched and isinstance(sampler, data.BatchSampler):
        return True
    dataset = _held(loader, "dataset")
    # torch's own Subset/StackDataset/ConcatDataset forward it, or read sample by sample.
    return any(
        "__getitems__" in vars(cls) and not cls.__module__.startswith("torch.")
        for cls in type(dataset).__mro__
    )


def _torch_defined_len(dataset: Any, data: Any, unread: list[str]) -> int | None:
    """The dataset's length where torch's own class knows it without the user's code.

    The report runs after the cell: it must call none of the user's code (a ``__len__`` that
    raises, prints or reads a file would change what the cell did, or fail a good cell). torch's
    containers that delegate (``ChainDataset`` sums ``len()`` of the user's datasets) are not
    asked; those that keep their length (``ConcatDataset``'s cumulative sizes, ``Subset``'s
    indices, ``TensorDataset``'s first tensor, ``StackDataset``) are read from their fields.
    The type of what is left unread for its own code (the delegating container, a tensor
    subclass with its own dispatch) goes to ``unread``.
    """
    import torch

    kind = type(dataset)
    length_fn = getattr(kind, "__len__", None)

    def is_torchs(cls_name: str) -> bool:
        cls = getattr(data, cls_name, None)
        return cls is not None and issubclass(kind, cls) and length_fn is cls.__len__

    if is_torchs("ChainDataset"):
        unread.append(kind.__name__)
        return None
    if is_torchs("ConcatDataset"):
        sizes = _held(dataset, "cumulative_sizes")
        return sizes[-1] if type(sizes) is list and sizes and type(sizes[-1]) is int else None
    if is_torchs("StackDataset"):
        length = _held(dataset, "_length")
        return length if type(length) is int else None
    if is_torchs("Subset"):
        indices = _held(dataset, "indices")
        if type(indices) in (list, tuple, range):
            return len(indices)
        return _tensor_len(indices, torch, unread)
    if is_torchs("TensorDataset"):
        tensors = _held(dataset, "tensors")
        if type(tensors) is tuple and tensors:
            return _tensor_len(tensors[0], torch, unread)
    return None


def _tensor_len(tensor: Any, torch: Any, unread: list[str]) -> int | None:
    kind = type(tensor)
    if not issubclass(kind, torch.Tensor):
        return None
    if getattr(kind, "__torch_dispatch__", None) is not torch.Tensor.__torch_dispatch__:
        unread.append(kind.__name__)
        return None  # a subclass that may compute its sizes in code of its own
    with torch._C.DisableTorchFunction():
        return int(torch.Tensor.size(tensor, 0)) if torch.Tensor.dim(tensor) > 0 else None


def _model(name: str, model: Any, torch: Any) -> LiveModel:
    # The module tree from torch's own dicts (_modules, _parameters), not parameters() or
    # modules(), which a model of the user's may override.
    modules: list[Any] = []
    paths: list[str] = []
    todo: list[tuple[str, Any]] = [("", model)]
    seen: set[int] = set()
    while todo:
        path, m = todo.pop()
        if id(m) in seen:
            continue
        seen.add(id(m))
        modules.append(m)
        paths.append(path)
        children = _held(m, "_modules")
        if type(children) is dict:
            todo.extend(
                (f"{path}.{k}" if path else str(k), c)
                for k, c in dict.items(children)
                if c is not None
            )
    # Each parameter once (shared weights are one tensor), in the order the modules hold them.
    params: dict[int, Any] = {}
    for m in modules:
        own = _held(m, "_parameters")
        for p in dict.values(own) if type(own) is dict else ():
            if p is not None:
                params.setdefault(id(p), p)
    convs = (torch.nn.modules.conv._ConvNd,)
    device = None
    if params:
        with torch._C.DisableTorchFunction():
            device = str(torch.Tensor.device.__get__(next(iter(params.values()))))
    kind = type(model)
    return LiveModel(
        name=name,
        type_name=kind.__name__,
        training=_held(model, "training") is True,
        data_parallel=issubclass(kind, torch.nn.DataParallel),
        compiled=kind.__name__ == "OptimizedModule",
        has_conv=any(issubclass(type(m), convs) for m in modules),
        parameter_tensors=len(params),
        device=device,
        mode_blind=all(_mode_blind(type(m), torch) for m in modules),
        parametrized=parametrized_tensors(zip(paths, modules, strict=True), torch),
    )


def _mode_blind(kind: type, torch: Any) -> bool:
    """A layer class of torch.nn's own whose forward never reads ``training``."""
    nn = torch.nn
    reads_mode = (
        nn.modules.dropout._DropoutNd,
        nn.modules.batchnorm._NormBase,  # batch and instance norm (running statistics)
        nn.RReLU,
        nn.RNNBase,
        nn.MultiheadAttention,
        nn.Transformer,
        nn.TransformerEncoder,
        nn.TransformerDecoder,
        nn.TransformerEncoderLayer,
        nn.TransformerDecoderLayer,
    )
    return kind.__module__.startswith("torch.nn.modules.") and not issubclass(kind, reads_mode)


def _optimizer(name: str, optimizer: Any) -> LiveOptimizer:
    defaults = _held(optimizer, "defaults", {})
    defaults = defaults if type(defaults) is dict else {}
    fused = defaults.get("fused")
    foreach = defaults.get("foreach")
    return LiveOptimizer(
        name=name,
        type_name=type(optimizer).__name__,
        fused=fused if isinstance(fused, bool) else None,
        foreach=foreach if isinstance(foreach, bool) else None,
        one_pass=type(optimizer).__name__ == "SGD"
        and defaults.get("momentum") == 0
        and defaults.get("weight_decay") == 0,
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
