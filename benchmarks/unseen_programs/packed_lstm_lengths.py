"""An LSTM classifier over variable-length sequences with ``pack_padded_sequence`` every batch
(unseen round 13): the collate pads with ``pad_sequence`` and returns the lengths as a tensor;
the loop moves the lengths to the device with the batch, then packs with
``lengths.cpu()`` (the API needs CPU lengths), ``enforce_sorted=False``.

Class: a per-step device read the API forces, avoidable by keeping the lengths on the host.
Written before the first run: on a GPU ``lengths.to(device)`` then ``lengths.cpu()`` is a device
to host copy and a wait every step; a practitioner keeps the collate's lengths on the CPU (drop
``lengths.to(device)``). On this CPU-only machine the read costs nothing; the product should
still count it as a read in its GPU estimate.

Seen 2026-12-06 (main bce4bf9, load 20-24, 95% wait): UNKNOWN, too busy to judge (right); no
sync finding; "Would a GPU help? about 4.9x ... the host runs ahead of the GPU (no per-step read
of device values)": wrong, the step reads ``lengths`` back every step on a GPU. The read is in
``Net.forward``, which no step-loop fact covers (the source reads of cell/syncs are the step
loop's and its step functions'): left open in round 13 (see benchmarks/README). By hand the
read's cost on a GPU was not measured (no device lent to this task).
"""

import time

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_sequence
from torch.utils.data import DataLoader, Dataset

device = "cuda" if torch.cuda.is_available() else "cpu"


class Seqs(Dataset):
    def __init__(self, n: int) -> None:
        g = torch.Generator().manual_seed(0)
        self.lens = torch.randint(8, 40, (n,), generator=g).tolist()
        self.data = [torch.randn(k, 32, generator=g) for k in self.lens]
        self.y = torch.randint(0, 5, (n,), generator=g)

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, i: int):
        return self.data[i], self.y[i]


def collate(batch):
    seqs, ys = zip(*batch, strict=True)
    lengths = torch.tensor([len(s) for s in seqs])
    return pad_sequence(list(seqs), batch_first=True), lengths, torch.stack(ys)


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(32, 64, batch_first=True)
        self.fc = nn.Linear(64, 5)

    def forward(self, x, lengths):
        packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        _, (h, _) = self.lstm(packed)
        return self.fc(h[-1])


if __name__ == "__main__":
    torch.manual_seed(0)
    loader = DataLoader(Seqs(640), batch_size=32, shuffle=True, collate_fn=collate)
    model = Net().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    t0 = time.time()
    for _epoch in range(1):
        for x, lengths, y in loader:
            x, lengths, y = x.to(device), lengths.to(device), y.to(device)
            loss = nn.functional.cross_entropy(model(x, lengths), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    print(f"done in {time.time() - t0:.1f}s")
