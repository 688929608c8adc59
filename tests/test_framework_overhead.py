"""Framework overhead comes from the frameworks' own logging/callback/progress frames (real
Lightning and transformers code objects), named with the setting as it is now (issue 26)."""

from __future__ import annotations

import dataclasses
import inspect
import sys

import pytest

from gpu_notebook.analysis import framework_stacks
from gpu_notebook.cell.scan import scan_source
from gpu_notebook.formatting import fmt_share
from gpu_notebook.records import CodeRef
from gpu_notebook.rules import step_logging as sl
from gpu_notebook.rules.common import SUGGEST
from gpu_notebook.rules.syncs import MIN_LINE_SAMPLES
from tests.scenarios import synthetic as syn
from tests.test_frameworks import _stacks
from tests.test_rules import ids, only, rules_for

pytest.importorskip("transformers")
pytest.importorskip("lightning")

CELL = CodeRef("<cell>", "<module>", 1)


def ref(fn) -> CodeRef:
    return CodeRef(inspect.getsourcefile(fn), fn.__qualname__, fn.__code__.co_firstlineno)


def _hf_run(cell: str, logging_us: int, attention_us: int):
    from transformers import Trainer
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    train = ref(Trainer.train)
    log = ref(Trainer._maybe_log_save_evaluate)
    attention = ref(sdpa_attention_forward)
    raw = _stacks(
        [([CELL, train, attention], attention_us), ([CELL, train, log], logging_us),
         ([CELL, train], 10_000 - attention_us - logging_us)], 10_000,
    )  # fmt: skip
    return dataclasses.replace(syn.make_run(cell), stacks=raw)


HF_CELL = (
    "args = TrainingArguments(output_dir='o', logging_steps={steps})\n"
    "Trainer(model=model, args=args, train_dataset=ds).train()\n"
)


def test_hf_attention_in_transformers_integrations_is_model_code_not_overhead():
    run = _hf_run(HF_CELL.format(steps=500), logging_us=0, attention_us=6000)
    assert "logging.framework_overhead" not in ids(rules_for(run, syn.make_analysis({})))


def test_hf_logging_steps_1_is_named_with_its_share_and_the_new_value():
    run = _hf_run(HF_CELL.format(steps=1), logging_us=2500, attention_us=4000)
    f = only(rules_for(run, syn.make_analysis({})), "logging.framework_overhead")
    assert "logging_steps=1 now: the Trainer logs every step (25% of the sampled time)" in f.fix
    assert "TrainingArguments(logging_steps=50)" in f.fix
    assert "HF Trainer logging: 25%" in f.evidence[1] and "sdpa" not in " ".join(f.evidence)


def test_hf_logging_every_500_steps_is_not_told_to_log_every_50():
    run = _hf_run(HF_CELL.format(steps=500), logging_us=2500, attention_us=4000)
    f = only(rules_for(run, syn.make_analysis({})), "logging.framework_overhead")
    assert "TrainingArguments(logging_steps=50)" not in f.fix and f.gain_bound is None
    assert "logging_steps=500" in f.fix and f.severity == "info"


LIT_CELL = """
class Lit(L.LightningModule):
    def training_step(self, batch, i):
        loss = self.net(batch).mean()
        self.log("loss", loss)
        return loss
trainer = L.Trainer(max_steps=10, log_every_n_steps=1)
trainer.fit(Lit())
"""


def _lit_run(cell: str, log_us: int, module_us: int = 0):
    import lightning.pytorch as pl
    from lightning.pytorch.loggers import csv_logs

    fit = ref(pl.Trainer.fit)
    log = ref(pl.LightningModule.log)
    # Importing Lightning's loggers (tensorboard, csv) runs their modules' code: import time.
    import_frame = CodeRef(inspect.getsourcefile(csv_logs), "<module>", 1)
    raw = _stacks(
        [([CELL, import_frame], module_us), ([CELL, fit, log], log_us),
         ([CELL, fit], 10_000 - log_us - module_us)], 10_000,
    )  # fmt: skip
    return dataclasses.replace(syn.make_run(cell), stacks=raw)


def test_lightning_self_log_every_step_is_named_with_its_line_and_share():
    f = only(
        rules_for(_lit_run(LIT_CELL, 3000), syn.make_analysis({})), "logging.framework_overhead"
    )
    assert (
        "self.log on every step (30% of the sampled time; line 6 (Lit.training_step): "
        '`self.log("loss", loss)`)' in f.fix
    )
    assert "log_every_n_steps=50) (log_every_n_steps=1 now)" in f.fix


