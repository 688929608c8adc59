"""Words of the host- and launch-bound rules (rules/launch.py)."""

from __future__ import annotations

from gpu_notebook.analysis.compare_samples import RUN_TO_RUN
from gpu_notebook.analysis.floor_lines import REFERENCE_FLOOR_US
from gpu_notebook.analysis.host import HOST_BOUND_SHARE, overhead_near_line, overhead_reach
from gpu_notebook.formatting import fmt_gain, fmt_share
from gpu_notebook.records import HostOverhead
from gpu_notebook.rules.common import WARN
from gpu_notebook.rules.launch import (
    COMPILED_COST_SPREAD,
    TINY_OP_US,
    CompileGain,
    GpuStarved,
    TinyOps,
    UnfusedOptimizer,
)
from gpu_notebook.words.common import (
    Words,
    at,
    busy_evidence,
    phase_source,
    start_ups_clause,
    worder,
    words,
)


@worder(GpuStarved)
def gpu_starved(s: GpuStarved) -> Words:
    partial = bool(s.unclocked_events)
    idle = (
        f"{fmt_share(s.host_idle_low)}-{fmt_share(s.host_idle)} of the window (the timeline's "
        "gaps may hold the unclocked events' time; "
        if partial
        else f"{fmt_share(s.host_idle)} of the window ("
    )
    evidence = [
        busy_evidence(s.busy, s.busy_high, s.unclocked_events),
        f"GPU idle waiting for the host to launch work: {idle}"
        f"host wait {s.host_wait_us / 1e3:.1f} ms, launch gaps {s.kernel_wait_us / 1e3:.1f} ms)",
    ]
    if s.mean_kernel_us is not None:
        evidence.append(f"mean duration of the top kernels: {s.mean_kernel_us:.0f} us")
    if s.model_idle is None:
        evidence.append(f"gain if the host kept the GPU fed: {fmt_gain(s.bound)}")
    else:
        evidence.append(
            f"while the host ran the model's forward and backward (what compiling the model "
            f"reaches): {'at most ' if partial else ''}{fmt_share(s.model_idle)} of the window; "
            "gain if compiling removed it all: "
            f"{fmt_gain(s.bound)}"
        )
    return words(
        "The GPU waits for Python to launch the next kernel",
        evidence,
        "Capture steps with CUDA graphs (torch.compile(mode='reduce-overhead')) or give each "
        "kernel more work (bigger batch)."
        if s.compiled
        else "Fuse small ops with torch.compile (fewer, longer kernels), use fused optimizers, or a bigger batch.",
        "Nsight Systems gpu_time_util (< 50% busy); HTA idle-time breakdown (host wait, 30 us kernel wait)",
    )


def _tiny_line(host: HostOverhead | None) -> str:
    """The tiny-op line as read: in this machine's small-operator floors where they moved it."""
    if host is None or host.op_floor_us is None or host.op_floor_us <= 0:
        return f"{TINY_OP_US:.0f} us"
    line = host.small_op_us
    if abs(line - TINY_OP_US) < 0.1 * TINY_OP_US:
        return f"{line:.0f} us"
    low, high = REFERENCE_FLOOR_US
    return (
        f"{TINY_OP_US:.0f} us where the smallest operators run {low:g}-{high:g} us; "
        f"{line:.0f} us here, where they run {host.op_floor_us:.1f} us: "
        f"{line / host.op_floor_us:.1f}x this machine's floor"
    )


