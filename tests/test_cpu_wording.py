"""A run without a GPU speaks of the CPU: no "the GPU waits" in its verdicts, one apart clause at most."""

from __future__ import annotations

import re

import pytest

from gpu_notebook.analysis.verdict import decide
from gpu_notebook.records import HostOverhead
from tests.scenarios import synthetic as syn

# Words that describe a device that is not there as if it were.
GPU_TALK = re.compile(
    r"GPU (waits|idles|is idle|sits)|stalls the pipeline|every (added )?GPU|on every GPU", re.I
)

TINY_OPS = HostOverhead(
    ops_per_step=400, median_op_us=4.0, between_ops_share=0.5, small_op_share=0.4, small_op_us=10.0
)


@pytest.mark.parametrize(
    "shares, host, category",
    [
        ({"data": 0.5}, None, "input-bound"),
        ({"sync": 0.4}, None, "sync-bound"),
        ({}, TINY_OPS, "host-bound"),
        ({}, None, "cpu-only"),
    ],
)
def test_cpu_verdicts_speak_of_a_gpu_once_and_apart(shares, host, category):
    import dataclasses

    analysis = dataclasses.replace(syn.make_analysis(shares), host=host)
    verdict = decide(syn.make_run("for x in loader:\n    step(x)\n"), analysis)
    assert verdict.category == category
    assert not GPU_TALK.search(verdict.headline)
    assert not GPU_TALK.search(verdict.more_gpus), verdict.more_gpus
    # At most one clause says what the same loop would mean on a GPU, after the CPU answer.
    sentences = [s for s in re.split(r"(?<=[.;])\s", verdict.more_gpus) if "GPU" in s]
    assert len(sentences) <= 2 and not verdict.more_gpus.startswith("On a GPU")
