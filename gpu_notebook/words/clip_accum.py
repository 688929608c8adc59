"""Words of the clip-per-micro-batch rule (rules/clip_accum.py)."""

from __future__ import annotations

from gpu_notebook.rules.clip_accum import ClipPerMicroBatch
from gpu_notebook.words.common import Words, worder, words


@worder(ClipPerMicroBatch)
def clip_per_micro_batch(s: ClipPerMicroBatch) -> Words:
    per = s.backward / s.optimizer
    return words(
        "Gradients are clipped on every micro-batch, not once an optimizer step",
        [
            f"line {s.clip.cell_line}: `{s.clip.text}` runs after every backward",
            f"line {s.step.cell_line}: `{s.step.text}` runs less often: the step clock counted "
            f"{s.backward} backward passes in {s.optimizer} timed optimizer steps ({per:.1f} a step)",
            f"each clip but the last of a step clips a partial sum of the gradients: about "
            f"{per - 1:.1f} of {per:.1f} clips a step change the training and are work thrown away",
        ],
        f"Move the clip to just before line {s.step.cell_line}'s step, inside its block (after "
        "scaler.unscale_(opt) where a GradScaler is used): the accumulated gradient is clipped "
        "once, as HF Accelerate and the HF Trainer do.",
        "torch.nn.utils.clip_grad_norm_ docs; HF Accelerate's sync_gradients; no bound: "
        "measure the change",
    )