@worder(TinyOps)
def tiny_ops(s: TinyOps) -> Words:
    host = s.host
    if s.tiny or host is None:
        first = (
            f"the heaviest matmul/convolution takes {s.heaviest_us if s.heaviest_us is not None else s.sized_us:.0f} us a call: shorter than a GPU "
            f"kernel launch gap ({_tiny_line(host)}), so a GPU would wait on Python"
        )
    else:
        heaviest = (
            f"the heaviest matmul/convolution takes {s.heaviest_us:.0f} us a call, but "
            if s.heaviest_us is not None
            else ""
        )
        first = (
            f"{heaviest}the step is {host.ops_per_step:.0f} host operators of median "
            f"{host.median_op_us:.0f} us: Python between them and operators under "
            f"{host.small_op_us:.0f} us take {fmt_share(host.between_ops_share + host.small_op_share)} "
            + (
                f"(up to {fmt_share(overhead_reach(host))} in a traced step: near the "
                f"{fmt_share(HOST_BOUND_SHARE)} line) "
                if overhead_near_line(host)
                else ""
            )
            + "of it, overhead rather than work"
        )
    evidence = [
        first,
        f"host time between operators: {fmt_share(s.residual or 0.0)} of the step ({phase_source(s.phases)}); "
        "the rest of the overhead sits inside every phase",
    ]
    if host is not None:
        evidence.extend(_core_wait(host.core_wait_share))
    if s.median_s is not None:
        evidence.append(f"median step {s.median_s * 1e3:.2f} ms with batch {s.batch}")
    k = s.factor
    if s.outcome == "batch" and s.accumulation is not None:
        evidence.append(
            f"gain with micro-batches x{k}: samples/s {fmt_gain(s.bound, s.low)} (the model side per "
            f"sample shrinks at most x{k}, data loading per sample not at all"
            f"{start_ups_clause(s.start_ups)}); "
            f"{s.accumulation_key} {s.accumulation} -> {s.accumulation // k} keeps the samples of each "
            "optimizer step, so the learning rate stays"
        )
        fix = (
            f"Give each step more work: micro-batch size x{k}, {s.accumulation_key} "
            f"{s.accumulation} -> {s.accumulation // k} (the same samples per optimizer step)"
            + ("" if s.compiled else "; then torch.compile to fuse the remaining small ops")
            + ". More GPUs would not help."
        )
    elif s.outcome == "batch":
        evidence.append(
            f"gain with a batch x{k}: samples/s {fmt_gain(s.bound, s.low)} (the model side per sample "
            f"shrinks at most x{k}, data loading per sample not at all{start_ups_clause(s.start_ups)}); "
            "the learning rate scales too (check convergence)"
        )
        fix = (
            f"Give each step more work: batch size x{k} (learning rate x{k})"
            + ("" if s.compiled else "; then torch.compile to fuse the remaining small ops")
            + ". More GPUs would not help."
        )
    elif s.outcome == "samples":
        where = s.sample_loops[0]
        evidence.append(
            f"{at(where)} `{where.text}` calls the model once per sample of the batch: "
            "every operator runs on one sample and its overhead is paid per sample, so a bigger "
            "batch adds calls of the same size (only the once-a-step work, the optimizer step, "
            "zero_grad and the backward call's own cost, is shared by more samples)"
        )
        fix = (
            f"Batch the samples: call the model once on the whole batch instead of per sample "
            f"({at(where)}); pad or pack variable-length samples (torch.nn.utils.rnn."
            "pad_sequence with a mask, or pack_padded_sequence), or torch.func.vmap over a "
            "per-sample function. A bigger batch alone shares only the once-a-step work. More GPUs "
            "would not help."
        )
    elif s.outcome == "compiled":
        evidence.append(
            "the model is compiled already (torch.compile): no DataLoader found to enlarge the batch"
        )
        fix = (
            "Make each step do more work: a bigger batch where the batches are made "
            "(torch.compile is already on; mode='reduce-overhead' captures CUDA graphs on a GPU)."
        )
    elif s.compile is not None and s.compile.small:
        evidence.append(_compile_gain_line(s.compile))
        evidence.append(_compile_sure_line(s.compile))
        fix = (
            "Small: torch.compile may have no measurable effect here (not offered): what it "
            "surely removes is within what two runs of the same script differ by "
            f"({RUN_TO_RUN:.0%}), the rest is operator work a compiled graph runs too. Make each "
            "step do more work (a bigger batch where the batches are made), and see the other "
            "findings for the host work around the model."
        )
    elif s.compile is not None:
        evidence.append(_compile_gain_line(s.compile))
        if s.compile.sure_gain is not None:
            evidence.append(_compile_sure_line(s.compile))
        fix = (
            "Fuse small ops with torch.compile (the first steps pay its compile time: the gain "
            "shows once they are past), or make each step do more work (bigger batch)."
        )
    else:
        evidence.append(
            "no DataLoader found to enlarge the batch: compile instead (not bounded: fusion shortens ops, it removes no phase)"
        )
        fix = (
            "Fuse small ops with torch.compile (the first steps pay its compile time), or make "
            "each step do more work (bigger batch)."
        )
    if s.outcome == "batch" and s.low is not None and s.per_sample is not None:
        evidence.append(
            f"at least {s.low:.2f}x: operators whose work grows with the batch (matmuls, "
            f"convolutions, calls of {_tiny_line(s.host)} or more; on a CPU also what the "
            "forward's and backward's smaller calls take beyond a call's fixed cost) take "
            f"{fmt_share(s.per_sample)} of the model side; only the rest (optimizer step, "
            "zero_grad, Python between operators, dispatch) is paid once a step"
            + (
                f"; torch's threads ask {s.stretch:.1f}x the free cores: the grown operators' "
                "parallel regions wait for them, counted as up to "
                f"{s.stretch:.1f}x longer a sample"
                if s.stretch > 1.0
                else ""
            )
        )
    if s.module_loops:
        m = s.module_loops[0]
        evidence.append(
            f"line {m.line} `{m.text}` calls the {m.count} `{m.layer}` layers of `self.{m.attr}` "
            "one by one in forward: each is a few tiny ops forward and backward, and the "
            "optimizer updates each one's tensors apart"
        )
        fix = (
            f"First, stack the {m.count} `{m.layer}` layers of `self.{m.attr}` into one (an "
            f"nn.{m.layer} whose outputs are theirs side by side, split or viewed after it; or "
            f"torch.func.stack_module_state with vmap): line {m.line} runs them one by one. " + fix
        )
    return words(
        "The model's ops are too small: per-op overhead dominates its time",
        evidence,
        fix,
        "HTA idle-time breakdown (30 us kernel-wait threshold); TraceML step_time policy (residual "
        "warn 10%)",
    )


