"""What part of an unfused CPU optimizer step a fused one keeps.

Fusing does not remove the update: ``Optimizer.step`` keeps its fixed cost (hooks, the
parameter-group walk, the state's step counters), one short call a tensor, and the arithmetic over
every parameter byte, in one pass instead of several. What goes is the unfused update's
per-tensor ops (several dispatched ops a tensor) and its extra passes over memory. So a model of
few small tensors keeps much of its update time (Adam, one 2-element tensor: 75%), and a model of
many tensors keeps little (Adam, 60 small tensors: 20%); a model of six tensors, 300 KB (a 3-layer
MLP): 36%.

The costs are torch 2.x's CPU update on one core, fitted on 1-60 tensors of 2 to 10^6 elements
(``opt.step()`` alone, fused=True against the default, medians of 180 steps; i26fused,
2026-12-05; measured kept: Adam 0.36 and AdamW 0.32 on the MLP, AdamW 0.29 on nanogpt_shaped's 7 tensors, SGD with momentum 0.53 there
and 0.22 on 60 tensors). They are read as ratios: a faster or slower machine scales both sides
alike. Past the caches (six 10^6-element tensors, 24 MB) the unfused passes cost more a byte
and a fused step kept 0.28 where the model reads 0.40: there the range under-reads the gain.

Page faults (``update_faults``): the unfused update makes full-size temporaries a tensor (Adam's
``sqrt`` then its division); past glibc's mmap threshold each one gets fresh pages, zeroed and
mapped on first touch, and unmapped or trimmed when freed, so the next step's gradients fault
their pages in again. The fused kernel makes none. The step clock counts the faults inside each
class's steps and outside them, and prices one fault on this machine; the bound's high end takes
the update's faults whole (not ``kept`` of them) and the step's faults outside the updates up to
as many as the update's own (a page trimmed because of the temporaries is one they took).
save_every_step's Adam (1M parameters): ~1,100 faults a step at ~3 us, 3 of its 5 ms, fused 0;
zip_two_loaders' AdamW: 260-520 inside, 430-1,100 outside, fused 0-770 (pfault, 2026-12-06,
benchmarks/README). The low end stays the model's: the faults move with the allocator's state.
It comes in streaks, unprofiled too (zip_two_loaders at load 25: runs of 5-40 steps of 0 and
of 300-700 pages): the step clock reads every step of 1 ms or more, not one in eight, so the
reading is the run's mean rather than one streak's (faultshare, benchmarks/README).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from gpu_notebook.records import StepClockRecord


class UpdateCosts(NamedTuple):
    """One implementation's cost model: a fixed cost, one a tensor, one a parameter byte."""

    fixed_us: float
    tensor_us: float
    byte_us: float

    def step_us(self, tensors: int, size: int) -> float:
        return self.fixed_us + tensors * self.tensor_us + size * self.byte_us


# (unfused, fused) by optimizer class. The fused kernel's fixed cost is the larger (the grouped
# kernel's set-up); its tensor's and byte's are far smaller (one call, one pass over memory).
COSTS: dict[str, tuple[UpdateCosts, UpdateCosts]] = {
    "Adam": (UpdateCosts(10.5, 13.5, 0.25e-3), UpdateCosts(15.5, 2.5, 0.10e-3)),
    # AdamW: the decoupled weight decay is one more op a tensor unfused.
    "AdamW": (UpdateCosts(10.5, 15.5, 0.25e-3), UpdateCosts(15.5, 2.5, 0.10e-3)),
    # Momentum SGD: two ops a tensor unfused, so less for fusing to take away.
    "SGD": (UpdateCosts(10.5, 4.0, 0.05e-3), UpdateCosts(15.5, 0.6, 0.023e-3)),
}


# An optimizer made with foreach=True (torch's default holds for CUDA tensors only: on the CPU
# the default is the per-tensor for-loop ``COSTS`` model): a larger fixed cost, a smaller one a
# tensor. Fitted on fused/foreach kept fractions of ``opt.step()`` alone, one thread, the three
# implementations interleaved (benchmarks/heads_step_parts.py --only fit, 2026-12-06, load
# 22-25): 0.26-0.37 from 1 to 98 tensors of 128 elements or fewer and six of 50k; 0.27-0.32 on
# heads_modulelist's 98 (0.15-0.19 against the for-loop). The for-loop's costs read a foreach
# user's fused gain as a for-loop user's: heads_modulelist kept 20% by them.
FOREACH_COSTS: dict[str, UpdateCosts] = {
    "Adam": UpdateCosts(45.0, 9.0, 0.30e-3),
    "AdamW": UpdateCosts(45.0, 9.0, 0.30e-3),
}


