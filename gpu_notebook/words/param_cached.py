"""Words of the recomputed-parametrization rule (rules/param_cached.py)."""

from __future__ import annotations

from gpu_notebook.formatting import fmt_gain, fmt_share
from gpu_notebook.rules.param_cached import CONTEXT, RecomputedParametrization
from gpu_notebook.words.common import Words, worder, words


@worder(RecomputedParametrization)
def recomputed_parametrization(s: RecomputedParametrization) -> Words:
    tensors = ", ".join(f"`{p}`" for p in s.paths[:4])
    if len(s.paths) > 4:
        tensors += f" and {len(s.paths) - 4} more"
    kinds = " / ".join(dict.fromkeys(s.kinds))
    evidence = [
        f"{tensors} ({kinds} parametrization): computed anew on every read",
        f"the traced steps computed them {s.calls} times in {s.forwards} forward(s): "
        f"{s.reads:.1f} reads a forward each, where one would do",
    ]
    if s.sampled is not None:
        evidence.append(f"under the parametrizations' reads: {fmt_share(s.sampled)} of the "
                        "sampled time")  # fmt: skip
    if s.traced is not None:
        evidence.append(f"their operators: {fmt_share(s.traced)} of the traced steps")
    if s.backward is not None:
        evidence.append(f"their backward: {fmt_share(s.backward)} of the traced steps")
    if s.bound is not None:
        evidence.append(f"gain if each is computed once a forward: {fmt_gain(s.bound, s.low)}")
    where = f" (line {s.line} on)" if s.line is not None else ""
    same = (
        "the same weights (spectral norm: one power iteration a forward, not one a read)"
        if "spectral_norm" in s.kinds
        else "the same values and gradients"
    )
    return words(
        f"A parametrized weight is computed {s.reads:.0f} times a forward",
        evidence,
        f"Put the forward and its loss{where} under `with {CONTEXT}:`: the first read computes "
        f"each parametrized weight, the others reuse it: {same}. "
        "Keep the backward and the optimizer step outside the block (a step inside would leave "
        "the cached weight stale).",
        "PyTorch docs: torch.nn.utils.parametrize.cached",
    )
