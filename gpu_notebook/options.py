"""The measuring options, written once: ``%%gpucheck`` and ``gpucheck run`` both build from here.

Each option is one row (flags, help, argparse keywords); defaults come from ``CaptureOptions``
itself, so the two parsers and the capture can no longer disagree. ``--gpu`` is not a capture
option: it names the card the report estimates a CPU run on (``analysis/gpu_estimate.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpu_notebook.capture.session import CaptureOptions

_DEFAULTS = CaptureOptions()


@dataclass(frozen=True)
class OptionSpec:
    flags: tuple[str, ...]
    help: str
    kwargs: dict[str, Any] = field(default_factory=dict)


def _gpu_names() -> tuple[str, ...]:
    from gpu_notebook.analysis.gpu_estimate import GPUS

    return tuple(sorted(GPUS))


MEASURE_OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec(
        ("-s", "--steps"),
        f"Training steps to record with torch.profiler after the warm-up (default: {_DEFAULTS.profile_steps}).",
        {
            "type": int,
            "default": _DEFAULTS.profile_steps,
            "dest": "profile_steps",
            "metavar": "STEPS",
        },
    ),
    OptionSpec(
        ("-w", "--warmup"),
        f"Steps to skip before recording: compilation, cudnn autotuning... (default: {_DEFAULTS.warmup_steps}).",
        {"type": int, "default": _DEFAULTS.warmup_steps},
    ),
    OptionSpec(
        ("-i", "--interval"),
        f"Seconds between GPU (NVML) and CPU (psutil) samples (default: {_DEFAULTS.interval_s}).",
        {"type": float, "default": _DEFAULTS.interval_s},
    ),
    OptionSpec(
        ("--no-profile",),
        "Do not run torch.profiler: sampling and step timing only (lowest overhead).",
        {"action": "store_true"},
    ),
    OptionSpec(
        ("--lines",),
        "Sample the Python stacks for line-level time: over as many steps as are profiled, right "
        "after the profiler window (window, default), for the whole run (all), or not at all (off).",
        {"choices": ("window", "all", "off"), "default": _DEFAULTS.lines},
    ),
    OptionSpec(
        ("--gpu",),
        "On a machine without a GPU: the card to estimate the step on (default: a100).",
        {"metavar": "NAME", "default": None},
    ),
)


def add_measure_options(add_argument: Callable[..., Any]) -> None:
    """Declare every option through ``add_argument`` (argparse's, or IPython's ``argument``)."""
    for spec in MEASURE_OPTIONS:
        add_argument(*spec.flags, help=spec.help, **spec.kwargs)


def magic_measure_arguments(func: Callable[..., Any]) -> Callable[..., Any]:
    """IPython ``@argument`` decorators for every option, in the table's order."""
    from IPython.core.magic_arguments import argument

    for spec in reversed(MEASURE_OPTIONS):
        func = argument(*spec.flags, help=spec.help, **spec.kwargs)(func)
    return func


def capture_options(args: Any) -> CaptureOptions:
    """The parsed options as a ``CaptureOptions`` (ValueError with what to do instead)."""
    return CaptureOptions(
        warmup_steps=args.warmup,
        profile_steps=args.profile_steps,
        interval_s=args.interval,
        profile=not args.no_profile,
        lines=args.lines,
    )


def target_gpu(args: Any) -> str | None:
    """``--gpu``, checked against the table (ValueError naming the known cards)."""
    name = getattr(args, "gpu", None)
    if name is None:
        return None
    key = str(name).lower()
    if key not in _gpu_names():
        raise ValueError(f"--gpu must be one of {', '.join(_gpu_names())} (got {name!r})")
    return key
