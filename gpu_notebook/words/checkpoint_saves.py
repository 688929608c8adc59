"""Words of rules/checkpoint_saves: a checkpoint written on every step."""

from __future__ import annotations

from gpu_notebook.rules.checkpoint_saves import SavesEveryStep
from gpu_notebook.rules.syncs import EVERY
from gpu_notebook.words.common import Words, worder
from gpu_notebook.words.step_logging import every_step_words

_SOURCE = (
    "TraceML step_time policy (residual warn 10%, critical 20%); PyTorch saving and loading "
    "models tutorial (checkpoint every N epochs or steps)"
)


@worder(SavesEveryStep)
def saves_every_step(s: SavesEveryStep) -> Words:
    if s.to_memory:  # torch.save into an io.BytesIO: no file, the serialising is the cost
        return every_step_words(
            s,
            ("torch.save(s) to memory", "save lines", "they", "the saves"),
            "The loop serialises the whole state (torch.save to memory) on every step",
            f"Serialise every {EVERY} steps (if step % {EVERY} == 0:) and once after the loop: "
            "each torch.save serialises the whole state into the buffer, and a faster model or "
            "device does not shorten it.",
            _SOURCE,
        )
    return every_step_words(
        s,
        ("checkpoint save(s)", "save lines", "they", "the saves"),
        "The loop saves a checkpoint on every step",
        f"Save every {EVERY} steps (if step % {EVERY} == 0:) and once after the loop: each save "
        "serialises the whole state and writes it to disk, and a faster model or device does "
        "not shorten it.",
        _SOURCE,
    )
