"""A batch processed one sample at a time inside the step (unseen round 9): variable-length
sequences, a loader with ``collate_fn=lambda b: b`` (a list of (sequence, label) tuples), the
model called per sample, the losses summed, one Adam step.

Class: the model runs once per sample inside the step. A bigger batch adds calls of the same
size and shares only the once-a-step work (the optimizer step, zero_grad, the backward call):
x8 measured 1.25x-1.39x per sample by thread time (load 23-27), while main offered "batch size
x8 (2.39x-7.24x)". Main also read the batch as the first sequence's length ("batch 15", so
samples/s was wrong) and --try-fixes read the bigger batch per sample from it: "0.10x, slower".
The product should say host-bound, count 16 samples a step, and tell the user to batch the
samples into one model call (pad or pack them, or torch.func.vmap), with no bigger-batch patch.
Fixed (the step clock: a list of samples counts its items; launch.tiny_ops: "Batch the
samples", no patch, no bound).
"""

import torch
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
torch.set_num_threads(1)


class Seqs(Dataset):
    def __init__(self, n=3000):
        g = torch.Generator().manual_seed(0)
        self.lens = torch.randint(5, 30, (n,), generator=g).tolist()
        self.data = [torch.randn(L, 16, generator=g) for L in self.lens]
        self.y = [int(d[:, 0].sum() > 0) for d in self.data]

    def __len__(self):
        return len(self.data)

    def __getitem__(self, i):
        return self.data[i], self.y[i]


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = torch.nn.Sequential(
            torch.nn.Linear(16, 64), torch.nn.Tanh(), torch.nn.Linear(64, 64)
        )
        self.head = torch.nn.Linear(64, 2)

    def forward(self, seq):  # one sequence (L, 16) -> logits (2,)
        return self.head(self.enc(seq).mean(0))


model = Net()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
loader = DataLoader(Seqs(), batch_size=16, shuffle=True, collate_fn=lambda b: b)
for epoch in range(2):
    for batch in loader:
        opt.zero_grad()
        loss = 0.0
        for seq, y in batch:
            loss = loss + torch.nn.functional.cross_entropy(model(seq)[None], torch.tensor([y]))
        loss = loss / len(batch)
        loss.backward()
        opt.step()
    print(epoch, float(loss))
