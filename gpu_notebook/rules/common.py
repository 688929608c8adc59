"""Shared pieces of the rules: thresholds with their sources, Amdahl bounds, the loader in use.

The gain bound of a finding is Amdahl's: if a fix removes a share ``f`` of the step, the step is
at most ``1/(1-f)`` times faster, *provided the rest of the step keeps its time*. Work that
disturbs the rest (caches, garbage collection, the allocator) breaks that proviso: on 2 cores a
per-step print of tensors made the model's own phases ~25% slower, so removing it beat the
bound (benchmarks/fix_speedups.py shows such cases; the comparison says so). Two rules keep the
bound honest otherwise:

- a share that was not measured (None) gives no bound, never a bound from zero;
- when a GPU timeline exists, a step can never be shorter than the GPU work inside it, so a
  host-side fix is also capped at ``1 / (GPU busy share)`` (GPU-side fixes are not).

A rule may use a superset of what its fix removes (e.g. "host time outside the model" for
per-step logging): the bound is then looser but still an upper bound, and the evidence says so.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from gpu_notebook.analysis.gpu_bounds import gpu_busy_bounds as gpu_busy_bounds
from gpu_notebook.analysis.level_range import Level, margin_of, reach, widened
from gpu_notebook.analysis.uncertainty import share_interval
from gpu_notebook.analysis.verdict import amdahl_bound
from gpu_notebook.cell.facts import ORIGIN_LINES, LoaderCall, SourceFacts, SourceLine
from gpu_notebook.cell.live import LiveLoader
from gpu_notebook.fixes.records import Fix
from gpu_notebook.records import Analysis, Finding, PhaseBreakdown, Run, RunPhase, Said, Severity

# PyTorch TensorBoard profiler plugin (profiler/data.py): DataLoader > 5% of the step -> workers.
SUGGEST = 0.05
# TraceML diagnostics/step_time/policy.py: input wait / H2D / residual warn at 10%, critical 20%.
WARN = 0.10
CRITICAL = 0.20
# TraceML and SageMaker Debugger's `patience`: fewer profiled steps than this is thin evidence.
FEW_STEPS = 5

Rule = Callable[[Run, Analysis, SourceFacts], Finding | None]

SEVERITY_RANK: dict[str, int] = {"high": 0, "medium": 1, "low": 2, "info": 3}

# Host-side phases outside data loading, the model and the optimizer: where per-step Python
# work (logging, reading values, building tensors) shows up in the phase split.
RESIDUAL_PHASES = ("sync", "other", "unattributed")


def share(analysis: Analysis, phase: str) -> float | None:
    """Share of the recorded step time in ``phase``; None when not measured."""
    return analysis.phases.share(phase) if analysis.phases is not None else None


def lean_share(analysis: Analysis, phase: str) -> float | None:
    """``phase``'s time in a traced step over the run's median step, where that reads more than
    its share of the traced steps; None: not measured.

    For a phase of few long operators (a 48 MB copy) the profiler adds next to nothing, while
    it lengthens every small operator around it: the traced steps' share understates the phase
    in an unprofiled step (the H200 kit's pageable copies: 72% of a traced step, 7.9 ms of an
    8.96 ms median step; pinned and non-blocking they measured 6.76x against a 3.52x bound).
    Never below the traced share, so it only raises a bound: an upper end.
    """
    window = analysis.window_phases or analysis.phases
    traced = share(analysis, phase)
    median_s = analysis.step_stats.median_s
    if window is None or traced is None or not window.steps or not median_s:
        return traced
    median_us = median_s * 1e6
    per_step_us = window.phase_total_us.get(phase, 0.0) / len(window.steps)
    return max(traced, min(1.0, per_step_us / median_us))


def data_wait(analysis: Analysis) -> float | None:
    """The step's share waiting for data: as the step clock timed it over the run where it did,
    else the window's. The profiler's cost per op swells a window's compute (a tokenizing
    dataset's window read 7.5%, 0.37 ms a batch; its 354 steps 21%, 0.81 ms)."""
    whole = analysis.run_data
    return whole.share if whole is not None else share(analysis, "data")


