"""A checkpoint written on every step: ``torch.save`` (or ``save_pretrained``, ``np.save``...)
inside the step loop with no ``if`` around it.

Each save serialises the whole state (an Adam optimizer's two moments included) and writes it,
work no change to the model shortens (torch.compile, a bigger batch, a GPU). Measured as the
per-step logs are (rules/step_logging.every_step_lines). Thresholds: TraceML's residual levels
(warn 10%, critical 20%). Seen (unseen round 8, save_every_step): the save read as the forward

and as "Python between operators", and torch.compile was offered for it.
"""

from __future__ import annotations

import ast
import dataclasses
from dataclasses import dataclass

from gpu_notebook.cell.facts import SourceFacts, SourceLine
from gpu_notebook.cell.names import dotted
from gpu_notebook.records import Analysis, Finding, Run
from gpu_notebook.rules.common import EveryStepLines, severity_of
from gpu_notebook.rules.step_logging import every_step_lines
from gpu_notebook.rules.syncs import loop_lines


@dataclass(frozen=True)
class SavesEveryStep(EveryStepLines):
    """Checkpoint saves on every step (``lines``; ``own``: their own sampled time).
    ``to_memory``: every one is a ``torch.save`` into an ``io.BytesIO`` (serialised, not
    written to disk)."""

    to_memory: bool = False


def saves_every_step(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """Checkpoint writes on every step of the training loop."""
    lines = loop_lines(facts, facts.saves)
    return every_step_lines(
        "checkpoint.every_step", SavesEveryStep, lines, analysis, to_memory=_to_memory(facts, lines)
    )


def _to_memory(facts: SourceFacts, lines: tuple[SourceLine, ...]) -> bool:
    """Every save on ``lines`` is ``torch.save(obj, buf)`` with ``buf`` an ``io.BytesIO(...)``
    call or a name the source binds to one (``buf = io.BytesIO()``, ``with io.BytesIO() as
    buf``): the state is serialised in memory, no file is written."""
    tree = facts.tree
    if tree is None or not lines:
        return False
    buffers: set[str] = set()
    for node in ast.walk(tree.tree):
        if isinstance(node, ast.Assign) and _bytes_io(node.value):
            buffers.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif (
            isinstance(node, ast.withitem)
            and _bytes_io(node.context_expr)
            and isinstance(node.optional_vars, ast.Name)
        ):
            buffers.add(node.optional_vars.id)
    at = {s.line for s in lines}
    saves = [c for c in tree.calls() if tree.line_of(c) in at and dotted(c.func) == "torch.save"]
    # A line the source does not show as torch.save (save_pretrained, np.save) writes a file.
    if len(saves) < len(at):
        return False
    return all(_into(c, buffers) for c in saves)


def _into(save: ast.Call, buffers: set[str]) -> bool:
    """``torch.save(obj, f)``'s ``f`` (positional or ``f=``) is a BytesIO."""
    given = [k.value for k in save.keywords if k.arg == "f"]
    target = save.args[1] if len(save.args) > 1 else (given[0] if given else None)
    return target is not None and (
        _bytes_io(target) or (isinstance(target, ast.Name) and target.id in buffers)
    )


def _bytes_io(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and (dotted(node.func) or "").split(".")[-1] == "BytesIO"


@dataclass(frozen=True)
class StateCopiedEveryStep(EveryStepLines):
    """Copies of the model's whole state in the step loop (``lines``: ``copy.deepcopy(model.
    state_dict())``, ``{k: v.clone() ...}``; ``own``: their own sampled time). ``branch``: one
    at least runs on the steps a test of a value picks (``if loss.item() < best:``)."""

    branch: bool = False


def state_copied_every_step(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """A keep-the-best snapshot or a rollback copy of the whole state, taken every step (or on
    the steps a batch's value picks): a checkpoint's host work without the file, measured as
    the saves are. Seen (unseen round 11, best_state_deepcopy): no finding named it."""
    lines = tuple(s for s in facts.state_copies if s.step_loop_line is not None)
    if not lines:
        return None
    branch = any(s.gated for s in lines)
    finding = every_step_lines(
        "checkpoint.state_copy", StateCopiedEveryStep, lines, analysis, branch=branch
    )
    if finding is not None and branch:
        # Gating a copy the branch picks would keep a stale best: said, with its advice. Its
        # level is its own sampled time's: the host time outside the model it shares with the
        # other per-step work (a save beside it) is not its own.
        own = finding.said.own if isinstance(finding.said, StateCopiedEveryStep) else None
        finding = dataclasses.replace(
            finding, fix_id=None, fix_params={}, severity=severity_of(own, low=0.0) or "low"
        )
    return finding


RULES = (saves_every_step, state_copied_every_step)
