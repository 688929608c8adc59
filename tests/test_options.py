"""One option table: %%gpucheck and `gpucheck run` accept the same measuring options, with the
defaults of CaptureOptions, and --gpu names the card a CPU run is estimated on."""

from __future__ import annotations

import pytest
from IPython.core.error import UsageError

from gpu_notebook.capture.session import CaptureOptions
from gpu_notebook.cli import build_parser
from gpu_notebook.magic import GpuCheckMagics
from gpu_notebook.options import MEASURE_OPTIONS, capture_options
from gpu_notebook.views.text import render_text
from tests import cells


def _flags(parser: object) -> set[str]:
    return {s for a in parser._actions for s in a.option_strings}  # type: ignore[attr-defined]


def test_the_magic_and_the_cli_take_every_option_of_the_table():
    table = {f for spec in MEASURE_OPTIONS for f in spec.flags}
    magic_parser = GpuCheckMagics.gpucheck.parser  # built by IPython's magic_arguments
    run_parser = build_parser()._subparsers._group_actions[0].choices["run"]  # type: ignore[union-attr]
    assert table <= _flags(magic_parser)
    assert table <= _flags(run_parser)


def test_defaults_are_the_capture_options_defaults():
    args = build_parser().parse_args(["run", "train.py"])
    assert capture_options(args) == CaptureOptions()


def test_gpu_estimate_on_a_named_card_in_the_magic(ip):
    ip.run_cell_magic("gpucheck", "-q --gpu h100 -o _gpu_rep", cells.MLP_LOADER.format(workers=0))
    rep = ip.user_ns["_gpu_rep"]
    assert rep.gpu_estimate is not None and "H100" in rep.gpu_estimate.gpu
    assert "Would a GPU help?" in render_text(rep)


def test_an_unknown_card_is_a_usage_error_before_the_cell_runs(ip):
    ip.user_ns["_ran"] = False
    with pytest.raises(UsageError, match="--gpu must be one of"):
        ip.run_cell_magic("gpucheck", "--gpu nope", "_ran = True")
    assert ip.user_ns["_ran"] is False


def test_the_profiled_steps_go_by_one_name_from_the_option_to_the_record():
    """``-s/--steps`` is ``profile_steps`` in the parsed arguments, the capture's options, the
    profiler door and every window's record (it was ``steps``, ``profile_steps`` and
    ``requested_steps`` on the way down; ``-w/--warmup`` is ``warmup_steps`` once parsed)."""
    import dataclasses
    import inspect

    from gpu_notebook.capture.profiler import ProfilerWindow
    from gpu_notebook.records import ProfileWindow

    (steps,) = (s for s in MEASURE_OPTIONS if "--steps" in s.flags)
    assert steps.kwargs["dest"] == "profile_steps"
    args = build_parser().parse_args(["run", "-s", "7", "-w", "2", "train.py"])
    assert capture_options(args).profile_steps == 7 and capture_options(args).warmup_steps == 2
    assert "profile_steps" in inspect.signature(ProfilerWindow).parameters
    for record in (CaptureOptions, ProfileWindow):
        names = {f.name for f in dataclasses.fields(record)}
        assert {"profile_steps", "warmup_steps"} <= names, record
        assert not names & {"steps", "requested_steps"}, record
