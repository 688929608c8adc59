"""A small GAN on the CPU: a generator and a discriminator, each with its own unfused Adam.

Class shown: a loop stepping two optimizers of one class, both reached by fused=True: the trace
splits the update into one class (Adam), all of it the fix's, so the fused bound stays the whole
update's and the fix is still offered (the check beside embbag_sparse, issue 26).

Measured (helper optsplit, 2026-12-05 12:44-13:03 UTC, load 17-23 falling to 9 on 2 cores,
STEPS=400): before (main as of 11:51 UTC) "[low] ... Adam ... 1.07x-1.07x" (optimizer 10% of
the step over 380 steps, 8 tensors of the first optimizer); after, the trace split one class,
Adam (4 step calls over 2 traced steps), all reached: "[low] 1.07x-1.08x" (11% of the step),
the same bound and floor, still offered. Neither trial fit the 120 s budget at that load, and
the run margins (459%, 1333%) left every range uncertain.
"""

import torch
from torch import nn

torch.manual_seed(0)
Z, X, H, BATCH, STEPS = 32, 64, 64, 64, 1500


def mlp(i: int, o: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Linear(i, H),
        nn.LeakyReLU(0.2),
        nn.Linear(H, H),
        nn.LeakyReLU(0.2),
        nn.Linear(H, H),
        nn.LeakyReLU(0.2),
        nn.Linear(H, o),
    )


gen, disc = mlp(Z, X), mlp(X, 1)
opt_g = torch.optim.Adam(gen.parameters(), lr=2e-4, betas=(0.5, 0.999))
opt_d = torch.optim.Adam(disc.parameters(), lr=2e-4, betas=(0.5, 0.999))
bce = nn.BCEWithLogitsLoss()
real_data = torch.randn(BATCH * 16, X) * 0.5 + 1.0
ones, zeros = torch.ones(BATCH, 1), torch.zeros(BATCH, 1)

for _step in range(STEPS):
    real = real_data[torch.randint(0, len(real_data), (BATCH,))]
    fake = gen(torch.randn(BATCH, Z))
    opt_d.zero_grad()
    loss_d = bce(disc(real), ones) + bce(disc(fake.detach()), zeros)
    loss_d.backward()
    opt_d.step()
    opt_g.zero_grad()
    loss_g = bce(disc(fake), ones)
    loss_g.backward()
    opt_g.step()
print(f"loss_d {loss_d.item():.3f} loss_g {loss_g.item():.3f}")
