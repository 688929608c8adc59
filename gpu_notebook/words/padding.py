"""Words of the padding rule (rules/padding.py)."""

from __future__ import annotations

from gpu_notebook.formatting import fmt_gain, fmt_share
from gpu_notebook.rules.padding import PaddedTokens
from gpu_notebook.words.common import Words, unclocked_clause, worder, words


@worder(PaddedTokens)
def padded_tokens(s: PaddedTokens) -> Words:
    where = (
        f"`{s.field}`" if s.pad_value is None else f"`{s.field}` (rows end in token {s.pad_value})"
    )
    evidence = [
        f"the first {s.batches} batches the loop read, from {where}: padded to {s.length} "
        f"columns, the longest row {s.longest} tokens; {fmt_share(s.real_share)} of the columns "
        f"computed are real tokens, padding each batch to its longest row would keep "
        f"{fmt_share(s.kept_share)}"
    ]
    if s.on_device:
        evidence.append(
            f"{s.on_device} batch(es) not read: their tensors were on the GPU already (reading "
            "them would wait for it)"
        )
    if s.gpu and s.unclocked_events:
        most = (
            "not measured"
            if s.scaling_high is None
            else f"at most {fmt_share(s.scaling_high)} of the step (NVML inside the steps)"
        )
        evidence.append(
            f"the GPU's kernels: {most}; {unclocked_clause(s.unclocked_events)}, its busy share "
            "only a lower bound"
            + ("" if s.scaling_low is not None else " (a step the host paces may not shorten)")
        )
    elif s.gpu:
        evidence.append(
            f"the GPU's kernels: {fmt_share(s.scaling_high)} of the step"
            + ("" if s.scaling_low is not None else " (a step the host paces may not shorten)")
        )
    else:
        low, high = fmt_share(s.scaling_low), fmt_share(s.scaling_high)
        share, point = f"{low} of the step", low
        if s.waited >= 0.05 and s.scaling_low is not None:
            own = point = fmt_share(s.scaling_low / (1.0 - s.waited)) if s.waited < 1 else "-"
            share = (
                f"{own} of the step's own time, {low} of its wall time (it waited "
                f"{fmt_share(s.waited)} for a core, which the low end takes to stay)"
            )
        evidence.append(
            f"forward and backward, which scale with sequence length: {share}"
            + (
                f"; at most {high}: the step outside the data wait and the optimizer"
                if high != point
                else ""
            )
        )
    evidence.append(
        f"gain if the padding goes: {fmt_gain(s.bound, s.low)} (low end: the least share, "
        "linear in length; high end: the most, attention's square)"
    )
    side = (
        " Each batch then has its own length: the compiled model compiles again for new lengths "
        "(torch.compile(dynamic=True), or pad to a multiple of 8 or 64 to keep them few)"
        if s.compiled
        else " Each batch then has its own length (torch.compile would compile again for new "
        "lengths; cudnn.benchmark tunes each new shape once)"
    )
    site = ""
    if s.site_line is not None:
        site = f" at line {s.site_line} (" + (
            f"`{s.site}`, the loader's collate)" if s.site_is_collate else f"`{s.site}`)"
        )
    return words(
        f"{fmt_share(1 - s.real_share)} of the tokens computed are padding",
        evidence,
        f'Pad each batch to its longest row{site}: tokenizer padding=True ("longest"), '
        "DataCollatorWithPadding, or the collate's fixed length replaced by the batch's longest; "
        f"rows and masks stay the same.{side}.",
        "Hugging Face 'Padding and truncation' (dynamic padding); attention is quadratic in "
        "length, the rest linear",
    )
