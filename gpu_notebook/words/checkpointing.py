"""Words of the activation checkpointing rule (rules/checkpointing.py)."""

from __future__ import annotations

from gpu_notebook.formatting import fmt_bytes, fmt_ms, fmt_share
from gpu_notebook.rules.checkpointing import CheckpointingUnneeded
from gpu_notebook.words.common import Words, worder, words

_FORMS = {
    "checkpoint": "torch.utils.checkpoint.checkpoint",
    "checkpoint_sequential": "torch.utils.checkpoint.checkpoint_sequential",
    "hf_enable": "HF's gradient/activation_checkpointing_enable()",
    "hf_argument": "HF's gradient/activation_checkpointing=True",
}


@worder(CheckpointingUnneeded)
def checkpointing_unneeded(s: CheckpointingUnneeded) -> Words:
    per_step = s.recompute_us / 1e6 / max(1, s.steps)
    timed = "their kernels' time" if s.on_device else "their time on the host"
    evidence = [
        f"the backward runs the checkpointed forward again: {s.ops} recomputed operator(s) in "
        f"{s.steps} profiled step(s), {timed} {fmt_ms(per_step)} a step "
        f"({fmt_share(s.recompute_share)} "
        + (
            "of a step without the profiler)"
            if s.unprofiled_step_us is not None
            else "of the step)"
        ),
    ]
    if s.forward_overhead_us is not None or s.backward_overhead_us is not None:
        steps = max(1, s.steps)
        hooks = (
            f", its saved-tensor pack hooks inside the forward's operators about "
            f"{fmt_ms(s.pack_us / 1e6 / steps)} a step (as much as their unpack)"
            if s.pack_us
            else ""
        )
        step = (
            f"of a step without the profiler ({fmt_ms(s.unprofiled_step_us / 1e6)} as read "
            "here: the profiler slows the small operators around the checkpoint more than its "
            "own Python)"
            if s.unprofiled_step_us is not None
            else "of the step"
        )
        if s.floored_base:
            step += (
                ", the step and the checkpoint's pieces each at their least over the profiled "
                "steps (a time slice another process took is in neither)"
            )
        evidence.append(
            f"turning it off removes up to {fmt_share(s.share)} {step}: recompute "
            f"{fmt_share(s.recompute_share)}, the checkpoint's own overhead "
            f"{fmt_share(s.overhead_share)} (its wrapper around each block's forward "
            f"{fmt_ms((s.forward_overhead_us or 0.0) / 1e6 / steps)} a step, its backward "
            f"nodes beside the recompute {fmt_ms((s.backward_overhead_us or 0.0) / 1e6 / steps)} "
            f"a step{hooks})"
        )
    if s.memory is not None and s.peak_bytes is not None and s.total_bytes:
        what = "GPU memory" if s.memory == "gpu" else "this process's RSS against the machine's RAM"
        evidence.append(
            f"memory has room: peak {what} {fmt_bytes(s.peak_bytes)} of "
            f"{fmt_bytes(s.total_bytes)} ({fmt_share(s.peak_bytes / s.total_bytes)})"
        )
    else:
        evidence.append("memory headroom not read: whether the activations would fit is not known")
    if s.line is not None and s.form is not None:
        evidence.append(f"line {s.line}: `{s.text}` checkpoints ({_FORMS[s.form]})")
    evidence.append("without it, peak memory grows by about the activations the blocks keep")
    if s.line is None:
        fix = (
            "No line of this cell checkpoints: the model's own code does (a library block, or "
            "a config with gradient_checkpointing on). Turn it off there (HF: "
            "model.gradient_checkpointing_disable(), transformers 5: "
            "model.activation_checkpointing_disable(); Lightning/accelerate: the module's "
            "checkpoint calls) if the activations fit."
        )
    elif s.memory is None:
        fix = (
            f"{_undo(s)} if the activations fit in memory (not read here); no change to this "
            "cell is offered."
        )
    else:
        fix = f"{_undo(s)}: memory has room for the activations."
    return words(
        "Activation checkpointing recomputes the forward while memory has room",
        evidence,
        fix,
        "torch.utils.checkpoint docs: checkpointing trades compute for memory",
    )


def _undo(s: CheckpointingUnneeded) -> str:
    """How to turn off the checkpointing the line holds, in the line's own terms."""
    if s.form == "hf_argument" and s.switch is not None:
        return f"Set {s.switch}=False in the TrainingArguments at line {s.line}"
    if s.form == "hf_enable" and s.switch is not None:
        return (
            f"Call {s.switch.removesuffix('_enable')}_disable() in place of the call at line "
            f"{s.line} (or drop the call)"
        )
    return (
        f"Call the checkpointed function directly at line {s.line} (or turn "
        "gradient_checkpointing off)"
    )
