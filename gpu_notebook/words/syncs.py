"""Words of the per-step sync rules (rules/syncs.py)."""

from __future__ import annotations

from gpu_notebook.formatting import fmt_gain, fmt_share
from gpu_notebook.rules.syncs import (
    EVERY,
    HookReads,
    How,
    NeededReads,
    PerStepSyncs,
    RegisteredHookReads,
)
from gpu_notebook.words.common import Words, at, lines_at, worder, words

_SOURCE = (
    "TraceML step_time policy (residual warn 10%, critical 20%); PyTorch performance tuning "
    "guide (avoid unnecessary CPU-GPU synchronization)"
)
_ON_THE_CPU = (
    "measured on the CPU, where a read costs little; on a GPU each read also waits for every "
    "queued kernel"
)
_KIND_WORDS = {
    "item": ".item()",
    "cpu": ".cpu()",
    "numpy": ".numpy()",
    "tolist": ".tolist()",
    "float": "float()/int() of a tensor",
    "synchronize": "synchronize()",
    "print-tensor": "print of a tensor",
    "log-tensor": "logging of a tensor",
    "fstring-tensor": "f-string of a tensor",
    "bool": "a branch on a tensor's truth value",
}
HOW: dict[How, str] = {
    "unmeasured": "not measured (no trace and no line sampling)",
    "sync": "the measured sync wait (formatting time not sampled)",
    "lines": "the sampled time on those lines",
    "both": "the measured sync wait and the sampled time on those lines",
    "few-samples": "not measured: too few stack samples of those lines",
    "unsampled": (
        "not measured: no line samples, and no phase of the step holds the reads alone (the "
        "time in .item() leaves out their formatting; a function the model or the optimizer "
        "calls runs inside their phases)"
    ),
    "with-bar": (
        "not measured: no line samples, and the host time outside the model that holds the "
        "reads also holds the progress bar those lines redraw every step (said under its own "
        "finding)"
    ),
    "residual": (
        "the step clock's host time outside the model and the optimizer, which holds those "
        "lines (and other host work)"
    ),
}
_CPU_READ = (
    "on the CPU a read waits for nothing: reading less often saves only its call and formatting"
)


def _each_read(gpu: bool) -> str:
    """What each read of a device value costs where it ran (a GPU, or the CPU)."""
    if gpu:
        return "each read waits for every queued kernel: the host cannot run ahead of the GPU"
    return _ON_THE_CPU


def _read_cost(s: NeededReads, cost: str) -> tuple[str, str]:
    """A needed read's cost lines: its share of the step and how it was read, what a read waits for."""
    return f"its cost: {cost} of the step ({HOW[s.how]})", _each_read(s.gpu)


@worder(PerStepSyncs)
def per_step_syncs(s: PerStepSyncs) -> Words:
    evidence: list[str] = []
    optional = s.optional
    if optional:
        kinds = sorted({_KIND_WORDS.get(line.kind, line.kind) for line in optional})
        first = optional[0]
        evidence.append(
            f"every step reads device values on the host ({', '.join(kinds)}): "
            + lines_at(optional)
        )
        evidence.append(f"{at(first)}: `{first.text}`")
    else:
        evidence.append(
            f"host syncs take {fmt_share(s.sync or 0.0)} of the step; the reads are not in this cell's "
            "source (a function from another cell?)"
        )
    if s.sync is not None:
        evidence.append(f"waiting in .item()/synchronize itself: {fmt_share(s.sync)} of the step")
    removable = fmt_share(s.removable) if s.removable is not None else "n/a"
    evidence.append(f"what reading less often removes: {removable} of the step ({HOW[s.how]})")
    if s.drawn is not None:
        evidence.append(
            f"{fmt_share(s.drawn)} of the step on those lines is a progress bar drawing (in its "
            "library's frames), not the read: left out here, said under its own finding"
        )
    if s.other_work is not None:
        evidence.append(
            f"the rest of the host time outside the model ({fmt_share(s.other_work)}) is other "
            "Python work, which reading less often does not remove"
        )
    if s.needed:
        evidence.append(
            f"{at(s.needed[0])} reads a value the loop needs (`{s.needed[0].text}`): kept as it is"
        )
    if s.reads is not None:
        evidence.append(f"{s.reads:.1f} scalar read(s) per step in the trace")
    if not s.gpu:
        said = f"{_CPU_READ} (on a GPU each read also waits for every queued kernel)"
        evidence.append(said if s.removable is not None else f"{_CPU_READ}, unmeasured here")
    if s.gpu or s.removable is not None:
        evidence.append(
            f"gain if values are read every {EVERY} steps: {fmt_gain(s.bound)} (Amdahl over that share)"
        )
        fix = (
            f"Read losses/metrics every {EVERY} steps (or keep a running sum on the device with "
            ".detach() and read it once); don't print tensors every step."
        )
        return words("The loop reads device values on the host every step", evidence, fix, _SOURCE)
    # On the CPU with nothing measuring the read's cost: no patch offered (rules/syncs.py).
    return words(
        "The loop reads tensor values every step; on the CPU their cost was not measured",
        evidence,
        f"No patch offered: {_CPU_READ}, which this run did not measure. To measure it, sample "
        f"the lines (`--lines all`); on a GPU each read also waits for every queued kernel, and "
        f"reading values every {EVERY} steps pays there.",
        _SOURCE,
    )


