"""Frameworks that build the loop: fixes where Lightning / HF Trainer build the loader, and their
per-step logging named from the sampled stacks (real Lightning and transformers)."""

from __future__ import annotations

import inspect

import pytest

from gpu_notebook.analysis.uncertainty import sampled_share_low
from gpu_notebook.fixes import Patch, Refusal, apply_fix
from gpu_notebook.records import CodeRef, RawStacks, StackCount
from gpu_notebook.words.proposals import attach_fixes
from tests.scenarios import synthetic as syn
from tests.test_rules import ids, only, rules_for

pytest.importorskip("lightning")

DATAMODULE = """
import time, torch, lightning as L
from torch import nn
from torch.utils.data import DataLoader, Dataset
torch.set_num_threads(1)
class SlowData(Dataset):
    def __len__(self): return 256
    def __getitem__(self, i):
        time.sleep(0.002)
        return torch.randn(32), torch.randn(1)
class DM(L.LightningDataModule):
    def __init__(self, num_workers=0):
        super().__init__(); self.num_workers = num_workers
    def train_dataloader(self):
        return DataLoader(SlowData(), batch_size=8, num_workers=self.num_workers)
class FixedDM(L.LightningDataModule):
    def train_dataloader(self):
        return DataLoader(SlowData(), batch_size=8)
class Lit(L.LightningModule):
    def __init__(self):
        super().__init__(); self.net = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))
    def training_step(self, batch, i):
        x, y = batch
        loss = nn.functional.mse_loss(self.net(x), y)
        self.log("loss", loss, prog_bar=True)
        return loss
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)
dm, fixed_dm, lit = DM(), FixedDM(), Lit()
"""


def test_workers_set_through_the_datamodule_attribute_from_an_earlier_cell(ip):
    assert ip.run_cell(DATAMODULE).success
    cell = "trainer.fit(lit, datamodule=dm)\n"
    findings = rules_for(
        syn.make_run(cell, cpu_count=8), syn.make_analysis({"data": 0.6}), namespace=ip.user_ns
    )
    f = only(findings, "input.loader_workers")
    assert (
        "dm.train_dataloader()" in f.evidence[1] and "num_workers=self.num_workers" in f.evidence[1]
    )
    (fixed,) = attach_fixes([f], cell, namespace=ip.user_ns)
    after = fixed.proposal.source_after
    # The script's own setting is used, never a literal pasted over `self.num_workers`.
    assert "dm.num_workers = 6" in after and "DataLoader(" not in after
    assert ip.run_cell(
        after.replace("trainer.fit(lit, datamodule=dm)", "loader = dm.train_dataloader()")
    ).success
    assert ip.user_ns["loader"].num_workers == 6


def test_a_train_dataloader_with_a_literal_is_rebuilt_and_put_back_on_its_class(ip):
    assert ip.run_cell(DATAMODULE).success
    cell = "trainer.fit(lit, datamodule=fixed_dm)\n"
    findings = rules_for(
        syn.make_run(cell, cpu_count=4), syn.make_analysis({"data": 0.6}), namespace=ip.user_ns
    )
    (fixed,) = attach_fixes([only(findings, "input.loader_workers")], cell, namespace=ip.user_ns)
    after = fixed.proposal.source_after
    assert "type(fixed_dm).train_dataloader = train_dataloader" in after
    assert ip.run_cell(
        after.replace(
            "trainer.fit(lit, datamodule=fixed_dm)", "loader = fixed_dm.train_dataloader()"
        )
    ).success
    loader = ip.user_ns["loader"]
    assert (loader.num_workers, loader.persistent_workers, loader.batch_size) == (3, True, 8)


