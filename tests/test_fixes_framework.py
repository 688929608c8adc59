"""The gate of a user's callback hook the HF Trainer or Lightning calls on every step
(fixes/codemods_framework ``gate_callback_hook``): source in, patched source out; the refusals
that say where the user can act; the gated hook doing on the steps it still runs what it did."""

from __future__ import annotations

import textwrap
from typing import Any

import pytest

from gpu_notebook.fixes import Patch, Refusal, apply_fix

HF_CELL = '''\
from transformers import TrainerCallback


class WeightNorms(TrainerCallback):
    def __init__(self, model):
        self.model = model
        self.history = []

    def on_step_end(self, args, state, control, **kwargs):
        """Norms of every weight."""
        row = {n: float(p.detach().norm()) for n, p in self.model.named_parameters()}  # heavy
        self.history.append((state.global_step, row))
'''

HF_GATED = '''\
# gpucheck fix: Run the callback's work every N steps (WeightNorms.on_step_end every 50 steps)
from transformers import TrainerCallback


class WeightNorms(TrainerCallback):
    def __init__(self, model):
        self.model = model
        self.history = []

    def on_step_end(self, args, state, control, **kwargs):
        """Norms of every weight."""
        if state.global_step % 50 != 0:
            return
        row = {n: float(p.detach().norm()) for n, p in self.model.named_parameters()}  # heavy
        self.history.append((state.global_step, row))
'''

LIGHTNING_CELL = """\
import lightning as L


class WeightStats(L.Callback):
    def __init__(self):
        self.snapshot = {}

    def on_train_batch_end(self, tr, module, outputs, batch, batch_idx):
        for name, p in module.named_parameters():
            self.snapshot[name] = p.detach().clone()


trainer = L.Trainer(max_epochs=1, callbacks=[WeightStats()])
"""


def _gate(source: str, hooks: str, framework: str, **params: Any) -> Patch | Refusal:
    return apply_fix("gate_callback_hook", source, hooks=hooks, framework=framework, **params)


def _refused(source: str, hooks: str, framework: str = "transformers") -> str:
    result = _gate(source, hooks, framework)
    assert isinstance(result, Refusal), result.diff
    return result.reason


def test_an_hf_hook_is_gated_at_its_top_by_the_state_it_is_handed() -> None:
    result = _gate(HF_CELL, "WeightNorms.on_step_end", "transformers")
    assert isinstance(result, Patch), result
    assert result.source_after == HF_GATED


def test_a_lightning_hook_is_gated_by_the_trainer_it_is_handed_whatever_its_name() -> None:
    result = _gate(LIGHTNING_CELL, "WeightStats.on_train_batch_end", "lightning", every=20)
    assert isinstance(result, Patch), result
    assert (
        "    def on_train_batch_end(self, tr, module, outputs, batch, batch_idx):\n"
        "        if tr.global_step % 20 != 0:\n"
        "            return\n"
        "        for name, p in module.named_parameters():\n"
    ) in result.source_after
    assert result.changed_lines == (1, 10, 11)  # the header, the gate


def test_a_qualified_name_from_the_samples_finds_the_cells_class() -> None:
    # A frame's co_qualname (a class made in a function: make.<locals>.WeightNorms...).
    result = _gate(HF_CELL, "make.<locals>.WeightNorms.on_step_end", "transformers")
    assert isinstance(result, Patch) and "if state.global_step % 50 != 0:" in result.source_after


def test_the_gated_hook_does_on_the_steps_it_runs_what_it_did() -> None:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    patched = _gate(HF_CELL, "WeightNorms.on_step_end", "transformers", every=10)
    assert isinstance(patched, Patch)
    model = torch.nn.Linear(3, 2)
    histories = []
    for source in (HF_CELL, patched.source_after):
        namespace: dict[str, Any] = {}
        exec(compile(source, "<cell>", "exec"), namespace)
        hook = namespace["WeightNorms"](model)
        args = transformers.TrainingArguments(output_dir="unused", report_to=[])
        control = transformers.TrainerControl()
        for step in range(1, 31):
            state = transformers.TrainerState(global_step=step)
            assert hook.on_step_end(args, state, control) is None
        histories.append(hook.history)
    before, after = histories
    assert [s for s, _ in after] == [10, 20, 30]
    assert after == [row for row in before if row[0] % 10 == 0]


@pytest.mark.parametrize(
    ("hook", "said"),
    [
        ("def on_step_end(self, *args, **kwargs):", "names no step by its arguments"),
        ("@staticmethod\n    def on_step_end(args, state, control, **kwargs):",
         "names no step by its arguments"),
    ],
)  # fmt: skip
def test_a_hook_that_names_no_step_is_refused_with_the_gate_to_write(hook: str, said: str) -> None:
    cell = HF_CELL.replace("def on_step_end(self, args, state, control, **kwargs):", hook)
    reason = _refused(cell.replace("state.global_step, row", "0, row"), "WeightNorms.on_step_end")
    assert said in reason and "`if state.global_step % 50 != 0: return`" in reason


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("control.should_save = True", "line 13 sets control.should_save (it steers the training)"),
        ("self.seen += 1", "line 13 carries self.seen from step to step"),
        ("self.mean = 0.9 * self.mean + 0.1 * row['w']", "line 13 carries self.mean"),
        ("return {'stop': True}", "line 13 returns a value the framework reads"),
    ],
)  # fmt: skip
def test_a_hook_a_gate_would_change_beyond_its_work_is_refused(line: str, said: str) -> None:
    cell = HF_CELL + textwrap.indent(line, " " * 8) + "\n"
    reason = _refused(cell, "WeightNorms.on_step_end")
    assert said in reason and "WeightNorms.on_step_end (line 9)" in reason
    assert "gate its heavy lines alone under `if state.global_step % 50 == 0:`" in reason


