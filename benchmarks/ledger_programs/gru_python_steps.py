"""A GRU cell stepped in Python over a short sequence (the classic RNN loop), a linear head, Adam;
no DataLoader to enlarge, so the tiny-ops finding offers torch.compile: its range is the step
less the optimizer step and the cell's matmuls (the rest of gru_cell is elementwise ops that a
compiled graph fuses)."""

import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)


class Rnn(nn.Module):
    def __init__(self, d=24, h=48):
        super().__init__()
        self.cell = nn.GRUCell(d, h)
        self.head = nn.Linear(h, 4)

    def forward(self, seq):
        h = torch.zeros(seq.shape[1], self.cell.hidden_size)
        for t in range(seq.shape[0]):
            h = self.cell(seq[t], h)
        return self.head(h)


model = Rnn()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
seq = torch.randn(12, 8, 24)
target = torch.randint(0, 4, (8,))
for step in range(200):
    loss = nn.functional.cross_entropy(model(seq + 0.01 * step), target)
    opt.zero_grad()
    loss.backward()
    opt.step()
