"""DDP under ``torchrun --nproc_per_node 2`` on gloo (unseen round 14): a 2-layer MLP wrapped in
DDP, a DistributedSampler (``set_epoch`` each epoch), SGD, batch 32, 2 epochs of 32 steps a rank;
every step ``dist.all_reduce`` of a detached copy of the loss and ``.item()`` for a log that rank 0
prints every 20 steps.

Run: ``torchrun --nproc_per_node 2 -m gpu_notebook run --json out/r{rank}.json ddp_allreduce_log.py``.
Class: a user's own collective every step (a logging barrier beside DDP's gradient all-reduce).
An expert's fix: reduce the loss only on the steps that log (``if step % 20 == 0:`` around the
all_reduce, on every rank), or keep a local running sum and reduce it every N steps.
Since (lead, rules/distributed.own_collectives, tests/test_own_collectives): "[high] The step loop
runs a collective of its own every step (line 68) (up to 3.94x)" with that advice (rank 0, load
~2, comm 75% of the step); no patch (whether the value is needed on the other steps is the user's).
Since (owncomm, analysis/host_comm): the share is the loop thread's time off a core over every
step (the traced wall share moved the bound 1.04x-10.23x over 8 rank-runs quiet and busy, this
2.40x-3.86x: benchmarks/own_comm_load.py); a rank whose window was unlike the run is judged on
its typical steps (COMM-BOUND, not HOST-BOUND); the verdict and the rule say what part of the
wait lay in backward (the gradient exchange) and what outside it (the loop's own collectives).

Seen 2026-12-06 (load 22-24 on 2 cores, main 37b864a): rank 0 COMM-BOUND (medium), "waiting in
collectives 75% of step time", hot line the logging ``dist.all_reduce`` (82% of samples) -- the
share true, but the advice ("overlap the all-reduce with backward, or accumulate more steps per
all-reduce") is DDP's gradient all-reduce's; no finding names the logging collective or offers
to reduce it only when it logs (open). Rank 1 HOST-BOUND: "on a core only 17% ... waits on
something outside torch": its window was unlike the run, so its phases are the hooks' (no comm
phase; the all_reduce after opt.step() reads as "other") while its trace window read comm 77%;
the job table shows rank 1 comm "n/a" (open) and showed rank 0's median step 26.35 ms (its
window's) beside rank 1's run median, "spread 151%"; fixed (views/job_text, tests/test_job_noise):
the run medians 3.53/3.39 ms, spread 4% when every rank has one. Job report: no straggler, host shared and 100% busy (right).
Findings: "[low] Some steps stall (up to 1.80x)" (the machine's load), "[info] reads device
values every step" (the .item(): right as info on CPU). Plain: ~25 s a run under load.
"""

import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


class Rows(Dataset):
    def __init__(self, n: int) -> None:
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, 64, generator=g)
        self.y = torch.randint(0, 8, (n,), generator=g)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int):
        return self.x[i], self.y[i]


def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    world = dist.get_world_size()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = DDP(nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 8)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    data = Rows(2048)
    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True)
    loader = DataLoader(data, batch_size=32, sampler=sampler)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for step, (x, y) in enumerate(loader):
            loss = loss_fn(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            logged = loss.detach().clone()
            dist.all_reduce(logged, op=dist.ReduceOp.SUM)
            mean_loss = logged.item() / world
            if rank == 0 and step % 20 == 0:
                print(f"epoch {epoch} step {step} loss {mean_loss:.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__" or os.environ.get("RANK") is not None:
    main()
