"""A hand-written trainer class: fit() loops over epochs and batches and calls self.step(batch),
whose body runs a torch.compile'd GRU over variable-length sequences padded by a collate_fn, and
the backward; the batch moves with .to(device, non_blocking=True); one print per epoch. Issue 26:
no loop of the cell was seen to train (the backward lives in a method), so the epoch's print read
'The loop logs on every step'."""
import random

import numpy as np
import torch
from torch import nn
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0); random.seed(0); np.random.seed(0)
torch.set_num_threads(1)


class Tokens(Dataset):
    def __init__(self, n):
        g = torch.Generator().manual_seed(0)
        self.seqs = [torch.randint(1, 50, (int(torch.randint(3, 20, (1,), generator=g)),),
                                   generator=g) for _ in range(n)]

    def __len__(self):
        return len(self.seqs)

    def __getitem__(self, i):
        s = self.seqs[i]
        return s, int(s.sum() % 2)


def pad_collate(batch):
    seqs, ys = zip(*batch, strict=True)
    return pad_sequence(seqs, batch_first=True), torch.tensor(ys)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 16)
        self.rnn = nn.GRU(16, 24, batch_first=True)
        self.head = nn.Linear(24, 2)

    def forward(self, x):
        out, _ = self.rnn(self.emb(x))
        return self.head(out[:, -1])


class Fitter:
    def __init__(self, model, lr, device):
        self.device = device
        self.model = model.to(device)
        self.compiled = torch.compile(self.model)
        self.opt = torch.optim.Adam(model.parameters(), lr=lr)
        self.history = []

    def step(self, batch):
        x, y = (t.to(self.device, non_blocking=True) for t in batch)
        loss = nn.functional.cross_entropy(self.compiled(x), y)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return loss.detach()

    def fit(self, loader, epochs):
        for epoch in range(epochs):
            for batch in loader:
                self.history.append(self.step(batch))
            print(f"epoch {epoch} loss {torch.stack(self.history[-len(loader):]).mean():.4f}")


loader = DataLoader(Tokens(160), batch_size=16, shuffle=True, collate_fn=pad_collate,
                    generator=torch.Generator().manual_seed(3))
fitter = Fitter(Net(), 1e-3, "cpu")
fitter.fit(loader, epochs=3)
final = [round(float(v), 5) for v in fitter.history]
del fitter  # holds the compiled module: its state is compared through `final` and the model

from tests.differential.probe import dump  # noqa: E402

dump(globals())

TIMEOUT_S = 300
