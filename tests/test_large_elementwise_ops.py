"""Tiny matmuls beside operators of milliseconds are not "ops too small to be the work".

Unseen round 20's bigtable_dense_adam (a two-tower model over a 200,000-row embedding table,
Adam over all parameters): 99% of the step in the table's dense gradient and Adam's update of it
(10-30 ms a call), its matmuls a few us; the verdict said HOST-BOUND "Python and per-operator
overhead set the pace" and ``launch.tiny_ops`` "the model's ops are too small", because the
heaviest matmul was under 30 us (by hand: sparse embeddings + SparseAdam 26x, fused Adam 1.9x:
the time is the table's traffic). Measured by a real %%gpucheck run on the CPU (the mechanism:
the top operators' calls are many small-operator floors long, the matmuls a few), and a planted
control: the same tiny matmuls with no large operator stay host-bound.

A call is large against the same trace's small-operator floor, not by its microseconds: the
400,000-row table read fill_ at 2.1 ms a call beside the old 2 ms line on one run and 1.6 ms on
a quieter one (host-bound there); the same op stats at half or twice the speed decide alike.
"""

from __future__ import annotations

import dataclasses

import pytest

from gpu_notebook.analysis.host import heaviest_matmul_us, host_bound, overhead_reach
from gpu_notebook.analysis.large_elementwise_ops import (
    LARGE_CALL_FLOORS,
    large_call_us,
    large_ops_hold_step,
)
from gpu_notebook.records import HostOverhead, OpStat
from tests.cells import measured