def shares_sum(analysis: Analysis, phases: Iterable[str]) -> float | None:
    """Sum of the measured shares among ``phases``; None when none of them was measured."""
    values = [s for s in (share(analysis, p) for p in phases) if s is not None]
    return sum(values) if values else None


def severity_of(value: float | None, *, low: float = SUGGEST, medium: float = WARN,
                high: float = CRITICAL) -> Severity | None:  # fmt: skip
    """Map a share to a severity with the TraceML levels (None: below the lowest level)."""
    if value is None:
        return None
    if value >= high:
        return "high"
    if value >= medium:
        return "medium"
    if value >= low:
        return "low"
    return None


# A share the rules read: one phase, or the sum of several (``RESIDUAL_PHASES``).
Phases = str | tuple[str, ...]


def run_optimizer(analysis: Analysis) -> RunPhase | None:
    """The optimizer step as the step clock timed it over the run; on a CPU run its share (and
    interval) the update's own CPU time over the steps' own time (``RunPhase.cpu_share``).

    On the CPU the update is the loop thread computing: its CPU clock reads the same under any
    load, where the wait for a core spread over the phases by their excess does not
    (save_every_step's Adam 4.6% at load 25 for 21%; lr_finder_runs' SGD small in one run and
    tried in the next). Every rule that reads the optimizer's share reads it here: the fused
    update's bound and the tiny-ops compile bound's "rest of the step" moved with the load
    until each read the same figure (benchmarks/README, faultshare)."""
    whole = analysis.run_optimizer
    if whole is None or whole.cpu_share is None:
        return whole
    return dataclasses.replace(
        whole,
        share=whole.cpu_share,
        low_share=whole.cpu_low_share if whole.cpu_low_share is not None else whole.cpu_share,
        high_share=whole.cpu_high_share if whole.cpu_high_share is not None else whole.cpu_share,
        fifths_low=whole.cpu_fifths_low,
        fifths_high=whole.cpu_fifths_high,
    )


def _whole_run(analysis: Analysis, phases: Phases) -> RunPhase | None:
    """The phase as the step clock timed it over the run (many more steps than the window)."""
    if phases == "optimizer":
        whole = run_optimizer(analysis)
    else:
        whole = analysis.run_data if phases == "data" else None
    return whole if whole is not None and whole.steps >= 2 else None


def share_range(analysis: Analysis, phases: Phases) -> tuple[float, float] | None:
    """The share's 90% interval: over the run where the step clock timed the phase
    (``_whole_run``), widened to what its fifths read, else the typical window step's (``share_interval(typical=True)``: a stall
    or a stand-in step weighs one step, not its time). None: neither."""
    whole = _whole_run(analysis, phases)
    if whole is not None:
        # Each fifth of the run's steps is a run of its own under the load of its time: the
        # interval reaches what the fifths read (``RunPhase.fifths_low``/``fifths_high``). The
        # bootstrap over ~500 steps is narrow, and a load that moves between runs moves the
        # share more than it says (accel_log_gather's data wait 10-12% at the 10% line, 0.5
        # points wide a run; compile_graph_break's optimizer 21-26% at the 20% line).
        low = min(x for x in (whole.low_share, whole.share, whole.fifths_low) if x is not None)
        high = max(x for x in (whole.high_share, whole.share, whole.fifths_high) if x is not None)
        return low, high
    if analysis.phases is None:
        return None
    return share_interval(analysis.phases, phases, typical=True)


def severity_in(analysis: Analysis, phases: Phases, value: float | None, *,
                low: float = SUGGEST, medium: float = WARN,
                high: float = CRITICAL, part: float = 1.0) -> Severity | None:  # fmt: skip
    """The level of a share read with its 90% interval (``share_range``): None where the whole
    interval is below ``low``, else the level its low end clears, never below the rule's lowest.
    ``value``, the point, decides only where the share has no interval. ``part``: the part of
    the phase the finding is about (one optimizer's of several), scaling share and interval.

    A severity says "at least this much of the step": a share whose interval straddles a line
    (six steps' data wait 8-28% from run to run of the same code, at the 10% and 20% lines) has
    not shown it is above it, so noise around a line reads the level below every time. At the
    rule's lowest line the same noise kept a point's finding in one run and dropped it in the
    next: the interval reaching the line keeps it, at the lowest level, every time. The level
    another run may read is ``level_in``'s top (a finding given a ``Level`` says both)."""
    level = level_in(analysis, phases, value, low=low, medium=medium, high=high, part=part)
    return None if level is None else level.least


