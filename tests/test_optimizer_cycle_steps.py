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
    # The epoch's last step reads "batch 4" on main too (not this test's matter): left out.
    assert [(s.backward_calls, s.batch_size) for s in record.steps[:7]] == [(2, 8)] * 7


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