def test_lightning_logger_imports_are_not_per_step_overhead():
    quiet = LIT_CELL.replace('self.log("loss", loss)', 'self.log("loss", loss, on_step=False)')
    run = _lit_run(quiet.replace("log_every_n_steps=1", "log_every_n_steps=50"), 0, module_us=3500)
    assert "logging.framework_overhead" not in ids(rules_for(run, syn.make_analysis({})))


def test_framework_settings_read_literals_defaults_and_unknowns():
    facts = scan_source(
        "a = TrainingArguments(output_dir='o')\nb = L.Trainer(log_every_n_steps=n)\n"
    )
    assert facts.framework_setting("TrainingArguments", "logging_steps") == 500  # the default
    assert facts.framework_setting("Trainer", "log_every_n_steps") is None  # not a literal
    assert facts.framework_setting("Trainer", "enable_progress_bar") is True


LOGGING_FIT = """
import torch, lightning as L
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
torch.manual_seed(0); torch.set_num_threads(1)
ds = TensorDataset(torch.randn(4800, 16), torch.randint(0, 3, (4800,)))
class Logs(L.LightningModule):
    def __init__(self):
        super().__init__(); self.net = nn.Linear(16, 3)
    def training_step(self, batch, i):
        x, y = batch
        logits = self.net(x)
        loss = nn.functional.cross_entropy(logits, y)
        self.log("loss", loss, on_step=True, prog_bar=True)
        self.log("acc", (logits.argmax(1) == y).float().mean(), on_step=True, on_epoch=True)
        self.log("norm", logits.norm(), on_step=True, on_epoch=True)
        return loss
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)
trainer = L.Trainer(max_epochs=1, accelerator="cpu", log_every_n_steps=1, logger=False,
                    enable_checkpointing=False, enable_model_summary=False)
"""

# A tiny model under the HF Trainer: the step is the Trainer's own machinery and its logging.
HF_LOGGING = """
import os, torch
from torch import nn
from transformers import Trainer, TrainingArguments
from transformers.utils import logging as hf_logging
hf_logging.set_verbosity_error()
torch.manual_seed(0); torch.set_num_threads(1)
class Pairs(torch.utils.data.Dataset):
    def __len__(self): return 4000
    def __getitem__(self, i):
        return {"x": torch.full((4,), float(i % 7)), "labels": torch.tensor(float(i % 3))}
class Tiny(nn.Module):
    def __init__(self):
        super().__init__(); self.net = nn.Linear(4, 1)
    def forward(self, x, labels):
        return {"loss": ((self.net(x).squeeze(1) - labels) ** 2).mean()}
"""


def _framework_named(report, name: str, setting: str, *, measured: bool = False):
    """The framework finding of a default run: a share read off the dense samples after the
    window and the clocked sparse ones over the rest of the run, by the loop thread's time each
    stands for (or, too few of both, what they caught, without a share). ``measured``: the run is long
    enough for a share on any machine (25 sparse samples a second)."""
    run = report.run
    # The sparse samples over the rest of the run are kept apart: the hot lines are the dense
    # ones' alone (issue 26: mixed in, a torch line outranked the pure-Python one on a loaded
    # machine); they fell on a jittered clock with the switch interval lowered for each.
    sparse = run.framework_stacks
    assert sparse is not None and sparse.samples > 0 and sparse.clocked
    assert run.stacks is not None
    if report.analysis.stacks is not None:
        assert report.analysis.stacks.duration_s == run.stacks.duration_s
    # The share, recomputed here from the recorded samples of both samplers, on the loop
    # thread's clock, our own code's samples out (framework_stacks.sampled_stacks).
    sampled = framework_stacks.sampled_stacks(run)
    samples = sum(framework_stacks.loop_time(raw)[0] for raw in sampled)
    loop_us = sum(framework_stacks.loop_time(raw)[1] for raw in sampled)
    by_label: dict[str, int] = {}
    for raw in sampled:
        framework_stacks.count_overhead(raw, by_label, {}, set())
    share = sum(by_label.values()) / loop_us
    f = next((f for f in report.findings if f.rule_id == "logging.framework_overhead"), None)
    if measured:
        assert samples >= MIN_LINE_SAMPLES, samples
    judged = sl.judged_share(share, samples) if samples >= sl.MIN_SHARE_SAMPLES else None
    if judged is None:
        # Too few for a share: what the sparse samples caught is said, if they caught enough of
        # it (a short fit on a fast, quiet machine gets a handful of samples: the CI's rerun at
        # load 1 caught too few, and the rule rightly said nothing).
        sparse = framework_stacks.without_ours(sparse)  # as the rule reads them
        seen = framework_stacks.count_overhead(sparse, {}, {}, set(), weigh=False)
        if seen < sl.MIN_SEEN or seen < SUGGEST * framework_stacks.loop_time(sparse)[0]:
            assert f is None, (seen, f)
            return None
        assert f is not None and f.severity == "info" and f.phase_share is None, f
        assert "not measured" in f.title and "--lines all" in f.fix, f
    elif judged < SUGGEST:
        assert f is None, (share, f)
        return None
    else:
        assert f is not None, share
        said = f"{fmt_share(share)} of the sampled time ({samples} stack samples: "
        assert said in f.evidence[0], (said, f.evidence)
        assert f.phase_share is not None and f.gain_bound is not None, f
    text = " ".join((f.title, *f.evidence, f.fix))
    assert name in text and setting in f.fix, f
    return f