def _floors(c: CompileGain) -> str:
    """The estimate's scale where this machine's operator floor moved it (a tenth or more)."""
    if abs(c.floors - 1.0) < 0.1:
        return ""
    return f" (this machine's smallest operators run {c.floors:.1f}x the measured machine's)"


def _compile_gain_line(c: CompileGain) -> str:
    if c.bound is None and c.own_us is not None:
        return (
            f"no DataLoader found to enlarge the batch: compile instead, not bounded: a compiled "
            f"graph pays its own guards and wrappers, one input a parameter tensor ({c.tensors} "
            f"here): about {c.own_us / 1e3:.2f} ms a step by a lower estimate{_floors(c)}, "
            "as much as half "
            f"the {c.removed_us / 1e3:.2f} ms it could remove at most (the model's forward and "
            "backward less its matmul/convolution calls): it may be slower"
        )
    where = (
        "over the run's unprofiled steps, as the step clock timed them"
        if c.over_run
        else "in the profiled window"
    )
    outside = (
        f"; the host work around the model in the loop ({fmt_share(c.outside)} of the step) stays "
        "as it is too"
        if c.outside >= 0.005
        else ""
    )
    return (
        f"no DataLoader found to enlarge the batch: compile instead, gain {fmt_gain(c.bound)} once "
        f"compiled (the first steps' compile time not counted): the model's forward and backward "
        f"({fmt_share(c.model)} {where}) less its matmul/convolution calls "
        f"({fmt_share(c.matmul)}, by their fastest calls: a compiled graph still calls them), all "
        f"removed. Compiling the model leaves the optimizer step and the data wait as they are"
        f"{outside}; no low end: the compiled graph's own guards and kernel calls are not in "
        "this run"
    )


def _compile_sure_line(c: CompileGain) -> str:
    gaps = c.gaps_us if c.gaps_us is not None else 0.0
    calls = f", {c.calls} calls a step (one a micro-batch)" if c.calls > 1 else ""
    head = (
        f"what compiling surely removes: the time between the model's operators (the forward's "
        f"Python, the autograd engine between backward nodes), {gaps / 1e3:.2f} ms a traced step "
        f"by each gap's fastest, less a compiled graph's own calls and kernels as far as they "
        f"may reach ({COMPILED_COST_SPREAD:.0f}x a lower estimate{_floors(c)}{calls})"
    )
    if not c.sure or c.sure_gain is None or c.sure_gain < 1.005:  # said as 1.00x: nothing
        return (
            f"{head}: nothing left, so no low end: from about 1.0x (on a CPU the compiled "
            "graph's kernels do the eager operators' work no faster, and it may be slower)"
        )
    return f"{head}: {fmt_share(c.sure)} of the step, at least {c.sure_gain:.2f}x"