def fused_cpu_kept(
    cls: str, tensors: int | None, grad_bytes: int | None, *, foreach: bool = False
) -> float | None:
    """The fraction of an unfused CPU ``cls`` step's time a fused step keeps, for an optimizer
    over ``tensors`` parameter tensors of ``grad_bytes`` bytes in all; ``foreach``: the unfused
    step is the foreach one (made with foreach=True; SGD's read as its for-loop). None: the
    tensors were not counted, or no costs for ``cls`` (the fix's bound is then the whole
    update's)."""
    costs = COSTS.get(cls)
    if costs is None or tensors is None or tensors <= 0:
        return None
    unfused, fused = costs
    if foreach and cls in FOREACH_COSTS:
        unfused = FOREACH_COSTS[cls]
    size = max(0, grad_bytes or 0)
    return min(1.0, fused.step_us(tensors, size) / unfused.step_us(tensors, size))


# Sampled steps the fault readings must rest on (the step clock reads one step in eight).
FAULT_MIN_STEPS = 2


class UpdateFaults(NamedTuple):
    """Minor page faults a step of the reached classes' updates (``inside``), the step's faults
    outside every update counted up to as many (``outside``), one fault's CPU time here
    (``fault_us``); and their times over the same classes' update CPU time (``inside_part``, at
    most 1; ``outside_part``)."""

    inside: float
    outside: float
    fault_us: float
    inside_part: float
    outside_part: float


def update_faults(record: StepClockRecord, classes: Iterable[str]) -> UpdateFaults | None:
    """The page faults a fused ``classes`` update would not make, from the step clock's
    readings. None: not read (no per-thread fault count, no fault priced), too few steps, or
    none in the update."""
    cost_s = record.fault_cost_s
    if cost_s is None or cost_s <= 0:
        return None
    inside = cpu_s = 0.0
    for cls in classes:
        faults, timed = record.optimizer_faults.get(cls, (0, 0)), record.optimizer_cpu.get(cls)
        if timed is None or timed[1] <= 0 or faults[1] < FAULT_MIN_STEPS:
            return None
        inside += faults[0] / faults[1]
        cpu_s += timed[0] / timed[1]
    if inside < 1 or cpu_s <= 0:  # under a page a step: no temporaries past the threshold
        return None
    rest, rest_steps = record.rest_faults
    outside = min(inside, rest / rest_steps) if rest_steps >= FAULT_MIN_STEPS else 0.0
    return UpdateFaults(
        inside, outside, cost_s * 1e6, min(1.0, inside * cost_s / cpu_s), outside * cost_s / cpu_s
    )


# Classes whose unfused CPU update makes full-size temporaries a tensor (Adam's and AdamW's
# ``sqrt`` then division; SGD's momentum is updated in place). Inside the caches they fault no
# page, yet the forward and backward that follow run slower for them: the step's other phases
# lost their working set to the temporaries' passes (the loop thread's CPU time, fused against
# the default, interleaved, one core; ledger26, 2026-12-07, load 2-17: nanogpt_shaped's 7 AdamW
# tensors, forward+backward 181-374 us shorter fused in 2 runs of 3 against 214-344 us off the
# update, 0.35-0.71 of its time; an embedding and 21 linear layers' 43 tensors in two
# weight-decay groups, 424 us against 1215 us, 0.23). The ledger's nanogpt_shaped fix measured
# 1.22x twice over a 1.18x top that took the update's own part alone; subset_eval_break's MLP
# 1.23x over 1.20x.
TEMPORARIES = frozenset({"Adam", "AdamW"})


def outside_part(cls: str, kept: float) -> float:
    """The most of the other phases' time a fused ``cls`` step gives back, as a part of the
    update's time: as much again as fusing takes off the update's arithmetic (``1 - kept``),
    the most read (0.71 of nanogpt_shaped's update against 0.70 taken off it); 0 for a class
    whose unfused update makes no full-size temporaries."""
    return 1.0 - kept if cls in TEMPORARIES else 0.0


def fused_removed_high(kept: float, faults: UpdateFaults | None, cls: str = "") -> float:
    """The most of the update's time a fused step takes away, as a part of it: all but ``kept``
    of its arithmetic, its faults whole, and what its temporaries cost outside it: the faults
    they cause there, or the other phases' lost caches (``outside_part``), the larger (either
    may take the part over 1: they are other phases' time)."""
    inside = 1.0 - kept if faults is None else 1.0 - kept * (1.0 - faults.inside_part)
    fault_outside = 0.0 if faults is None else faults.outside_part
    return inside + max(fault_outside, outside_part(cls, kept))
