"""Operators that are the work though no matmul is (unseen round 20, bigtable_dense_adam).

A CPU run whose heaviest matmul/convolution is under 30 us a call was read as "ops too small
to be the work" (``analysis.host.host_bound``, ``rules.launch.tiny_ops``), whatever else the
step ran. A two-tower model over a 200,000-row embedding table under Adam has matmuls of a few
us, yet 99% of its step is in operators of milliseconds a call: the backward's dense gradient
of the table (``fill_``, the embedding backward) and Adam's update of the table and its two
moments (``sqrt``, ``div``, ``lerp_``, ``addcdiv_``). Those are memory traffic, not overhead:
on any device they stay larger than their launch.

A call is large by what it costs against this machine's own small operator, not by its
microseconds: ``HostOverhead.op_floor_us`` (the median call floor of the traced steps'
operators under 30 us) is read in the same trace, so a CPU twice as fast or as slow reads the
same program the same way. An absolute line (2 ms a call, once) made the answer the machine's:
a 400,000-row table's update read 2.1 ms a call on one run and 1.6 ms on the next, and the
same program read "tiny ops" on the faster.

``LARGE_CALL_FLOORS``: a call is the work where its bytes would outlast the host's launch of
its kernel on the GPU the estimate models (``analysis.gpu_estimate``: an A100 at 70% of
2039 GB/s moves ~17 MB in the 12 us the host spends on a launch). A 17 MB call takes ~1 ms
of one core (a ``fill_`` of 25.6 MB: 1.6 ms a call, 16 GB/s) where a small operator's floor is
~4 us (3.7-5.9 us, the runs of tests/test_large_elementwise_ops.py): ~250 floors. Measured the
same way, a 16-wide table of 200,000 rows (12.8 MB tensors, under the 17 MB) holds at most 42%
of the operators' time in such calls (its ``sqrt``: 620 floors a call) and stays tiny ops; one
of 400,000 rows (25.6 MB) holds 82% (``fill_`` 390 floors, ``sqrt`` 2,070).

Where calls that large hold at least half the top operators' self time, and the measured
per-op overhead (Python between operators + operators under 30 us) is under half the step,
the tiny matmuls do not make the step's ops small.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpu_notebook.records import OpStat

LARGE_CALL_FLOORS = 250.0
LARGE_SHARE = 0.5


def _per_call_us(op: OpStat) -> float:
    """The mean call, not the typical one: Adam's ``sqrt`` runs once per parameter tensor, the
    table's call of milliseconds one in five beside the MLP's of 2 us (median 2.4 us a call,
    mean 46 ms: the real run of tests/test_large_elementwise_ops.py). A preempted call lifts a
    mean too, so the per-op overhead at call floors (under half the step) must agree."""
    return op.self_us / op.calls


def large_call_us(op_floor_us: float) -> float:
    """The shortest call that is the work on a machine whose small operator's floor is
    ``op_floor_us`` (``HostOverhead.op_floor_us``)."""
    return LARGE_CALL_FLOORS * op_floor_us


def large_ops_hold_step(
    top_ops: Sequence[OpStat], overhead: float | None, op_floor_us: float | None
) -> bool:
    """Host operators of at least ``LARGE_CALL_FLOORS`` small-operator floors a call
    (``op_floor_us``, read in the same trace) hold most of the top operators' self time, and
    the per-op overhead (``overhead``, analysis.host.overhead_reach) is under half the step:
    the step is work, however small its matmuls. False where either figure was not read."""
    if overhead is None or overhead >= LARGE_SHARE or op_floor_us is None or op_floor_us <= 0:
        return False
    line_us = large_call_us(op_floor_us)
    cpu = [op for op in top_ops if op.device == "cpu" and op.calls > 0]
    total = sum(op.self_us for op in cpu)
    large = sum(op.self_us for op in cpu if _per_call_us(op) >= line_us)
    return total > 0 and large >= LARGE_SHARE * total
