"""Words of rules/checkpoint_saves: a checkpoint written on every step."""

from __future__ import annotations

from gpu_notebook.formatting import fmt_gain, fmt_share
from gpu_notebook.rules.checkpoint_saves import SavesEveryStep
from gpu_notebook.rules.syncs import EVERY
from gpu_notebook.words.common import Words, residual_evidence, worder, words

_SOURCE = (
    "TraceML step_time policy (residual warn 10%, critical 20%); PyTorch saving and loading "
    "models tutorial (checkpoint every N epochs or steps)"
)


@worder(SavesEveryStep)
def saves_every_step(s: SavesEveryStep) -> Words:
    first = s.lines[0]
    evidence = [
        f"{len(s.lines)} checkpoint save(s) run on every step: line(s) "
        + ", ".join(str(line.line) for line in s.lines[:6]),
        f"line {first.line}: `{first.text}`",
        residual_evidence(s.phases, s.residual),
    ]
    if s.own is not None:
        evidence.append(f"the save lines themselves: {fmt_share(s.own)} of the sampled time")
    evidence.append(
        f"gain if they run every {EVERY} steps: {fmt_gain(s.bound, s.low)} (low end: the save "
        "lines' own sampled time; high end: all host time outside the model, which also holds "
        "other host work)"
    )
    advice = (
        f"Save every {EVERY} steps (if step % {EVERY} == 0:) and once after the loop: each save "
        "serialises the whole state and writes it to disk, and a faster model or device does "
        "not shorten it."
    )
    if s.bound is None:  # rules/checkpoint_saves.py: not offered
        advice = (
            "No patch offered: this run measured no time that holds the saves (no step "
            f"phases); measure it before gating them. {advice}"
        )
    return words("The loop saves a checkpoint on every step", evidence, advice, _SOURCE)