def test_a_datamodule_made_inline_in_fit_gets_its_class_method_rebuilt(ip):
    """`trainer.fit(lit, datamodule=FixedDM())`: no name holds the instance, the class is an
    earlier cell's. The method is rebuilt and put on the class itself, above the cell's lines
    (the class is bound in a fresh kernel too). A class whose method passes
    `num_workers=self.num_workers` is not given a class attribute (the instance's own, set in
    __init__, would hide it): a refusal, no wrong code."""
    assert ip.run_cell(DATAMODULE).success
    cell = "trainer.fit(lit, datamodule=FixedDM())\n"
    findings = rules_for(
        syn.make_run(cell, cpu_count=4), syn.make_analysis({"data": 0.6}), namespace=ip.user_ns
    )
    (fixed,) = attach_fixes([only(findings, "input.loader_workers")], cell, namespace=ip.user_ns)
    after = fixed.proposal.source_after
    assert after is not None, fixed.proposal.refusal
    assert "FixedDM.train_dataloader = train_dataloader" in after and after.endswith(cell)
    assert ip.run_cell(after.replace(cell, "loader = FixedDM().train_dataloader()\n")).success
    loader = ip.user_ns["loader"]
    assert (loader.num_workers, loader.persistent_workers, loader.batch_size) == (3, True, 8)
    held = "trainer.fit(lit, datamodule=DM())\n"
    findings = rules_for(
        syn.make_run(held, cpu_count=4), syn.make_analysis({"data": 0.6}), namespace=ip.user_ns
    )
    (fixed,) = attach_fixes([only(findings, "input.loader_workers")], held, namespace=ip.user_ns)
    assert (
        fixed.proposal.source_after is None or "DM.num_workers" not in fixed.proposal.source_after
    )


def test_a_variable_holding_num_workers_is_patched_where_it_gets_its_value():
    src = (
        "class DM:\n"
        "    def __init__(self, num_workers=0):\n"
        "        self.num_workers = num_workers\n"
        "    def train_dataloader(self):\n"
        "        return DataLoader(ds, batch_size=8, num_workers=self.num_workers)\n"
    )
    patch = apply_fix("dataloader_workers", src, num_workers=2, pin_memory=False)
    assert isinstance(patch, Patch)
    assert "def __init__(self, num_workers=2):" in patch.source_after
    assert (
        "num_workers=self.num_workers, persistent_workers=self.num_workers > 0)"
        in patch.source_after
    )
    flag = "workers = 0\nloader = DataLoader(ds, num_workers=workers)\n"
    assert "workers = 4\n" in apply_fix("dataloader_workers", flag, num_workers=4).source_after
    unknown = apply_fix(
        "dataloader_workers", "loader = DataLoader(ds, num_workers=args.workers)\n", num_workers=4
    )
    assert (
        isinstance(unknown, Refusal)
        and "`args.workers`" in unknown.reason
        and "num_workers=4" in unknown.reason
    )


def test_training_arguments_in_the_cell_get_the_dataloader_fields():
    src = 'args = TrainingArguments(output_dir="out", per_device_train_batch_size=8)\ntrainer = Trainer(model, args)\n'
    patch = apply_fix("dataloader_workers", src, num_workers=2, pin_memory=False)
    assert isinstance(patch, Patch)
    assert (
        "dataloader_num_workers=2" in patch.source_after
        and "dataloader_persistent_workers=True" in patch.source_after
    )
    held = 'n = 0\nargs = TrainingArguments(output_dir="out", dataloader_num_workers=n)\n'
    assert "n = 2\n" in apply_fix("dataloader_workers", held, num_workers=2).source_after


def test_training_arguments_are_patched_like_dataloaders_when_one_setting_is_held_elsewhere():
    # One TrainingArguments takes its workers from a flag this cell does not set: the other is
    # still patched, as for DataLoaders; with only the held one, the refusal says what to set.
    held = 'a = TrainingArguments(output_dir="a", dataloader_num_workers=cfg.workers)\n'
    other = 'b = TrainingArguments(output_dir="b")\n'
    patch = apply_fix("dataloader_workers", held + other, num_workers=2)
    assert isinstance(patch, Patch)
    assert 'b = TrainingArguments(output_dir="b", dataloader_num_workers=2' in patch.source_after
    refusal = apply_fix("dataloader_workers", held, num_workers=2)
    assert isinstance(refusal, Refusal)
    assert "`cfg.workers`" in refusal.reason and "dataloader_num_workers=2)" in refusal.reason


