"""Codemods on the model and its surroundings: torch.compile, backend flags, fused optimizers, DDP."""

from __future__ import annotations

import libcst as cst

from gpu_notebook.cell.names import (
    bool_or_none,
    dotted,
    has_star_kwargs,
    keyword_value,
    position,
    receiver_of,
    walk,
)
from gpu_notebook.cell.words import (
    CUDNN_BENCHMARK,
    FOREACH_OPTIMIZERS,
    FUSED_OPTIMIZERS,
    MATMUL_PRECISION,
    TF32_FLAGS,
)
from gpu_notebook.fixes.cst_tools import (
    CodemodResult,
    Declined,
    Edited,
    Replacement,
    Tree,
    after_imports_index,
    assigned_names,
    expression,
    facts_of,
    nodes_of,
    only_call,
    only_small,
    remove_keyword,
    replace_nodes,
    set_keyword,
    statement,
    training_loops,
    tree_of,
    with_torch_import,
)
from gpu_notebook.fixes.records import Fix


def torch_compile(
    module: cst.Module,
    *,
    model_name: str | None = None,
    mode: str | None = None,
    backend: str | None = None,
) -> CodemodResult:
    """Add ``model = torch.compile(model)`` after the line that creates the model.

    The line goes after the creation and after the model method calls that directly follow it
    (``model.to(device)``, ``model.load_state_dict(...)``): a compiled module's state_dict keys
    gain an ``_orig_mod.`` prefix, so loading a checkpoint must happen before compiling.
    """
    for text, label in ((mode, "mode"), (backend, "backend")):
        if text is not None and (not text or '"' in text or "\\" in text):
            raise ValueError(f"{label} must be a plain non-empty string, not {text!r}")
    facts = facts_of(module)
    if facts.compiled:  # the rule's own reading: it proposed no compile then
        return Declined("this cell already calls torch.compile")
    arguments = [
        c for c in nodes_of(module, list(facts.training_arguments)) if isinstance(c, cst.Call)
    ]
    if arguments and model_name is None and mode is None and backend is None:
        # An HF Trainer compiles the model it trains when its arguments say so (the switch
        # its documentation gives); the model itself often comes from an earlier cell.
        if any(has_star_kwargs(c) for c in arguments):
            return Declined(
                "the TrainingArguments come from **kwargs; set torch_compile=True where they "
                "are defined"
            )
        edits: dict[cst.CSTNode, Replacement] = dict.fromkeys(arguments, _compile_argument)
        return Edited(replace_nodes(module, edits), "TrainingArguments(torch_compile=True)")
    name = model_name or facts.trained_model()
    if name is None:
        return Declined(
            "cannot tell which name holds the model (no optimizer over model.parameters() "
            "in this cell); add `model = torch.compile(model)` where your model is created"
        )
    tree = tree_of(module)
    # The last ``name = <call>`` outside functions, classes and loops (the rule's reading).
    found = nodes_of(module, [node for target, node in facts_of(module).created if target == name])
    creation = tree.statement_of(found[-1]) if found else None
    inside = _made_in_the_loops_function(tree, module, name)
    if inside is not None:
        # `model = train()` binds what the training returned, after it ran: compiling there
        # never reaches the loop. The model the loop trains is the function's own.
        function, creation = inside
        if creation is None:
            return Declined(
                f"`{name}` is made inside `{function}()`, which trains it; add "
                f"`{name} = torch.compile({name})` there, after the line that makes it"
            )
    if creation is None:
        return Declined(
            f"{name} is not created in this cell (it may come from an earlier cell, and "
            f"compiling it here would compile it again on every run); add "
            f"{name} = torch.compile({name}) where it is created",
            on_script=f"{name} is not created at the top level of this script (a function or "
            f"an import makes it); add {name} = torch.compile({name}) where it is created",
        )
    anchor = _last_setup_statement(tree, creation, name)
    options = "".join(
        f', {label}="{text}"' for text, label in ((mode, "mode"), (backend, "backend")) if text
    )
    line = statement(f"{name} = torch.compile({name}{options})\n")

    def insert(stmt: cst.BaseStatement) -> cst.FlattenSentinel[cst.BaseStatement]:
        return cst.FlattenSentinel([stmt, line])

    patched = with_torch_import(module, {anchor: insert})
    return Edited(patched, name + options.replace('"', ""))


def _made_in_the_loops_function(
    tree: Tree, module: cst.Module, name: str
) -> tuple[str, cst.BaseStatement | None] | None:
    """Where a step loop runs in a function that binds ``name`` itself (``def train(): model =
    Net(); ... for x, y in loader: ...``): the function's name, and its last ``name = <call>``
    among the statements above the loop (None: it binds the model some other way). None where
    the loop trains a model it is handed (a parameter or a global)."""
    for loop in training_loops(module):
        function = tree.nearest(loop, cst.FunctionDef)
        if not isinstance(function, cst.FunctionDef):
            continue
        block = function.body
        if not isinstance(block, cst.IndentedBlock):
            continue
        bound = any(
            isinstance(node, cst.Name) and node.value == name
            for target in walk(function)
            if isinstance(target, cst.AssignTarget)
            for node in walk(target.target)
        )
        if not bound or any(
            isinstance(node, cst.Global) and name in {n.name.value for n in node.names}
            for node in walk(function)
        ):
            continue
        top = loop
        while tree.parent.get(top) is not block:
            top = tree.parent[top]
        above = list(block.body)[: list(block.body).index(top)]
        made = [
            stmt
            for stmt in above
            if any(t == name and isinstance(v, cst.Call) for t, v in assigned_names(stmt))
        ]
        return function.name.value, (made[-1] if made else None)
    return None


