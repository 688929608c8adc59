"""An LSTM language model trained with gradient accumulation (4 micro-batches an optimizer
step), fed by a map-style Dataset that builds each sequence in Python, with num_workers=0."""

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

torch.set_num_threads(1)
torch.manual_seed(0)
VOCAB, SEQ, ACCUM = 500, 32, 4


class Tokens(Dataset):
    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator().manual_seed(i)
        raw = torch.randint(0, 4 * VOCAB, (SEQ + 1,), generator=g).tolist()
        ids = torch.tensor([t % VOCAB for t in raw])  # a tokenizer's per-token Python work
        return ids[:-1], ids[1:]


class LM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(VOCAB, 64)
        self.lstm = nn.LSTM(64, 128, num_layers=2, batch_first=True)
        self.head = nn.Linear(128, VOCAB)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, _ = self.lstm(self.emb(x))
        return self.head(h)


model = LM()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
loader = DataLoader(Tokens(100_000), batch_size=16, shuffle=True)
for i, (x, y) in enumerate(loader):
    loss = nn.functional.cross_entropy(model(x).reshape(-1, VOCAB), y.reshape(-1)) / ACCUM
    loss.backward()
    if (i + 1) % ACCUM == 0:
        opt.step()
        opt.zero_grad()
    if i + 1 >= ACCUM * 300:
        break
