"""Per-step host syncs: ``.item()``, ``.cpu()``, ``float(t)``, printing or logging a tensor every step.

Each such read makes the host wait until the device has finished every queued kernel, so the
CPU cannot run ahead and the GPU idles at each one. The scan finds the lines; the measurement
gives the share (``removable_share``; on the CPU, where a read waits for nothing,
``cpu_read_cost``). A read whose value the loop needs (``if loss.item() < x: break``) is named
as such, with its alternative, and never patched. Severity with TraceML's levels for the
residual (warn 10%, critical 20%, ``diagnostics/step_time/policy.py``); a per-step read under
5% is still reported, as "low", because on a GPU it serialises the pipeline whatever its own
cost. The fix reads the values every ``EVERY`` steps: it removes ``(1 - 1/EVERY)`` of that
share. Where nothing measured a CPU read's cost (a printed read inside LBFGS's closure, no line
samples) the fix is not offered: a gain nothing bounds is no recommendation (issue 26: offered
"up to -", measured 1.03x, undecided after 10 added rounds).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Literal

from gpu_notebook.analysis.framework_stacks import drawn_under
from gpu_notebook.analysis.level_range import Level
from gpu_notebook.analysis.uncertainty import sampled_share_low
from gpu_notebook.cell.facts import SourceFacts, SourceLine
from gpu_notebook.cell.names import dotted
from gpu_notebook.markers import VALUE_READ_OPS
from gpu_notebook.records import Analysis, Finding, Run, Said, Severity
from gpu_notebook.rules.common import (
    RESIDUAL_PHASES,
    SUGGEST,
    WARN,
    Phases,
    found,
    gain_bound,
    gain_bound_low,
    has_gpu,
    level_in,
    level_of,
    profiled_steps,
    severity_in,
    share,
    shares_sum,
)

EVERY = 10  # read values every 10 steps: the fix's default and what the bound assumes
# From this many stack samples on a line's share is read as sampled: with none of n samples on
# a line, its share is still up to 3/n (the rule of three, 95%), over the 10% warn level below
# 30 samples. Seen: a busy machine left the sampler 3 samples of a 40-step cell, and a per-step
# print read "0% of the step" from them.
MIN_LINE_SAMPLES = 30
# Fewer samples than MIN_LINE_SAMPLES read a share only where its low end (Wilson, 95%) is over
# the lowest level, and the level is the low end's: a hook at 80% of the step read by 29 samples
# is "high" (low end 66%), as by 30, where a hard count of 30 said nothing (issue 26: the CI's
# Lightning hook run flipped on it; a line's share, ``lines_share``, had the same hard count).
# Under MIN_SHARE_SAMPLES no share is read at all.
MIN_SHARE_SAMPLES = 10
# Reads whose cost on the CPU is their formatting (the sampler's time on the line), not the
# sync wait: a CPU tensor is ready when it is read.
_FORMATTING = ("print-tensor", "log-tensor", "fstring-tensor")

# Where the removable share comes from (words/syncs.py words it); "residual": the step clock's
# host time outside the model and the optimizer (a CPU read written in the loop itself);
# "unsampled": a CPU read no line sample and no phase of the step measured alone.
# "with-bar": a CPU read on a line that also redraws a progress bar, no line samples: the host
# time outside the model holds the bar's redraw, which is not the read's (progress_redraw's).
How = Literal[
    "unmeasured", "sync", "lines", "both", "few-samples", "residual", "unsampled", "with-bar"
]


@dataclass(frozen=True)
class PerStepSyncs(Said):
    optional: tuple[SourceLine, ...]  # per-step reads the loop does not need
    needed: tuple[SourceLine, ...]  # and those it does (kept as they are)
    sync: float | None  # the sync wait's share of the step
    removable: float | None  # what reading less often removes
    how: How
    other_work: float | None  # the rest of the host time outside the model, when notable
    reads: float | None  # scalar reads per step in the trace
    gpu: bool
    bound: float | None
    # Of the reading lines' sampled time, the share spent in a progress bar's frames (tqdm's
    # set_postfix redrawing the bar): not a read, left out of ``removable`` (drawn_share).
    drawn: float | None = None


@dataclass(frozen=True)
class NeededReads(Said):
    first: SourceLine  # a per-step read the loop needs
    removable: float | None
    how: How
    gpu: bool
    bound: float | None
    # The read is a gradient's norm (``p.grad.norm().item()``): a hand-written clip or norm log,
    # which ``clip_grad_norm_`` does on the device with no read.
    grad_norm: bool = False


def _reads_grad_norm(line: SourceLine) -> bool:
    """``<x>.grad.norm(...).item()`` (or ``.tolist()``, ``float(...)`` of it): a read of a
    gradient's norm (unseen round 16's hand_clip_item: a clip written by hand)."""
    node = line.node
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args:
        node = node.args[0]  # float(p.grad.norm())
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if node.func.attr == "norm" and (dotted(node.func.value) or "").endswith(".grad"):
            return True
        node = node.func.value
    return False


def every_n(share: float | None) -> float | None:
    """What doing it every ``EVERY`` steps instead of every step removes of ``share``."""
    return share * (1 - 1 / EVERY) if share is not None else None


def loop_lines(facts: SourceFacts, lines: tuple[SourceLine, ...]) -> tuple[SourceLine, ...]:
    """The lines that run on every training step (in any loop, ungated, when nothing trains)."""
    per_step = facts.per_step(lines)
    if facts.training_loops():
        return tuple(s for s in per_step if s.step_loop_line is not None)
    # No loop of the cell calls backward: the step is in a function of an earlier cell. A loop
    # over a DataLoader runs a step an iteration (`for batch in loader: train_step(...)`); a
    # loop around it, or one that hands the loader to a call (`train_one_epoch(model, loader,
    # opt)`), runs an epoch an iteration: its own lines run once per epoch.
    loaders = {ld.name for ld in facts.loaders if ld.name} | {ld.name for ld in facts.live.loaders}
    stepping = {id(loop.node) for loop in facts.loops if set(loop.iterates) & loaders}
    epochs = {id(loop.node) for loop in facts.loops if set(loop.hands) & loaders}
    tree = facts.tree
    if tree is None or not (stepping or epochs):
        return tuple(s for s in per_step if s.loop_line is not None)

    def in_a_step(line: SourceLine) -> bool:
        around = {id(a) for a in tree.ancestors(line.node)} if line.node is not None else set()
        if stepping:
            return bool(around & stepping)
        return line.loop_line is not None and not around & epochs

    return tuple(s for s in per_step if in_a_step(s))


def reads_per_step(analysis: Analysis) -> float | None:
    """Scalar reads per profiled step, from the trace's top operators (None: not in the top)."""
    steps = profiled_steps(analysis)
    if steps == 0 or analysis.phases is None or analysis.phases.source != "trace":
        return None
    calls = max(
        (op.calls for op in analysis.top_ops if op.name in VALUE_READ_OPS and op.device == "cpu"),
        default=None,
    )
    return calls / steps if calls is not None else None


