"""Words of rules/python_work: the loop body's own work outside the model, at its lines."""

from __future__ import annotations

from gpu_notebook.formatting import fmt_gain, fmt_share
from gpu_notebook.rules.python_work import EVERY, LoopBodyWork
from gpu_notebook.words.common import Words, at, lines_at, worder, words

_SOURCE = (
    "PyTorch docs: torch.utils.data (Dataset, collate_fn and num_workers move per-sample work "
    "off the training loop's thread); torch.optim.swa_utils (AveragedModel, "
    "get_ema_multi_avg_fn); TraceML step_time policy (residual warn 10%, critical 20%)"
)

_TITLES = {
    "input": "The loop body works on each batch in Python before the model",
    "ema": "The loop updates an averaged (EMA) copy of the model on every step",
    "host": "The loop body's own work after the update takes a share of every step",
}

_ADVICE = {
    "input": "Move it off the loop's thread: into the Dataset's __getitem__ or a collate_fn "
    "(tokenise, augment and pad there) with DataLoader(num_workers=N), or do it once before "
    "training (pre-tokenised tensors). No patch: where it can go depends on what builds your "
    "batches; a bigger batch or torch.compile leaves this Python as it is, and a GPU does not "
    "run it.",
    "ema": f"Update the average every {EVERY} steps (if step % {EVERY} == 0:) with the decay "
    f"raised to the {EVERY}th power to keep its horizon, or use a foreach update "
    "(AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(decay)), torch._foreach_lerp_ "
    "over the parameter lists). No patch: the decay is part of your training recipe.",
    "host": "Do it less often (every N steps), or move it out of the step; a bigger batch or "
    "torch.compile leaves it as it is, and a GPU does not run it. No patch: what the lines do "
    "decides whether they may run less often.",
}


_FRAMEWORK = {"lightning": "Lightning", "transformers": "the HF Trainer"}

# Where to act when the lines are in a method the framework calls every step.
_WHERE = {
    ("lightning", "input"): "Move it out of training_step: into the Dataset's __getitem__ or the "
    "DataLoader's collate_fn your LightningDataModule's train_dataloader() builds, with "
    "num_workers=N there, or do it once in prepare_data()/setup() (pre-tokenised tensors).",
    ("transformers", "input"): "Move it out of the Trainer's step: tokenise once with "
    "datasets' map(batched=True) before train(), or in the data_collator with "
    "TrainingArguments(dataloader_num_workers=N).",
    ("lightning", "ema"): f"Update the average every {EVERY} steps in the hook (if "
    f"trainer.global_step % {EVERY} == 0:) with the decay raised to the {EVERY}th power, or "
    "one foreach update (torch._foreach_lerp_ over the parameter lists; Lightning's "
    "WeightAveraging callback with get_ema_multi_avg_fn).",
    ("transformers", "ema"): f"Update the average every {EVERY} steps in the hook (if "
    f"state.global_step % {EVERY} == 0:) with the decay raised to the {EVERY}th power, or "
    "one foreach update (torch._foreach_lerp_ over the parameter lists).",
}


@worder(LoopBodyWork)
def loop_body_work(s: LoopBodyWork) -> Words:
    first = s.lines[0]
    where = (
        "after the batch arrives and before the model's first operator"
        if s.kind == "input"
        else "outside the model, the optimizer and the data wait"
    )
    holder = (
        f"`{s.method}`, which {_FRAMEWORK.get(s.framework or '', s.framework)} calls every step,"
        if s.method is not None
        else "the step loop's body"
    )
    evidence = [
        f"{len(s.lines)} statement(s) of {holder} run outside the model: " + lines_at(s.lines),
        f"{at(first)}: `{first.text}`",
        f"the host's time {where}, in Python between operators and operators outside the "
        f"model: {fmt_share(s.share)} of the traced steps ({fmt_share(s.low)}-"
        f"{fmt_share(s.high)} a step over {s.steps} step(s), read by the trace's clock)"
        if s.method is None
        else f"the host's time {where}, in Python between operators and operators outside the "
        f"model: {fmt_share(s.low)}-{fmt_share(s.high)} a step over {s.steps} traced step(s) "
        "(the trace's clock)",
    ]
    if s.method is not None:
        fw = _FRAMEWORK.get(s.framework or "", s.framework)
        evidence.append(
            f"{fw}'s own per-step work (its hooks' dispatch, the batch's transfer) runs in the "
            f"same stretch of the step: these lines' share is the stack sampler's time on them, "
            f"{fmt_share(s.share)} of the steps, the framework's frames not counted; the range's "
            "high end is the whole stretch, which holds the framework's part too"
        )
    elif s.shared:
        evidence.append(
            "other work runs in the same stretch of the step (a line another finding names, a "
            "block): the share is the stack sampler's time on these lines, at most the "
            "stretch's"
        )
    elif s.sampled is not None:
        evidence.append(f"the stack sampler's time on these lines: {fmt_share(s.sampled)}")
    else:
        evidence.append("the stack sampler caught these lines too rarely to split the time")
    removed = f"run every {EVERY} steps" if s.kind == "ema" else "moved off the loop's thread"
    evidence.append(
        f"gain if {removed}: {fmt_gain(s.bound, s.gain_low)} (the steps' lower and upper "
        "quartiles; low end: as if each step's wait for a core fell in this time, high end: "
        "as if none did, never above the step's time outside the model)"
    )
    advice = _ADVICE[s.kind]
    where_to = _WHERE.get((s.framework or "", s.kind))
    if where_to is not None:
        advice = where_to + " " + advice[advice.index("No patch") :]
    title = _TITLES[s.kind]
    if s.method is not None:
        title = f"{s.method} does Python work on every step outside the model"
        if s.kind == "ema":
            title = f"{s.method} updates an averaged (EMA) copy of the model on every step"
    return words(title, evidence, advice, _SOURCE)
