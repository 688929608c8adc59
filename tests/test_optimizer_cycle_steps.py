"""One step an iteration whatever the loop's pattern of optimizer steps, through the real step
clock on real loops: the step is the period of the pattern (D then G; a critic's D n times then
G, with or without a DataLoader; gradient accumulation; HF Trainer and Lightning), and its first
occurrence is one step, neither split nor doubled.

Measured on main before this: a critic loop (d, d, d, g a batch) counted 18 steps for 6 batches;
d x5 then g with no loader 41 for 8 iterations; the GAN of unseen notebook 27 (d, g, no loader)
13 for 12; the first step of accumulation over a loader (and of HF Trainer under
``gradient_accumulation_steps``) held its last micro-batch only.
"""

from __future__ import annotations

import time

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from gpu_notebook.capture.stepclock import StepClock


def _clocked(loop) -> object:
    clock = StepClock(time.perf_counter_ns())
    clock.install()
    try:
        loop()
    finally:
        clock.uninstall()
    return clock.record()


def _optimizers_loop(iterations: int, order: list[str], *, loader: bool):
    """Per iteration the optimizers named in ``order`` step ("d", "g", "e"), each after its
    own backward; the batches from a DataLoader or from a list (no loader to tell iterations)."""

    def loop() -> None:
        d, g, e = torch.nn.Linear(2, 1), torch.nn.Linear(2, 2), torch.nn.Linear(2, 1)
        opts = {
            "d": torch.optim.SGD(d.parameters(), lr=0.01),
            "g": torch.optim.Adam(g.parameters(), lr=0.01),
            "e": torch.optim.SGD(e.parameters(), lr=0.01),
        }
        data = torch.randn(iterations * 4, 2)
        batches = (
            DataLoader(TensorDataset(data), batch_size=4)
            if loader
            else [(x,) for x in data.split(4)]
        )
        for (x,) in batches:
            for name in order:
                loss = d(g(x)).sum() if name == "g" else (e(x).sum() if name == "e" else d(x).sum())
                loss.backward()
                opts[name].step()

    return loop


@pytest.mark.parametrize(
    ("order", "loader", "iterations"),
    [
        (["d", "g"], True, 12),
        (["d", "d", "d", "g"], True, 6),  # main: 18
        (["d", "g"], False, 12),  # unseen notebook 27's shape; main: 13
        (["d"] * 5 + ["g"], False, 8),  # main: 41
        (["d", "d", "g", "g"], False, 6),  # another shape: each optimizer twice in a row
        (["g", "d", "e", "d"], True, 6),  # three optimizers, one of them twice
    ],
)
def test_a_loops_optimizer_pattern_is_one_step_an_iteration(order, loader, iterations):
    record = _clocked(_optimizers_loop(iterations, order, loader=loader))
    assert record.event_counts["optimizer"] == iterations * len(order)
    assert record.step_count == iterations, (order, loader)
    # The first iteration is one whole step like the others: every backward of the iteration.
    assert [s.backward_calls for s in record.steps] == [len(order)] * iterations
    assert [s.index for s in record.steps] == list(range(iterations))
    if loader:
        assert {s.batch_size for s in record.steps} == {4}


def test_gradient_accumulation_over_a_loader_holds_every_micro_batch_from_the_first_step():
    def loop() -> None:
        net = torch.nn.Linear(2, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.01)
        for i, (x,) in enumerate(
            DataLoader(TensorDataset(torch.randn(8 * 4 * 4, 2)), batch_size=4)
        ):
            net(x).sum().backward()
            if (i + 1) % 4 == 0:
                opt.step()
                opt.zero_grad()

    record = _clocked(loop)
    assert record.step_count == 8
    # main: the first step held its last micro-batch (1 backward, batch 4)
    assert [(s.backward_calls, s.batch_size) for s in record.steps] == [(4, 16)] * 8


def test_an_evaluation_before_training_stays_out_of_the_first_step():
    def loop() -> None:
        net = torch.nn.Linear(2, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.01)
        with torch.no_grad():
            for (x,) in DataLoader(TensorDataset(torch.randn(40, 2)), batch_size=8):
                net(x)
        for (x,) in DataLoader(TensorDataset(torch.randn(24, 2)), batch_size=4):
            net(x).sum().backward()
            opt.step()
            opt.zero_grad()

    record = _clocked(loop)
    assert record.step_count == 6
    assert [(s.backward_calls, s.batch_size) for s in record.steps] == [(1, 4)] * 6


