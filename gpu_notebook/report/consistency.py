"""What a report says must agree with itself: the verdict, its more-GPUs answer and the findings.

``contradictions`` lists every disagreement (empty when there is none). The scenario tests hold
it as a property over every cell they run, and over real CPU loops and hand-built GPU traces.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpu_notebook.records import Finding, Verdict

__all__ = ["contradictions"]

# Findings that say the host's per-op overhead, not the device's work, sets the pace.
HOST_OVERHEAD_RULES = frozenset({"launch.tiny_ops", "launch.gpu_starved"})
# Findings that say the step waits on something other than compute.
WAITING_PREFIXES = ("input.", "syncs.")
# Verdicts that say the step's time goes to compute.
COMPUTE_VERDICTS = frozenset({"cpu-only", "gpu-bound"})
_NO_MORE_GPUS = "more gpus would not help"


def contradictions(verdict: Verdict, findings: Sequence[Finding]) -> tuple[str, ...]:
    out: list[str] = []
    yes = verdict.more_gpus.lstrip().lower().startswith(("yes", "a gpu would help"))
    if yes and verdict.category not in COMPUTE_VERDICTS:
        out.append(f"verdict {verdict.category} but the more-GPUs answer says yes")
    if verdict.category in (
        "host-bound",
        "input-bound",
        "sync-bound",
    ) and not verdict.more_gpus.lower().startswith("no"):
        out.append(f"verdict {verdict.category} but the more-GPUs answer is not no")
    for f in findings:
        serious = f.severity in ("medium", "high")
        if verdict.category in COMPUTE_VERDICTS and serious and f.rule_id in HOST_OVERHEAD_RULES:
            out.append(f"verdict {verdict.category} (compute) beside {f.rule_id} [{f.severity}]")
        if (
            verdict.category in COMPUTE_VERDICTS
            and f.severity == "high"
            and f.rule_id.startswith(WAITING_PREFIXES)
        ):
            out.append(f"verdict {verdict.category} (compute) beside {f.rule_id} [high]")
        if yes and _NO_MORE_GPUS in f.fix.lower():
            out.append(f"more-GPUs answer yes beside {f.rule_id}: '{f.fix}'")
    return tuple(out)