def test_a_default_short_fit_logging_every_step_names_self_log(ip):
    # Issue 26 (unseen round 3): with the default options the stack sampler followed the
    # profiler window for 3 steps only (2-16 samples of a short fit): the framework's
    # self.log on every step was never named. A sparse sampler now goes on over the rest of
    # the run; what it caught in Lightning's own frames is said, with the settings.
    assert ip.run_cell(LOGGING_FIT).success
    cell = "%%gpucheck -q -o rep\ntrainer.fit(Logs(), DataLoader(ds, batch_size=16))\n"
    assert ip.run_cell(cell).success
    _framework_named(ip.user_ns["rep"], "Lightning self.log", "log_every_n_steps")


def test_a_default_hf_trainer_logging_every_step_names_its_logging(ip, tmp_path):
    ip.user_ns["OUT"] = str(tmp_path)
    assert ip.run_cell(HF_LOGGING).success
    cell = (
        "%%gpucheck -q -o rep\n"
        "args = TrainingArguments(output_dir=os.path.join(OUT, 'hf'), logging_steps=1,\n"
        "    per_device_train_batch_size=1, num_train_epochs=1, report_to=[], use_cpu=True,\n"
        "    save_strategy='no', seed=0, dataloader_num_workers=0)\n"
        "Trainer(model=Tiny(), args=args, train_dataset=Pairs()).train()\n"
    )
    before = sys.getswitchinterval()
    sys.setswitchinterval(0.003)  # the program's own: ours is set only around each sample
    try:
        assert ip.run_cell(cell).success
        after = sys.getswitchinterval()
    finally:
        sys.setswitchinterval(before)
    assert after == pytest.approx(0.003)
    f = _framework_named(ip.user_ns["rep"], "HF Trainer", "logging_steps", measured=True)
    assert f is None or "logging_steps=1 now" in f.fix, f


HF_WORKERS_CELL = (
    "args = TrainingArguments(output_dir='o', dataloader_num_workers=2)\n"
    "Trainer(model=model, args=args, train_dataset=ds, data_collator=PadCollator(0)).train()\n"
)


@pytest.mark.parametrize(
    "step_us, machine, said",
    [
        # A compute-bound 26 ms step on a busy 2-core machine, its 2 workers at 0.4% of a core
        # (issue 26, unseen round 3): they may wait for a core, not for their samples.
        (26_000.0, 100.0, "waiting for a core, not for their samples; which one was not measured"),
        # Workers ahead of a short step: the wait is receiving the batch they have ready.
        (4_000.0, 40.0, "the workers are ahead of the step"),
    ],
)
def test_idle_workers_are_not_said_to_wait_for_their_samples_unless_measured(
    step_us, machine, said
):
    run = syn.make_run(HF_WORKERS_CELL, cpu_count=2, series=syn.worker_samples(2, 3, 0.4))
    run = dataclasses.replace(run, steps=dataclasses.replace(run.steps, loader_num_workers=2))
    # 12% of the step waits for data: 3.1 ms of a 26 ms step, 0.48 ms of a 4 ms one.
    split = syn.phases({"data": 0.12, "backward": 0.5}, step_us=step_us)
    analysis = syn.make_analysis(phase_split=split)
    util = dataclasses.replace(
        analysis.utilization, children_cpu_mean_pct=0.4, system_cpu_mean_pct=machine
    )
    f = only(rules_for(run, dataclasses.replace(analysis, utilization=util)), "input.slow_dataset")
    text = " ".join((f.title, *f.evidence, f.fix))
    assert "wait for their samples" not in text and "num_workers=4" not in text, text
    assert said in text and f.fix_id is None and f.severity == "info"


PLAIN_LOOP = """
import sys, torch
from torch import nn
torch.manual_seed(0)
net = nn.Linear(8, 1); opt = torch.optim.SGD(net.parameters(), lr=0.01)
seen = []
"""