def judged_share(share: float, samples: int) -> float | None:
    """The share the levels judge: ``share`` itself from ``MIN_LINE_SAMPLES`` samples on, its
    low end below that when that is over the lowest level, else None (not read)."""
    if samples >= MIN_LINE_SAMPLES:
        return share
    low = sampled_share_low(share, samples)
    return low if samples >= MIN_SHARE_SAMPLES and low >= SUGGEST else None


def lines_share(analysis: Analysis, lines: tuple[SourceLine, ...]) -> float | None:
    """Share of the sampled time spent on ``lines`` (their read, formatting and printing), as
    ``judged_share`` reads it off the samples: below ``MIN_LINE_SAMPLES`` the least it can be
    (a per-step print at 60% of 29 samples is read as at least 42%, where a hard count of 30
    read nothing and the rule fell back to another figure, at 30 the share: two answers for
    one program); None when lines were not sampled, or too few times to measure a share."""
    stacks = analysis.stacks
    if stacks is None or not (stacks.lines or stacks.script_lines):
        return None
    wanted = {s.line for s in lines if s.origin is None}
    # A line of a function the cell calls (cell.calls): the sampler names it by its own file.
    there = {(s.origin.filename, s.line_there) for s in lines if s.origin is not None}
    own = sum(stat.share for stat in stacks.lines if stat.line in wanted)
    own += sum(stat.share for stat in stacks.script_lines if (stat.filename, stat.line) in there)
    return judged_share(own, stacks.samples)


