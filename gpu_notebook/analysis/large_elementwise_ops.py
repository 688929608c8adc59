"""Operators that are the work though no matmul is (unseen round 20, bigtable_dense_adam).

A CPU run whose heaviest matmul/convolution is under 30 us a call was read as "ops too small
to be the work" (``analysis.host.host_bound``, ``rules.launch.tiny_ops``), whatever else the
step ran. A two-tower model over a 200,000-row embedding table under Adam has matmuls of a few
us, yet 99% of its step is in operators of milliseconds a call: the backward's dense gradient
of the table (``fill_``, the embedding backward) and Adam's update of the table and its two
moments (``sqrt``, ``div``, ``lerp_``, ``addcdiv_``: 10-30 ms a call on one core). Those are
memory traffic, not overhead: on any device they stay larger than their launch.

``LARGE_CALL_US``: a call that long moves more bytes than a kernel launch's worth on the GPU the
estimate models (``analysis.gpu_estimate``: a CPU core streams ~10 GB/s; an A100 at 70% of
2039 GB/s moves ~17 MB in the 12 us the host spends on a launch: 1.7 ms of one core's
streaming). Where calls that long hold at least half the top operators' self time, and the
measured per-op overhead (Python between operators + operators under 30 us) is under half the
step, the tiny matmuls do not make the step's ops small.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpu_notebook.records import OpStat

LARGE_CALL_US = 2_000.0
LARGE_SHARE = 0.5


def _per_call_us(op: OpStat) -> float:
    """The mean call, not the typical one: Adam's ``sqrt`` runs once per parameter tensor, the
    table's call of milliseconds one in five beside the MLP's of 2 us (median 2.4 us a call,
    mean 46 ms: the real run of tests/test_large_elementwise_ops.py). A preempted call lifts a
    mean too, so the per-op overhead at call floors (under half the step) must agree."""
    return op.self_us / op.calls


def large_ops_hold_step(top_ops: Sequence[OpStat], overhead: float | None) -> bool:
    """Host operators of at least ``LARGE_CALL_US`` a call hold most of the top operators' self
    time, and the per-op overhead (``overhead``, analysis.host.overhead_reach) is under half
    the step: the step is work, however small its matmuls."""
    if overhead is None or overhead >= LARGE_SHARE:
        return False
    cpu = [op for op in top_ops if op.device == "cpu" and op.calls > 0]
    total = sum(op.self_us for op in cpu)
    large = sum(op.self_us for op in cpu if _per_call_us(op) >= LARGE_CALL_US)
    return total > 0 and large >= LARGE_SHARE * total