def test_outside_a_framework_the_sparse_sampler_leaves_the_switch_interval_alone(ip, monkeypatch):
    # A plain script that reads the switch interval at its end reads its own (the differential
    # probe does): the switch interval is lowered around the sparse samples only under a
    # framework's loop (capture/session.py), whose share they give.
    from gpu_notebook.capture import session

    monkeypatch.setattr(session, "_FRAMEWORK_MODULES", ("no_such_framework_module",))
    assert ip.run_cell(PLAIN_LOOP).success
    before = sys.getswitchinterval()
    sys.setswitchinterval(0.003)
    try:
        cell = (
            "%%gpucheck -q -o rep\n"
            "for i in range(400):\n"
            "    loss = net(torch.randn(4, 8)).pow(2).mean()\n"
            "    opt.zero_grad(); loss.backward(); opt.step()\n"
            "    sum(range(2000))\n"
            "    if i >= 300: seen.append(sys.getswitchinterval())\n"
        )
        assert ip.run_cell(cell).success
        after = sys.getswitchinterval()
    finally:
        sys.setswitchinterval(before)
    assert after == pytest.approx(0.003)
    assert set(ip.user_ns["seen"]) == {0.003}
    sparse = ip.user_ns["rep"].run.framework_stacks
    assert sparse is None or not sparse.clocked


# Issue 26 (unseen round 10, benchmarks/unseen_programs/lightning_norm_callback.py): a
# Callback's hook logging every parameter's gradient norm with ``pl_module.log`` took 30-66% of
# the samples, and the finding named only training_step's self.log.
CALLBACK_CELL = """\
class Norms(pl.Callback):
    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        for name, p in module.named_parameters():
            module.log_dict({name: p.norm()})
    def on_train_epoch_end(self, trainer, module):
        module.log("epoch_norm", 1.0)
    def on_before_zero_grad(self, trainer, pl_module, optimizer):
        trainer.lightning_module.log("lr", 1.0)
class Lit(L.LightningModule):
    def training_step(self, batch, i):
        loss = self.net(batch).mean()
        self.log("loss", loss, on_step=False, on_epoch=True)
        return loss
    def on_after_backward(self):
        self.trainer.lightning_module.log("grad", 1.0)
trainer = L.Trainer(max_steps=10, callbacks=[Norms()])
trainer.fit(Lit())
"""
# The run's cell is read as the magic's body: its lines counted from 2.
HOOK, EPOCH, ZERO, STEP, BACKWARD = 5, 7, 9, 13, 16


def test_lightning_log_calls_are_read_in_callback_hooks_and_module_hooks():
    logs = {log.at.line - 1: log for log in scan_source(CALLBACK_CELL, line_offset=1).step_logs}
    # The hook's module argument, whatever its name, and log_dict; an epoch hook's log is not
    # on a step; on_step=False still calls Lightning's log on every step.
    hook = logs[HOOK - 1]
    assert (hook.hook, hook.owner, hook.callback, hook.at.kind) == (
        "on_train_batch_end",
        "Norms",
        True,
        "on_step",
    )
    assert logs[EPOCH - 1].at.kind == "epoch" and logs[EPOCH - 1].callback
    assert logs[ZERO - 1].callback and logs[ZERO - 1].hook == "on_before_zero_grad"
    step = logs[STEP - 1]
    assert (step.hook, step.callback, step.at.kind) == ("training_step", False, "off_step")
    assert not logs[BACKWARD - 1].callback and logs[BACKWARD - 1].hook == "on_after_backward"
    assert not scan_source("y = torch.log(x)\nz = math.log(2)\n").step_logs


def _callback_run(hook_us: int, norm_us: int, step_us: int):
    """A fit whose Callback hook (line HOOK) logs through Lightning's log and computes the
    values it logs in torch's frames, and whose training_step (line STEP) logs too."""
    import lightning.pytorch as pl
    import torch

    fit = ref(pl.Trainer.fit)
    log = ref(pl.LightningModule.log)
    norm = ref(torch.Tensor.norm)
    hook = CodeRef("<cell>", "Norms.on_train_batch_end", HOOK)
    step = CodeRef("<cell>", "Lit.training_step", STEP)
    raw = _stacks(
        [([CELL, fit, hook, log], hook_us), ([CELL, fit, hook, norm], norm_us),
         ([CELL, fit, step, log], step_us), ([CELL, fit], 10_000 - hook_us - norm_us - step_us)],
        10_000,
    )  # fmt: skip
    raw = dataclasses.replace(raw, root_filename="<cell>")
    return dataclasses.replace(syn.make_run(CALLBACK_CELL), stacks=raw)


