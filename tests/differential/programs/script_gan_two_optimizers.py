"""A small GAN: a discriminator and a generator, two optimizers stepping once each per batch in
one loop. The report must count one step a batch (issue 26: each optimizer step ended a step,
twice the steps and twice the samples/s, and the batch arriving every other step read as
periodic stalls)."""
import random

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0); random.seed(0); np.random.seed(0)
torch.set_num_threads(1)
real_data = TensorDataset(torch.randn(60 * 16, 2) * 0.5 + 1.0)
loader = DataLoader(real_data, batch_size=16, shuffle=True, generator=torch.Generator().manual_seed(3))
G = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2))
D = nn.Sequential(nn.Linear(2, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
opt_g = torch.optim.Adam(G.parameters(), lr=2e-4, betas=(0.5, 0.999))
opt_d = torch.optim.Adam(D.parameters(), lr=2e-4, betas=(0.5, 0.999))
bce = nn.BCEWithLogitsLoss()
for (real,) in loader:
    fake = G(torch.randn(real.size(0), 8))
    ones, zeros = torch.ones(real.size(0), 1), torch.zeros(real.size(0), 1)
    d_loss = bce(D(real), ones) + bce(D(fake.detach()), zeros)
    opt_d.zero_grad()
    d_loss.backward()
    opt_d.step()
    g_loss = bce(D(fake), ones)
    opt_g.zero_grad()
    g_loss.backward()
    opt_g.step()
print(f"d {d_loss.item():.4f} g {g_loss.item():.4f}")

from tests.differential.probe import dump  # noqa: E402

dump(globals())

# 60 batches, one step a batch: the first batch's second optimizer, stepping with no batch read
# since the first one's step, joins that step (154e012; before it the first batch made 2 steps: 61).
REPORT_HAS = [r"\nSteps: 60 \(step ends at: optimizer\)"]