_CPU_OPTIM_SOURCE = (
    "torch/utils/_foreach_utils.py (torch 2.13): foreach kernels exist for cuda, xpu, mtia, not "
    "cpu; torch/optim/sgd.py: without momentum or weight decay the update is one add_ a tensor"
)


def _optimizer_evidence(s: UnfusedOptimizer) -> str:
    whole = s.whole
    if whole is None:
        return (
            f"optimizer step and zero_grad: {fmt_share(s.optimizer)} of the step "
            f"({phase_source(s.phases)}; the step clock did not time the optimizer over the run)"
        )
    clock = (
        "its own steps on the loop thread's CPU clock over the steps' own time, step clock"
        if whole.cpu_share is not None and whole.share == whole.cpu_share
        else "step clock"
    )
    line = (
        f"optimizer step: {fmt_share(s.optimizer)} of the step time over {whole.steps} steps "
        f"({clock}, outside the profiled window)"
    )
    if s.profiled is not None and abs(s.profiled - s.optimizer) >= 0.01:
        line += (
            f"; the profiled window read {fmt_share(s.profiled)} (the profiler's cost per op "
            "lands on the update's many small ops)"
        )
    return line


def _fused_gain_line(s: UnfusedOptimizer) -> str:
    gain = fmt_gain(s.bound, s.low)
    if s.kept is None:
        return (
            f"gain if the update took no time: {gain} (from the least update share the run's "
            "steps support, 90% interval, to the run's; fusing trims it, it does not remove it)"
        )
    size = f", {s.grad_bytes / 1e6:.2g} MB" if s.grad_bytes else ""
    whose = "the update's" if s.reached is None or s.reached >= 1.0 else f"{s.cls}'s update"
    line = (
        f"gain if the fused update keeps {fmt_share(s.kept)} of {whose} time: {gain} "
        f"(on the CPU a fused step still pays its fixed cost, a call a tensor and one pass over "
        f"the parameters: {s.tensors} tensors{size} here; from the least update share the run's "
        "steps support, 90% interval, to the run's"
    )
    if s.outside > 0:
        line += (
            f"; the high end also counts up to {fmt_share(s.outside)} of the update's time "
            "outside it: the unfused update's temporaries cost the forward and backward their "
            "caches"
        )
    f = s.faults
    if f is None and s.faults_off is not None:
        return (
            f"{line}; its page faults are not counted: they are read up to the end of our "
            f"profiler window (step {s.faults_off}) and too few were read there; the heap its "
            "buffers leave behind is ours as much as the program's (the update's temporaries may "
            "stop faulting after it), so the high end is the model's alone and may under-read a "
            "fused step's gain)"
        )
    if f is None:
        return line + ")"
    outside = (
        f", and the step {f.outside:.0f} more outside it, which the high end also counts (the "
        "heap its temporaries leave trimmed makes the next gradients fault again)"
        if f.outside >= 1
        else ""
    )
    return (
        f"{line}; the high end counts the update's page faults whole: {f.inside:.0f} fresh pages "
        f"a step for its temporaries at {f.fault_us:.1f} us each here, "
        f"{fmt_share(f.inside_part)} of its time, which a fused step does not make{outside})"
    )


def _split_line(s: UnfusedOptimizer) -> str:
    """The update's time by optimizer class, as the trace or the step clock split it, and the
    fix's part."""
    each = ", ".join(f"{cls} {fmt_share(p)}" for cls, p in s.split)
    where = (
        f"each optimizer's step on the loop thread's CPU clock over {s.split_steps} steps"
        if s.split_source == "clock"
        else "the profiled steps' Optimizer.step ranges"
    )
    return (
        f"the update's time by optimizer ({where}): {each}; "
        f"{s.implementation}=True reaches {fmt_share(s.reached or 0.0)} of it, "
        f"{fmt_share(s.optimizer * (s.reached or 0.0))} of the step"
    )


