"""Process-wide modes of torch that slow every step, read live while the loop ran.

An earlier cell, an imported module or a library may switch them on; the cell's source never
shows them, so the step clock reads torch's flags as each timed backward starts
(``StepClockRecord.deterministic_backwards``...; read, never set, and nothing outlives the cell).
A mode counts when it was on in at least half of the backward calls read, as for anomaly
detection (rules/debug_apis.py).

- ``modes.deterministic``: ``torch.use_deterministic_algorithms(True)`` (or warn-only), or
  ``torch.backends.cudnn.deterministic = True`` on a GPU run. It changes only some operators:
  on a GPU, scatter/index_add/index_put with accumulation, embedding backward, cumsum, some
  pooling and upsampling backwards run a sorted or serial fallback, and cuDNN picks among its
  deterministic convolution algorithms only (PyTorch "Reproducibility" notes,
  ``torch.use_deterministic_algorithms``' list). Severity low where a GPU trace shows such
  operators, info otherwise (a CPU run's operators are the same either way; the cuDNN flag does
  nothing without a GPU, so it alone is not reported there). Not measured apart: no bound.
- ``modes.float64_default``: ``torch.get_default_dtype()`` is float64 while the loop ran (an
  earlier ``torch.set_default_dtype(torch.float64)``): every float tensor made without a dtype,
  and every parameter built then, is float64, at twice the bytes of float32 and a fraction of
  its arithmetic rate on GPUs. Severity medium where the trained parameters are float64 (the
  optimizer's, read once), info where they are not. No patch: the parameters are made already.
- ``modes.profiler_on``: a torch profiler (autograd, Kineto, emit_nvtx...) was already recording
  when the cell started (``ProfileWindow.profiler_before_cell``: ours found it on and stepped
  aside; Kineto takes one session at a time). It records every operator of every step, so each
  figure of the report carries its cost; not measured apart (it is not ours to stop). Medium.
- ``modes.profiler_in_cell``: a torch profiler the cell itself started (its ``with
  torch.profiler.profile(...)``, ``prof.start()``) recorded while the loop ran
  (``ProfileWindow.profiler_in_cell``: ours stepped aside). The user runs it on purpose; what
  it costs (every operator of the steps it records, its stop, its ``key_averages()``) is in the
  step times, the phases and the time around the loop, with nothing saying so but a note
  (unseen round 15: the time after the loop read "nothing measured says what it does", its
  cycles "make the periodic work cheaper (checkpoints...)"). Low, no bound, no patch.
- ``modes.one_thread``: torch's intra-op pool is one thread (``torch.get_num_threads()`` read at
  the cell's end: an earlier ``torch.set_num_threads(1)``, ``OMP_NUM_THREADS=1``) on a CPU-only
  run whose operators take at least ``CPU_OPS_SHARE`` of the step, while ``SPARE_CORES`` or more
  cores of those this process may use (``os.sched_getaffinity``) stood free beside its
  DataLoader workers (the others' median load subtracted). Small operators do not parallelise
  (torch splits an operator only past its grain size), so no bound: low, with the thread count
  to try. Too many threads is ``machine.oversubscribed``'s.
"""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass

from gpu_notebook.analysis.kernels import kernel_share
from gpu_notebook.cell.facts import SourceFacts
from gpu_notebook.cell.names import dotted
from gpu_notebook.cell.words import last
from gpu_notebook.records import Analysis, Finding, Run, Said, Severity, StepClockRecord
from gpu_notebook.rules.common import found, has_gpu

# Operators whose deterministic form differs on a GPU (torch.use_deterministic_algorithms' list;
# cuDNN convolutions for both flags), as host op names in the trace.
DETERMINISTIC_OPS = re.compile(
    r"aten::(index_add|index_put|_index_put_impl|scatter_add|scatter_reduce|scatter|index_copy|"
    r"put|embedding_dense_backward|embedding_backward|_embedding_bag|embedding_bag|cumsum|"
    r"nll_loss2d|.*upsample.*backward|grid_sampler.*backward|.*pool3d.*backward|"
    r"adaptive_.*pool.*backward|_ctc_loss|histc|bincount|kthvalue|median|index_reduce|"
    r"cudnn_convolution|convolution_backward|_cudnn_rnn)"
)
CONVOLUTION_OPS = re.compile(r"aten::(cudnn_convolution|convolution_backward|_cudnn_rnn)")
CPU_OPS_SHARE = 0.5  # forward + backward + optimizer share of the step
SPARE_CORES = 2  # cores free beside the one thread and the workers
MANY_CORES = 4  # cores this process may use, at least

DOUBLE_KERNEL = re.compile(r"double|dgemm|fp64|f64", re.IGNORECASE)


@dataclass(frozen=True)
class DeterministicOn(Said):
    """Deterministic algorithms on while the loop ran (``cudnn``: only cuDNN's flag was)."""

    backwards_on: int  # backward calls of the timed steps that found it on
    backwards_read: int  # ... of those read
    warn_only: bool  # torch.use_deterministic_algorithms(True, warn_only=True)
    cudnn_only: bool  # torch.backends.cudnn.deterministic alone
    gpu: bool  # a GPU run
    ops: tuple[str, ...]  # the trace's operators it changes (GPU runs only)
    cell_line: int | None  # this cell's own switch (None: set outside the cell)


@dataclass(frozen=True)
class Float64Default(Said):
    """``torch.get_default_dtype()`` was float64 while the loop ran."""

    backwards_on: int
    backwards_read: int
    double_bytes: int | None  # trained parameters' bytes that are float64 (None: not read)
    param_bytes: int | None  # ... of the trained parameters' bytes
    kernel_share: float | None  # share of the GPU window in float64 kernels (None: no GPU)
    cell_line: int | None