CELL = """\
import torch
from torch import nn
table = nn.Embedding({rows}, 16)
tower = nn.Sequential(nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 16))
opt = torch.optim.Adam([*table.parameters(), *tower.parameters()], lr=1e-3)
ids = torch.randint(0, {rows}, (16 * 8,))
for i in range(0, len(ids), 16):
    idx = ids[i : i + 16]
    loss = (tower(table(idx)) * table(idx.flip(0))).sum(1).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


@pytest.fixture(scope="module", params=[800_000, 1_600_000], ids=["800k_rows", "1600k_rows"])
def rep(ip, request):
    return measured(ip, CELL.format(rows=request.param))


def test_a_large_table_under_adam_is_not_read_as_tiny_ops(rep):
    """400k rows (25.6 MB tensors) sat on the old 2 ms line (2.1 ms a call on one run, 1.6 ms
    on another), and sits near the new one too (the mean call of Adam's update is diluted by
    the tower's small tensors: lerp_ read 166 floors on a loaded run, 341 on another): the
    speed test above reads its figures. 800k rows is 2x past it, 1.6M rows 4x: the work on
    any CPU."""
    a = rep.analysis
    assert a.host is not None and a.host.op_floor_us is not None
    line_us = large_call_us(a.host.op_floor_us)
    heaviest = heaviest_matmul_us(a.top_ops, a.host)
    # The matmuls are a few floors (main read the run as "ops too small" when the heaviest was
    # under 30 us), far from the table's calls of hundreds of floors.
    assert heaviest is not None and heaviest < line_us / 10
    # The mechanism: the table's update runs in calls of hundreds of floors that hold the step.
    large = [op for op in a.top_ops if op.self_us / op.calls >= line_us]
    assert large, a.top_ops
    assert large_ops_hold_step(a.top_ops, overhead_reach(a.host), a.host.op_floor_us)
    assert not host_bound(a.host, a.top_ops, on_gpu=False)
    assert rep.verdict.category != "host-bound", rep.verdict.headline
    assert "too small" not in rep.verdict.headline
    assert not [f for f in rep.findings if f.rule_id == "launch.tiny_ops"]


# Overhead 30%: under the half line; a small operator's floor 4 us (this machine's: 3.7-5.9 us).
TINY = HostOverhead(60.0, 12.0, 0.2, 0.1, 30.0, op_floor_us=4.0)


def _op(name: str, per_call_us: float, calls: int = 6) -> OpStat:
    return OpStat(name, calls, per_call_us * calls, per_call_us * calls, "cpu", 2.0)


def test_tiny_matmuls_without_large_operators_stay_host_bound() -> None:
    small = (_op("aten::addmm", 9.0, 60), _op("aten::mul", 40.0, 100), _op("aten::add_", 35.0))
    assert not large_ops_hold_step(small, overhead_reach(TINY), TINY.op_floor_us)
    assert host_bound(TINY, small, on_gpu=False)
    # One large op beside them that does not hold half the operators' time: still tiny ops.
    some = (*small, _op("aten::sqrt", 2_500.0, 1))
    assert not large_ops_hold_step(some, overhead_reach(TINY), TINY.op_floor_us)
    assert host_bound(TINY, some, on_gpu=False)
    # Large calls that hold the operators' time: work, not overhead.
    held = (*small, _op("aten::sqrt", 12_000.0), _op("aten::lerp_", 4_000.0))
    assert large_ops_hold_step(held, overhead_reach(TINY), TINY.op_floor_us)
    assert not host_bound(TINY, held, on_gpu=False)
    # Overhead past the half line is host-bound whatever the large calls.
    busy = dataclasses.replace(TINY, between_ops_share=0.45, small_op_share=0.2)
    assert host_bound(busy, held, on_gpu=False)


def _scaled(op: OpStat, factor: float) -> OpStat:
    median = None if op.median_self_us is None else op.median_self_us * factor
    return dataclasses.replace(
        op, total_us=op.total_us * factor, self_us=op.self_us * factor, median_self_us=median
    )


def _at_speed(host: HostOverhead, factor: float) -> HostOverhead:
    """The same program's host figures on a CPU ``1 / factor`` as fast: every time scaled, the
    shares (ratios of times) and the 30 us line kept."""
    floor = host.op_floor_us
    return dataclasses.replace(
        host,
        median_op_us=host.median_op_us * factor,
        op_floor_us=None if floor is None else floor * factor,
    )


@pytest.mark.parametrize("factor", [0.5, 1.0, 2.0])
def test_the_decision_does_not_move_with_the_machines_speed(factor: float) -> None:
    """The 400k-row table's update as one quiet run read it: the table's calls 1.4-8.4 ms (a
    mean over the tower's small calls too) beside a 4 us small-operator floor. Main's 2 ms line
    read it as work at 2x (a CPU half as fast: every update call past 2 ms) and as tiny ops at
    1x and 0.5x (only ``sqrt`` past it, 46% of the operators' time); by floors it is work at
    every speed, and the tiny-op loop is tiny ops at every speed."""
    table = (  # the real run's top operators (calls, mean us a call), its floor 4.06 us
        _op("aten::sqrt", 8_392.0, 15),
        _op("aten::addcdiv_", 1_649.0, 15),
        _op("aten::fill_", 1_587.0, 21),
        _op("aten::addcmul_", 1_485.0, 15),
        _op("aten::lerp_", 1_385.0, 15),
        _op("aten::add_", 574.0, 33),
        _op("aten::div", 770.0, 21),
        _op("aten::mul_", 823.0, 15),
        _op("aten::embedding_dense_backward", 33.0, 6),
    )
    small = (_op("aten::addmm", 9.0, 60), _op("aten::mul", 40.0, 100), _op("aten::add_", 35.0))
    quiet = dataclasses.replace(TINY, between_ops_share=0.02, small_op_share=0.01)
    host = _at_speed(quiet, factor)
    ops = tuple(_scaled(op, factor) for op in table)
    assert large_ops_hold_step(ops, overhead_reach(host), host.op_floor_us)
    assert not host_bound(host, ops, on_gpu=False)
    tiny_host = _at_speed(TINY, factor)
    tiny = tuple(_scaled(op, factor) for op in small)
    assert not large_ops_hold_step(tiny, overhead_reach(tiny_host), tiny_host.op_floor_us)


def test_the_line_is_floors_of_this_machines_small_operator() -> None:
    """No floor read (an older record): no call is shown large, main's reading of tiny matmuls
    stands. The line is ``LARGE_CALL_FLOORS`` floors, whatever the floor's microseconds."""
    held = (_op("aten::sqrt", 12_000.0), _op("aten::addmm", 9.0, 6))
    assert not large_ops_hold_step(held, 0.1, None)
    assert large_call_us(4.0) == LARGE_CALL_FLOORS * 4.0
    at = LARGE_CALL_FLOORS * 10.0
    assert large_ops_hold_step((_op("aten::sqrt", at), _op("aten::addmm", 9.0)), 0.1, 10.0)
    assert not large_ops_hold_step(
        (_op("aten::sqrt", at * 0.99), _op("aten::addmm", 9.0)), 0.1, 10.0
    )
