"""Words of rules/checkpoint_saves: a checkpoint written on every step."""

from __future__ import annotations

from gpu_notebook.rules.checkpoint_saves import SavesEveryStep, StateCopiedEveryStep
from gpu_notebook.rules.syncs import EVERY
from gpu_notebook.words.common import Words, lines_at, worder
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


@worder(StateCopiedEveryStep)
def state_copied_every_step(s: StateCopiedEveryStep) -> Words:
    copies = ("whole-state copy line(s)", "copy lines", "they", "the copies")
    if s.branch:  # `if loss.item() < best: best_state = copy.deepcopy(...)`: no patch
        said = every_step_words(
            s,
            copies,
            "The loop copies the model's whole state on the steps a batch's value picks",
            f"Keep the best by the validation loss every {EVERY} steps or once an epoch, and "
            "copy the state then: a batch's loss is noisy, so the copy is taken on many steps, "
            "and each duplicates every parameter on the host (a faster model or device does "
            "not shorten it). No patch: gating the copy alone would keep a stale best.",
            _SOURCE,
        )
        picked = (
            f"{len(s.lines)} whole-state copy line(s) run on the steps a test of a value picks "
            f"(not a period): {lines_at(s.lines)}"
        )
        return said._replace(evidence=(picked, *said.evidence[1:]))
    return every_step_words(
        s,
        copies,
        "The loop copies the model's whole state on every step",
        f"Copy every {EVERY} steps (if step % {EVERY} == 0:) and once after the loop: each copy "
        "duplicates every parameter on the host, and a faster model or device does not "
        "shorten it.",
        _SOURCE,
    )