def level_in(analysis: Analysis, phases: Phases, value: float | None, *,
             low: float = SUGGEST, medium: float = WARN,
             high: float = CRITICAL, part: float = 1.0) -> Level | None:  # fmt: skip
    """The share's level as a range (``analysis.level_range``): ``least`` as ``severity_in`` says
    it, ``most`` the level its interval's high end reaches widened by the run's margin (what
    another run of this code may read: ``level_range.reach``). None: as ``severity_in``."""
    if value is None:
        return None
    span = share_range(analysis, phases)
    if span is None:
        span = (value, value)
    span = (span[0] * part, span[1] * part)
    if severity_of(span[1], low=low, medium=medium, high=high) is None:
        return None
    least = severity_of(low, low=low, medium=medium, high=high)
    at_least = severity_of(span[0], low=low, medium=medium, high=high) or least
    assert at_least is not None  # the high end clears the lowest line
    top = reach(span[1], margin_of(analysis.run_margin))
    return widened(at_least, severity_of(top, low=low, medium=medium, high=high))


def level_of(analysis: Analysis, value: float | None, *, low: float = SUGGEST,
             medium: float = WARN, high: float = CRITICAL) -> Level | None:  # fmt: skip
    """A point share's level (``severity_of``, no interval read) as a range: its top the level
    the share reaches widened by the run's margin (``level_range.reach``). None: below ``low``."""
    least = severity_of(value, low=low, medium=medium, high=high)
    if value is None or least is None:
        return None
    top = reach(value, margin_of(analysis.run_margin))
    return widened(least, severity_of(top, low=low, medium=medium, high=high))


def gpu_busy_share(analysis: Analysis) -> float | None:
    """The GPU timeline's busy share: a lower bound where the timeline is partial (read it
    through ``gpu_busy_bounds`` to judge on it); None: no clocked GPU window."""
    gpu = analysis.gpu
    if gpu is None or gpu.window_us <= 0:
        return None
    return gpu.busy_share


def window_share_high(analysis: Analysis, share: float | None) -> float | None:
    """The most ``share`` (of the GPU window, read on the timeline's clocked kernels) can be:
    itself on a complete timeline; on a partial one, plus all the busy time no event shows (the
    unclocked kernels may all be of its kind), at most 1; None: not measured (no share, or a
    partial timeline without NVML to bound what it left out)."""
    bounds = gpu_busy_bounds(analysis)
    if share is None or bounds is None:
        return share
    unseen = bounds.unseen
    return None if unseen is None else min(1.0, share + unseen)


def gain_bound(
    removed_share: float | None, analysis: Analysis, *, host_side: bool = True
) -> float | None:
    """Amdahl bound for removing ``removed_share`` of the step.

    A host-side fix (input, syncs, logging, launches) leaves the GPU's work as it is, so its
    bound is also capped by the GPU busy share; a GPU-side fix (precision, TF32, overlap of
    communication) shortens that work itself and is not capped (``host_side=False``).
    """
    if removed_share is None:
        return None
    bound = amdahl_bound(max(0.0, removed_share))
    busy = gpu_busy_share(analysis)
    if host_side and busy is not None and busy > 0:
        bound = min(bound, 1.0 / busy)  # a step is never shorter than the GPU work inside it
    return bound


def share_span(analysis: Analysis, phase: Phases) -> tuple[float, float] | None:
    """The 90% interval of ``phase``'s share of the window's steps (a seeded bootstrap over them,
    ``analysis.uncertainty.share_interval``): how well the steps the rules read pin the share
    down. None: not measured, or fewer than two steps."""
    if analysis.phases is None:
        return None
    return share_interval(analysis.phases, phase)


