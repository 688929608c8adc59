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
