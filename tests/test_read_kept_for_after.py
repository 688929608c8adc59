"""A per-step read whose value the code after the loop prints is refused by saying so
(fixes/codemods_syncs._throttle), not with "the training loop has no per-step .item() ...
outside an if (nothing to throttle)".

Unseen round 17 (benchmarks/unseen_programs/clip_logit_scale.py): the batch's accuracy and the
temperature are read by ``.item()`` every step and printed once an epoch, after the batch loop.
The report named both reads ("[info] The loop reads device values on the host every step",
lines 52-53 as run), and its patch was refused with a sentence that denied they exist: a gate
would leave the printed values stale, so the patch rightly kept them; the refusal now says which
value and why, and what to do."""

from __future__ import annotations

from pathlib import Path

from gpu_notebook.fixes import Patch, Refusal, apply_fix

UNSEEN = Path(__file__).resolve().parents[1] / "benchmarks" / "unseen_programs"


def test_the_clip_loops_reads_are_refused_for_the_epochs_print():
    refused = apply_fix(
        "throttle_host_syncs", (UNSEEN / "clip_logit_scale.py").read_text(), every=10
    )
    assert isinstance(refused, Refusal), refused
    assert "has no per-step" not in refused.reason
    assert refused.reason.startswith("`acc = (logits.argmax(1) == ")
    assert "`acc` is read outside the loop" in refused.reason


LAST_LOSS = """\
import torch
for epoch in range(3):
    for x, y in loader:
        loss = loss_fn(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        last = loss.item()
    print(f"epoch {epoch} loss {last:.3f}")
"""


def test_a_last_loss_printed_after_the_loop_is_named():
    refused = apply_fix("throttle_host_syncs", LAST_LOSS, every=10)
    assert isinstance(refused, Refusal), refused
    assert refused.reason.startswith("`last = loss.item()` reads a value every step")
    assert "`last` is read outside the loop" in refused.reason


def test_a_read_only_the_loop_uses_is_still_gated():
    cell = LAST_LOSS.replace('loss {last:.3f}")', 'done")').replace(
        "        last = loss.item()\n", "        last = loss.item()\n        print(last)\n"
    )
    patched = apply_fix("throttle_host_syncs", cell, every=10)
    assert isinstance(patched, Patch), patched
    assert "% 10 == 0:" in patched.source_after
