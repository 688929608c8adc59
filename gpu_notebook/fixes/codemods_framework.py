"""Codemods of a framework's per-step work: a user's callback hook that the framework's loop
calls on every step (``gate_callback_hook``), the LightningModule's ``training_step`` log calls
(``gate_training_log``), and Lightning's ``log_every_n_steps``
(``lightning_log_every_n``: made and checked, not offered by a rule; see its docstring).

The HF Trainer calls a ``TrainerCallback``'s ``on_step_end`` and Lightning a ``Callback``'s
``on_train_batch_end`` on every step; what the hook computes (weight norms, histograms, a CPU
snapshot of the weights) is the user's work, which no logging setting spaces. The patch puts
``if state.global_step % N != 0: return`` (Lightning: ``trainer.global_step``) at the top of the
hooks the finding named: on the steps it still runs the hook does what it did.

It gates only a hook the cell defines, that names the step by its own argument, and that does
nothing a gate would change besides its work (``cell/hooks.HookDef.changes``): else it says why
and where the user can act.
"""

from __future__ import annotations

import libcst as cst

from gpu_notebook.cell.hooks import HookDef, fitted_trainer, hook_defs
from gpu_notebook.cell.step_logs import training_logs
from gpu_notebook.fixes.cst_tools import (
    CodemodResult,
    Declined,
    Edited,
    Replacement,
    facts_of,
    nodes_of,
    opened_with,
    replace_nodes,
    set_keyword,
    tree_of,
    wrap,
)
from gpu_notebook.fixes.records import Fix

EVERY_STEPS = 50  # the advice's period (rules/step_logging.RARE_LOGS: Lightning's own default)
# The step a gate reads, by framework, as the advice words it where a hook names none.
_STEP_WORD = {"transformers": "state.global_step", "lightning": "trainer.global_step"}


def gate_callback_hook(
    module: cst.Module,
    *,
    hooks: str = "",
    framework: str = "transformers",
    every: int = EVERY_STEPS,
    cells: str = "",
) -> CodemodResult:
    """Run each named hook's body (``hooks``: ``Class.method``, comma-separated) every
    ``every`` steps. Declines where no named hook can be gated, saying why for each.
    ``cells``: the execution number of the cell that defined each hook (comma-separated, in the
    order of ``hooks``; empty where not known), for a refusal to name."""
    if every < 2:
        raise ValueError(f"every must be 2 or more, not {every}")
    tree = facts_of(module).tree
    names = [h.strip() for h in hooks.split(",") if h.strip()]
    numbers = [n.strip() for n in cells.split(",")] if cells else []
    made_in = {n: int(c) for n, c in zip(names, numbers, strict=False) if c.isdigit()}
    if tree is None or not names:
        return Declined("no callback hook of this cell was named")
    edits: dict[cst.CSTNode, Replacement] = {}
    gated: list[str] = []
    why: list[str] = []
    for name in names:
        found = hook_defs(tree, name, framework)
        reason = _reason(name, found, framework, every, made_in.get(name))
        if reason is not None:
            why.append(reason)
            continue
        [hook] = found
        assert hook.step is not None and hook.node is not None
        nodes = nodes_of(module, [hook.node])
        if not nodes or not isinstance(nodes[0].body, cst.IndentedBlock):
            why.append(f"{name} (line {hook.line}) is written on one line: nothing to gate")
            continue
        edits[nodes[0]] = _gate(hook.step, every)
        gated.append(f"{name} every {every} steps")
    if not edits:
        return Declined("; ".join(why))
    return Edited(replace_nodes(module, edits), ", ".join(gated))


def _reason(
    name: str, found: list[HookDef], framework: str, every: int, cell: int | None = None
) -> str | None:
    """Why ``name`` cannot be gated here (None: it can); ``cell``: the cell that defined it."""
    gate = f"`if {_STEP_WORD.get(framework, 'state.global_step')} % {every} != 0: return`"
    if not found:
        where = f"In[{cell}]" if cell is not None else "an earlier cell or a file it imports"
        return f"{name} is not defined in this cell ({where}): put {gate} at the top of it there"
    if len(found) > 1:
        return f"the cell defines {name} {len(found)} times: put {gate} at the top of the one used"
    hook = found[0]
    if hook.step is None:
        return (
            f"{name} (line {hook.line}) names no step by its arguments (decorated, or taking "
            f"them as *args): put {gate} at its top, the step read from its arguments"
        )
    if hook.changes is not None:
        return (
            f"{name} (line {hook.line}): {hook.changes}, so a gate would change more than how "
            f"often its work runs; gate its heavy lines alone under "
            f"`if {hook.step} % {every} == 0:`"
        )
    return None


def _gate(step: str, every: int) -> Replacement:
    def edit(fn: cst.FunctionDef) -> cst.FunctionDef:
        assert isinstance(fn.body, cst.IndentedBlock)
        gate = cst.parse_statement(f"if {step} % {every} != 0:\n    return\n")
        return fn.with_changes(body=opened_with(fn.body, gate))

    return edit


GATE_CALLBACK_HOOK = Fix(
    "gate_callback_hook",
    "Run the callback's work every N steps",
    (
        "The framework calls your callback's hook every step; its work runs each time.",
        "A gate at the hook's top runs it every N steps, as it was on those steps.",
    ),
    "https://huggingface.co/docs/transformers/main_classes/callback",
    gate_callback_hook,
)