def test_a_callbacks_per_step_log_is_named_with_its_hook_share_and_gate():
    f = only(
        rules_for(_callback_run(2500, 1500, 500), syn.make_analysis({})),
        "logging.framework_overhead",
    )
    # The values the hook computes only to log them count with the log (45% in all).
    assert f"{fmt_share(0.45)} of the sampled time" in f.evidence[0]
    callback = f.fix.index("the Callback's log calls on every step")
    module = f.fix.index("self.log on every step")
    assert callback < module  # the larger first
    assert (
        f"line {HOOK} (Norms.on_train_batch_end, 40%): `module.log_dict({{name: p.norm()}})`"
        in f.fix
    )
    assert "if trainer.global_step % 50 == 0:" in f.fix
    assert f"line {STEP} (Lit.training_step, 5%)" in f.fix and f"line {EPOCH} " not in f.fix
    # Hooks that run on every step: named, without a share where no sample fell under them.
    assert f"line {ZERO} (Norms.on_before_zero_grad)" in f.fix
    assert f"line {BACKWARD} (Lit.on_after_backward)" in f.fix


NORMS_FIT = """%%gpucheck -q -o rep
class GradNorms(L.Callback):
    def on_before_optimizer_step(self, trainer, lit, optimizer):
        for name, p in lit.named_parameters():
            lit.log(f"grad/{name}", p.grad.norm(), on_step=True)
class Plain(L.LightningModule):
    def __init__(self):
        super().__init__(); self.net = nn.Sequential(*[nn.Linear(16, 16) for _ in range(6)])
    def training_step(self, batch, i):
        x, y = batch
        return nn.functional.cross_entropy(self.net(x)[:, :3], y)
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)
trainer = L.Trainer(max_epochs=1, accelerator="cpu", logger=False, callbacks=[GradNorms()],
                    enable_checkpointing=False, enable_model_summary=False,
                    enable_progress_bar=False)
trainer.fit(Plain(), DataLoader(ds, batch_size=16))
"""


def test_a_real_fit_names_the_callback_hook_that_logs_every_step(ip):
    # A real fit whose only per-step log is a Callback's: the framework finding, where the
    # samples read one, names the hook's line and its gate, never a training_step self.log.
    assert ip.run_cell(LOGGING_FIT).success
    assert ip.run_cell(NORMS_FIT).success
    report = ip.user_ns["rep"]
    line = 1 + NORMS_FIT.splitlines().index(  # the magic's line is line 1
        '            lit.log(f"grad/{name}", p.grad.norm(), on_step=True)'
    )
    f = next((f for f in report.findings if f.rule_id == "logging.framework_overhead"), None)
    if f is None:  # too few samples caught it on this machine: nothing said, nothing wrong
        return
    assert f"line {line} (GradNorms.on_before_optimizer_step" in f.fix, f.fix
    assert "trainer.global_step % 50 == 0" in f.fix and "self.log on every step" not in f.fix


def test_log_calls_of_classes_defined_in_an_earlier_cell_are_named_from_their_frames():
    # A notebook defines the Callback and the LightningModule in one cell and measures
    # `trainer.fit(...)` in the next: the measured cell shows no log call. The samples do: the
    # user's frame that called Lightning's log, a Callback's where Lightning's
    # _call_callback_hooks called it.
    import lightning.pytorch as pl
    from lightning.pytorch.trainer import call

    here = CodeRef("<ipython-input-4-0a1b>", "<module>", 1)
    fit = ref(pl.Trainer.fit)
    log = ref(pl.LightningModule.log)
    hooks = ref(call._call_callback_hooks)
    module_hook = ref(call._call_lightning_module_hook)
    norms = CodeRef("<ipython-input-3-9f8e>", "GradNorms.on_before_optimizer_step", 5)
    step = CodeRef("<ipython-input-3-9f8e>", "Lit.training_step", 12)
    raw = _stacks(
        [([here, fit, hooks, norms, log], 4000), ([here, fit, module_hook, step, log], 1000),
         ([here, fit], 5000)], 10_000,
    )  # fmt: skip
    raw = dataclasses.replace(raw, root_filename=here.filename)
    run = dataclasses.replace(syn.make_run("trainer.fit(Lit())\n"), stacks=raw)
    f = only(rules_for(run, syn.make_analysis({})), "logging.framework_overhead")
    assert "the Callback's log calls on every step" in f.fix
    assert "In[3] line 5 (GradNorms.on_before_optimizer_step, 40%)" in f.fix
    assert "self.log on every step" in f.fix and "In[3] line 12 (Lit.training_step, 10%)" in f.fix
    assert f.fix.index("GradNorms") < f.fix.index("Lit.training_step")