def test_a_live_hf_trainer_gets_its_args_set(ip, tmp_path):
    pytest.importorskip("transformers")
    setup = (
        "import torch\nfrom torch import nn\nfrom transformers import Trainer, TrainingArguments\n"
        "class Tiny(nn.Module):\n"
        "    def __init__(self): super().__init__(); self.l = nn.Linear(4, 1)\n"
        "    def forward(self, x, labels=None): return {'loss': ((self.l(x) - labels) ** 2).mean()}\n"
        "hf_ds = [{'x': torch.randn(4), 'labels': torch.randn(1)} for _ in range(16)]\n"
        f"hf_trainer = Trainer(model=Tiny(), args=TrainingArguments(output_dir={str(tmp_path)!r}, report_to=[]), train_dataset=hf_ds)\n"
    )
    assert ip.run_cell(setup).success
    cell = "hf_trainer.train()\n"
    findings = rules_for(
        syn.make_run(cell, cpu_count=4), syn.make_analysis({"data": 0.6}), namespace=ip.user_ns
    )
    f = only(findings, "input.loader_workers")
    assert "Hugging Face Trainer `hf_trainer`" in f.evidence[1]
    (fixed,) = attach_fixes([f], cell, namespace=ip.user_ns)
    after = fixed.proposal.source_after
    assert "hf_trainer.args.dataloader_num_workers = 3" in after
    assert ip.run_cell(after.replace(cell, "")).success
    args = ip.user_ns["hf_trainer"].args
    assert (args.dataloader_num_workers, args.dataloader_persistent_workers) == (3, True)


def _stacks(frames_per_stack: list[tuple[list[CodeRef], int]], total_us: int) -> RawStacks:
    functions: list[CodeRef] = []
    stacks = []
    for frames, us in frames_per_stack:
        idx = []
        for ref in frames:
            if ref not in functions:
                functions.append(ref)
            idx.append((functions.index(ref), ref.first_line))
        stacks.append(StackCount(tuple(idx), None, 1, us, True))
    # As many samples as a 10 ms-interval sampler takes in a run of a few seconds: enough to
    # read a share (rules.syncs.MIN_LINE_SAMPLES).
    return RawStacks(1, 0.01, 200, total_us, 1.0, tuple(functions), tuple(stacks))


def test_a_framework_share_read_off_a_handful_of_samples_says_nothing():
    # Issue 26: a loaded machine left the sampler 2 samples of a Lightning run, one of them in
    # LightningModule.log: "[high] The framework logs or draws progress on every step (up to
    # 10.00x)". A share needs MIN_LINE_SAMPLES samples, as a line's does.
    import dataclasses

    import lightning.pytorch as pl

    def ref(fn) -> CodeRef:
        return CodeRef(inspect.getsourcefile(fn), fn.__qualname__, fn.__code__.co_firstlineno)

    cell = CodeRef("<cell>", "<module>", 1)
    raw = _stacks([([cell, ref(pl.Trainer.fit), ref(pl.LightningModule.log)], 1000)], 1000)
    run = dataclasses.replace(syn.make_run("trainer.fit(lit)\n"), stacks=raw)
    assert "logging.framework_overhead" in ids(rules_for(run, syn.make_analysis({})))
    few = dataclasses.replace(run, stacks=dataclasses.replace(raw, samples=2))
    assert "logging.framework_overhead" not in ids(rules_for(few, syn.make_analysis({})))


