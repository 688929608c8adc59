"""The verdict's words: its answer and evidence lines from their figures (``Verdict.answer``,
``Verdict.lines``: words/verdict_answers.py, words/verdict_lines.py), then the steps' wait for a
core (``Verdict.core_wait``, analysis/too_busy): "too busy to judge" where the wait moves the
deciding share across its line, a line of evidence where the share stays on its side wherever
the wait went."""

from __future__ import annotations

import dataclasses

from gpu_notebook.formatting import fmt_share
from gpu_notebook.records import CoreWait, Verdict
from gpu_notebook.words.verdict_answers import answer_words
from gpu_notebook.words.verdict_lines import line_words

__all__ = ["word_verdict"]

_NAMES = {"data": "data wait", "sync": "host sync"}


def word_verdict(verdict: Verdict) -> Verdict:
    """``verdict`` worded: its answer (headline, more-GPUs answer) and its evidence lines from
    their figures, what its steps' wait for a core means said, and a run that ended within
    the profiler's warm-up said first. A verdict already worded (read back from JSON) as it is."""
    if verdict.answer is not None or verdict.lines:
        headline, more = (
            answer_words(verdict.answer)
            if verdict.answer is not None
            else (verdict.headline, verdict.more_gpus)
        )
        verdict = dataclasses.replace(
            verdict,
            headline=headline,
            more_gpus=more,
            evidence=(*(line_words(line) for line in verdict.lines), *verdict.evidence),
            answer=None,
            lines=(),
        )
    if verdict.warmup_only is not None:
        line = _warmup_only(*verdict.warmup_only)
        if line not in verdict.evidence:
            verdict = dataclasses.replace(verdict, evidence=(line, *verdict.evidence))
    wait = verdict.core_wait
    if wait is None:
        return verdict
    if wait.judged:
        line = _holds(wait)
        if line in verdict.evidence:
            return verdict
        return dataclasses.replace(verdict, evidence=(*verdict.evidence, line))
    if wait.own_mostly:
        # Host-bound by the program's own thread (analysis/own_wait_verdict): its answer worded
        # above; the wait and the split it leaves unread said first.
        lines = (_waited(wait), _own_split(wait))
        if lines[0] in verdict.evidence:
            return verdict
        return dataclasses.replace(verdict, evidence=(*lines, *verdict.evidence))
    if verdict.headline:
        return verdict
    other = wait.other or "another verdict"
    return dataclasses.replace(
        verdict,
        headline=(
            f"Too busy to judge: the steps waited {fmt_share(wait.wait_share)} of their time for "
            f"a core ({_held_by(wait)}). As read they would give {wait.found}; where "
            f"that wait fell decides between it and {other}."
        ),
        more_gpus=(
            f"Unknown on this machine as it was: {wait.found} or {other}. Rerun on a quieter "
            "machine (when the other programs are done, or on cores of its own) to tell them apart."
            + (
                f" Stop this program's own `{wait.own_function}` thread first (its finding below)."
                if wait.own_function is not None
                else ""
            )
        ),
        evidence=(
            _waited(wait),
            _batch_line(wait, other)
            if wait.phase == "batch"
            else _ops_line(wait, other)
            if wait.phase in _OPS
            else _share_line(wait, other),
            f"the {'shares' if wait.phase in _NAMES else 'figures'} as read give {wait.found}; "
            "no bound is named from them",
            *verdict.evidence,
        ),
    )


_OPS = {
    "ops": "per-op overhead (Python between operators and small operators)",
    "on_core": "the loop thread on a core",
}


def _ops_line(wait: CoreWait, other: str) -> str:
    return (
        f"{_OPS[wait.phase]} {fmt_share(wait.share)} of the step as read, up to "
        f"{fmt_share(wait.high)} with the waits of torch's other threads in its ops (a parallel "
        "region ends when every thread's part is done; the loop thread's own wait does not "
        f"count theirs): the {fmt_share(wait.line)} line between {wait.found} and {other} lies "
        "inside it"
    )


def _warmup_only(steps: int, warmup: int) -> str:
    return (
        f"the run ended after {steps} step(s), within the profiler's warm-up of {warmup}: no "
        "step was profiled, and this verdict rests on the step clock's timings of those first "
        "steps, which carry one-time costs (first calls, allocations, a framework's set-up); "
        "-w 0 profiles from the first step, or run more steps"
    )


def _batch_line(wait: CoreWait, other: str) -> str:
    return (
        f"the data wait {wait.share * 1000:.2f} ms a step as read (each step less its wait), "
        f"{wait.low * 1000:.2f}-{wait.high * 1000:.2f} ms with that wait all in it or none of "
        f"it: the {wait.line * 1000:.1f} ms line (a worker's handoff of a batch: under it the "
        f"batches are assembled from memory, host work) between {wait.found} and {other} lies "
        "inside it"
    )


def _share_line(wait: CoreWait, other: str) -> str:
    return (
        f"{_NAMES.get(wait.phase, wait.phase)} {fmt_share(wait.share)} of the step as read "
        f"(each step less its wait), {fmt_share(wait.low)}-{fmt_share(wait.high)} with that "
        "wait anywhere in the step (all in it, none of it, or spread over the phases), over "
        "the steps' range or over a fifth of the run: the "
        f"{fmt_share(wait.line)} line between {wait.found} and {other} lies inside it"
    )


def _waited(wait: CoreWait) -> str:
    return (
        f"the steps waited {fmt_share(wait.wait_share)} of their time for a core over "
        f"{wait.steps} steps: {_held_by(wait)} (schedstat run delay)"
    )


def _held_by(wait: CoreWait) -> str:
    """Who held the cores the steps waited for: other programs, or in part a thread of this
    program's own (``CoreWait.own_held``)."""
    if wait.own_held is None or wait.own_function is None:
        return "other programs held the CPU"
    if wait.own_held >= 0.995:
        return f"this program's own thread `{wait.own_function}` held the CPU"
    return (
        f"this program's own thread `{wait.own_function}` held about {fmt_share(wait.own_held)} "
        "of it, other programs the rest"
    )


def _holds(wait: CoreWait) -> str:
    side = "over" if wait.low >= wait.line else "under"
    surer = (
        f"the loop without the `{wait.own_function}` thread"
        if wait.own_mostly
        else "a quieter machine"
    )
    return (
        f"{_waited(wait)}; the shares are each step less its wait: "
        f"{_NAMES.get(wait.phase, wait.phase)} {fmt_share(wait.low)}-{fmt_share(wait.high)} of "
        f"the step wherever that wait went, {side} its {fmt_share(wait.line)} line; {surer} "
        "would read the code's own split more surely"
    )


def _own_split(wait: CoreWait) -> str:
    """The code's own split, unread while the thread's wait falls anywhere in the step."""
    other = f" or {wait.other}" if wait.other is not None else ""
    what = "shares" if wait.phase in _NAMES else "figures"
    return (
        f"the code's own {what}, each step less its wait, give {wait.found}{other} with that "
        "wait put anywhere in the step; the thread's wait is no other program's, so no quieter "
        "machine removes it: the loop without the thread reads them"
    )