@worder(NeededReads)
def needed_reads(s: NeededReads) -> Words:
    cost = fmt_share(s.removable) if s.removable is not None else "not measured"
    if s.grad_norm:
        return _grad_norm_read(s, cost)
    if s.first.called_in is not None:
        return _read_in_callee(s, cost)
    if s.first.feeds is not None:
        return _feeds_the_step(s, cost)
    if s.first.handed_to is not None:
        return _handed_to_host(s, cost)
    if not s.first.stops and s.first.kind == "bool":
        return _guard_on_read(s, cost)
    if not s.first.stops:
        return _branch_on_read(s, cost)
    evidence = [
        f"{at(s.first)} reads a device value every step and the loop needs it: `{s.first.text}`",
        *_read_cost(s, cost),
        f"gain if the condition is checked every {EVERY} steps: {fmt_gain(s.bound)} (the loop may then "
        f"run up to {EVERY - 1} steps past its stop)",
    ]
    return words(
        "The loop reads a value it needs every step (a stop condition)",
        evidence,
        f"The read is needed, so no patch: to make it cheaper, compute the condition on the device "
        f"(`stop = loss.detach() < threshold`) and read it every {EVERY} steps "
        f"(`if step % {EVERY} == 0 and stop.item(): break`), or stop on an epoch boundary.",
        _SOURCE,
    )


def _branch_on_read(s: NeededReads, cost: str) -> Words:
    """A read whose value picks work inside the step and never ends the loop (a best-so-far
    snapshot, a conditional log): no stop, no threshold to move to the device; what makes it
    cheaper is deciding on fewer steps (unseen round 11: a per-step ``if loss.item() < best:``
    copying the model was told to ``break`` on a device-side threshold)."""
    return words(
        "The loop branches on a device value every step",
        [
            f"{at(s.first)} reads a device value every step and an `if` of the loop decides on "
            f"it: `{s.first.text}`",
            *_read_cost(s, cost),
            f"gain if the branch is decided every {EVERY} steps: {fmt_gain(s.bound)}",
        ],
        f"The branch needs the value, so no patch: to make it cheaper, decide it on fewer steps "
        f"(every {EVERY} steps, or once an epoch on the validation loss, as a best-model "
        "snapshot usually is): a batch's loss is noisy, and whatever the branch does (a copy "
        "of the model, a log) is paid each time it is taken.",
        _SOURCE,
    )


def _guard_on_read(s: NeededReads, cost: str) -> Words:
    """A test on a tensor's truth value that skips or picks work in the step (``if not
    torch.isfinite(norm): continue`` after clipping): no ``.item()`` is written, yet the test
    reads the device; what makes it cheaper is a guard that stays on the device."""
    return words(
        "The loop tests a tensor's value every step (a read with no .item() written)",
        [
            f"{at(s.first)}: `{s.first.text}`: an `if` on a tensor reads its value on the host "
            "(Tensor.__bool__) on every step",
            *_read_cost(s, cost),
            f"gain if the test is made every {EVERY} steps: {fmt_gain(s.bound)}",
        ],
        "The branch needs the value, so no patch. To make it cheaper on a GPU, keep the guard "
        "on the device (scale the gradients by `torch.isfinite(norm)` rather than skipping the "
        "step, as AMP's GradScaler skips a step without reading), or test it every "
        f"{EVERY} steps.",
        _SOURCE,
    )