def test_a_large_framework_share_reads_the_same_a_sample_either_side_of_the_count():
    # Issue 26: the CI's Lightning hook run (a callback's hook at 80% of the step) got 29 samples
    # once and 30 the next: a hard count of 30 said nothing at 29 and "[high]" at 30, and the
    # hook's gate went untried. Under 30 a share is read by its low end (Wilson, 95%): a large
    # share keeps its level, a small one is still not read, and a handful reads nothing.
    import dataclasses

    import lightning.pytorch as pl

    from gpu_notebook.rules import step_logging as sl

    def ref(fn) -> CodeRef:
        return CodeRef(inspect.getsourcefile(fn), fn.__qualname__, fn.__code__.co_firstlineno)

    cell = CodeRef("<cell>", "<module>", 1)
    loop = [cell, ref(pl.Trainer.fit)]
    raw = _stacks([([*loop, ref(pl.LightningModule.log)], 800), (loop, 200)], 1000)
    run = syn.make_run("trainer.fit(lit)\n")

    def level(samples: int, stacks=raw) -> str | None:
        few = dataclasses.replace(run, stacks=dataclasses.replace(stacks, samples=samples))
        f = next((f for f in rules_for(few, syn.make_analysis({}))
                  if f.rule_id == "logging.framework_overhead"), None)  # fmt: skip
        return None if f is None else f.severity

    assert level(29) == level(30) == level(200) == "high"
    assert level(sl.MIN_SHARE_SAMPLES - 1) is None
    # 8% of the step: its low end under 5% with 29 samples (not read), read from 30 on.
    thin = _stacks([([*loop, ref(pl.LightningModule.log)], 80), (loop, 920)], 1000)
    assert level(29, thin) is None and level(30, thin) == "low"
    assert sl.judged_share(0.8, 29) == pytest.approx(sampled_share_low(0.8, 29))
    # The report says the least it read, and from how few samples, where that gave the level.
    from gpu_notebook.formatting import fmt_share

    few = dataclasses.replace(run, stacks=dataclasses.replace(raw, samples=29))
    f = only(rules_for(few, syn.make_analysis({})), "logging.framework_overhead")
    least = fmt_share(sampled_share_low(0.8, 29))
    assert "(29 stack samples" in f.evidence[0] and f"at least {least} (95%)" in f.evidence[0]
    f = only(rules_for(dataclasses.replace(run, stacks=raw), syn.make_analysis({})),
             "logging.framework_overhead")  # fmt: skip
    assert "at least" not in f.evidence[0], f.evidence


def test_sparse_samples_over_a_default_run_say_the_logging_ran_never_its_share():
    # Issue 26: a default run samples densely only the few steps after the profiler window
    # (2-16 samples of a short Lightning fit: too few for a share), then sparsely over the rest
    # at the program's own switch interval, where a sample lands on the next GIL-releasing call
    # (capture/stacks.py): what they caught in the framework's frames is said, at no level,
    # with no share and no gain, however large their count reads.
    import dataclasses

    import lightning.pytorch as pl

    def ref(fn) -> CodeRef:
        return CodeRef(inspect.getsourcefile(fn), fn.__qualname__, fn.__code__.co_firstlineno)

    cell = CodeRef("<cell>", "<module>", 1)
    fit, log = ref(pl.Trainer.fit), ref(pl.LightningModule.log)
    dense = dataclasses.replace(_stacks([([cell, fit, log], 1000)], 1000), samples=2)

    def sparse(hits: int, samples: int) -> RawStacks:
        raw = _stacks([([cell, fit, log], 40_000), ([cell, fit], 40_000)], 80_000)
        counts = (hits, samples - hits)
        stacks = tuple(
            dataclasses.replace(s, count=n) for s, n in zip(raw.stacks, counts, strict=True)
        )
        return dataclasses.replace(raw, stacks=stacks, samples=samples)

    run = dataclasses.replace(
        syn.make_run("trainer.fit(lit)\n"), stacks=dense, framework_stacks=sparse(40, 50)
    )
    f = only(rules_for(run, syn.make_analysis({})), "logging.framework_overhead")
    assert f.severity == "info" and f.phase_share is None and f.gain_bound is None, f
    assert "Lightning self.log" in f.evidence[0] and "40 of the 50 stack samples" in f.evidence[0]
    assert "%" not in " ".join(f.evidence), f.evidence  # a count, never a share
    assert "log_every_n_steps" in f.fix and "--lines all" in f.fix
    # Caught too rarely to say it ran on the steps: silent, as without the sparse samples.
    for hits, samples in ((2, 50), (3, 100)):
        rare = dataclasses.replace(run, framework_stacks=sparse(hits, samples))
        assert "logging.framework_overhead" not in ids(rules_for(rare, syn.make_analysis({})))
    # Enough dense samples: their share decides, the sparse ones add nothing to it.
    quiet = dataclasses.replace(_stacks([([cell, fit], 1000)], 1000))
    measured = dataclasses.replace(run, stacks=quiet)
    assert "logging.framework_overhead" not in ids(rules_for(measured, syn.make_analysis({})))


