"""Functions a spawned child imports by name (spawn needs them in a module, not a cell)."""

from __future__ import annotations

import sys

import torch


def train(rank: int, steps: int, exit_code: int = 0) -> None:
    torch.manual_seed(rank)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps + rank):
        opt.zero_grad()
        model(torch.randn(8, 4)).pow(2).mean().backward()
        opt.step()
    if exit_code:
        sys.exit(exit_code)


def train_then_exit_with_next_fd(rank: int) -> None:
    """Trains a little, then exits with the number the next ``open`` gets (its fd table)."""
    import os

    train(rank, 2)
    sys.exit(os.open(os.devnull, os.O_RDONLY))


class _SlowItems(torch.utils.data.Dataset):
    """Each item waits ``wait_s``: the DataLoader's ``__next__`` takes at least that a batch."""

    def __init__(self, n: int, wait_s: float) -> None:
        self.n, self.wait_s = n, wait_s

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        import time

        time.sleep(self.wait_s)
        return torch.ones(4)


class _SlowBackward(torch.autograd.Function):
    """Identity whose backward waits ``wait_s``: ``autograd.backward`` takes at least that."""

    @staticmethod
    def forward(ctx: object, x: torch.Tensor, wait_s: float) -> torch.Tensor:
        ctx.wait_s = wait_s  # type: ignore[attr-defined]
        return x.clone()

    @staticmethod
    def backward(ctx: object, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        import time

        time.sleep(ctx.wait_s)  # type: ignore[attr-defined]
        return grad, None


def train_in_phases(rank: int, steps: int, data_wait_s: float, backward_wait_s: float) -> None:
    """A loop whose data wait and backward have known lower bounds (batches of one item)."""
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = torch.utils.data.DataLoader(_SlowItems(steps, data_wait_s), batch_size=1)
    for x in loader:
        opt.zero_grad()
        _SlowBackward.apply(model(x), backward_wait_s).sum().backward()
        opt.step()


def train_with_autograd_grad(rank: int, steps: int, backward_wait_s: float) -> None:
    """Gradients from ``torch.autograd.grad`` (no ``loss.backward()``), then the optimizer's
    step: each backward pass takes at least ``backward_wait_s``."""
    model = torch.nn.Linear(4, 1)
    params = list(model.parameters())
    opt = torch.optim.SGD(params, lr=0.1)
    x = torch.randn(2, 4)
    for _ in range(steps):
        loss = _SlowBackward.apply(model(x), backward_wait_s).sum()
        for p, g in zip(params, torch.autograd.grad(loss, params), strict=True):
            p.grad = g
        opt.step()


class _SlowForward(torch.nn.Module):
    """A linear layer whose forward waits ``wait_s``: a closure's forward takes at least that."""

    def __init__(self, wait_s: float) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 1)
        self.wait_s = wait_s

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        import time

        time.sleep(self.wait_s)
        return self.linear(x)  # type: ignore[no-any-return]


def train_with_closure(
    rank: int, steps: int, forward_wait_s: float, backward_wait_s: float
) -> None:
    """LBFGS: forward and backward run in the closure, inside step(), at least once a step."""
    torch.manual_seed(rank)
    model = _SlowForward(forward_wait_s)
    opt = torch.optim.LBFGS(model.parameters(), lr=0.1, max_iter=2)
    x, y = torch.randn(8, 4), torch.randn(8, 1)

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = _SlowBackward.apply((model(x) - y).pow(2).mean(), backward_wait_s)
        loss.backward()
        return loss  # type: ignore[no-any-return]

    for _ in range(steps):
        opt.step(closure)


def spawn_a_trainer(rank: int, steps: int) -> None:
    """A child that spawns a child of its own that trains (a grandchild of the cell), then
    forks one that trains too, and trains itself."""
    import multiprocessing
    import os

    p = multiprocessing.get_context("spawn").Process(target=train, args=(0, steps))
    p.start()
    p.join()
    pid = os.fork()
    if pid == 0:
        try:
            train(0, steps + 1)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    train(0, steps + 2)
    sys.exit(0 if p.exitcode == 0 else 1)
