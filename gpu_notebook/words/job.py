"""Words of a job's ranks (report/job.py decides each rank's role; the job report holds them)."""

from __future__ import annotations

from typing import Literal

Role = Literal["failed", "straggler", "waits", "comm"]


def role_words(role: Role, *, error: str | None = None, straggler: int | None = None) -> str:
    """A rank's role: failed (with its error), the straggler, waiting for the straggler
    (``straggler``: its rank), or comm-bound."""
    if role == "failed":
        return f"failed: {error}" if error else "failed"
    if role == "straggler":
        return "straggler: the others wait for it"
    if role == "waits":
        return f"waits for rank {straggler} in collectives"
    return "comm-bound: waits in collectives"
