"""DDP under ``torchrun --nproc_per_node 2`` on gloo, a second shape of the loop's own collectives
(owncomm, beside ddp_allreduce_log): no DataLoader (batches sliced from in-memory tensors in a
``while`` loop), Adam, and every step an ``all_gather`` of each rank's accuracy into a list and a
``barrier()``; rank 0 prints the mean accuracy every 25 steps.

Run: ``torchrun --nproc_per_node 2 -m gpu_notebook run --json out/r{rank}.json ddp_gather_barrier.py``.
Class: a user's own collectives every step beside DDP's gradient all-reduce.
An expert's fix: gather the metric only on the steps that print (same condition on every rank)
and drop the barrier (DDP's all-reduce already keeps the ranks in step).
"""

import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel


def main() -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(rank)
    torch.set_num_threads(1)
    net = DistributedDataParallel(nn.Sequential(nn.Linear(32, 128), nn.Tanh(), nn.Linear(128, 4)))
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    xs = torch.randn(4096, 32)
    ys = torch.randint(0, 4, (4096,))
    step, batch = 0, 64
    while step < 120:
        i = (step * batch) % (len(xs) - batch)
        x, y = xs[i : i + batch], ys[i : i + batch]
        out = net(x)
        loss = nn.functional.cross_entropy(out, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        acc = (out.argmax(1) == y).float().mean().reshape(1)
        accs = [torch.zeros(1) for _ in range(world)]
        dist.all_gather(accs, acc)
        dist.barrier()
        if rank == 0 and step % 25 == 0:
            print(f"step {step} acc {torch.cat(accs).mean().item():.3f}", flush=True)
        step += 1
    dist.destroy_process_group()


if __name__ == "__main__" or os.environ.get("RANK") is not None:
    main()