def test_clocked_sparse_samples_give_the_share_with_the_dense_ones_by_their_time():
    # Issue 26: the sparse sampler now samples on a jittered clock with the switch interval
    # lowered just before each sample (RawStacks.clocked): where a sample falls no longer
    # depends on where the program releases the GIL, so its samples give the share, added to
    # the few dense ones by the wall time each stands for.
    import dataclasses

    import lightning.pytorch as pl

    def ref(fn) -> CodeRef:
        return CodeRef(inspect.getsourcefile(fn), fn.__qualname__, fn.__code__.co_firstlineno)

    cell = CodeRef("<cell>", "<module>", 1)
    fit, log = ref(pl.Trainer.fit), ref(pl.LightningModule.log)
    # 3 dense steps: 15 ms, 5 of them in self.log; the rest of the run: 2 s, 0.5 s in it.
    dense = dataclasses.replace(
        _stacks([([cell, fit, log], 5_000), ([cell, fit], 10_000)], 15_000), samples=3
    )

    def sparse_of(hits: int, samples: int) -> RawStacks:
        raw = _stacks([([cell, fit, log], 500_000), ([cell, fit], 1_500_000)], 2_000_000)
        counts = (hits, samples - hits)
        stacks = tuple(
            dataclasses.replace(s, count=n) for s, n in zip(raw.stacks, counts, strict=True)
        )
        return dataclasses.replace(raw, stacks=stacks, samples=samples, clocked=True)

    sparse = sparse_of(12, 50)
    run = dataclasses.replace(
        syn.make_run("trainer.fit(lit)\n"), stacks=dense, framework_stacks=sparse
    )
    f = only(rules_for(run, syn.make_analysis({})), "logging.framework_overhead")
    share = (5_000 + 500_000) / (15_000 + 2_000_000)  # 25.1%
    assert f.severity == "high" and f.phase_share is not None and f.gain_bound is not None, f
    assert f"{100 * share:.0f}% of the sampled time (53 stack samples" in f.evidence[0], f.evidence
    assert "50 over the rest of the run" in f.evidence[0]
    assert f"self.log on every step ({100 * share:.0f}% of the sampled time" in f.fix, f.fix
    # Too few of both for a share (under rules.step_logging.MIN_SHARE_SAMPLES; 23 of them now
    # read one by its low end, 11%: medium): what the clocked samples caught is said, without one.
    f = only(
        rules_for(dataclasses.replace(run, framework_stacks=sparse_of(5, 20)),
                  syn.make_analysis({})),
        "logging.framework_overhead",
    )  # fmt: skip
    assert f.severity == "medium" and "(23 stack samples" in f.evidence[0], f.evidence
    few = sparse_of(3, 6)
    f = only(
        rules_for(dataclasses.replace(run, framework_stacks=few), syn.make_analysis({})),
        "logging.framework_overhead",
    )
    assert f.severity == "info" and "%" not in " ".join(f.evidence), f.evidence
    assert "too few for a share" in f.evidence[0]