@dataclass(frozen=True)
class ProfilerOnBefore(Said):
    """A torch profiler was recording when the cell started: ours stepped aside."""

    steps: int  # steps the clock timed under it


@dataclass(frozen=True)
class ProfilerInCell(Said):
    """A torch profiler the cell started recorded while the loop ran: ours stepped aside."""

    steps: int  # steps the clock timed in the cell
    line: int | None  # the cell's first profiler call (None: not in its own lines)


@dataclass(frozen=True)
class OneThread(Said):
    """torch computed on one thread of a CPU-only run with cores to spare."""

    cores: int  # cores this process may use
    free_cores: float  # ... left by the others
    workers: int  # DataLoader workers (processes) seen
    compute_share: float  # forward + backward + optimizer share of the step
    target: int  # the thread count to try
    cell_line: int | None  # this cell's own torch.set_num_threads (None: set outside the cell)


def _mostly(on: int, clock: StepClockRecord) -> bool:
    """On in at least half of the backward calls read: a one-off backward is not the loop's."""
    return on > 0 and 2 * on >= clock.anomaly_backward_reads


def _cell_line(facts: SourceFacts, names: tuple[str, ...]) -> int | None:
    """The line of this cell's first call of one of ``names`` (None: none)."""
    tree = facts.tree
    if tree is None:
        return None
    calls = [c for c in tree.calls() if last(dotted(c.func) or "") in names and tree.in_cell(c)]
    return tree.line_of(calls[0]) if calls else None


def _cudnn_assigned(facts: SourceFacts) -> int | None:
    tree = facts.tree
    if tree is None:
        return None
    for node in ast.walk(tree.tree):
        if (
            isinstance(node, ast.Assign)
            and tree.in_cell(node)
            and any((dotted(t) or "").endswith("cudnn.deterministic") for t in node.targets)
        ):
            return tree.line_of(node)
    return None


def deterministic(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """Deterministic algorithms were on while the loop ran."""
    clock = run.steps
    gpu = has_gpu(run)
    algorithms = _mostly(clock.deterministic_backwards, clock)
    cudnn = gpu and _mostly(clock.cudnn_deterministic_backwards, clock)
    if not algorithms and not cudnn:
        return None
    picks = DETERMINISTIC_OPS if algorithms else CONVOLUTION_OPS
    ops = (
        tuple(dict.fromkeys(op.name for op in analysis.top_ops if picks.match(op.name)))
        if gpu
        else ()
    )
    line = (
        _cell_line(facts, ("use_deterministic_algorithms",))
        if algorithms
        else _cudnn_assigned(facts)
    )
    on = clock.deterministic_backwards if algorithms else clock.cudnn_deterministic_backwards
    said = DeterministicOn(
        on,
        clock.anomaly_backward_reads,
        algorithms and _mostly(clock.deterministic_warn_only_backwards, clock),
        not algorithms,
        gpu,
        ops,
        line,
    )
    return found("modes.deterministic", "low" if ops else "info", said, line=line)


def float64_default(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """The default dtype was float64 while the loop ran."""
    clock = run.steps
    if not _mostly(clock.double_default_backwards, clock):
        return None
    share = kernel_share(analysis, DOUBLE_KERNEL.search)
    said = Float64Default(
        clock.double_default_backwards,
        clock.anomaly_backward_reads,
        clock.double_grad_bytes,
        clock.grad_bytes,
        share,
        _cell_line(facts, ("set_default_dtype", "set_default_tensor_type")),
    )
    severity: Severity = "medium" if clock.double_grad_bytes or share else "info"
    return found("modes.float64_default", severity, said, line=said.cell_line)


def profiler_on(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """A profiler started outside the cell recorded while the loop ran."""
    if not run.window.profiler_before_cell:
        return None
    return found("modes.profiler_on", "medium", ProfilerOnBefore(run.steps.step_count))


# How a cell starts a torch profiler of its own (torch.profiler.profile, the autograd profiler,
# emit_nvtx / emit_itt), by the called name's last part.
PROFILER_CALLS = ("profile", "emit_nvtx", "emit_itt")


def profiler_in_cell(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """A profiler the cell itself started recorded while the loop ran."""
    if not run.window.profiler_in_cell:
        return None
    line = _cell_line(facts, PROFILER_CALLS)
    said = ProfilerInCell(run.steps.step_count, line)
    return found("modes.profiler_in_cell", "low", said, line=line)


def one_thread(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """A CPU-only run computes on one intra-op thread while cores stand free."""
    m = analysis.machine
    if has_gpu(run) or m is None or m.torch_threads != 1 or analysis.phases is None:
        return None
    target = math.floor(m.free_cores) - m.workers
    if m.cores - m.workers < MANY_CORES or target - 1 < SPARE_CORES:
        return None
    shares = [analysis.phases.share(p) for p in ("forward", "backward", "optimizer")]
    compute = sum(s for s in shares if s is not None)
    if compute < CPU_OPS_SHARE:
        return None
    line = _cell_line(facts, ("set_num_threads",))
    said = OneThread(m.cores, m.free_cores, m.workers, compute, target, line)
    return found("modes.one_thread", "low", said, line=line)


TIE = 110  # where its findings tie: the verdict table's order (rules._families)
RULES = (deterministic, float64_default, profiler_on, profiler_in_cell, one_thread)
