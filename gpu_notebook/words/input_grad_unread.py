"""Words of the unread input-gradient rule (rules/input_grad_unread.py)."""

from __future__ import annotations

from gpu_notebook.formatting import fmt_gain, fmt_share
from gpu_notebook.rules.input_grad_unread import InputGradUnread
from gpu_notebook.words.common import Words, worder, words


def _lines(lines: tuple[int, ...]) -> str:
    said = [str(n) for n in lines]
    return said[0] if len(said) == 1 else f"{', '.join(said[:-1])} and {said[-1]}"


@worder(InputGradUnread)
def input_grad_unread(s: InputGradUnread) -> Words:
    x = s.name
    if not s.reads:
        read = f"and nothing in the step reads `{x}.grad`"
    elif s.gate is not None:
        read = f"and the step reads its gradient only when `{s.gate}` (line {_lines(s.reads)})"
    else:
        read = f"and the step reads its gradient only behind an `if` (line {_lines(s.reads)})"
    evidence = [
        f"line {s.line}: `{s.text}` makes `{x}` require grad on every step {read}: every "
        f"backward also computes `{x}`'s gradient (through the first layer, a product as large "
        f"as its weight's gradient) and accumulates it into `{x}.grad`",
    ]
    if s.backward is not None:
        evidence.append(f"the backward (where that gradient is made): {fmt_share(s.backward)} "
                        "of the step, not timed apart")  # fmt: skip
    if s.bound is not None:
        evidence.append(f"gain {fmt_gain(s.bound)} (the whole backward's share: a ceiling)")
    if not s.reads:
        fix = f"Drop line {s.line} (`{s.text}`): nothing reads the gradient it asks for."
    elif s.gate is not None:
        fix = (
            f"Ask for it only on the steps that read it: `{x}.requires_grad_({s.gate})` on "
            f"line {s.line} (the reads' own test; mind a step counter bumped in between)."
        )
    else:
        fix = (
            f"Ask for it only on the steps that read it: `{x}.requires_grad_(<the reads' "
            f"test>)` on line {s.line}, or `torch.autograd.grad(loss, {x})` on those steps."
        )
    return words(
        "Each backward computes an input's gradient that is read on few steps",
        evidence,
        fix,
        "PyTorch docs: Autograd mechanics (Locally disabling gradient computation)",
    )
