"""A character model's loss summed one time step at a time (unseen round 23): ``loss =
sum(F.cross_entropy(logits[:, t], y[:, t]) for t in range(T)) / T`` over T=128 steps of a
causal 1-d conv model (embedding 96x64, three dilated convolutions of width 64), batch 32, Adam,
150 batches drawn from a generator over one long synthetic text.

Class: a loss written as a Python loop over a tensor dimension. Each ``logits[:, t]`` is a view
whose backward allocates a zero gradient of the whole [B, T, V] logits and adds the slice into
it (128 full-size buffers a step), beside 128 small cross-entropies forward and back. The fix:
``F.cross_entropy(logits.reshape(-1, V), y.reshape(-1))`` (the same mean: every step has B
targets).
Seen 2026-12-07 on main e9b71ba: CPU-ONLY (medium), backward 81% of the sampled step, no
finding. By hand the one call 2.44x (CPU clock, medians of 3 pairs). Open.
"""

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)
V, T, B = 96, 128, 32


class CausalConv(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(V, 64)
        self.convs = nn.ModuleList(nn.Conv1d(64, 64, 2, dilation=d) for d in (1, 2, 4))
        self.out = nn.Linear(64, V)

    def forward(self, idx):
        h = self.emb(idx).transpose(1, 2)
        for conv in self.convs:
            h = h + F.gelu(conv(F.pad(h, (conv.dilation[0], 0))))
        return self.out(h.transpose(1, 2))


text = torch.randint(0, V, (200_000,))
text[1::2] = (text[0::2] * 7 + 3) % V


def batches():
    while True:
        start = torch.randint(0, len(text) - T - 1, (B,))
        rows = torch.stack([text[s : s + T + 1] for s in start.tolist()])
        yield rows[:, :-1], rows[:, 1:]


model = CausalConv()
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
for step, (x, y) in enumerate(batches()):
    logits = model(x)
    loss = sum(F.cross_entropy(logits[:, t], y[:, t]) for t in range(T)) / T
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 50 == 0:
        print(step, loss.item())
    if step == 150:
        break
