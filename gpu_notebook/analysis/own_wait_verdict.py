"""The verdict where the steps' wait for a core is mostly a thread of this program's own.

``analysis.too_busy`` reads the loop thread's wait for a core (schedstat run_delay) as the
machine's and, where it moves the deciding share across its line, names no bound: "too busy to
judge", rerun on a quieter machine. A thread of the process on a core beside the loop
(``analysis.own_threads_spin``: a ``while running:`` poll with no sleep, transformers' memory
tracker) makes the same wait and falls anywhere in the step as the machine's does, but no
quieter machine removes it: the process keeps its share of the cores (autogroup), and the
thread takes it. Where that thread holds ``OWN_WAIT_MOST`` of the wait or more, the verdict is
the thread's: host-bound (the host's own work sets the pace, more GPUs wait the same), the
share the code's split gives as read kept beside it; under it, the wait stays the machine's,
the thread's part said (``CoreWait.own_held``).
"""

from __future__ import annotations

import dataclasses

from gpu_notebook.analysis import verdict_said as said
from gpu_notebook.records import SideThreads, Verdict

__all__ = ["OWN_WAIT_MOST", "own_wait"]

# The thread's share of the steps' wait from which the wait is its own: at half, the thread's
# part is at least the other programs', so "the machine" names the lesser cause. The memory
# tracker of unseen round 22 held 58%-60% of the wait (its second reading) where turning it off
# measured 2.31x by hand, the other programs' load (1.76 cores on 2) beside it: over the line.
# Half is also ``too_busy.TOO_BUSY_WAIT``'s reading (the wait more than the work).
OWN_WAIT_MOST = 0.5


def own_wait(verdict: Verdict, side: SideThreads | None) -> Verdict:
    """``verdict`` with its steps' wait for a core said with the share a thread of this process
    held (``CoreWait.own_held``); where that share is ``OWN_WAIT_MOST`` or more, the wait is the
    thread's (``CoreWait.own_mostly``), and a verdict too busy to judge is host-bound by it."""
    wait = verdict.core_wait
    if side is None or not side.threads or wait is None or side.held <= 0:
        return verdict
    function = side.threads[0].function
    mostly = side.held >= OWN_WAIT_MOST
    own = dataclasses.replace(wait, own_held=side.held, own_function=function, own_mostly=mostly)
    if wait.judged or not mostly:
        return dataclasses.replace(verdict, core_wait=own)
    return dataclasses.replace(
        verdict,
        category="host-bound",
        headline="",
        more_gpus="",
        confidence="medium",
        core_wait=own,
        answer=said.OwnThreadWait(function, side.held, wait.wait_share),
    )