def _feeds_the_step(s: NeededReads, cost: str) -> Words:
    """A read whose value the step's work takes (``nodes, hops = sample(seeds.tolist())`` before
    ``model(feats[nodes], hops)``): gated, the other steps would train on a stale value (unseen
    round 21: the read-less-often patch did so). The line's own time is the work it feeds, not
    the read's; on a GPU the read waits for the kernels that make the value."""
    line = s.first
    evidence = [
        f"{at(line)}: `{line.text}`: the value goes on into the step's work (through "
        f"`{line.feeds}`), so it is read on every step; read every {EVERY} steps, the other "
        "steps would train on a stale value",
        f"its cost: {cost} of the step (the wait in the read alone: the line's other time is "
        "the work the value feeds, which reading less often would not remove)",
        _each_read(s.gpu),
    ]
    return words(
        "The step's work needs a device value read every step",
        evidence,
        "The step needs the value, so no patch. On a GPU, make it where it is used: keep the "
        "indices or lengths it reads on the CPU as the data comes (index host tensors, move only "
        "the result), or compute what it decides on the device.",
        _SOURCE,
    )


def _handed_to_host(s: NeededReads, cost: str) -> Words:
    """A read handed to host code each step (an action for a numpy environment): it cannot be
    read less often; what makes it cheaper is fewer reads per step's work, not a gate."""
    callee = s.first.handed_to
    return words(
        f"The loop hands a device value to `{callee}` every step",
        [
            f"{at(s.first)}: `{s.first.text}`: `{callee}` takes the value as a number, and "
            "what it returns decides what the loop does next",
            *_read_cost(s, cost),
        ],
        f"The read is needed every step, so no patch. To make it cheaper, give `{callee}` "
        "more per read (a batch of values in one `.tolist()`, e.g. several environments stepped "
        "together) or, on a GPU, compute what it takes on the CPU.",
        _SOURCE,
    )


def _grad_norm_read(s: NeededReads, cost: str) -> Words:
    """A gradient's norm read every step to clip or log by hand (unseen round 16: a
    ``clip_by_hand`` summing ``p.grad.norm().item() ** 2`` over 40 parameters, a read each):
    ``clip_grad_norm_`` computes the total norm and scales on the device, no read."""
    line = s.first
    where = f"`{line.called_in}`" if line.called_in is not None else "the step loop"
    evidence = [
        f"{at(line)}, in {where}, every step: `{line.text}` (one read for each parameter "
        "it loops over)",
        *_read_cost(s, cost),
    ]
    fix = (
        "No patch: the norm decides the clip. Let torch compute it on the device: "
        "`torch.nn.utils.clip_grad_norm_(params, max_norm)` takes the total norm of all the "
        "gradients and scales them with no read (it returns the norm as a tensor: read it only "
        "on the steps that log)."
    )
    return words(f"{where[0].upper()}{where[1:]} reads a gradient norm every step", evidence,
                 fix, _SOURCE)  # fmt: skip