def drawn_share(
    run: Run, analysis: Analysis, lines: tuple[SourceLine, ...]
) -> tuple[float | None, tuple[str, ...]]:
    """The share of the sampled time that ``lines`` (of the cell) spent in a progress or console
    library's frames (analysis.framework_stacks.drawn_under: tqdm's set_postfix redrawing the
    bar), and the libraries; None where the lines' share is not measured (``lines_share``)."""
    wanted = frozenset(s.line for s in lines if s.origin is None)
    raw = run.stacks
    if not wanted or raw is None or raw.time_us <= 0 or lines_share(analysis, lines) is None:
        return None, ()
    by_line, libraries = drawn_under(raw, wanted)
    return sum(by_line.values()) / raw.time_us, tuple(sorted(libraries))


def _reading(own: float | None, drawn: float | None) -> float | None:
    """The lines' sampled share less their progress bar's: what is the read's and its formatting."""
    return max(0.0, own - drawn) if own is not None and drawn is not None else own


def removable_share(
    analysis: Analysis, lines: tuple[SourceLine, ...], drawn: float | None = None
) -> tuple[float | None, How]:
    """What reading the values less often can remove, and where that figure comes from: the
    sync wait and the sampler's time on the reading lines, never the whole host time outside
    the model, which holds work the fix does not touch; nor the lines' time drawing a progress
    bar (``drawn``: on a GPU the read's sync is real, the bar's redraw is not part of it)."""

    sync = share(analysis, "sync")
    own = _reading(lines_share(analysis, lines) if lines else None, drawn)
    if own is None:
        if sync is None:
            return None, "unmeasured"
        return sync, "sync"
    if sync is None:
        return own, "lines"
    # The lines' samples include their own wait in .item(); other lines' syncs are in `sync`.
    return max(sync, own), "both"