def test_framework_logging_is_named_from_the_stacks_and_counted_once():
    import dataclasses

    import lightning.pytorch as pl

    def ref(fn) -> CodeRef:
        return CodeRef(inspect.getsourcefile(fn), fn.__qualname__, fn.__code__.co_firstlineno)

    cell = CodeRef("<cell>", "<module>", 1)
    fit = ref(pl.Trainer.fit)
    log = ref(pl.LightningModule.log)
    bar = ref(pl.callbacks.TQDMProgressBar.on_train_batch_end)
    train = ref(pl.LightningModule.forward)
    raw = _stacks([([cell, fit, log], 1500), ([cell, fit, log, bar], 500), ([cell, fit, bar], 1000),
                   ([cell, fit, train], 7000)], 10_000)  # fmt: skip
    run = dataclasses.replace(syn.make_run("trainer.fit(lit)\n"), stacks=raw)
    f = only(rules_for(run, syn.make_analysis({})), "logging.framework_overhead")
    assert f.severity == "high" and f.phase_share == pytest.approx(
        0.3 * 0.9
    )  # 20% + 10%, nested once
    assert (
        "Lightning self.log / logger connector: 20%" in f.evidence[1]
        and "progress bar: 10%" in f.evidence[1]
    )
    assert "log_every_n_steps" in f.fix and "TQDMProgressBar" in f.fix
    quiet = dataclasses.replace(
        run, stacks=_stacks([([cell, fit, train], 9800), ([cell, fit, log], 200)], 10_000)
    )
    assert "logging.framework_overhead" not in ids(rules_for(quiet, syn.make_analysis({})))


def test_a_bar_wrapping_the_loader_is_not_charged_for_the_loaders_time():
    # tqdm(enumerate(loader)): every batch is fetched below tqdm's __iter__ frame. On main that
    # time (70% of the run) was "the framework draws progress on every step", [high] 2.96x.
    import dataclasses

    import tqdm
    from torch.utils.data import dataloader

    def ref(fn) -> CodeRef:
        return CodeRef(inspect.getsourcefile(fn), fn.__qualname__, fn.__code__.co_firstlineno)

    cell = CodeRef("<cell>", "<module>", 1)
    bar, update = ref(tqdm.tqdm.__iter__), ref(tqdm.tqdm.update)
    fetch = ref(dataloader._BaseDataLoaderIter.__next__)
    model = CodeRef("<cell>", "Net.forward", 3)
    run = syn.make_run("for i, (x, y) in tqdm(enumerate(loader)):\n    step(x)\n")
    fetched = _stacks(
        [([cell, bar, fetch], 7000), ([cell, bar], 100), ([cell, model], 2900)], 10_000
    )
    assert "logging.framework_overhead" not in ids(
        rules_for(dataclasses.replace(run, stacks=fetched), syn.make_analysis({}))
    )
    drawn = _stacks([([cell, bar, update], 3000), ([cell, bar, fetch], 4000), ([cell, model], 3000)],
                    10_000)  # fmt: skip
    f = only(
        rules_for(dataclasses.replace(run, stacks=drawn), syn.make_analysis({})),
        "logging.framework_overhead",
    )
    assert "30%" in f.evidence[0] and "tqdm" in f.evidence[1]
    assert "mininterval=1" in f.fix
    # A bar that already redraws every 5 s is not told to redraw every second (main did).
    held = syn.make_run("for i, b in tqdm(enumerate(loader), mininterval=5):\n    step(b)\n")
    f = only(
        rules_for(dataclasses.replace(held, stacks=drawn), syn.make_analysis({})),
        "logging.framework_overhead",
    )
    assert "mininterval=5 now" in f.fix and "mininterval=1" not in f.fix


# ---------------------------------------------------------------------- batch size and samples/s

BATCH_SETUP = """
import torch, lightning as L
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
torch.set_num_threads(1)
ds = TensorDataset(torch.randn(640, 32), torch.randn(640, 1))
class Lit(L.LightningModule):
    def __init__(self):
        super().__init__(); self.net = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))
    def training_step(self, batch, i):
        x, y = batch
        return nn.functional.mse_loss(self.net(x), y)
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)
model = Lit(); loader = DataLoader(ds, batch_size=16)
trainer = L.Trainer(max_steps=20, accelerator="cpu", enable_checkpointing=False, logger=False, enable_model_summary=False, enable_progress_bar=False, accumulate_grad_batches=2)
"""

