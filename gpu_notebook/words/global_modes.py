"""Words of the process-wide modes rule family (rules/global_modes.py)."""

from __future__ import annotations

from gpu_notebook.formatting import fmt_bytes, fmt_share
from gpu_notebook.rules.global_modes import (
    DeterministicOn,
    Float64Default,
    OneThread,
    ProfilerInCell,
    ProfilerOnBefore,
)
from gpu_notebook.words.common import Words, worder, words

_REPRODUCIBILITY = "PyTorch notes: Reproducibility (torch.use_deterministic_algorithms)"


def _where(cell_line: int | None, outside: str) -> str:
    if cell_line is not None:
        return f"line {cell_line} of this cell sets it"
    return f"no line of this cell sets it: {outside}"


@worder(DeterministicOn)
def deterministic_on(s: DeterministicOn) -> Words:
    if s.cudnn_only:
        flag = "torch.backends.cudnn.deterministic = True"
        off = "torch.backends.cudnn.deterministic = False"
    else:
        flag = "torch.use_deterministic_algorithms(True" + (
            ", warn_only=True)" if s.warn_only else ")"
        )
        off = "torch.use_deterministic_algorithms(False)"
    outside = "an earlier cell, an imported module or a library did"
    evidence = [
        f"on while the loop ran (set outside this cell): `{flag}`, found on in {s.backwards_on} "
        f"of the {s.backwards_read} backward calls read"
        if s.cell_line is None
        else f"`{flag}` was on in {s.backwards_on} of the {s.backwards_read} backward calls read",
        _where(s.cell_line, outside),
    ]
    if s.ops:
        evidence.append(
            "operators of the trace that it changes on a GPU (a sorted or serial fallback, or "
            "only cuDNN's deterministic algorithms): " + ", ".join(s.ops[:6])
        )
        evidence.append("their cost in deterministic form is not measured apart: no bound")
    elif s.gpu:
        evidence.append("no operator of the trace is one it changes: no cost seen")
    else:
        evidence.append(
            "a CPU run: its operators run the same with it on; it matters on a GPU (scatter, "
            "index_add, embedding backward, cuDNN convolutions): no cost seen here"
        )
    if s.warn_only:
        evidence.append("warn-only: an operator without a deterministic form warns and runs")
    act = f"line {s.cell_line}" if s.cell_line is not None else "where it is set"
    act = "at " + act if s.cell_line is not None else act
    return words(
        "Deterministic algorithms are "
        + (
            "on while the loop ran (set outside this cell)"
            if s.cell_line is None
            else "on for the loop"
        ),
        evidence,
        f"If bit-exact reruns are not needed for this training, turn it off {act}, or call "
        f"{off} before the loop; no change to this cell is offered (the mode is the "
        "process's, and outlives the cell).",
        _REPRODUCIBILITY,
    )


@worder(Float64Default)
def float64_default(s: Float64Default) -> Words:
    outside = "an earlier cell's torch.set_default_dtype(torch.float64), or a module's, did"
    evidence = [
        f"on while the loop ran (set outside this cell): torch.get_default_dtype() was "
        f"torch.float64 in {s.backwards_on} of the {s.backwards_read} backward calls read"
        if s.cell_line is None
        else f"torch.get_default_dtype() was torch.float64 in {s.backwards_on} of the "
        f"{s.backwards_read} backward calls read",
        _where(s.cell_line, outside),
    ]
    if s.double_bytes is not None and s.param_bytes:
        evidence.append(
            f"{fmt_bytes(s.double_bytes)} of the {fmt_bytes(s.param_bytes)} of trained parameters are "
            "float64" + (": the model computes in double precision" if s.double_bytes else "")
        )
    if s.kernel_share:
        evidence.append(f"float64 kernels took {fmt_share(s.kernel_share)} of the GPU window")
    evidence.append(
        "float64 moves twice the bytes of float32 and runs at a fraction of its rate on GPUs; "
        "not measured apart: no bound"
    )
    return words(
        "The default dtype is float64 while the loop ran"
        + (" (set outside this cell)" if s.cell_line is None else ""),
        evidence,
        "Unless the training needs double precision: call torch.set_default_dtype(torch.float32) "
        "where float64 is set, before the model and its data are made (or convert them: "
        "model.float(), and make the optimizer again); no change to this cell is offered (its "
        "parameters are made already)."
        if s.cell_line is None
        # The cell's own line: what it makes after that line follows it, so that line is
        # where to act (no patch: the dtype is the process's, and outlives the cell).
        else "Unless the training needs double precision: set torch.float32 on line "
        f"{s.cell_line} instead (what the cell makes after it follows; for what it made before, "
        "model.float() and the optimizer made again); no change to this cell is offered (the "
        "default dtype is the process's, and outlives the cell).",
        "PyTorch docs: torch.set_default_dtype",
    )


