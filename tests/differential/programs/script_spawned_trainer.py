"""A script that trains in two processes started by torch.multiprocessing.spawn (one exits
with an error code it catches): the children's output, exit codes and results as with plain
python, one report (the parent's), which names each child's optimizer steps."""
import random
import sys

import numpy as np
import torch
import torch.multiprocessing as mp


def train(rank, out):
    torch.manual_seed(rank)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(6 + rank):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
    out[rank] = round(loss.item(), 6)
    if rank == 0:
        print("rank", rank, "done", flush=True)


if __name__ == "__main__":
    torch.manual_seed(0); random.seed(0); np.random.seed(0)
    _out = mp.Manager().dict()  # names with _ are not compared (a proxy's repr has its address)
    mp.spawn(train, args=(_out,), nprocs=2, join=True)
    _p = mp.get_context("spawn").Process(target=sys.exit, args=(3,))
    _p.start(); _p.join()
    print(sorted(_out.items()), "exit", _p.exitcode)

    from tests.differential.probe import dump

    dump(globals())

TIMEOUT_S = 240
REPORT_HAS = [
    r"13 optimizer step\(s\) ran in 2 child process\(es\) the script started by spawn",
    r"pid \d+: 6 in [0-9.]+ s \([0-9.]+ ms a step; [a-z ]+ \d+%, .*: bound by ",
    r"The training ran in 2 child process\(es\)",
    r"pid \d+: 7 in ",
]