def gain_bound_low(
    analysis: Analysis,
    phase: Phases,
    removed: Callable[[float], float | None] = lambda s: s,
    *,
    host_side: bool = True,
) -> float | None:
    """The least the Amdahl bound over ``removed(share of phase)`` reads within the phase
    share's 90% interval (``share_span``'s low end): ``Finding.bound_low`` for a fix bounded by
    one window phase. None: no interval."""
    span = share_span(analysis, phase)
    return None if span is None else gain_bound(removed(span[0]), analysis, host_side=host_side)


def gain_range(
    low_share: float | None,
    high_share: float | None,
    analysis: Analysis,
    *,
    host_side: bool = True,
) -> tuple[float | None, float | None]:
    """A fix's gain as a range: (low, high) = the Amdahl bounds (``gain_bound``) of the least
    and the most of the step it can be expected to remove, which the rule gives (a share's
    interval, or a figure and its superset). The low end never exceeds the high one; None: no
    low end (the range is 1x to the bound)."""
    high = gain_bound(high_share, analysis, host_side=host_side)
    low = gain_bound(low_share, analysis, host_side=host_side)
    if low is not None and high is not None:
        low = min(low, high)
    return low, high


def uses_compile(facts: SourceFacts) -> bool:
    """The cell calls torch.compile, or a live model is compiled already."""
    return facts.compiled or any(m.compiled for m in facts.live.models)


def input_or_sync_speaks(analysis: Analysis) -> bool:
    """The data wait or the host syncs reach the warn level: their rules name the cause."""
    return any(
        (value := share(analysis, p)) is not None and value >= WARN for p in ("data", "sync")
    )


def has_gpu(run: Run) -> bool:
    return run.env.cuda_available or bool(run.env.gpus)


def compute_capability(run: Run) -> float | None:
    """The highest compute capability among the visible GPUs ("8.0" -> 8.0); None if unknown."""
    best: float | None = None
    for gpu in run.env.gpus:
        if gpu.compute_capability is None:
            continue
        try:
            value = float(gpu.compute_capability)
        except ValueError:
            continue
        best = value if best is None else max(best, value)
    return best


def gpu_name(run: Run) -> str:
    return run.env.gpus[0].name if run.env.gpus else "the GPU"


def profiled_steps(analysis: Analysis) -> int:
    return len(analysis.phases.steps) if analysis.phases is not None else 0


@dataclass(frozen=True)
class EveryStepLines(Said):
    """Host lines the loop runs on every step with no ``if`` around them (logging calls,
    checkpoint saves), measured alike (``rules.step_logging.every_step_lines``): each rule's
    record is a subclass, worded by its own words module."""

    lines: tuple[SourceLine, ...]
    phases: PhaseBreakdown | None
    residual: float | None  # host time outside the model and the optimizer
    own: float | None  # the lines' own sampled time
    low: float | None
    bound: float | None


@dataclass(frozen=True)
class LoaderInUse:
    """The DataLoader the cell's loops iterate (``loader_in_use``): as the cell builds it
    (``static``), or as an earlier cell left it (``live``); neither when it is not known."""

    static: LoaderCall | None = None
    live: LiveLoader | None = None

    @property
    def known(self) -> bool:
        return self.static is not None or self.live is not None

    @property
    def line(self) -> int | None:
        """The cell's line that builds it (None: not built in this cell)."""
        return self.static.line if self.static is not None else None

    def setting(self, name: str) -> Any:
        """As the cell writes it, else as the live loader holds it; None when neither is known."""
        loader = self.static if self.static is not None else self.live
        return getattr(loader, name) if loader is not None else None


def loader_in_use(facts: SourceFacts) -> LoaderInUse:
    """The DataLoader the cell's loops iterate: built in this cell, or found live by name.

    Training loops first, then any loop; a cell that builds exactly one loader and iterates
    something else (a generator over it) still gets that loader.
    """
    loops = sorted(facts.loops, key=lambda lp: (not lp.trains, lp.line))
    for loop in loops:
        for name in loop.iterates:
            static = next((c for c in facts.loaders if c.name == name), None)
            if static is not None:
                return LoaderInUse(static=static)
            live = facts.live.loader(name)
            if live is not None:
                return LoaderInUse(live=live)
    if len(facts.loaders) == 1:
        return LoaderInUse(static=facts.loaders[0])
    if len(facts.live.loaders) == 1:
        return LoaderInUse(live=facts.live.loaders[0])
    return LoaderInUse()