ACCUMULATE_PLAIN = """%%gpucheck -q -o rep -s 5
net = nn.Linear(32, 1); opt = torch.optim.SGD(net.parameters(), lr=0.01)
for i, (x, y) in enumerate(loader):
    loss = nn.functional.mse_loss(net(x), y) / 4
    loss.backward()
    if (i + 1) % 4 == 0:
        opt.step(); opt.zero_grad()
"""

KEYWORD_BATCH = """%%gpucheck -q -o rep -s 5
class KW(nn.Module):
    def __init__(self): super().__init__(); self.l = nn.Linear(32, 1)
    def forward(self, input_ids=None, labels=None): return ((self.l(input_ids) - labels) ** 2).mean()
kw = KW(); opt = torch.optim.SGD(kw.parameters(), lr=0.01)
dl = DataLoader([{"input_ids": torch.randn(32), "labels": torch.randn(1)} for _ in range(320)], batch_size=16)
for batch in dl:
    loss = kw(**batch); loss.backward(); opt.step(); opt.zero_grad()
"""

MODULE_TRANSFORMS = """%%gpucheck -q -o rep -s 5
from torch.utils.data import Dataset
class Aug(nn.Module):
    def forward(self, x): return x * 2 + 1
class WithAug(Dataset):
    def __init__(self): self.t = nn.Sequential(Aug(), Aug()); self.x = torch.randn(320, 32); self.y = torch.randn(320, 1)
    def __len__(self): return 320
    def __getitem__(self, i): return self.t(self.x[i]), self.y[i]
net = nn.Linear(32, 1); opt = torch.optim.SGD(net.parameters(), lr=0.01)
for x, y in DataLoader(WithAug(), batch_size=16):
    loss = nn.functional.mse_loss(net(x), y); loss.backward(); opt.step(); opt.zero_grad()
"""


def _steady_batches(report) -> set[int | None]:
    warmup = report.run.window.warmup_steps
    return {s.batch_size for s in report.run.steps.steps if s.index >= warmup}


@pytest.mark.parametrize(
    "cell, batch",
    [
        # Lightning accumulate_grad_batches=2: two micro-batches of 16 per optimizer step.
        ("%%gpucheck -q -o rep -s 5\ntrainer.fit(model, loader)\n", 32),
        (ACCUMULATE_PLAIN, 64),  # a plain loop stepping every 4 micro-batches
        (KEYWORD_BATCH, 16),  # model(**batch), as HF calls models
        (MODULE_TRANSFORMS, 16),  # nn.Module transforms inside the Dataset are not the model
    ],
)
def test_samples_per_step_under_accumulation_keywords_and_module_transforms(ip, cell, batch):
    assert ip.run_cell(BATCH_SETUP).success
    assert ip.run_cell(cell).success
    report = ip.user_ns["rep"]
    stats = report.analysis.step_stats
    assert _steady_batches(report) == {batch} and stats.batch_size == batch
    assert stats.samples_per_s == pytest.approx(batch / stats.median_s)
    if cell is MODULE_TRANSFORMS:
        assert {s.forward_calls for s in report.run.steps.steps if s.timed} == {1}


ACCELERATE = """
import time, torch
from torch.utils.data import DataLoader, Dataset
from accelerate import Accelerator
class SlowAcc(Dataset):
    def __len__(self): return 64
    def __getitem__(self, i):
        time.sleep(0.002)
        return torch.randn(32), torch.randn(1)
accelerator = Accelerator(cpu=True)
acc_loader = accelerator.prepare(DataLoader(SlowAcc(), batch_size=8))
"""


def test_a_loader_accelerate_prepared_is_not_rebuilt_the_refusal_says_where_to_act(ip):
    pytest.importorskip("accelerate")
    assert ip.run_cell(ACCELERATE).success
    assert type(ip.user_ns["acc_loader"]).__module__.startswith("accelerate.")
    cell = "for x, y in acc_loader:\n    pass\n"
    findings = rules_for(
        syn.make_run(cell, cpu_count=8), syn.make_analysis({"data": 0.6}), namespace=ip.user_ns
    )
    f = only(findings, "input.loader_workers")
    (fixed,) = attach_fixes([f], cell, namespace=ip.user_ns)
    assert fixed.proposal is not None and fixed.proposal.source_after is None
    assert "accelerator.prepare" in (fixed.proposal.refusal or "")