@worder(ProfilerOnBefore)
def profiler_on_before(s: ProfilerOnBefore) -> Words:
    return words(
        "A torch profiler was already recording while the loop ran (set outside this cell)",
        [
            "on when the cell started: an earlier cell's profiler (prof.start() or an unclosed "
            "`with torch.profiler.profile()`), or a library's, was still recording",
            f"it records every operator of the {s.steps} steps: the step times and phases above "
            "include its cost, not measured apart (it is not gpucheck's to stop)",
            "gpucheck's own profiler stepped aside (one profiler session at a time): no trace, "
            "no operator or kernel figures; step timing and sampling only",
        ],
        "Stop it where it was started (prof.stop(), or leave its `with` block), then measure "
        "again; no change to this cell is offered.",
        "PyTorch docs: torch.profiler.profile (start/stop)",
    )


@worder(ProfilerInCell)
def profiler_in_cell(s: ProfilerInCell) -> Words:
    where = (
        f"line {s.line}: the cell starts its own torch profiler"
        if s.line is not None
        else "the cell (or a function it calls) started a torch profiler of its own"
    )
    return words(
        "The cell's own torch.profiler recorded while the loop ran",
        [
            where,
            "it records every operator of the steps it covers and gathers them when it stops "
            "(on a schedule, at each cycle's end; key_averages() and export_chrome_trace() read "
            "them after): the step times, the phases and the time around the loop include its "
            f"cost over the {s.steps} steps, not measured apart",
            "gpucheck's own profiler stepped aside (one profiler session at a time): no trace of "
            "its own, no operator or kernel figures; step timing and sampling only",
        ],
        "Nothing to change in the training: read its trace, then measure the loop without it "
        "(or on a schedule of a few active steps, repeat=1) for the step time without its cost; "
        "no change to this cell is offered.",
        "PyTorch docs: torch.profiler.profile (schedule, on_trace_ready)",
    )


@worder(OneThread)
def one_thread(s: OneThread) -> Words:
    outside = (
        "an earlier cell's torch.set_num_threads(1), or OMP_NUM_THREADS=1 / MKL_NUM_THREADS=1 "
        "set before torch was imported, did"
    )
    workers = f" beside {s.workers} DataLoader worker(s)" if s.workers else ""
    return words(
        "torch computes on one thread while cores stand free"
        + (" (set outside this cell)" if s.cell_line is None else ""),
        [
            f"torch.get_num_threads() was 1 after the cell; this process may use {s.cores} "
            f"cores, {s.free_cores:.1f} of them left free by other processes{workers}",
            _where(s.cell_line, outside),
            f"torch's operators (forward, backward, optimizer) took {fmt_share(s.compute_share)} "
            "of the step: a CPU-only run whose operators run on one core",
            "operators below torch's grain size do not split over threads: not measured, no bound",
        ],
        (
            f"Try torch.set_num_threads({s.target}) at the top of the cell (it stays set for "
            "the cells after it) and measure again with the same machine load."
            if s.cell_line is None
            # A call at the top would be undone by the cell's own line below it.
            else f"Try torch.set_num_threads({s.target}) on line {s.cell_line} in place of the "
            "cell's own call (it stays set for the cells after it) and measure again with the "
            "same machine load."
        ),
        "PyTorch performance tuning guide: CPU threads (torch.set_num_threads)",
    )
