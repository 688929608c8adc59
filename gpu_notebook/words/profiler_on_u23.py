"""Words of the profiler-left-on rule (rules/profiler_on_u23.py)."""

from __future__ import annotations

from gpu_notebook.rules.profiler_on_u23 import ProfilerOn
from gpu_notebook.words.common import Words, worder, words

_WHAT = {
    "cProfile": "cProfile traces every Python call of each step's actions (the batch, "
    "training_step, backward, optimizer_step, each hook) and sorts and prints them at the end",
    "torch.profiler": "torch.profiler records every operator of every step and exports them",
}


@worder(ProfilerOn)
def profiler_on(s: ProfilerOn) -> Words:
    evidence = [
        f"line {s.line}: `{s.text}`: {_WHAT.get(s.tracer, s.tracer)}",
        "its cost is spread over the step's own calls, not measured apart: no bound",
    ]
    return words(
        "The training run is profiled: a tracing profiler is on for every step",
        evidence,
        "Pass profiler=None (the default) for the training run, and profile a short run "
        "apart when you need the breakdown.",
        "Lightning docs: Find bottlenecks in your code (profiler)",
    )