HF_HOOK_CELL = """args = TrainingArguments(output_dir='o', logging_steps=500, disable_tqdm=True)
class WeightNorms(TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        self.rows.append([float(p.norm()) for p in self.model.parameters()])
Trainer(model=model, args=args, train_dataset=ds, callbacks=[WeightNorms()]).train()
"""


def _hooked_run(cell: str, dispatch: list[CodeRef], hook: CodeRef, work: CodeRef, us: int):
    """A run whose framework loop calls the user's callback ``hook`` through ``dispatch`` (the
    framework's frames), the hook's own work in ``work``'s frame for ``us`` of 10 ms."""
    raw = _stacks([([CELL, *dispatch, hook, work], us), ([CELL, dispatch[0]], 10_000 - us)], 10_000)
    raw = dataclasses.replace(raw, root_filename="<cell>")
    return dataclasses.replace(syn.make_run(cell), stacks=raw)


def test_a_trainer_callbacks_own_work_is_named_by_its_hook_with_its_gate_not_a_logging_setting():
    # Unseen hf_callback_metrics: a TrainerCallback's weight norms on every step read "HF
    # Trainer callbacks: 27% ... the framework's own per-step bookkeeping: nothing to turn
    # down". The work is the user's hook's, gated in the hook; logging_steps spaces none of it.
    import torch
    from transformers import Trainer
    from transformers.trainer_callback import CallbackHandler

    dispatch = [
        ref(Trainer.train),
        ref(CallbackHandler.on_step_end),
        ref(CallbackHandler.call_event),
    ]
    hook = CodeRef("<cell>", "WeightNorms.on_step_end", 3)
    run = _hooked_run(HF_HOOK_CELL, dispatch, hook, ref(torch.Tensor.norm), 3000)
    f = only(rules_for(run, syn.make_analysis({})), "logging.framework_overhead")
    assert f.severity != "info" and f.gain_bound is not None
    assert "WeightNorms.on_step_end (line 3, 30%)" in f.fix
    assert "`if state.global_step % 50 == 0:`" in f.fix
    assert "logging_steps=50" not in f.fix and "Nothing to turn down" not in f.fix
    assert "HF Trainer callbacks" not in " ".join(f.evidence)


def test_a_lightning_callbacks_own_work_is_named_by_its_hook():
    # Unseen lightning_heavy_callback: a Callback's per-step weight statistics (no log call)
    # ran under Lightning's _call_callback_hooks and no framework finding named the hook.
    import lightning.pytorch as pl
    import torch
    from lightning.pytorch.trainer import call

    cell = HF_HOOK_CELL.replace("TrainerCallback", "L.Callback").replace(
        "on_step_end(self, args, state, control, **kwargs)",
        "on_train_batch_end(self, trainer, module, outputs, batch, i)",
    )
    dispatch = [ref(pl.Trainer.fit), ref(call._call_callback_hooks)]
    hook = CodeRef("<cell>", "WeightNorms.on_train_batch_end", 3)
    run = _hooked_run(cell, dispatch, hook, ref(torch.Tensor.norm), 3000)
    f = only(rules_for(run, syn.make_analysis({})), "logging.framework_overhead")
    assert "WeightNorms.on_train_batch_end (line 3, 30%)" in f.fix
    assert "`if trainer.global_step % 50 == 0:`" in f.fix


def test_the_hooks_finding_offers_the_gate_in_the_hook_it_names():
    # Issue 26: the hook was named with its share and its gate as advice, with no patch.
    import torch
    from transformers import Trainer
    from transformers.trainer_callback import CallbackHandler

    from gpu_notebook.fixes import Patch, apply_fix

    dispatch = [ref(Trainer.train), ref(CallbackHandler.on_step_end),
                ref(CallbackHandler.call_event)]  # fmt: skip
    hook = CodeRef("<cell>", "WeightNorms.on_step_end", 3)
    run = _hooked_run(HF_HOOK_CELL, dispatch, hook, ref(torch.Tensor.norm), 3000)
    f = only(rules_for(run, syn.make_analysis({})), "logging.framework_overhead")
    assert f.fix_id == "gate_callback_hook"
    assert dict(f.fix_params) == {"hooks": "WeightNorms.on_step_end", "framework": "transformers",
                                  "every": 50}  # fmt: skip
    # The low end: the hook's own share (here all of the overhead, so the range is one value).
    assert f.gain_low == f.gain_bound == pytest.approx(1 / (1 - 0.3 * 0.9))
    patch = apply_fix(f.fix_id, HF_HOOK_CELL, **f.fix_params)
    assert isinstance(patch, Patch)
    gated = (
        "    def on_step_end(self, args, state, control, **kwargs):\n"
        "        if state.global_step % 50 != 0:\n"
        "            return\n"
    )
    assert gated in patch.source_after