def lightning_log_every_n(module: cst.Module, *, every: int = EVERY_STEPS) -> CodemodResult:
    """``log_every_n_steps=every`` in the Lightning ``Trainer(...)`` call the cell fits: the
    logger writes (and the step's metrics made into floats for them) every ``every`` steps.
    Each ``self.log`` call still runs in full every step: only its gate removes that.

    No rule offers it: on lightning_sync_every_step (log_dict every step, a CSVLogger,
    log_every_n_steps=1) it showed no gain beyond the noise (benchmarks/lightning_log_every_n.py;
    rules/step_logging.framework_overhead says the setting as advice)."""
    if every < 2:
        raise ValueError(f"every must be 2 or more, not {every}")
    tree = facts_of(module).tree
    if tree is None:
        return Declined("no Lightning Trainer in this cell")
    fitted = fitted_trainer(tree)
    if fitted.why is not None or fitted.node is None:
        return Declined(
            f"{fitted.why}: set log_every_n_steps={every} in the Trainer(...) call that fit runs"
        )
    if fitted.logger_off:
        return Declined(
            f"the Trainer (line {fitted.line}) has logger=False: log_every_n_steps spaces only "
            "a logger's writes, and there are none"
        )
    if isinstance(fitted.log_every, int) and fitted.log_every >= every:
        return Declined(
            f"log_every_n_steps={fitted.log_every} already (line {fitted.line}): the logger "
            "writes rarely; what is left is the log calls themselves"
        )
    nodes = [n for n in nodes_of(module, [fitted.node]) if isinstance(n, cst.Call)]
    if not nodes:
        return Declined(f"line {fitted.line}: the Trainer call could not be edited")

    def edit(call: cst.Call) -> cst.Call:
        return set_keyword(call, "log_every_n_steps", cst.Integer(str(every)))

    return Edited(replace_nodes(module, {nodes[0]: edit}), f"log_every_n_steps={every}")


LIGHTNING_LOG_EVERY_N = Fix(
    "lightning_log_every_n",
    "Let the Lightning logger write every N steps",
    (
        "log_every_n_steps is low: the logger writes the step's metrics nearly every step.",
        "log_every_n_steps=50 writes them every 50 steps; each self.log call still runs.",
    ),
    "https://lightning.ai/docs/pytorch/stable/extensions/logging.html",
    lightning_log_every_n,
)


def gate_training_log(module: cst.Module, *, every: int = EVERY_STEPS) -> CodemodResult:
    """Run the ``self.log``/``self.log_dict`` calls of the fitted LightningModule's
    ``training_step`` under ``if (self.global_step + 1) % N == 0:`` (``cell/step_logs``), N the
    Trainer's ``log_every_n_steps`` where it is 2 or more: the calls then run on the steps the
    logger writes (Lightning's ``should_update_logs``), whose rows are unchanged. Where the
    Trainer writes every step (``log_every_n_steps=1``), N is ``every`` and the Trainer's
    setting is raised to it: the logger writes every N steps, each row as it was.

    Declines, naming the line and what to write, where a gate would change what is logged
    beyond how often: ``on_epoch=True``, arguments that do more than compute the value, a call
    inside a loop or a block, a key a callback or scheduler monitors, manual optimization."""
    if every < 2:
        raise ValueError(f"every must be 2 or more, not {every}")
    tree = facts_of(module).tree
    if tree is None:
        return Declined("no Lightning Trainer in this cell")
    read = training_logs(tree, every)
    if read.why is not None:
        return Declined(read.why)
    gateable = [log.node for log in read.logs if log.why is None and log.node is not None]
    left = [log.why for log in read.logs if log.why is not None]
    if not gateable:
        return Declined("; ".join(str(w) for w in left))
    calls = nodes_of(module, gateable)
    parents = tree_of(module).parent
    statements = [parents.get(parents.get(c)) for c in calls]  # Call -> Expr -> the line
    if len(calls) != len(gateable) or not all(
        isinstance(s, cst.SimpleStatementLine) and len(s.body) == 1 for s in statements
    ):
        return Declined(f"line {read.line}: the log calls could not be edited")
    gate = read.gate()
    edits: dict[cst.CSTNode, Replacement] = {}
    for stmt in statements:
        assert isinstance(stmt, cst.SimpleStatementLine)
        edits[stmt] = _gated_line(gate)
    detail = f"{read.owner}.training_step's log calls every {read.every} steps"
    trainer = read.trainer
    if read.raise_every and trainer is not None and trainer.node is not None:
        found = [n for n in nodes_of(module, [trainer.node]) if isinstance(n, cst.Call)]
        if not found:
            return Declined(f"line {trainer.line}: the Trainer call could not be edited")
        edits[found[0]] = lambda call: set_keyword(
            call, "log_every_n_steps", cst.Integer(str(read.every))
        )
        detail += f", log_every_n_steps={read.every}"
    if left:
        detail += f"; left as they were: {'; '.join(str(w) for w in left)}"
    return Edited(replace_nodes(module, edits), detail)


def _gated_line(gate: str) -> Replacement:
    def edit(stmt: cst.SimpleStatementLine) -> cst.If:
        shell = cst.parse_statement(f"{gate}\n    pass\n")
        assert isinstance(shell, cst.If)
        return wrap(shell, [stmt])

    return edit


GATE_TRAINING_LOG = Fix(
    "gate_training_log",
    "Run training_step's self.log calls every N steps",
    (
        "Lightning runs each self.log call in full every step, whatever log_every_n_steps says.",
        "A gate runs them on the steps the logger writes; those rows are unchanged.",
    ),
    "https://lightning.ai/docs/pytorch/stable/extensions/logging.html",
    gate_training_log,
)