def found(
    rule_id: str,
    severity: Severity | Level,
    said: Said,
    *,
    phase_share: float | None = None,
    bound: float | None = None,
    line: int | None = None,
    fix_id: str | None = None,
    fix_params: dict[str, str | int | float | bool | None] | None = None,
    low: float | None = None,
    bound_low: float | None = None,
    ceiling: float | None = None,
    fix: Fix | None = None,
) -> Finding:
    """A rule's finding as figures (``said``: gpu_notebook.words words it), its gain, where in
    the cell and which fix (``fix``: the ``Fix`` its module owns, or ``fix_id``: the catalog's
    id); ``bound_low``: the least its bound reads within its shares' interval
    (``Finding.bound_low``); ``ceiling``: the most the change can physically give whatever any
    share read (``Finding.gain_ceiling``; None: no such ceiling). ``severity`` a ``Level`` (a
    share's, ``level_in``): the finding's severity its least, ``severity_reach`` its top."""
    level = severity if isinstance(severity, Level) else Level(severity, severity)
    if fix is not None:
        fix_id = fix.fix_id  # found in the module by rules.RULE_FIXES
    if line is not None and line >= ORIGIN_LINES:
        line = None  # a line of a function the cell calls (cell.calls): not one of the cell
    return Finding(rule_id, "", level.least, (), phase_share, bound, "", line=line, fix_id=fix_id,
                   fix_params=dict(fix_params or {}), gain_low=low, bound_low=bound_low,
                   gain_ceiling=ceiling, said=said, severity_reach=level.most)  # fmt: skip


@dataclass(frozen=True)
class PerStartCost:
    """Time a loader pays once per start (each new loader's worker start-up and first batches:
    ``rules.input_pipeline.per_start_cost``), which a bigger batch does not share out: an epoch
    of half as many steps starts its loader as often, so per sample it stays as it is.

    ``share``: of the run's step time. ``outside_data``: the part of it outside the data wait
    (``iter()`` forking the workers, no hook of ours: the step's "other"), which the run's data
    share does not hold; the rest of it, the first batches' wait, is in that share already."""

    share: float
    outside_data: float


def bigger_batch_bound(
    factor: int, analysis: Analysis, starts: PerStartCost | None = None
) -> float:
    """Most samples/s gain from a batch ``factor`` times bigger: per sample the model side
    shrinks at most ``factor`` times, the data side not at all, nor what a loader pays once per
    start (``starts``: a loader made anew every epoch) (``factor`` where neither was measured).
    The data share is the run's where the step clock timed it: the profiler's cost on every
    small model op reads the model side larger in the window (python_items: 72% data in the
    window, 85% over the run; the window's bound 1.26x, the run's 1.13x, a quiet measurement
    1.11x). workers_respawn's loader, made anew every epoch, stalled 46% of its step time at
    its starts, at load mostly in making the iterator (outside the data wait): the bound from
    the data share alone read 1.15x-1.23x, measured 1.02x, 1.11x and 1.13x, undecided each
    time."""
    unshrunk = _unshrunk(analysis, starts, high=False)
    if unshrunk is None:
        return float(factor)
    return _per_sample_gain(factor, unshrunk)


def bigger_batch_bound_low(
    factor: int, analysis: Analysis, starts: PerStartCost | None = None
) -> float | None:
    """The least ``bigger_batch_bound`` reads within the data share's 90% interval (its high
    end: the more of the step the data takes, the less a bigger batch gains). The data share
    moves with the machine's load (a loaded run's 1.05x against a quiet run's 1.04x on the same
    code), so the small-gain gate reads this, not the point, at the 5% line. None: no interval."""
    if _data_span(analysis) is None:
        return None
    unshrunk = _unshrunk(analysis, starts, high=True)
    assert unshrunk is not None  # the data share's interval is known
    return min(_per_sample_gain(factor, unshrunk), bigger_batch_bound(factor, analysis, starts))


