"""Lean steps count their own samples: a lean run of 32- and 16-sample steps holds the kinds of
work its timed twin does.

A loop of short steps goes lean (few hooks: the loader's and the step's end). Its loader's
batches are still read for their leading dimension (``stepclock._leading_size``, the timed
steps' reading), so each lean step carries its own batch size, not the last timed step's:
jitter is read within like work (``analysis.work_spread``), comparisons at one mix of work
(``analysis.like_work``), per-sample throughput over the samples the steps trained. Real torch,
the real step clock going lean as the session makes it (``StepClock.lean``); counts, no timing.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from torch.utils.data import DataLoader, Dataset, TensorDataset  # noqa: E402

from gpu_notebook.analysis.like_work import like_work, step_work  # noqa: E402
from gpu_notebook.analysis.work_spread import work_of, work_spread  # noqa: E402
from gpu_notebook.capture.stepclock import StepClock  # noqa: E402
from gpu_notebook.records import StepTiming  # noqa: E402

EPOCHS = 14  # 2 steps an epoch (48 samples at batch 32: 32 then 16)
TIMED_EPOCHS = 3


def _clocked(
    epoch: Callable[[Any, Any], None], model: Any, opt: Any, *, lean: bool
) -> list[StepTiming]:
    """The steps of EPOCHS epochs under the real step clock; lean after TIMED_EPOCHS where
    ``lean`` (as the session makes a short loop's clock), timed throughout otherwise."""
    clock = StepClock(time.perf_counter_ns())
    clock.install()
    try:
        for e in range(EPOCHS):
            if lean and e == TIMED_EPOCHS:
                clock.lean()
            epoch(model, opt)
    finally:
        clock.uninstall()
    steps = clock.record().steps
    assert clock.anchor == "optimizer"
    if lean:
        assert any(not s.timed for s in steps)
        return [s for s in steps if not s.timed]
    return [s for s in steps if s.index >= 2 * TIMED_EPOCHS]


def _model() -> tuple[Any, Any]:
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    return model, torch.optim.SGD(model.parameters(), lr=0.01)


def _loss(model: Any, x: Any, y: Any) -> Any:
    return torch.nn.functional.mse_loss(model(x), y)


def _pairs(n: int = 48) -> TensorDataset:
    g = torch.Generator().manual_seed(1)
    return TensorDataset(torch.randn(n, 8, generator=g), torch.randn(n, 1, generator=g))


class _Dicts(Dataset):
    """Samples as dicts: the default collate makes each batch a dict of tensors."""

    def __init__(self, n: int = 48) -> None:
        self.x, self.y = torch.randn(n, 8), torch.randn(n, 1)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {"x": self.x[i], "y": self.y[i]}


def _step(model: Any, opt: Any, x: Any, y: Any) -> None:
    _loss(model, x, y).backward()
    opt.step()
    opt.zero_grad()


PAIRS = DataLoader(_pairs(), batch_size=32)
DICTS = DataLoader(_Dicts(), batch_size=32)


def for_loop(model: Any, opt: Any) -> None:
    for x, y in PAIRS:
        _step(model, opt, x, y)


def while_next(model: Any, opt: Any) -> None:
    it = iter(DICTS)
    while True:
        try:
            batch = next(it)
        except StopIteration:
            break
        _step(model, opt, batch["x"], batch["y"])


def generator_of_dicts(model: Any, opt: Any) -> None:
    def batches() -> Iterator[dict[str, Any]]:
        for x, y in PAIRS:
            yield {"inputs": x, "labels": y}

    for b in batches():
        _step(model, opt, b["inputs"], b["labels"])


LISTS = DataLoader(_pairs(), batch_size=32, collate_fn=lambda items: [torch.stack([a for a, _ in items]), torch.stack([b for _, b in items])])  # fmt: skip


def zip_of_two(model: Any, opt: Any) -> None:
    for (x, y), (x2, y2) in zip(PAIRS, LISTS, strict=True):
        _step(model, opt, torch.cat([x, x2]), torch.cat([y, y2]))


def read_ahead(model: Any, opt: Any) -> None:
    """accelerate's DataLoaderShard (the HF Trainer's loader): the next batch is read before
    the current one is handed out."""

    def shard() -> Iterator[Any]:
        it = iter(PAIRS)
        current = next(it)
        for nxt in it:
            yield current
            current = nxt
        yield current

    for x, y in shard():
        _step(model, opt, x, y)


SHAPES = [for_loop, while_next, generator_of_dicts, zip_of_two, read_ahead]


@pytest.mark.parametrize("epoch", SHAPES, ids=lambda f: f.__name__)
def test_lean_steps_carry_their_own_batch_sizes_as_their_timed_twin(epoch):
    """Each lean step holds the samples it trained (an epoch's 32 then its short 16; 64 then
    32 for a zip of two loaders), the sizes its timed twin's steps hold: main gave every lean
    step the last timed step's size, one kind of work whose spread is the batch mix."""
    per = 2 if epoch is zip_of_two else 1
    lean = _clocked(epoch, *_model(), lean=True)
    timed = _clocked(epoch, *_model(), lean=False)
    assert [s.batch_size for s in lean] == [32 * per, 16 * per] * (len(lean) // 2), [
        s.batch_size for s in lean
    ]
    assert [s.batch_size for s in timed] == [32 * per, 16 * per] * (len(timed) // 2)
    assert len({work_of(s) for s in lean}) == len({work_of(s) for s in timed}) == 2
    assert work_spread(lean).kinds == work_spread(timed).kinds == 2


def test_a_lean_closure_loop_keeps_its_counts_and_its_samples():
    """LBFGS over a loader of 32 then 16: lean steps keep their closure's calls and loader
    reads, and now their batch sizes."""
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.LBFGS(model.parameters(), lr=0.1, max_iter=5)

    def epoch(model: Any, opt: Any) -> None:
        for x, y in PAIRS:

            def closure(x: Any = x, y: Any = y) -> Any:
                opt.zero_grad()
                loss = _loss(model, x, y)
                loss.backward()
                return loss

            opt.step(closure)

    lean = _clocked(epoch, model, opt, lean=True)
    assert all(s.closure_calls and s.closure_calls >= 1 for s in lean)
    assert all(s.loader_reads is not None for s in lean)
    assert {s.batch_size for s in lean} == {32, 16}
    assert {work_of(s)[-1] for s in lean} == {32, 16}


def test_a_batch_with_no_tensor_counts_nothing_and_the_loop_runs_on():
    """A loader of strings (tokenized later): no leading dimension to read, no size, no error."""
    words = DataLoader([f"w{i}" for i in range(48)], batch_size=32)
    model, opt = _model()

    def epoch(model: Any, opt: Any) -> None:
        for batch in words:
            _step(model, opt, torch.randn(len(batch), 8), torch.randn(len(batch), 1))

    lean = _clocked(epoch, model, opt, lean=True)
    assert lean and {s.batch_size for s in lean} == {None}


def _lean_run(rng: random.Random, short_share: float, steps: int = 120) -> list[StepTiming]:
    """Lean steps of 32 samples (10 ms) and 16 (5 ms), one read each, the short ones at
    ``short_share``."""
    out = []
    for i in range(steps):
        short = rng.random() < short_share
        t = (0.005 if short else 0.010) * (1 + 0.02 * rng.random())
        out.append(StepTiming(i, 0.01 * i, t, 0.0, 0.0, 0.0, 0.0, timed=False,
                              batch_size=16 if short else 32, closure_calls=0, loader_reads=1))  # fmt: skip
    return out


def test_comparisons_read_lean_runs_of_two_batch_sizes_at_one_mix():
    """Two lean runs of the same code, one drawing more short batches: at one mix they read
    alike (main saw one work, and the run with more short steps read 1.2x faster)."""
    rng = random.Random(5)
    a, b = _lean_run(rng, 0.2), _lean_run(rng, 0.6)
    works = [[step_work(s) for s in run] for run in (a, b)]
    assert {w[-1] for w in works[0] if w} == {32, 16}
    mixed = like_work([[s.duration_s for s in run] for run in (a, b)], works)
    assert mixed is not None
    mean_a, mean_b = (sum(r) / len(r) for r in mixed)
    assert mean_a == pytest.approx(mean_b, rel=0.03)


def _lean_run_of(
    loader: Any, wrap: Callable[[Any], Any], epochs: int, lean_at: int, micro: int = 1
):
    """``tests.test_read_ahead_steps._run`` with the clock made lean after ``lean_at`` steps
    (1: lean from the first step the optimizer ended, as the session makes it lean at the
    anchor's own warm-up; no timed step learnt the loop's reading ahead). Returns (each step's
    batch size as trained, as recorded by its lean steps)."""
    net = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    trained: list[int] = []
    clock = StepClock(time.perf_counter_ns())
    clock.install()
    try:
        for _ in range(epochs):
            it = iter(wrap(loader))
            while True:
                if len(trained) == lean_at:
                    clock.lean()
                batches = []
                for _ in range(micro):
                    try:
                        batches.append(next(it))
                    except StopIteration:
                        break
                if not batches:
                    break
                for x, y in batches:
                    torch.nn.functional.mse_loss(net(x), y).backward()
                opt.step()
                opt.zero_grad()
                trained.append(sum(len(x) for x, _ in batches))
    finally:
        clock.uninstall()
    steps = clock.record().steps
    assert len(steps) == len(trained) and not any(s.timed for s in steps[lean_at:])
    return trained[lean_at:], [s.batch_size for s in steps[lean_at:]]


@pytest.mark.parametrize("lean_at", [1, 3])
@pytest.mark.parametrize("wrapper", ["generator", "prefetcher"])
def test_lean_steps_read_ahead_are_credited_the_batch_they_trained(wrapper, lean_at):
    """HF Trainer's shape (accelerate reads one batch ahead) and a CUDA prefetcher's, lean
    after the first step or after three timed ones: each lean step holds the batch it trained,
    32 then 16 an epoch (the read ahead told by the loader's end, as timed)."""
    from tests.test_read_ahead_steps import _WRAPPERS, _data

    trained, recorded = _lean_run_of(DataLoader(_data(48), batch_size=32), _WRAPPERS[wrapper], 5, lean_at)  # fmt: skip
    assert recorded == trained


def test_lean_steps_of_a_long_epoch_read_ahead_are_corrected_at_its_end():
    """A bucketing sampler's 60 uneven batches in one epoch, read ahead, lean: corrected once
    the loader's end shows the loop reads ahead (the same correction as timed steps')."""
    from tests.test_read_ahead_steps import _WRAPPERS, _Buckets, _data

    sizes = [4, 12, 8] * 20
    loader = DataLoader(_data(sum(sizes)), batch_sampler=_Buckets(sizes))
    trained, recorded = _lean_run_of(loader, _WRAPPERS["generator"], 1, lean_at=5)
    assert recorded == trained == sizes[5:]


def test_lean_micro_batches_read_ahead_are_credited_to_their_step():
    """HF Trainer under gradient_accumulation_steps=2 (micro-batches read ahead), lean."""
    from tests.test_read_ahead_steps import _Buckets, _data, _one_ahead

    sizes = [4, 12, 8, 6, 10]
    loader = DataLoader(_data(sum(sizes)), batch_sampler=_Buckets(sizes))
    trained, recorded = _lean_run_of(loader, _one_ahead, epochs=3, lean_at=1, micro=2)
    assert trained == ([16, 14, 10] * 3)[1:]
    assert recorded == trained


@pytest.mark.parametrize("micro", [1, 2])
def test_a_lean_loop_that_reads_its_own_batches_is_left_as_read(micro):
    """The control: a plain loop's uneven batches (and micro-batches) keep the sizes read."""
    from tests.test_read_ahead_steps import _Buckets, _data

    sizes = [4, 12, 8] * 4
    loader = DataLoader(_data(sum(sizes)), batch_sampler=_Buckets(sizes))
    trained, recorded = _lean_run_of(loader, lambda d: d, epochs=2, lean_at=1, micro=micro)
    assert recorded == trained


EPOCHS_CELL = """%%gpucheck -q -o rep
import torch
from torch.utils.data import DataLoader, TensorDataset
torch.manual_seed(0)
_m = torch.nn.Linear(8, 1)
_o = torch.optim.SGD(_m.parameters(), lr=0.01)
_l = DataLoader(TensorDataset(torch.randn(48, 8), torch.randn(48, 1)), batch_size=32)
for _e in range(40):
    for _x, _y in _l:
        torch.nn.functional.mse_loss(_m(_x), _y).backward()
        _o.step()
        _o.zero_grad()
"""


@pytest.mark.parametrize("timed_min_step_s", [60.0, 0.0], ids=["lean", "timed"])
def test_a_cell_of_tiny_epochs_reads_two_kinds_of_work_lean_or_timed(
    ip, monkeypatch, timed_min_step_s
):
    """``%%gpucheck`` in the real shell over 40 epochs of 32 + 16 samples, its steps lean
    (the session's choice pinned: every step under the line) or timed: the report's steps
    after the window carry 32 and 16, two kinds of work, and 24 samples a step on average."""
    import gpu_notebook.capture.session as session_mod
    from gpu_notebook.analysis.steps import step_stats

    monkeypatch.setattr(session_mod, "TIMED_MIN_STEP_S", timed_min_step_s)
    assert ip.run_cell(EPOCHS_CELL).success
    rep = ip.user_ns["rep"]
    steps = [s for s in rep.run.steps.steps if s.index >= 16]
    lean = timed_min_step_s > 0
    assert steps and all(s.timed is not lean for s in steps)
    assert {s.batch_size for s in steps} == {32, 16}
    assert len({work_of(s) for s in steps}) == 2
    stats = step_stats(rep.run.steps, warmup_steps=16)
    assert stats.median_s and stats.samples_per_s == pytest.approx(24 / stats.median_s, rel=0.05)


# The frameworks' own loops, each in a fresh process (their global state stays there): the
# clock made lean after three timed steps, 8 epochs of 32 + 16 samples.
LIGHTNING = """\
import logging, sys, time, torch, lightning as L
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from gpu_notebook.capture.stepclock import StepClock
logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
clock = StepClock(time.perf_counter_ns())
seen = []
class M(L.LightningModule):
    def __init__(self):
        super().__init__(); self.net = nn.Linear(8, 1)
    def training_step(self, batch, i):
        x, y = batch; seen.append(len(x))
        if len(seen) == 4: clock.lean()
        return nn.functional.mse_loss(self.net(x), y)
    def configure_optimizers(self): return torch.optim.SGD(self.parameters(), lr=0.01)
dl = DataLoader(TensorDataset(torch.randn(48, 8), torch.randn(48, 1)), batch_size=32)
t = L.Trainer(max_epochs=8, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
              default_root_dir=sys.argv[1])
clock.install()
try: t.fit(M(), dl)
finally: clock.uninstall()
r = clock.record()
print("STEPS", [(s.batch_size, s.timed) for s in r.steps])
"""

HF_TRAINER = """\
import os, sys, time, torch
os.environ["WANDB_DISABLED"]="true"
from torch import nn
from torch.utils.data import Dataset
from transformers import Trainer, TrainingArguments, TrainerCallback
from gpu_notebook.capture.stepclock import StepClock
clock = StepClock(time.perf_counter_ns())
class DS(Dataset):
    def __len__(self): return 48
    def __getitem__(self, i): return {"x": torch.randn(8), "labels": torch.randn(1)}
class M(nn.Module):
    def __init__(self): super().__init__(); self.net = nn.Linear(8, 1)
    def forward(self, x, labels): return {"loss": nn.functional.mse_loss(self.net(x), labels)}
class CB(TrainerCallback):
    def on_step_begin(self, args, state, control, **kw):
        if state.global_step == 3: clock.lean()
args = TrainingArguments(output_dir=sys.argv[1], per_device_train_batch_size=32, num_train_epochs=8, report_to=[], save_strategy="no", logging_strategy="no", use_cpu=True, dataloader_num_workers=0, disable_tqdm=True)
t = Trainer(model=M(), args=args, train_dataset=DS(), callbacks=[CB()])
clock.install()
try: t.train()
finally: clock.uninstall()
r = clock.record()
print("STEPS", [(s.batch_size, s.timed) for s in r.steps])
"""


@pytest.mark.parametrize(("script", "module"), [(LIGHTNING, "lightning"), (HF_TRAINER, "transformers")], ids=["lightning", "hf_trainer"])  # fmt: skip
def test_a_framework_s_lean_steps_carry_the_batch_each_trained(tmp_path, script, module):
    """Lightning's fetcher and accelerate's DataLoaderShard both read one batch ahead: each
    lean step still holds the batch it trained (main: the last timed step's, 32 or 16 for all)."""
    import ast
    import os
    import subprocess
    import sys

    pytest.importorskip(module)
    path = tmp_path / "loop.py"
    path.write_text(script)
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    out = subprocess.run([sys.executable, str(path), str(tmp_path / "out")], env=env, cwd=tmp_path,
                         check=True, capture_output=True, text=True, timeout=600).stdout  # fmt: skip
    steps = ast.literal_eval(out.split("STEPS", 1)[1].strip().splitlines()[0])
    lean = [size for size, timed in steps if not timed]
    assert len(lean) >= 10 and lean == ([16, 32] * len(lean))[: len(lean)], steps