def test_a_callbacks_log_calls_are_gated_in_their_hook():
    import lightning.pytorch as pl
    from lightning.pytorch.trainer import call

    cell = (
        "class GradNorms(L.Callback):\n"
        "    def on_before_optimizer_step(self, trainer, pl_module, optimizer):\n"
        "        for n, p in pl_module.named_parameters():\n"
        "            pl_module.log(n, p.grad.norm(), on_step=True, on_epoch=False)\n"
        "trainer.fit(Lit())\n"
    )
    here = CodeRef("<cell>", "<module>", 5)
    norms = CodeRef("<cell>", "GradNorms.on_before_optimizer_step", 2)
    raw = _stacks(
        [([here, ref(pl.Trainer.fit), ref(call._call_callback_hooks), norms,
           ref(pl.LightningModule.log)], 4000), ([here, ref(pl.Trainer.fit)], 6000)], 10_000,
    )  # fmt: skip
    run = dataclasses.replace(
        syn.make_run(cell), stacks=dataclasses.replace(raw, root_filename="<cell>")
    )
    f = only(rules_for(run, syn.make_analysis({})), "logging.framework_overhead")
    assert "the Callback's log calls on every step" in f.fix
    assert f.fix_id == "gate_callback_hook"
    assert f.fix_params["hooks"] == "GradNorms.on_before_optimizer_step"
    assert f.fix_params["framework"] == "lightning"


def test_the_hooks_gate_is_worded_with_the_step_its_own_argument_names():
    # Unseen lightning_after_backward_stats: `def on_after_backward(self, tr, module)` was told
    # `if trainer.global_step % 50 == 0:`, a name the hook does not have (its patch read tr).
    import lightning.pytorch as pl
    import torch
    from lightning.pytorch.trainer import call

    cell = HF_HOOK_CELL.replace("TrainerCallback", "L.Callback").replace(
        "on_step_end(self, args, state, control, **kwargs)", "on_after_backward(self, tr, module)"
    )
    dispatch = [ref(pl.Trainer.fit), ref(call._call_callback_hooks)]
    hook = CodeRef("<cell>", "WeightNorms.on_after_backward", 3)
    run = _hooked_run(cell, dispatch, hook, ref(torch.Tensor.norm), 3000)
    f = only(rules_for(run, syn.make_analysis({})), "logging.framework_overhead")
    assert "`if tr.global_step % 50 == 0:` at the top of the hook" in f.fix
    assert "trainer.global_step" not in f.fix


def test_a_framework_callback_below_the_dispatcher_stays_the_frameworks():
    # Lightning's own progress bar is a Callback too: its samples stay the bar's.
    import lightning.pytorch as pl
    from lightning.pytorch.callbacks import TQDMProgressBar
    from lightning.pytorch.trainer import call

    dispatch = [ref(pl.Trainer.fit), ref(call._call_callback_hooks)]
    bar = ref(TQDMProgressBar.on_train_batch_end)
    run = _hooked_run(LIT_CELL, dispatch, bar, ref(TQDMProgressBar.on_train_batch_end), 3000)
    f = only(rules_for(run, syn.make_analysis({})), "logging.framework_overhead")
    assert "Lightning progress bar: 30%" in f.evidence[1] and "your callbacks" not in f.fix


def test_hf_checkpoints_and_evaluation_are_not_the_trainers_logging():
    # Unseen hf_save_steps: save_steps=5's checkpoints under _maybe_log_save_evaluate read "HF
    # Trainer logging: 17% ... nothing to turn down" beside the save's own finding (its
    # save_steps, rules/step_logging.periodic_work).
    from transformers import Trainer

    train = ref(Trainer.train)
    log = ref(Trainer._maybe_log_save_evaluate)
    for work in (ref(Trainer._save_checkpoint), ref(Trainer._evaluate)):
        raw = _stacks([([CELL, train, log, work], 3000), ([CELL, train], 7000)], 10_000)
        run = dataclasses.replace(syn.make_run(HF_CELL.format(steps=500)), stacks=raw)
        assert "logging.framework_overhead" not in ids(rules_for(run, syn.make_analysis({})))
    # The logging itself under the same frame is still the logging's.
    raw = _stacks([([CELL, train, log, ref(Trainer.log)], 3000), ([CELL, train], 7000)], 10_000)
    run = dataclasses.replace(syn.make_run(HF_CELL.format(steps=1)), stacks=raw)
    f = only(rules_for(run, syn.make_analysis({})), "logging.framework_overhead")
    assert "HF Trainer logging: 30%" in f.evidence[1]


