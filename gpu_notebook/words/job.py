"""Words of a job's ranks (report/job.py decides each rank's role; the job report holds them)."""

from __future__ import annotations

from typing import Literal

Role = Literal["failed", "straggler", "waits", "comm", "comm_at_most"]


def role_words(role: Role, *, error: str | None = None, straggler: int | None = None) -> str:
    """A rank's role: failed (with its error), the straggler, waiting for the straggler
    (``straggler``: its rank), or comm-bound."""
    if role == "failed":
        return f"failed: {error}" if error else "failed"
    if role == "straggler":
        return "straggler: the others wait for it"
    if role == "waits":
        return f"waits for rank {straggler} in collectives"
    if role == "comm_at_most":
        return "comm-bound at most: its wait in collectives passes a tenth of its step only at its most (partial GPU timeline)"
    return "comm-bound: waits in collectives"