def _compile_argument(call: cst.Call) -> cst.Call:
    return set_keyword(call, "torch_compile", cst.Name("True"))


TORCH_COMPILE = Fix(
    "torch_compile",
    "Compile the model with torch.compile",
    (
        "Many small kernels leave the GPU idle while Python launches the next one.",
        "torch.compile fuses them into fewer kernels; the first steps are slow: they compile.",
    ),
    "https://pytorch.org/docs/stable/generated/torch.compile.html",
    torch_compile,
)


def _last_setup_statement(tree: Tree, creation: cst.BaseStatement, name: str) -> cst.BaseStatement:
    anchor = creation
    for stmt in tree.around(creation)[1]:
        if not _configures(stmt, name):
            break
        anchor = stmt
    return anchor


def _configures(stmt: cst.BaseStatement, name: str) -> bool:
    """``model.to(device)``, ``model.load_state_dict(...)``, ``model = model.to(device)``."""
    if only_small(stmt) is None:
        return False
    call = only_call(stmt)
    if call is not None:
        return dotted(receiver_of(call)) == name
    return any(
        target == name and isinstance(value, cst.Call) and dotted(receiver_of(value)) == name
        for target, value in assigned_names(stmt)
    )


def backend_flags(
    module: cst.Module, *, cudnn_benchmark: bool = True, tf32: bool = True
) -> CodemodResult:
    """Turn on the cuDNN autotuner and/or TF32 math right after the cell's imports.

    A flag the cell already sets to False is flipped in place (the fix is about it). The
    autotuner is not added when the cell asks for deterministic cuDNN: benchmark mode picks
    algorithms by timing, which breaks run-to-run reproducibility.
    """
    if not (cudnn_benchmark or tf32):
        raise ValueError("backend_flags needs cudnn_benchmark or tf32 (or both)")
    found = [f for f in facts_of(module).flags if f.node is not None]
    existing = {f.name: f.value for f in sorted(found, key=lambda f: position(f.node))}
    wanted: list[str] = []
    if cudnn_benchmark and existing.get("torch.backends.cudnn.deterministic") is not True:
        wanted.append(CUDNN_BENCHMARK)
    if tf32:
        wanted.extend(TF32_FLAGS)
    if not wanted:
        return Declined(
            "this cell asks for deterministic cuDNN (torch.backends.cudnn.deterministic = True); "
            "the autotuner would make runs differ"
        )
    if MATMUL_PRECISION in existing:
        # The user chose a matmul precision on purpose; leave matmul TF32 to that call.
        del existing[MATMUL_PRECISION]
        existing[TF32_FLAGS[0]] = True
    missing = [flag for flag in wanted if flag not in existing]
    disabled = [flag for flag in wanted if existing.get(flag) is False]
    if not missing and not disabled:
        return Declined("this cell already sets " + ", ".join(f"{f} = True" for f in wanted))
    flipped = [f.node for f in found if f.single and f.name in disabled]
    edits: dict[cst.CSTNode, Replacement] = {
        node: lambda assign: assign.with_changes(value=cst.Name("True"))
        for node in nodes_of(module, flipped)
    }
    patched = with_torch_import(module, edits)
    body = list(patched.body)
    index = after_imports_index(body)
    body[index:index] = [statement(f"{flag} = True\n") for flag in missing]
    detail = ", ".join(
        label
        for label, on in (("cudnn.benchmark", CUDNN_BENCHMARK in wanted), ("TF32", tf32))
        if on
    )
    return Edited(patched.with_changes(body=body), detail)


BACKEND_FLAGS = Fix(
    "backend_flags",
    "cuDNN autotuner and TF32 math",
    (
        "cuDNN picks convolution algorithms by heuristics; float32 matmuls skip tensor cores.",
        "benchmark=True times the algorithms once per shape; TF32 uses tensor cores (Ampere+).",
    ),
    "https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html#enable-cudnn-auto-tuner",
    backend_flags,
)