def test_lightnings_own_bookkeeping_without_a_log_call_is_not_told_to_gate_self_log():
    # Unseen lightning_heavy_callback logs nothing; Lightning's per-step bookkeeping (1%) beside
    # its callback's work read "self.log on every step (1% of the sampled time) ... call
    # self.log under `if self.global_step % 50 == 0:`".
    import lightning.pytorch as pl
    import torch
    from lightning.pytorch.trainer import call
    from lightning.pytorch.trainer.connectors.logger_connector.logger_connector import (
        _LoggerConnector,
    )

    cell = HF_HOOK_CELL.replace("TrainerCallback", "L.Callback")
    fit, bookkeeping = ref(pl.Trainer.fit), ref(_LoggerConnector.on_batch_end)
    hook = CodeRef("<cell>", "WeightNorms.on_step_end", 3)
    raw = _stacks(
        [([CELL, fit, ref(call._call_callback_hooks), hook, ref(torch.Tensor.norm)], 3000),
         ([CELL, fit, bookkeeping], 100), ([CELL, fit], 6900)], 10_000,
    )  # fmt: skip
    run = dataclasses.replace(
        syn.make_run(cell), stacks=dataclasses.replace(raw, root_filename="<cell>")
    )
    f = only(rules_for(run, syn.make_analysis({})), "logging.framework_overhead")
    assert f.title.startswith("Your callback's hook") and "self.log" not in f.fix


@pytest.mark.parametrize(
    ("rate", "said"),
    [
        ("refresh_rate=1", "TQDMProgressBar(refresh_rate=20) in the Trainer's callbacks list "
                           "(refresh_rate=1 now)"),
        ("refresh_rate=50", "it redraws every 50 batches already"),
        ("5", "TQDMProgressBar(refresh_rate=20) or enable_progress_bar=False"),  # not read
    ],
)  # fmt: skip
def test_a_bar_in_the_callbacks_list_is_told_with_its_refresh_rate_as_it_is(rate, said):
    # Unseen lightning_bar_refresh1: TQDMProgressBar(refresh_rate=1) in callbacks=[...] was
    # told "TQDMProgressBar(refresh_rate=20) or enable_progress_bar=False", not the argument
    # it already passes.
    import lightning.pytorch as pl
    from lightning.pytorch.callbacks import TQDMProgressBar
    from lightning.pytorch.trainer import call

    cell = LIT_CELL.replace("log_every_n_steps=1", f"callbacks=[TQDMProgressBar({rate})]")
    dispatch = [ref(pl.Trainer.fit), ref(call._call_callback_hooks)]
    bar = ref(TQDMProgressBar.on_train_batch_end)
    f = only(
        rules_for(_hooked_run(cell, dispatch, bar, bar, 3000), syn.make_analysis({})),
        "logging.framework_overhead",
    )
    assert said in f.fix


def test_the_modules_step_logs_finding_offers_the_gate_that_reaches_them():
    # lightning_sync_every_step: the log_dict line was named with its share and "gate" as
    # advice, with no patch (log_every_n_steps=50 alone measured ~1.05x, the call removed 3.21x).
    from gpu_notebook.fixes import Patch, apply_fix

    f = only(
        rules_for(_lit_run(LIT_CELL, 3000), syn.make_analysis({})), "logging.framework_overhead"
    )
    assert f.fix_id == "gate_training_log" and dict(f.fix_params) == {"every": 50}
    # The advice names the gate the patch writes (the steps the logger writes at).
    assert "`if (self.global_step + 1) % 50 == 0:`" in f.fix
    patch = apply_fix(f.fix_id, LIT_CELL, **f.fix_params)
    assert isinstance(patch, Patch)
    assert (
        '        if (self.global_step + 1) % 50 == 0:\n            self.log("loss", loss)\n'
    ) in patch.source_after


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ('self.log("loss", loss)', 'self.log("loss", loss, on_epoch=True)'),
        ("trainer.fit(Lit())", "trainer.fit(make())"),
    ],
)
def test_no_gate_is_offered_where_the_patch_cannot_reach_the_named_call(old, new):
    cell = LIT_CELL.replace(old, new)
    f = only(rules_for(_lit_run(cell, 3000), syn.make_analysis({})), "logging.framework_overhead")
    assert f.fix_id is None
