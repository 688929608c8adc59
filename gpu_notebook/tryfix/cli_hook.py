"""``gpucheck run --try-fixes [N] [--try-budget S]``: the options, and the step after the
report is built (the trials go into the report, so ``--json`` carries them)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from gpu_notebook.records import Report, TrialSaid
from gpu_notebook.tryfix import DEFAULT_ROUNDS, RUN_STEPS_S

__all__ = ["DEFAULT_BUDGET_S", "DEFAULT_STEPS", "add_options", "with_trials"]

DEFAULT_STEPS = 30
DEFAULT_BUDGET_S = 600.0


def add_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--try-fixes",
        metavar="N",
        nargs="?",
        type=_positive_int,
        const=DEFAULT_STEPS,
        default=None,
        help="after the report, run the script again to its warm-up + at least N measured "
        f"steps (default {DEFAULT_STEPS}; more where they cover under about "
        f"{RUN_STEPS_S:g} s) as it is and with each offered fix applied to a private copy, "
        "interleaved; say per fix whether the measured step times verify it",
    )
    p.add_argument(
        "--try-budget",
        metavar="S",
        type=float,
        default=DEFAULT_BUDGET_S,
        help=f"seconds the --try-fixes runs may take in all (default {DEFAULT_BUDGET_S:.0f}); "
        "the fixes that do not fit are named as skipped",
    )

    p.add_argument(
        "--try-rounds",
        metavar="R",
        type=_positive_int,
        default=DEFAULT_ROUNDS,
        help=f"runs of the script as it is and of each fix (default {DEFAULT_ROUNDS}; at least 2)",
    )


def _positive_int(value: str) -> int:
    n = int(value)
    if n < 2:
        raise argparse.ArgumentTypeError("needs at least 2")
    return n


def with_trials(
    report: Report,
    script: Path,
    script_args: Sequence[str],
    args: argparse.Namespace,
    word: Callable[[TrialSaid], str],
) -> Report:
    """The report with its offered fixes measured (``report.try_fixes``, its records not yet
    worded: the caller's views word them); ``word`` words the progress lines. Under torchrun
    rank 0 decides and the other ranks run what it posts (``tryfix.distributed``)."""
    from gpu_notebook.tryfix.distributed import follow, job_runner, world
    from gpu_notebook.tryfix.trials import TrialSettings, try_fixes

    settings = TrialSettings(
        steps=int(args.try_fixes), budget_s=float(args.try_budget), rounds=int(args.try_rounds)
    )
    quiet = bool(getattr(args, "quiet", False))

    def say(msg: TrialSaid) -> None:
        if not quiet:
            print(f"gpucheck: {word(msg)}", file=sys.stderr, flush=True)

    _release_device_memory()
    rank, _size = world()
    if rank != 0:
        return dataclasses.replace(report, try_fixes=follow(script, script_args, settings))
    runner = job_runner(report, settings)
    try:
        result = try_fixes(report, script, script_args, settings, runner=runner, progress=say)
    finally:
        if runner is not None:
            runner.done()  # type: ignore[attr-defined]
    return dataclasses.replace(report, try_fixes=result)


def _release_device_memory() -> None:
    """The measured run's tensors are gone with its module, but torch's caching allocator still
    holds their GPU memory in this process: the trial processes need it."""
    import gc

    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()