def test_hf_trainer_under_gradient_accumulation_counts_whole_steps_from_the_first():
    """HF Trainer reads a step's micro-batches ahead (get_batch_samples), then a backward each:
    the first step held the second read only on main ("batch 4" for 2 x 4)."""
    transformers = pytest.importorskip("transformers")
    import tempfile

    transformers.logging.set_verbosity_error()

    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(4, 1)

        def forward(self, x, labels=None):
            out = self.lin(x)
            return {"loss": torch.nn.functional.mse_loss(out.squeeze(-1), labels), "logits": out}

    class Data(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return 64

        def __getitem__(self, i):
            return {"x": torch.randn(4), "labels": torch.randn(())}

    with tempfile.TemporaryDirectory() as out:
        args = transformers.TrainingArguments(
            output_dir=out, per_device_train_batch_size=4, gradient_accumulation_steps=2,
            num_train_epochs=1, report_to=[], logging_strategy="no", save_strategy="no",
            use_cpu=True, disable_tqdm=True,
        )  # fmt: skip
        trainer = transformers.Trainer(model=Model(), args=args, train_dataset=Data())
        record = _clocked(trainer.train)
    assert record.step_count == 8
    # The epoch's last step too (accelerate's loader reads one ahead: main read "batch 4").
    assert [(s.backward_calls, s.batch_size) for s in record.steps] == [(2, 8)] * 8


def _hf_trainer_steps(samples: int, accumulation: int, epochs: int) -> list[tuple[int, int]]:
    transformers = pytest.importorskip("transformers")
    import tempfile

    transformers.logging.set_verbosity_error()

    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(4, 1)

        def forward(self, x, labels=None):
            out = self.lin(x)
            return {"loss": torch.nn.functional.mse_loss(out.squeeze(-1), labels), "logits": out}

    class Data(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return samples

        def __getitem__(self, i):
            return {"x": torch.randn(4), "labels": torch.randn(())}

    with tempfile.TemporaryDirectory() as out:
        args = transformers.TrainingArguments(
            output_dir=out, per_device_train_batch_size=4,
            gradient_accumulation_steps=accumulation, num_train_epochs=epochs, report_to=[],
            logging_strategy="no", save_strategy="no", use_cpu=True, disable_tqdm=True,
        )  # fmt: skip
        trainer = transformers.Trainer(model=Model(), args=args, train_dataset=Data())
        record = _clocked(trainer.train)
    return [(s.backward_calls, s.batch_size) for s in record.steps]


def test_hf_trainer_s_last_step_of_each_epoch_holds_the_batch_read_ahead_for_it():
    """18 batches an epoch under 4 x 4: four whole steps and one of the 2 left, each epoch.
    accelerate's loader reads one batch ahead, so the last step reads one batch and the
    loader ends before its backward passes (main: "batch 4" for the 2 batches of 4)."""
    assert _hf_trainer_steps(72, 4, 2) == ([(4, 16)] * 4 + [(2, 8)]) * 2


def test_lightning_manual_optimization_with_a_critic_counts_one_step_a_batch():
    """Lightning's manual optimization, a critic stepped 3 times and a generator once a batch
    (main: 3 steps a batch)."""
    lightning = pytest.importorskip("lightning")
    import logging

    from torch import nn

    logging.getLogger("lightning").setLevel(logging.ERROR)
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)

    class Critic(lightning.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.automatic_optimization = False
            self.gen, self.critic = nn.Linear(8, 8), nn.Linear(8, 1)

        def training_step(self, batch, batch_idx):
            (x,) = batch
            opt_g, opt_c = self.optimizers()
            for _ in range(3):
                opt_c.zero_grad()
                self.manual_backward(
                    self.critic(self.gen(x).detach()).mean() - self.critic(x).mean()
                )
                opt_c.step()
            opt_g.zero_grad()
            self.manual_backward(-self.critic(self.gen(x)).mean())
            opt_g.step()

        def configure_optimizers(self):
            return [
                torch.optim.Adam(self.gen.parameters()),
                torch.optim.SGD(self.critic.parameters(), lr=0.01),
            ]

    loader = DataLoader(TensorDataset(torch.randn(12 * 8, 8)), batch_size=8)
    trainer = lightning.Trainer(
        max_epochs=1, accelerator="cpu", logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False,
    )  # fmt: skip
    record = _clocked(lambda: trainer.fit(Critic(), loader))
    assert record.event_counts["optimizer"] == 48
    assert record.step_count == 12
    assert [(s.backward_calls, s.batch_size) for s in record.steps] == [(4, 8)] * 12


def _critic_loop(iterations: int, critic: int, *, generator_reads: bool):
    """WGAN's loop: the critic reads a batch of its own for each of its ``critic`` steps
    (``x = next(it)``), then the generator steps, on noise or on a batch of its own."""

    def loop() -> None:
        d, g = torch.nn.Linear(2, 1), torch.nn.Linear(2, 2)
        opt_d = torch.optim.RMSprop(d.parameters(), lr=1e-3)
        opt_g = torch.optim.RMSprop(g.parameters(), lr=1e-3)
        it = iter(DataLoader(TensorDataset(torch.randn(iterations * (critic + 1) * 4, 2)), 4))
        for _ in range(iterations):
            for _ in range(critic):
                (x,) = next(it)
                opt_d.zero_grad()
                (d(g(torch.randn(4, 2)).detach()).mean() - d(x).mean()).backward()
                opt_d.step()
            z = next(it)[0] if generator_reads else torch.randn(4, 2)
            opt_g.zero_grad()
            (-d(g(z)).mean()).backward()
            opt_g.step()

    return loop


@pytest.mark.parametrize(
    ("critic", "generator_reads", "batch"),
    [(5, False, 20), (3, True, 16)],  # main: 30 and 24 steps (one a batch)
)
def test_a_critic_reading_a_batch_each_step_is_one_step_a_generator_step(
    critic, generator_reads, batch
):
    record = _clocked(_critic_loop(6, critic, generator_reads=generator_reads))
    assert record.event_counts["optimizer"] == 6 * (critic + 1)
    assert record.step_count == 6
    assert [(s.backward_calls, s.batch_size) for s in record.steps] == [(critic + 1, batch)] * 6


def test_a_generator_stepped_every_fifth_batch_ends_the_steps_after_the_first():
    """``if i % 5 == 0: opt_g.step()`` after each batch's D step: the loop looks like D, G
    alternating at its first batch, whose step ends at G; each later step is a period, 5
    batches ending at G (main: 16 steps, one of them 10 D steps)."""

    def loop() -> None:
        d, g = torch.nn.Linear(2, 1), torch.nn.Linear(2, 2)
        opt_d, opt_g = torch.optim.Adam(d.parameters()), torch.optim.Adam(g.parameters())
        for i, (x,) in enumerate(DataLoader(TensorDataset(torch.randn(80, 2)), batch_size=4)):
            opt_d.zero_grad()
            (d(g(torch.randn(4, 2)).detach()).mean() - d(x).mean()).backward()
            opt_d.step()
            if i % 5 == 0:
                opt_g.zero_grad()
                (-d(g(torch.randn(4, 2))).mean()).backward()
                opt_g.step()

    record = _clocked(loop)
    assert [(s.backward_calls, s.batch_size) for s in record.steps] == [(2, 4)] + [(6, 20)] * 3


def _two_loaders(n: int) -> list[DataLoader]:
    return [DataLoader(TensorDataset(torch.randn(n * 4, 2)), batch_size=4) for _ in range(2)]


def test_a_zip_of_two_loaders_holds_both_batches_from_the_first_step():
    def loop() -> None:
        net = torch.nn.Linear(2, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.01)
        for (a,), (b,) in zip(*_two_loaders(8), strict=True):
            (net(a).sum() + net(b).sum()).backward()
            opt.step()
            opt.zero_grad()

    record = _clocked(loop)
    # main: the first step held one loader's batch (1, 4)
    assert [(s.backward_calls, s.batch_size) for s in record.steps] == [(1, 8)] * 8


def test_a_zip_of_three_loaders_without_an_optimizer_is_one_step_an_iteration():
    """A manual update (the loader anchors the steps): main counted the first iteration's
    three reads as three steps."""

    def loop() -> None:
        w = torch.zeros(2, requires_grad=True)
        loaders = [DataLoader(TensorDataset(torch.randn(24, 2)), batch_size=4) for _ in range(3)]
        for (a,), (b,), (c,) in zip(*loaders, strict=True):
            ((a @ w).sum() + (b @ w).sum() + (c @ w).sum()).backward()
            with torch.no_grad():
                w -= 0.1 * w.grad
            w.grad = None

    record = _clocked(loop)
    assert record.anchor == "dataloader"
    assert [(s.backward_calls, s.batch_size) for s in record.steps] == [(1, 12)] * 6


def test_an_inference_zip_is_one_step_an_iteration_and_one_loader_one_a_batch():
    """No backward: a read of the other loader joins the step; one loader's reads (and a
    second loop after the first ended) each end one (main: 12 steps for the zip's 6)."""

    def loop() -> None:
        net = torch.nn.Linear(2, 1)
        with torch.no_grad():
            for (a,), (b,) in zip(*_two_loaders(6), strict=True):
                net(a) + net(b)
            for (x,) in _two_loaders(3)[0]:
                net(x)

    record = _clocked(loop)
    assert [s.batch_size for s in record.steps] == [8] * 6 + [4] * 3


@pytest.mark.parametrize("seed", [1, 6])
def test_a_loop_with_no_period_that_reads_stays_one_step_a_batch(seed):
    """D steps when a coin says so, G every batch: short patterns repeat by chance, and a cycle
    taken for the loop's after two of them joined 2-5 batches into a step (5 of 8 seeds)."""
    import random

    def loop() -> None:
        coin = random.Random(seed)
        d, g = torch.nn.Linear(2, 1), torch.nn.Linear(2, 2)
        opt_d, opt_g = torch.optim.Adam(d.parameters()), torch.optim.Adam(g.parameters())
        for (x,) in DataLoader(TensorDataset(torch.randn(240, 2)), batch_size=4):
            if coin.random() < 0.5:
                opt_d.zero_grad()
                d(x).mean().backward()
                opt_d.step()
            opt_g.zero_grad()
            d(g(x)).mean().backward()
            opt_g.step()

    record = _clocked(loop)
    assert record.step_count >= 60
    assert {s.batch_size for s in record.steps} == {4}
