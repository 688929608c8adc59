"""A model compiled in ``main()`` that recompiles for every new batch shape until Dynamo's limit
(unseen, branch scriptns).

Class: ``if __name__ == "__main__": main()``, the common script shape: the model, optimizer and
loop live in ``main()``'s locals, gone when the report is built. Dynamo's counters are the
process's, not the script's objects: with the script's globals handed to the rules they are read
whatever shape the script has. Four batch sizes (4-7) with ``dynamic=False`` against a recompile
limit of 2 (lowered to keep the run short; the default is 8): Dynamo hits the limit and runs the
rest uncompiled. The product should say torch.compile keeps recompiling.

Seen 2026-12-05 (branch scriptns, load 12-16): on main no word of it (the counters were read only
with a namespace); since: "[medium] torch.compile keeps recompiling", 2 graphs, limit hit once.
"""

import torch
from torch import nn


def main():
    torch._dynamo.config.recompile_limit = 2
    model = torch.compile(nn.Linear(8, 2), backend="eager", dynamic=False)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(30):
        loss = model(torch.randn(4 + step % 4, 8)).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()


if __name__ == "__main__":
    main()
