"""Words of rules/housekeeping: a garbage collection or a cache flush on every step."""

from __future__ import annotations

from gpu_notebook.rules.housekeeping import CollectsEveryStep
from gpu_notebook.rules.syncs import EVERY
from gpu_notebook.words.common import Words, worder
from gpu_notebook.words.step_logging import every_step_words

_SOURCE = (
    "Python docs: gc.collect (a full collection examines every tracked object); PyTorch CUDA "
    "semantics: memory management (empty_cache frees cached blocks the next allocations take "
    "again); TraceML step_time policy (residual warn 10%, critical 20%)"
)


@worder(CollectsEveryStep)
def collects_every_step(s: CollectsEveryStep) -> Words:
    what = "gc.collect()" if s.gc else "the cache flush"
    return every_step_words(
        s,
        ("housekeeping call(s)", "housekeeping lines", "they", "the collections"),
        "The loop collects garbage on every step"
        if s.gc
        else "The loop empties the allocator's cache on every step",
        f"Drop {what} from the step, or run it every {EVERY} steps (if step % {EVERY} == 0:) or "
        "once an epoch: "
        + (
            "a full collection walks every object the process holds, and frees no tensor that "
            "is still referenced (del the names, not collect, frees them)"
            if s.gc
            else "the next step allocates the same blocks again, each cudaMalloc a sync"
        )
        + "; a faster model or device does not shorten it.",
        _SOURCE,
    )
