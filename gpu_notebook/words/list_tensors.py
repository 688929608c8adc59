"""Words of the list-of-arrays rule (rules/list_tensors.py)."""

from __future__ import annotations

from gpu_notebook.formatting import fmt_gain, fmt_share
from gpu_notebook.rules.list_tensors import TensorFromArrays
from gpu_notebook.words.common import Words, worder, words


@worder(TensorFromArrays)
def tensor_from_arrays(s: TensorFromArrays) -> Words:
    evidence = [
        f"line {s.line}: `{s.text}` reads `{s.source}`'s numpy arrays number by number in "
        "Python (no operator records it: the trace counts it as Python between operators)"
        + (f"; {s.count} such calls" if s.count > 1 else "")
    ]
    if s.own is not None:
        evidence.append(f"that line: {fmt_share(s.own)} of the sampled step time")
    if s.between is not None:
        evidence.append(f"Python between operators: {fmt_share(s.between)} of the step (holds it)")
    evidence.append(f"gain if the parse goes: {fmt_gain(s.bound, s.low)}")
    return words(
        "Each step builds a tensor from a list of numpy arrays, one number at a time",
        evidence,
        f"Stack the arrays first: torch.from_numpy(np.stack([...])) (same values and dtype), or "
        f"turn `{s.source}` into one tensor before the loop and index it (X[idx]). "
        "torch.compile and a bigger batch do not shorten this parse.",
        "PyTorch warns 'Creating a tensor from a list of numpy.ndarrays is extremely slow'",
    )
