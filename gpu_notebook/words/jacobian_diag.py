"""Words of the batch-Jacobian rule (rules/jacobian_diag.py)."""

from __future__ import annotations

from gpu_notebook.formatting import fmt_gain, fmt_share
from gpu_notebook.rules.jacobian_diag import BatchJacobianRead
from gpu_notebook.words.common import Words, worder, words

_READS = {
    "diagonal": "takes its diagonal over the batch",
    "einsum": "keeps its batch diagonal (an einsum that repeats the batch index)",
    "index": "indexes its batch diagonal (the same index on both batch dims)",
}


@worder(BatchJacobianRead)
def batch_jacobian_read(s: BatchJacobianRead) -> Words:
    f, x = s.function, s.inputs
    evidence = [
        f"line {s.line}: `{s.text}` differentiates every output of `{f}` over the batch "
        f"`{x}` against every sample of it: B backward passes, a Jacobian B times the size of "
        "each sample's own",
        f"line {s.read_line}: `{s.read_text}` {_READS.get(s.how, 'reads its diagonal')}: each "
        "sample's own block; the rest is computed, then dropped",
    ]
    if s.share is not None:
        evidence.append(f"the Jacobian's line: {fmt_share(s.share)} of the sampled step time")
    else:
        evidence.append("the Jacobian's line was not sampled enough to read its share")
    if s.backward is not None:
        evidence.append(
            f"the step's backward, which runs back through all B passes: {fmt_share(s.backward)}"
        )
    if s.model_work is not None:
        evidence.append(f"the step's forward and backward phases, which hold the Jacobian's "
                        f"passes: {fmt_share(s.model_work)} of the traced steps")  # fmt: skip
    if s.bound is not None:
        evidence.append(f"gain if only each sample's own Jacobian is computed: "
                        f"{fmt_gain(s.bound, s.low)}")  # fmt: skip
    return words(
        "A Jacobian of the whole batch where each sample's own was meant",
        evidence,
        f"Where `{f}` treats the samples apart (no batch norm, no mean over the batch), compute "
        f"each sample's Jacobian alone: `torch.func.vmap(torch.func.jacrev({f}_one))({x})` with "
        f"`{f}_one` taking one sample; where `{f}` gives one number a sample, its gradient is "
        f"one backward: `torch.autograd.grad({f}({x}).sum(), {x}, create_graph=True)[0]` (the "
        "same values as the diagonal; `x.requires_grad_()` first). No patch: whether the samples are apart is the model's.",
        "PyTorch docs: torch.func.jacrev, 'Per-sample-gradients' and 'Jacobians, Hessians, hvp, "
        "vhp, and more' (torch.func tutorials)",
    )