def _read_in_callee(s: NeededReads, cost: str) -> Words:
    """A read inside a function the step runs through its calls (the model's ``forward``): the
    value feeds the step's own work, so no gate can skip it (unseen round 13: ``lengths.cpu()``
    for ``pack_padded_sequence`` in ``Net.forward``, unseen). Where the value is needed on the
    CPU and the loop moved it to the device, the cure is not to move it."""
    line, where = s.first, s.first.called_in
    evidence = [
        f"{at(line)}, in `{where}`, which the step loop runs every step: `{line.text}`",
        *_read_cost(s, cost),
    ]
    if line.keep_on_host is not None and line.handed_to is not None:
        evidence.append(
            f"`{line.handed_to}` takes this value on the CPU; the loop moves it to the device on "
            f"line {line.keep_on_host}, and `{where}` copies it back every step"
        )
        fix = (
            f"No patch: the read is needed while the value is on the device. Keep it on the CPU "
            f"as the loader makes it: do not move it on line {line.keep_on_host} (move only the "
            f"tensors the model computes with); `{line.handed_to}` then reads a CPU tensor, "
            "which waits for nothing."
        )
    else:
        fix = (
            f"No patch: `{where}` needs the value to go on, and a read there cannot be skipped "
            "or gated. To make it cheaper, compute it on the host before the batch goes to the "
            "device (in the dataset or the collate), or keep the work on the device (tensor "
            "operations instead of .item()/.tolist() and Python branches)."
        )
    return words(f"`{where}` reads a device value every step", evidence, fix, _SOURCE)


@worder(HookReads)
def hook_reads(s: HookReads) -> Words:
    """Reads in a method the framework calls every step (cell/syncs.hook_reads; unseen round
    15: a Lightning ``on_train_batch_end`` appending ``outputs["loss"].cpu()`` every step)."""
    where = sorted({r.called_in for r in s.reads if r.called_in is not None})
    first = s.reads[0]
    kinds = sorted({_KIND_WORDS.get(r.kind, r.kind) for r in s.reads})
    one_a_line = {(r.origin, r.line): r for r in reversed(s.reads)}.values()
    evidence = [
        f"{at(r)}, in `{r.called_in}`, which the framework calls every training step: `{r.text}`"
        for r in sorted(one_a_line, key=lambda r: r.line)
    ]
    evidence.append(f"reads by {', '.join(kinds)}")
    evidence.append(_each_read(s.gpu))
    return words(
        f"`{where[0] if where else first.text}` reads device values every step",
        evidence,
        "No patch: the hook is the framework's to call. Keep the values on the device "
        "(append `.detach()`ed tensors, `torch.stack` and read them once at the epoch's end) or "
        f"read them every {EVERY} steps (under `if batch_idx % {EVERY} == 0:`, or the step "
        "the hook is handed).",
        _SOURCE,
    )


@worder(RegisteredHookReads)
def registered_hook_reads(s: RegisteredHookReads) -> Words:
    """Reads in a function the cell registers as a module or tensor hook (unseen round 21's
    activation_stats_hooks: ``make_hook(name)``'s three ``.item()`` on 20 layers every forward)."""
    hooks = sorted({r.called_in for r in s.reads if r.called_in is not None})
    one_a_line = {(r.origin, r.line): r for r in reversed(s.reads)}.values()
    evidence = [
        f"{at(r)}, in the {r.called_in}, which torch runs on every forward or backward of the "
        f"hooked module or tensor: `{r.text}`"
        for r in sorted(one_a_line, key=lambda r: r.line)
    ]
    kinds = sorted({_KIND_WORDS.get(r.kind, r.kind) for r in s.reads})
    evidence.append(f"reads by {', '.join(kinds)}, each with the reduction it reads")
    cost = fmt_share(s.removable) if s.removable is not None else "n/a"
    evidence.append(f"the reading hooks' own lines: {cost} of the step ({HOW[s.how]})")
    evidence.append(_each_read(s.gpu))
    if s.removable is not None:
        evidence.append(
            f"gain if the hooks read every {EVERY} steps: {fmt_gain(s.bound)} (Amdahl over that "
            "share)"
        )
    first = hooks[0] if hooks else s.reads[0].text
    return words(
        f"A registered {first.split(' (')[0]} reads device values on every step",
        evidence,
        "No patch: the hook runs inside the model's call, where the loop's step counter is not "
        f"in reach. Gate it to the logging steps: a flag the loop sets every {EVERY} steps "
        "(`log_now = step % "
        f"{EVERY} == 0`) and `if not log_now: return` at the hook's top ({at(s.reads[0])}); or "
        "keep the handle the register call returns and `handle.remove()` it after a debug run. "
        "To keep every step's statistic, keep it on the device (append the `.detach()`ed "
        "tensor, `torch.stack` and read them once at the epoch's end).",
        _SOURCE,
    )