def _made(s: UnfusedOptimizer) -> str:
    """Where an optimizer the patch cannot reach was made: an earlier cell, or (a script's
    global) a call of the script whose inside the reading does not see."""
    if s.made_in:
        return "built in " + ", ".join(f"In[{n}]" for n in s.made_in)
    return "built in an earlier cell" if s.made_before else "made by a call of the script"


def _other_optimizers(s: UnfusedOptimizer) -> list[str]:
    beside = []
    if s.split and s.reached is not None and s.reached < 1.0:
        beside = [_split_line(s) + ": the gain rests on that part, no least gain is claimed"]
    elif s.beside:
        beside = [
            f"the update time above also holds the step of {', '.join(s.beside)}, which "
            f"{s.implementation}=True does not change; how it splits between the optimizers was "
            "not measured: the gain is a ceiling, no least gain is claimed"
        ]
    if not s.others:
        return beside
    names = ", ".join(f"`{n}`" for n in s.others)
    if s.built_here:
        return [
            f"{names} ({_made(s)}) also steps here without {s.implementation}=True: "
            "the patch does not reach it (pass the flag where it is created), so no least gain "
            "is claimed",
            *beside,
        ]
    return [
        f"{names} ({_made(s)}) also steps here without {s.implementation}=True",
        *beside,
    ]


@worder(UnfusedOptimizer)
def unfused_optimizer(s: UnfusedOptimizer) -> Words:
    cls = s.cls
    if s.no_cpu_gain is not None:
        why = (
            f"torch has no foreach kernels for CPU tensors: {cls}(foreach=True) on the CPU runs the "
            "same per-tensor loop"
            if s.no_cpu_gain == "foreach"
            else f"{cls} without momentum or weight decay updates each tensor with one add_: one pass "
            "over the memory already, which a fused CPU kernel cannot shorten"
        )
        return words(
            f"The {cls} step takes {fmt_share(s.optimizer)} of the step; fusing it would not "
            "shorten it here",
            [_optimizer_evidence(s), why],
            f"No optimizer flag to change on the CPU: the update's time is its arithmetic "
            f"over {cls}'s parameters (a smaller model, or the GPU, shortens it).",
            _CPU_OPTIM_SOURCE,
        )
    if s.bound is None and s.reached is not None:
        # The flag's part of the update is under the rule's line: said, not offered.
        return words(
            f"The optimizer step takes {fmt_share(s.optimizer)} of the step, mostly in optimizers "
            f"{s.implementation}=True does not change",
            [_optimizer_evidence(s), _split_line(s)],
            f"No optimizer flag worth changing: {s.implementation}=True on {cls} would change "
            f"under {fmt_share(WARN)} of the step (the rest is the update's arithmetic in the "
            "other optimizers).",
            "TraceML step_time policy (warn 10%); PyTorch optim docs (foreach/fused implementations)",
        )
    return words(
        f"The {cls} step updates each parameter tensor separately",
        [
            _optimizer_evidence(s),
            f"{cls}"
            + (f" (`{s.name}`)" if s.name else "")
            + f" without {s.implementation}=True"
            + ("" if s.built_here else f", {_made(s)}"),
            *_other_optimizers(s),
            _fused_gain_line(s),
        ],
        f"Pass {s.implementation}=True to {cls}(...): one kernel (or a few) for all parameters "
        "(they sum in another order: the loss can differ in its last digits).",
        "TraceML step_time policy (warn 10%); PyTorch optim docs (foreach/fused implementations)",
    )


# A wait for a core under this share of the traced steps is not said: a quiet machine's.
_CORE_WAIT_SAID = 0.05


def _core_wait(share: float | None) -> list[str]:
    """The traced steps' wait for a core, as its own item: the machine's load, not the code's."""
    if share is None:
        return [
            "waiting for a core: not measured here (no Linux schedstat); other processes' "
            "load, if any, stays in the shares above"
        ]
    if share < _CORE_WAIT_SAID:
        return []
    return [
        f"waiting for a core: {fmt_share(share)} of the traced steps' time (other processes "
        "load this machine), taken out of the shares above: they are the code's own split"
    ]
