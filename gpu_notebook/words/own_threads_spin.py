"""Words of the own-thread rule (rules/own_threads_spin.py)."""

from __future__ import annotations

import os

from gpu_notebook.formatting import fmt_share
from gpu_notebook.rules.own_threads_spin import KEYWORD, SpinningThread
from gpu_notebook.words.common import Words, worder, words

_SOURCE = (
    "gpu_notebook's own level (analysis/own_threads_spin.py): a thread at a quarter of the loop "
    "thread's time on a core, read per thread (schedstat) at the sampler's ticks"
)


@worder(SpinningThread)
def spinning_thread(s: SpinningThread) -> Words:
    t, side = s.thread, s.side
    where = f"{os.path.basename(t.file)}:{t.line}"
    rate = (
        f", {t.cores / side.loop_cores:.2f}x the loop thread's own {side.loop_cores:.2f}"
        if side.loop_cores
        else ""
    )
    evidence = [
        f"this program's own thread `{t.name}`, in `{t.function}` ({where}), was on a core "
        f"{t.cpu_s:.2f} s of the {t.span_s:.2f} s of the steps it ran beside: {t.cores:.2f} "
        f"cores{rate}",
        "a thread on a core beside the loop holds the GIL the loop thread waits for between its "
        "operators, and takes a core it could run on",
    ]
    if side.wait_share is not None:
        evidence.append(
            f"the loop thread waited {fmt_share(side.wait_share)} of the steps for a core: "
            f"this thread accounts for about {fmt_share(side.held)} of that wait "
            + (
                f"(other programs used {side.others_cores:.2f} cores)"
                if side.others_cores is not None
                else "(other programs' load not read)"
            )
            + ", not the machine"
        )
    if len(side.threads) > 1:
        more = ", ".join(f"`{x.function}` {x.cores:.2f} cores" for x in side.threads[1:])
        evidence.append(f"also on a core beside the loop: {more}")
    if side.bound is not None:
        evidence.append(
            "the most without it: the larger of each step its own time on a core and the other "
            "programs' part of its wait (its time off a core, the GIL's wait among it, given "
            f"back), and the loop thread taking the thread's {side.cores:.2f} cores (at most one)"
        )
    if s.tracker:
        title = (
            "The Trainer's memory metrics run a thread that polls the memory with no sleep "
            "while the loop trains"
        )
        if s.line is not None:
            evidence.insert(0, f"line {s.line}: `{s.text}` turns the memory tracker on")
            fix = f"Pass {KEYWORD}=True (the default) to TrainingArguments at line {s.line}"
        else:
            fix = f"Pass {KEYWORD}=True (the default) where the TrainingArguments are made"
        fix += "; read the memory peak once after training if it is needed."
    else:
        title = f"A thread of this program spins beside the loop: `{t.function}`"
        at = f"line {s.line} (`{s.text}`)" if s.line is not None else where
        fix = (
            f"Let the thread wait in its loop at {at}: a time.sleep(...) of the polling period, "
            "or a blocking wait (Event.wait(timeout), queue.get()) instead of a loop that "
            "checks and runs again at once."
        )
    return words(title, evidence, fix, _SOURCE)