def test_an_hf_hook_that_hands_back_its_control_is_still_gated() -> None:
    cell = HF_CELL + "        return control\n"
    assert isinstance(_gate(cell, "WeightNorms.on_step_end", "transformers"), Patch)


def test_a_lightning_hook_that_stops_the_trainer_or_logs_into_the_epoch_is_refused() -> None:
    stops = LIGHTNING_CELL.replace(
        "            self.snapshot[name]",
        "            tr.should_stop = False\n            self.snapshot[name]",
    )
    assert "sets tr.should_stop" in _refused(stops, "WeightStats.on_train_batch_end", "lightning")
    epoch = LIGHTNING_CELL.replace(
        "p.detach().clone()",
        "p.detach().clone()\n            module.log('n', p.norm(), on_epoch=True)",
    )
    reason = _refused(epoch, "WeightStats.on_train_batch_end", "lightning")
    assert "on_epoch=True" in reason and "`if tr.global_step % 50 == 0:`" in reason


def test_a_hook_defined_elsewhere_is_refused_naming_where_to_gate() -> None:
    reason = _refused("trainer.train()\n", "WeightNorms.on_step_end")
    assert reason.startswith("WeightNorms.on_step_end is not defined in this cell")
    assert "`if state.global_step % 50 != 0: return` at the top of it there" in reason


def test_a_hook_of_a_known_earlier_cell_is_refused_naming_that_cell() -> None:
    # The rule reads the cell from the hook's frame (its file, as the shell compiled it).
    result = _gate("trainer.train()\n", "WeightNorms.on_step_end,Counter.on_log", "transformers",
                   cells="3,")  # fmt: skip
    assert isinstance(result, Refusal)
    assert "WeightNorms.on_step_end is not defined in this cell (In[3]): put " in result.reason
    assert "Counter.on_log is not defined in this cell (an earlier cell or a file it imports)" in (
        result.reason
    )


def test_one_hook_refused_leaves_the_others_gated() -> None:
    cell = HF_CELL + textwrap.dedent("""
        class Counter(TrainerCallback):
            def on_step_end(self, args, state, control, **kwargs):
                self.n += 1
    """)
    result = _gate(cell, "Counter.on_step_end,WeightNorms.on_step_end", "transformers")
    assert isinstance(result, Patch)
    assert result.source_after.count("% 50 != 0") == 1
    assert "(WeightNorms.on_step_end every 50 steps)" in result.source_after.splitlines()[0]


LIGHTNING_FIT = """\
import lightning as L
from lightning.pytorch.loggers import CSVLogger

trainer = L.Trainer(
    max_epochs=1,
    logger=CSVLogger("logs"),
    log_every_n_steps=1,
)
trainer.fit(Net(), loader)
"""


def _every_n(source: str) -> Patch | Refusal:
    return apply_fix("lightning_log_every_n", source)


def test_log_every_n_steps_is_raised_in_the_trainer_call_fit_runs() -> None:
    result = _every_n(LIGHTNING_FIT)
    assert isinstance(result, Patch), result
    assert "    log_every_n_steps=50,\n)\ntrainer.fit(Net(), loader)\n" in result.source_after
    assert result.changed_lines == (1, 8)
    chained = _every_n("import lightning as L\nL.Trainer(max_steps=9).fit(net)\n")
    # Absent, Lightning's default (50) holds: nothing to raise.
    assert isinstance(chained, Refusal) and "log_every_n_steps=50 already" in chained.reason
    chained = _every_n("import lightning as L\nL.Trainer(log_every_n_steps=5).fit(net)\n")
    assert isinstance(chained, Patch)
    assert "L.Trainer(log_every_n_steps=50).fit(net)" in chained.source_after


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (("trainer.fit(", "trainer = make()\ntrainer.fit("),
         "line 10 fits `trainer`, which the cell does not bind once"),
        (("trainer.fit(Net(), loader)", "other.fit(Net(), loader)"),
         "line 9 fits `other`, which the cell does not bind once"),
        (("trainer.fit(Net(), loader)", "trainer.fit(Net(), loader)\ntrainer.fit(Net(), loader)"),
         "2 fit calls (lines 9, 10)"),
        (("trainer = L.Trainer(", "trainer = Trainer(model=m, args=a,"),
         "line 9: the Trainer it fits is not made in this cell"),
        (('logger=CSVLogger("logs")', "logger=False"), "has logger=False"),
        (("log_every_n_steps=1", "log_every_n_steps=200"), "log_every_n_steps=200 already"),
        (("    max_epochs=1,", "    **opts,"), "line 4: the Trainer(...) call takes **kwargs"),
    ],
)  # fmt: skip
def test_log_every_n_steps_refusals_name_the_line(change: tuple[str, str], said: str) -> None:
    result = _every_n(LIGHTNING_FIT.replace(*change))
    assert isinstance(result, Refusal), result.diff
    assert said in result.reason
