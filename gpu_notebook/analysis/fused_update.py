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
"""

from __future__ import annotations

from typing import NamedTuple


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


def fused_cpu_kept(cls: str, tensors: int | None, grad_bytes: int | None) -> float | None:
    """The fraction of an unfused CPU ``cls`` step's time a fused step keeps, for an optimizer
    over ``tensors`` parameter tensors of ``grad_bytes`` bytes in all. None: the tensors were not
    counted, or no costs for ``cls`` (the fix's bound is then the whole update's)."""
    costs = COSTS.get(cls)
    if costs is None or tensors is None or tensors <= 0:
        return None
    unfused, fused = costs
    size = max(0, grad_bytes or 0)
    return min(1.0, fused.step_us(tensors, size) / unfused.step_us(tensors, size))