def in_the_loop_itself(facts: SourceFacts, line: SourceLine) -> bool:
    """The read is written in the step loop's own code (or a step function the loop calls),
    not in a function the model or the optimizer calls (LBFGS's closure, a ``forward``): it runs
    between their calls, so the step clock's host time outside them holds all of its cost."""
    tree = facts.tree
    if tree is None or line.node is None:
        return False
    steps = {id(fn) for fn in (*tree.step_functions.values(), *tree.step_methods.values())}
    for a in tree.ancestors(line.node):
        if isinstance(a, (ast.For, ast.AsyncFor, ast.While)) and (
            tree.line_of(a) == line.step_loop_line
        ):
            return True  # in the step loop's own body (a method's loop: ``Trainer.fit``)
        if (
            isinstance(a, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            and id(a) not in steps
        ):
            return False
    return True


def cpu_read_cost(
    analysis: Analysis,
    facts: SourceFacts,
    lines: tuple[SourceLine, ...],
    drawn: float | None = None,
) -> tuple[float | None, How]:
    """What reading less often can remove on the CPU, where a read waits for nothing: its call
    and its formatting, from what measured them. The sampled time on the lines (with the
    trace's time in ``.item()`` where larger); for reads that format nothing, that time in
    ``.item()`` alone; for reads written in the loop itself, the step clock's host time outside
    the model and the optimizer (a superset: an upper bound). None: nothing measured them.
    ``drawn``: the lines' time in a progress bar's frames, which is not the read's (issue 26:
    a tqdm set_postfix(loss=loss.item()) every step read "[high] reads device values every
    step, up to 1.50x" on the CPU, where the bar's redraw took the time)."""
    sync = share(analysis, "sync")
    own = _reading(lines_share(analysis, lines) if lines else None, drawn)
    if own is not None:
        return (own, "lines") if sync is None else (max(sync, own), "both")
    formats = any(s.kind in _FORMATTING or s.logged for s in lines)
    # The time in .item() is the read's call alone, not the line's (``float(w.norm())``
    # computes what it reads): it stands for the read only where the lines were sampled enough
    # to show they hold no more. Sampled too few times it is a lower figure, not the gain: the
    # unseen hf_callback_metrics read "0%, Small" off 8 samples where 50 read 26% [high].
    undersampled = analysis.stacks is not None and analysis.stacks.samples < MIN_LINE_SAMPLES
    if sync is not None and not formats and not undersampled:
        return sync, "sync"
    residual = shares_sum(analysis, RESIDUAL_PHASES)
    if residual is not None and lines and all(in_the_loop_itself(facts, s) for s in lines):
        if {s.line for s in lines} & {s.line for s in facts.redraws}:
            return None, "with-bar"
        return residual, "residual"
    return None, "few-samples" if analysis.stacks is not None else "unsampled"


def per_step_syncs(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """Device values read on the host every step."""
    lines = loop_lines(facts, facts.syncs)
    optional = tuple(s for s in lines if not s.needed)
    needed = tuple(s for s in lines if s.needed)
    sync = share(analysis, "sync")
    reads = reads_per_step(analysis)
    if not lines and severity_in(analysis, "sync", sync, low=WARN) is None:
        return None
    if lines and not optional:
        return needed_reads(run, analysis, needed)
    gpu = has_gpu(run)
    drawn, _libraries = drawn_share(run, analysis, optional)
    if gpu:
        removable, how = removable_share(analysis, optional, drawn)
    else:
        removable, how = cpu_read_cost(analysis, facts, optional, drawn)
    residual = shares_sum(analysis, RESIDUAL_PHASES)
    other = None  # the rest of the host time outside the model, when notable
    if how != "residual" and residual is not None and removable is not None:
        other = residual - removable if residual > removable + 0.05 else None
    removed = every_n(removable)
    bound = gain_bound(removed, analysis)
    said = PerStepSyncs(
        optional, needed, sync, removable, how, other, reads, gpu, bound, drawn or None
    )
    first = optional[0].cell_line if optional else None
    if not gpu and removable is None:
        # Nothing bounds what the fix saves here: said, not offered (issue 26).
        return found("syncs.per_step", "info", said, line=first)
    # Read off one window phase (the sync wait, or the host time outside the model): its
    # interval is the bound's too; the lines' sampled share is a point.
    phases: Phases | None = (
        "sync" if how == "sync" else RESIDUAL_PHASES if how == "residual" else None
    )
    low = gain_bound_low(analysis, phases, every_n) if phases is not None else None
    severity: Level | Severity = (
        level_in(analysis, phases, removable, low=0.0)
        if phases is not None
        else level_of(analysis, removable, low=0.0)
    ) or "low"
    return found("syncs.per_step", severity, said,
                 phase_share=removed, bound=bound, line=first,
                 fix_id="throttle_host_syncs", fix_params={"every": EVERY}, bound_low=low)  # fmt: skip


def needed_reads(run: Run, analysis: Analysis, needed: tuple[SourceLine, ...]) -> Finding:
    """Every per-step read decides what the loop does: name it, and say what could replace it.
    A read the step's work takes (``feeds``) is costed by the sync wait alone: its line's
    sampled time is the work the value feeds (a Python sampler given ``seeds.tolist()``), which
    no change to the read removes; on the CPU, where it waits for nothing, that is none."""
    removable: float | None
    how: How
    if needed[0].feeds is not None:
        removable, how = share(analysis, "sync"), "sync"
        if removable is None:
            how = "unmeasured"
    else:
        removable, how = removable_share(analysis, needed)
    removed = every_n(removable)
    bound = gain_bound(removed, analysis)
    said = NeededReads(needed[0], removable, how, has_gpu(run), bound,
                       grad_norm=_reads_grad_norm(needed[0]))  # fmt: skip
    severity: Severity = "low" if removable is None or removable < WARN else "medium"
    if not has_gpu(run) and (removable is None or removable < WARN):
        # On the CPU a read waits for nothing: a needed one unmeasured or under the line costs
        # its call, said for a GPU run to come, not as work to do here.
        severity = "info"
    return found("syncs.needed_read", severity, said, phase_share=removed, bound=bound,
                 line=needed[0].cell_line)  # fmt: skip


@dataclass(frozen=True)
class HookReads(Said):
    reads: tuple[SourceLine, ...]  # per-step reads in the framework's hooks, one a line and kind
    gpu: bool


def framework_hook_reads(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """Device values read on the host in a method the framework calls every training step
    (``on_train_batch_end``'s ``outputs["loss"].cpu()``): the cell holds no loop around them,
    so the per-step read rule and its patch do not reach them. Named with no bound: the reads'
    own time is not told apart from the hook's (on a GPU the sync wait holds them), and the cure
    (keep the values on the device, read them every N steps) is the hook's to write."""
    reads = tuple(s for s in facts.hook_reads if not s.cuda_only)
    if not reads:
        return None
    gpu = has_gpu(run)
    return found("syncs.hook_read", "low" if gpu else "info", HookReads(reads, gpu),
                 line=reads[0].cell_line)  # fmt: skip


@dataclass(frozen=True)
class RegisteredHookReads(Said):
    reads: tuple[SourceLine, ...]  # per-step reads in hooks the cell registers, one a line/kind
    removable: float | None  # the reading hooks' lines' share (sampled) or the sync wait's
    how: How
    gpu: bool
    bound: float | None  # gating the hooks to every EVERY-th step


def registered_hook_reads(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """Device values read on the host in a function the cell registers as a module or tensor
    hook (``m.register_forward_hook(make_hook(name))``): torch calls it on every forward or
    backward, so it reads every step though no line of the loop calls it (unseen round 21's
    activation_stats_hooks, 1.37x by hand, read as "ops too small"). Costed as the loop's reads
    are: the sync wait and the sampler's time on the hooks' reading lines (on the CPU,
    ``cpu_read_cost``). No patch: the step counter is the loop's and the hook runs inside the
    model's call; the words say where to gate it or remove it."""
    reads = tuple(s for s in facts.registered_hook_reads if not s.cuda_only)
    if not reads:
        return None
    gpu = has_gpu(run)
    # The hooks' whole bodies: gating a hook saves the reductions it reads as well as the reads.
    # A live hook of another cell or a user's file: its lines by their own file (cell.live_hooks).
    body = (
        tuple(SourceLine(line, "", "hook-body") for line in sorted(facts.registered_hook_lines))
        + facts.live_hook_lines
    ) or reads
    if gpu:
        removable, how = removable_share(analysis, body)
    else:
        removable, how = cpu_read_cost(analysis, facts, body)
    removed = every_n(removable)
    bound = gain_bound(removed, analysis)
    said = RegisteredHookReads(reads, removable, how, gpu, bound)
    severity: Level | Severity = level_of(analysis, removable, low=0.0) or "low"
    return found("syncs.module_hook_read", severity, said, phase_share=removed, bound=bound,
                 line=reads[0].cell_line)  # fmt: skip


TIE = 40  # where its findings tie: the verdict table's order (rules._families)
RULES = (per_step_syncs, framework_hook_reads, registered_hook_reads)