def test_a_loader_the_cell_prepares_itself_is_rebuilt_before_prepare(ip):
    """`m, o, dl2 = accelerator.prepare(model, opt, plain_loader)` in the measured cell, the
    plain loader an earlier cell's: rebuilt above the cell's lines, it is the one prepare()
    wraps (in a fresh kernel too: no name of the cell's is used before the cell binds it). A
    prepare() that rebinds its own argument's name still gets the refusal."""
    pytest.importorskip("accelerate")
    assert ip.run_cell(ACCELERATE + "plain_loader = DataLoader(SlowAcc(), batch_size=8)\n").success
    cell = "dl2 = accelerator.prepare(plain_loader)\nfor x, y in dl2:\n    pass\n"
    assert ip.run_cell(cell).success
    findings = rules_for(
        syn.make_run(cell, cpu_count=8), syn.make_analysis({"data": 0.6}), namespace=ip.user_ns
    )
    (fixed,) = attach_fixes([only(findings, "input.loader_workers")], cell, namespace=ip.user_ns)
    after = fixed.proposal.source_after
    assert after is not None, fixed.proposal.refusal
    assert "live `plain_loader`" in after.splitlines()[0] and after.endswith(cell)
    del ip.user_ns["dl2"]
    assert ip.run_cell(after).success
    assert ip.user_ns["plain_loader"].num_workers == 6
    assert type(ip.user_ns["dl2"]).__module__.startswith("accelerate.")
    again = (
        "plain_loader = accelerator.prepare(plain_loader)\nfor x, y in plain_loader:\n    pass\n"
    )
    assert ip.run_cell(again).success
    (fixed,) = attach_fixes([only(findings, "input.loader_workers")], again, namespace=ip.user_ns)
    assert fixed.proposal.source_after is None and fixed.proposal.refusal


def test_a_scripts_imports_do_not_divide_the_frameworks_share():
    # issue 26 (unseen round 3): `gpucheck run --lines all` of a Lightning script logging every
    # step: 92% of the samples were `import lightning`, so self.log's 35% of the fit read 3% of
    # the run and no finding. Samples in the import machinery are not the loop's.
    import dataclasses

    import lightning.pytorch as pl

    def ref(fn) -> CodeRef:
        return CodeRef(inspect.getsourcefile(fn), fn.__qualname__, fn.__code__.co_firstlineno)

    cell = CodeRef("<cell>", "<module>", 1)
    load = CodeRef("<frozen importlib._bootstrap>", "_find_and_load", 1165)
    fit, log = ref(pl.Trainer.fit), ref(pl.LightningModule.log)
    train = ref(pl.LightningModule.forward)
    raw = _stacks([([cell, load], 90_000), ([cell, fit, log], 3_500), ([cell, fit, train], 6_500)],
                  100_000)  # fmt: skip
    run = dataclasses.replace(syn.make_run("import lightning\ntrainer.fit(lit)\n"), stacks=raw)
    f = only(rules_for(run, syn.make_analysis({})), "logging.framework_overhead")
    assert "Lightning self.log / logger connector: 35%" in f.evidence[1], f.evidence
    # Only the loop's samples count toward the samples a share needs (8 of 16 here, under
    # rules.step_logging.MIN_SHARE_SAMPLES).
    few = dataclasses.replace(raw, stacks=tuple(dataclasses.replace(s, count=s.count * 20 if i == 0 else s.count)
                                                for i, s in enumerate(raw.stacks)), samples=16)  # fmt: skip
    assert "logging.framework_overhead" not in ids(
        rules_for(dataclasses.replace(run, stacks=few), syn.make_analysis({}))
    )
