"""The one vocabulary of a training cell, shared by the facts the rules read and the codemods.

Word lists and predicates over dotted names (``torch.optim.AdamW``, ``self.encoder``): which
calls build a module or an optimizer, which log, which switch autograd off. The scanner
(``cell/``, over :mod:`ast`) and the codemods (``fixes/``, over libcst) both ask here, so a
name the rule counts is a name its fix acts on. A heuristic over names, never a type check.
"""

from __future__ import annotations

from typing import Literal

LogKind = Literal["print", "logger", "tracker", "progress", "checkpoint", "collect"]

OPTIMIZER_CLASSES = frozenset(
    {"SGD", "Adam", "AdamW", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam", "RMSprop",
     "Rprop", "ASGD", "LBFGS", "SparseAdam", "Adafactor", "Muon"}
)  # fmt: skip
# torch.optim classes with a fused=True implementation, and those with foreach=True.
FUSED_OPTIMIZERS = frozenset({"Adam", "AdamW", "SGD"})
FOREACH_OPTIMIZERS = frozenset(
    {"Adam", "AdamW", "SGD", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam", "RMSprop",
     "Rprop", "ASGD"}
)  # fmt: skip

# Methods that run once, when an object is made: never a step's.
CONSTRUCTORS = frozenset({"__init__", "__post_init__", "__new__"})

# Micro-batches per optimizer step, by the keyword its framework takes: accelerate's
# ``Accelerator`` and HF's ``TrainingArguments`` (gradient_accumulation_steps), Lightning's
# ``Trainer`` (accumulate_grad_batches). A bigger batch folds them (rules/launch, fixes/).
ACCUMULATION_KEYS = ("gradient_accumulation_steps", "accumulate_grad_batches")

# Methods only an nn.Module has (zero_grad is shared with optimizers, so it proves nothing).
MODULE_METHODS = frozenset(
    {"parameters", "named_parameters", "train", "eval", "state_dict", "load_state_dict",
     "modules", "named_modules", "children", "apply", "requires_grad_",
     "register_forward_hook"}
)  # fmt: skip
# nn.* names that are not modules.
NN_NOT_MODULES = frozenset({"functional", "utils", "init", "Parameter", "parameter", "parallel"})
# Constructors that return a module from a library, by the last part of their dotted name.
MODEL_FACTORIES = frozenset({"from_pretrained", "create_model", "from_config"})
# Chained calls that return the module they were called on (``Net().to(device)``).
MODULE_CHAIN_METHODS = frozenset(
    {"to", "cuda", "cpu", "half", "float", "bfloat16", "double", "train", "eval",
     "requires_grad_", "to_empty"}
)  # fmt: skip
MODEL_WORDS = frozenset({"model", "net", "network", "encoder", "decoder", "backbone", "classifier"})

# Context managers and decorators that switch autograd off (set_grad_enabled: with False).
GRAD_MODES = frozenset({"no_grad", "inference_mode", "set_grad_enabled"})

# Logging: module prefixes of logging calls, tracker methods (wandb.log, writer.add_scalar,
# tracker.log_dict) and progress-bar methods.
LOG_PREFIXES = ("logging.", "logger.", "log.", "wandb.", "mlflow.", "neptune.", "comet")
TRACKER_METHODS = frozenset(
    {"log", "log_metric", "log_metrics", "add_scalar", "add_scalars", "add_histogram",
     "add_image", "log_dict"}
)  # fmt: skip
# Modules whose ``log`` is the logarithm (``math.log(100)``, ``torch.log(p)``, ``np.log(x)``),
# not a tracker's: a per-step ``torch.log`` of a batch value is neither logging nor a read.
MATH_MODULES = frozenset({"math", "cmath", "torch", "np", "numpy", "jnp", "jax", "scipy", "sympy"})
# A LightningModule's own logging (``self.log``, ``pl_module.log_dict``): Lightning's logger.
MODULE_LOG_METHODS = frozenset({"log", "log_dict"})
PROGRESS_METHODS = frozenset({"set_postfix", "set_postfix_str", "set_description", "write"})
# Progress-bar methods that redraw the bar on every call unless told ``refresh=False``: tqdm's
# set_postfix/set_description default to refresh=True, which skips the bar's own mininterval
# (0.1 s), so a call every step writes the line to the terminal every step.
REDRAW_METHODS = frozenset(
    {"set_postfix", "set_postfix_str", "set_description", "set_description_str"}
)
# ``sys.stdout.write("\rstep ...")`` is a print by hand (a progress line redrawn in place).
# ``clear_output(wait=True)`` is the other half of a redraw (``clear_output(wait=True);
# display(...)``): it flushes the cell's streams (a wait for the kernel's output thread) and
# sends a message every call, and the pair is one redraw: gated apart, a clear left every step
# still pays its flush and message, and the redraw's cost stays in the loop.
PRINT_CALLS = frozenset(
    {"print", "display", "pprint", "sys.stdout.write", "sys.stderr.write", "clear_output",
     "display.clear_output", "IPython.display.clear_output", "display.display",
     "IPython.display.display"}
)  # fmt: skip
# Checkpoint writes: a copy of the model's (and optimizer's) state serialised to disk. Inside the
# step loop with no ``if`` around them, every step pays the serialisation and the write, which
# no change to the model shortens (torch.compile, a bigger device): save every N steps.
SAVE_CALLS = frozenset(
    {"torch.save", "np.save", "np.savez", "numpy.save", "numpy.savez", "save_file",
     "safetensors.torch.save_file"}
)  # fmt: skip
SAVE_METHODS = frozenset({"save_pretrained", "save_state", "save_checkpoint", "save_model"})
# Whole-process housekeeping put in a step "to free memory" (unseen round 19): a full garbage
# collection walks every Python object the process holds (hundreds of thousands once torch is
# imported), and a caching allocator's cache emptied every step is refilled by the next step's
# allocations (cudaFree/cudaMalloc, each a device sync). Gated every N steps as a save is.
COLLECT_CALLS = frozenset(
    {"gc.collect", "torch.cuda.empty_cache", "torch.cuda.ipc_collect", "torch.mps.empty_cache",
     "torch.xpu.empty_cache"}
)  # fmt: skip

