"""Words of the GPU estimate (analysis/gpu_estimate.py): what limits the step on the card."""

from __future__ import annotations

import dataclasses

from gpu_notebook.records import EstimateLimit, GpuEstimate

__all__ = ["word_estimate"]

_LIMITS: dict[EstimateLimit, str] = {
    "data": "data loading",
    "host": "host Python and kernel launches",
    "compute": "GPU compute",
    "off_core": "the loop's waits outside torch (sleep, I/O, locks)",
}


def word_estimate(estimate: GpuEstimate | None) -> GpuEstimate | None:
    """``estimate`` with what limits its step said (``limited_by``); one already worded (read
    back from JSON), or None, as it is."""
    if estimate is None or estimate.limits is None:
        return estimate
    return dataclasses.replace(estimate, limited_by=_LIMITS[estimate.limits], limits=None)
