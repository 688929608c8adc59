"""Words of the batch rule (rules/batch.py)."""

from __future__ import annotations

from gpu_notebook.formatting import fmt_gain, fmt_share
from gpu_notebook.rules.batch import FACTOR, SmallBatch
from gpu_notebook.words.common import Words, start_ups_clause, worder, words

_BUSY_FROM = {"trace": "trace (GPU busy time)", "nvml": "NVML utilization"}


def _partial(s: SmallBatch) -> str:
    if not s.unclocked_events:
        return ""
    return (
        f"; the trace's GPU timeline is partial: {s.unclocked_events} GPU event(s) carry no"
        " timestamps, its busy share is only a lower bound, not measured"
    )


@worder(SmallBatch)
def small_batch(s: SmallBatch) -> Words:
    return words(
        f"The GPU is {fmt_share(s.busy)} busy with a batch of {s.batch}: room for a bigger batch",
        [
            f"GPU busy {fmt_share(s.busy)} ({_BUSY_FROM[s.busy_from]}{_partial(s)}), batch size {s.batch}",
            f"peak GPU memory {fmt_share(s.memory)} of the card: a batch of {s.batch * FACTOR} should fit",
            f"gain: samples/s {fmt_gain(s.bound)} (the model side per sample shrinks at most "
            f"x{FACTOR}, data loading per sample not at all{start_ups_clause(s.start_ups)})",
            "the learning rate scales with the batch (linear scaling rule); check convergence",
        ],
        f"Multiply the batch size by {FACTOR} and the learning rate by {FACTOR}.",
        "PyTorch TensorBoard profiler plugin (GPU utilization < 50% -> bigger batch); TraceML "
        "(< 30% low); Goyal et al. 2017 (linear LR scaling)",
    )