# Tensor methods that copy to a device (``x.to(device)``, ``x.cuda()``), and those that hand the
# host a number or an array (``loss.item()``): a read of a device value, a sync.
COPY_METHODS = frozenset({"to", "cuda"})

# Methods that store their argument in a container that outlives the step: a loss appended keeps
# its graph alive (the memory rule), a read appended behind a step gate keeps one value in N.
KEEPING_METHODS = frozenset(
    {"append", "extend", "add", "insert", "put", "appendleft", "extendleft"}
)
# Gradient clipping, which reads the gradients: a GradScaler must unscale them first.
CLIP_FUNCTIONS = frozenset({"clip_grad_norm_", "clip_grad_value_"})
# Words in a callable's name that compute the loss (``loss_fn``, ``criterion``), lower case.
LOSS_WORDS = ("loss", "criterion")
# Tensor methods that hand a value to Python (a sync on a device tensor, a graph break).
HOST_READ_METHODS = frozenset({"item", "tolist", "numpy"})

# torch dtypes by their last name: ``.to(torch.float16)`` converts, it does not copy to a device.
DTYPE_WORDS = frozenset(
    {"float", "float16", "half", "bfloat16", "float32", "float64", "double", "int", "int8",
     "int16", "int32", "int64", "long", "uint8", "bool", "complex64", "complex128"}
)  # fmt: skip


# The backend flags a cell sets (cell/setup.flags reads them, fixes/codemods_model.backend_flags sets them).
CUDNN_BENCHMARK = "torch.backends.cudnn.benchmark"
TF32_FLAGS = ("torch.backends.cuda.matmul.allow_tf32", "torch.backends.cudnn.allow_tf32")
MATMUL_PRECISION = "torch.set_float32_matmul_precision"


def last(name: str | None) -> str:
    """``AdamW`` for ``torch.optim.AdamW``; "" for None."""
    return "" if name is None else name.rsplit(".", 1)[-1]


def model_like(name: str) -> bool:
    """``model``, ``net``, ``self.encoder``, ``teacher_model``: names people give modules."""
    part = last(name).lower()
    return part in MODEL_WORDS or part.endswith(("model", "_net"))


def is_optimizer_class(name: str) -> bool:
    """``torch.optim.AdamW``, ``optim.SGD`` or a bare ``AdamW``."""
    parts = name.split(".")
    return parts[-1] in OPTIMIZER_CLASSES and (len(parts) == 1 or parts[-2] == "optim")


def builds_module(name: str, module_classes: set[str] | frozenset[str]) -> bool:
    """The called name builds an nn.Module: a class of the cell's own deriving from Module,
    ``nn.Linear``, ``torch.nn.Sequential``, a model factory, ``torchvision.models.resnet18``."""
    parts = name.split(".")
    if parts[-1] in module_classes:
        return True
    if "nn" in parts[:-1]:
        return not any(part in NN_NOT_MODULES for part in parts) and parts[-1][:1].isupper()
    return parts[-1] in MODEL_FACTORIES or "models" in parts[:-1]


def log_kind(name: str | None, method: str | None) -> LogKind | None:
    """What a call named ``name`` (method ``method``) logs with: "print", "logger", "tracker",
    "progress", "checkpoint" (a state written to disk: per-step work for humans as a log
    is) or "collect" (a garbage collection or an allocator cache emptied: housekeeping, gated
    as a log is); None for a call that does not log."""
    if name in PRINT_CALLS:
        return "print"
    if name in SAVE_CALLS or method in SAVE_METHODS:
        return "checkpoint"
    if name in COLLECT_CALLS:
        return "collect"
    if name is not None and name.startswith(LOG_PREFIXES):
        return "logger"
    if method in TRACKER_METHODS:
        return "tracker"
    if (method in PROGRESS_METHODS and method != "write") or name == "tqdm.write":
        return "progress"
    return None


# Datasets whose samples are views of tensors already in memory: a worker has nothing slow to hide.
IN_MEMORY_DATASETS = frozenset({"TensorDataset", "StackDataset"})


# Lightning's hooks that may log but run once an epoch, at the start or end, or in validation or
# test (lightning/pytorch/trainer/connectors/logger_connector/fx_validator.py, Lightning 2.x:
# the others that may log, training_step, on_train_batch_*, on_before/after_backward,
# on_before_optimizer_step, optimizer_step, on_before_zero_grad..., run on every training step,
# a LightningModule's and a Callback's alike).
OTHER_HOOKS = frozenset({
    "on_train_start", "on_validation_start", "on_test_start", "on_train_epoch_start",
    "on_train_epoch_end", "on_validation_epoch_start", "on_validation_epoch_end",
    "on_test_epoch_start", "on_test_epoch_end", "on_validation_batch_start",
    "on_validation_batch_end", "on_test_batch_start", "on_test_batch_end", "validation_step",
    "test_step",
})  # fmt: skip