def foreach_fused_optimizer(
    module: cst.Module, *, implementation: str = "fused", elsewhere: str = "", cells: str = ""
) -> CodemodResult:
    """Add ``fused=True`` (or ``foreach=True``) to the cell's torch.optim constructors.

    ``elsewhere``: comma-separated names of unfused optimizers the cell steps that earlier cells
    made (the rule's); a refusal names them as where to act. ``cells``: the execution number of
    the cell that made each (comma-separated, in the same order; empty where not known).

    ``fused`` exists for Adam, AdamW and SGD (CUDA, and CPU since torch 2.4); ``foreach`` for most
    optimizers. torch rejects both at once, so a ``foreach=True`` is replaced by ``fused=True``.
    Calls with ``differentiable=True`` or ``**kwargs`` are left alone.
    """
    if implementation not in ("fused", "foreach"):
        raise ValueError(f'implementation must be "fused" or "foreach", not {implementation!r}')
    classes = FUSED_OPTIMIZERS if implementation == "fused" else FOREACH_OPTIMIZERS
    found = [opt.node for opt in facts_of(module).optimizers if opt.cls in classes]
    calls: list[cst.Call] = nodes_of(module, found)
    earlier = ", ".join(f"`{n}`" for n in elsewhere.split(",") if n)
    numbers = [n for n in cells.split(",") if n.isdigit()]
    known = len(numbers) == len([n for n in elsewhere.split(",") if n]) and numbers
    where = ", ".join(f"In[{n}]" for n in dict.fromkeys(numbers)) if known else "an earlier cell"
    if not calls:
        names = ", ".join(sorted(classes)) if implementation == "foreach" else "Adam, AdamW or SGD"
        return Declined(
            f"no torch.optim {names} optimizer is created in this cell; pass "
            f"{implementation}=True where {earlier or 'it'} "
            f"{'are' if ',' in earlier else 'is'} created ({where})"
        )
    edits: dict[cst.CSTNode, Replacement] = {}
    skipped = 0
    for call in calls:
        if has_star_kwargs(call) or _is_true(call, "differentiable"):
            skipped += 1
        elif not (_is_true(call, "fused") or _is_true(call, implementation)):
            edits[call] = _use(implementation)
    if not edits and skipped:
        return Declined(
            "the optimizers here take **kwargs or differentiable=True (which fused and foreach "
            "do not support); set the option where they are configured"
        )
    already = f"{implementation}=True" + (" (or fused=True)" if implementation == "foreach" else "")
    if not edits and earlier:
        return Declined(
            f"the optimizers this cell creates already use {already}; {earlier} comes from an "
            f"earlier cell: pass {implementation}=True where it is created"
        )
    if not edits:
        return Declined(f"every optimizer in this cell already uses {already}")
    return Edited(replace_nodes(module, edits), f"{implementation}=True")


FOREACH_FUSED_OPTIMIZER = Fix(
    "foreach_fused_optimizer",
    "Fused optimizer step",
    (
        "The optimizer updates each parameter tensor with its own small kernels.",
        "fused=True updates all of them in a few kernels.",
    ),
    "https://pytorch.org/docs/stable/optim.html#algorithms",
    foreach_fused_optimizer,
)


def _is_true(call: cst.Call, name: str) -> bool:
    return bool_or_none(keyword_value(call, name), None) is True


def _use(implementation: str) -> Replacement:
    def apply(call: cst.Call) -> cst.Call:
        if implementation == "fused":
            call = remove_keyword(call, "foreach")
        return set_keyword(call, implementation, expression("True"))

    return apply


_DDP_SKETCH = """\
# train_ddp.py -- run with: torchrun --nproc_per_node=NUM_GPUS train_ddp.py
import os
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

dist.init_process_group("nccl")
rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(rank)
model = DDP(Net().to(rank), device_ids=[rank])  # was nn.DataParallel(Net())
sampler = DistributedSampler(dataset)
loader = DataLoader(dataset, batch_size=64, sampler=sampler, num_workers=4, pin_memory=True)
for epoch in range(epochs):
    sampler.set_epoch(epoch)
    for x, y in loader:
        ...  # the same training step, with x.to(rank) / y.to(rank)
dist.destroy_process_group()
"""


def dataparallel_to_ddp(module: cst.Module) -> CodemodResult:
    """Always declines: DDP needs one process per GPU, which a cell cannot rewrite itself into.

    When the cell uses ``nn.DataParallel`` the reason carries a script sketch to start from.
    """
    if not facts_of(module).data_parallel:
        return Declined("no nn.DataParallel(...) in this cell")
    return Declined(
        "DistributedDataParallel runs one process per GPU, which a notebook cell cannot become "
        "by patching; move the training into a script and start it with torchrun, e.g.:\n"
        + _DDP_SKETCH,
        on_script="DistributedDataParallel runs one process per GPU, which patching a script "
        "cannot start: replace nn.DataParallel with DDP and start it with torchrun, e.g.:\n"
        + _DDP_SKETCH,
    )


DATAPARALLEL_TO_DDP = Fix(
    "dataparallel_to_ddp",
    "DistributedDataParallel instead of DataParallel",
    (
        "DataParallel drives all GPUs from one Python thread and copies the model every step.",
        "DistributedDataParallel runs one process per GPU and overlaps gradient exchange.",
    ),
    "https://pytorch.org/tutorials/intermediate/ddp_tutorial.html",
    dataparallel_to_ddp,
)