def pool_stretch(analysis: Analysis) -> float:
    """How many times longer, per sample, the work that grows with the batch may take at a
    bigger batch on a CPU whose torch intra-op pool has more threads than the cores the other
    processes leave (``MachineFacts``: threads wanted over free cores, as
    ``rules.machine.oversubscribed`` reads it); 1 elsewhere (a GPU, one thread, cores to spare).

    A bigger batch takes a CPU operator over torch's parallel grain (32,768 elements): at batch
    128 heads_modulelist's ops all run on the loop thread, at 1,024 its trunk, activation and
    loss ops and their backward open parallel regions, and each region waits at its barrier for
    a pool thread that has no core. Measured (benchmarks/heads_step_parts.py, thread CPU clock,
    load 21-27): the step's per-sample gain at batch x8 2.82x with one thread, 1.67x with two
    (backward 2.15x -> 0.62x); the ledger near-quiet (load 1-3) read 1.96x under a 2.11x low
    end, by hand with one thread 3.04x."""
    m = analysis.machine
    if m is None or analysis.gpu is not None or (m.torch_threads or 1) <= 1:
        return 1.0
    wanted = m.threads_wanted
    if wanted is None or wanted <= m.free_cores + 0.5:
        return 1.0
    return wanted / m.free_cores


def bigger_batch_gain_low(
    factor: int,
    analysis: Analysis,
    per_sample: float,
    starts: PerStartCost | None = None,
    stretch: float = 1.0,
) -> float | None:
    """The least a batch ``factor`` times bigger gains on a CPU: only the model side's per-step
    cost is amortized (the optimizer step, zero_grad, Python between operators, per-op
    dispatch), while its ``per_sample`` share (``analysis.host.per_sample_model_share``: operators whose work
    grows with the batch) grows with it as the data does. With the data share ``d`` at its
    interval's high end (and a loader's per-start cost, ``starts``, beside it) and ``m = 1 -
    d``: ``1 / (d + m * per_sample + m * (1 - per_sample) / factor)``, never above the bound.
    accum_tqdm's convolutions made 79% of its model side: at least 1.03x, measured 1.00x,
    where the bound said up to 1.24x. ``stretch`` (``pool_stretch``): on a CPU whose intra-op
    pool is short of cores the growing work may take that many times longer per sample at the
    bigger batch: ``1 / (d + m * per_sample * stretch + m * (1 - per_sample) / factor)``.
    None: the data not measured."""
    data = _unshrunk(analysis, starts, high=True)
    if data is None:
        return None
    part = min(1.0, max(0.0, per_sample))
    model = 1.0 - data
    low = 1.0 / (data + model * part * max(1.0, stretch) + model * (1.0 - part) / factor)
    return min(low, bigger_batch_bound(factor, analysis, starts))


def _unshrunk(analysis: Analysis, starts: PerStartCost | None, *, high: bool) -> float | None:
    """The share of the run's step time a bigger batch leaves as it is per sample: the data
    wait (``high``: its 90% interval's high end), and a remade loader's start-ups outside it
    (``starts``: the first batches' wait is in the data share already, counted once). None:
    neither measured."""
    span = _data_span(analysis)
    data = span[1] if high and span is not None else _data_share(analysis)
    if starts is None:
        return data
    if data is None:
        return min(1.0, starts.share)
    return min(1.0, data + max(0.0, starts.outside_data))


def _data_share(analysis: Analysis) -> float | None:
    whole = _whole_run(analysis, "data")
    return whole.share if whole is not None else share(analysis, "data")


def _data_span(analysis: Analysis) -> tuple[float, float] | None:
    whole = _whole_run(analysis, "data")
    if whole is not None:
        return min(whole.low_share, whole.share), max(whole.high_share, whole.share)
    return share_span(analysis, "data")


def _per_sample_gain(factor: int, data: float) -> float:
    return 1.0 / (data + (1.0 - data) / factor)
