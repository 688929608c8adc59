"""A torch.compile'd model whose forward breaks the graph every call (unseen round 10).

Class: graph breaks in a compiled model. The forward checks ``if h.abs().max().item() > 50:``
between its two halves (a data-dependent Python branch on a tensor value), which Dynamo cannot
trace: it compiles two graphs and returns to Python between them on every call, with the
``.item()`` read eager. A practitioner knows: ``torch._dynamo.explain(model)(x)`` or
``TORCH_LOGS=graph_breaks`` names it; replace the branch by ``torch.where``/``torch.clamp``
(or drop the check), or ``torch._dynamo.config.capture_scalar_outputs``. The product should say
the compiled model has a graph break (where, how many per step), not "use torch.compile" for a
model that is compiled.

Seen 2026-12-05 (unseen round 10, load 15): host-bound, "torch.compile is already on" (right:
compile not offered again), fused Adam uncertain; no word of the graph break (the live Dynamo
counters are read only with a namespace, which gpucheck run does not hand the rules); stalls
on 27-38% of the steps (p90/median 15-21). Since rules/graph_breaks: "[low] The compiled model
breaks its graph on every call", that line named; the branch as torch.where measured 1.29x
(median of 5 rounds of 100 compiled steps, 0.94x-1.64x, load ~12).
"""

import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 128), nn.GELU())
        self.b = nn.Sequential(nn.Linear(128, 128), nn.GELU(), nn.Linear(128, 10))

    def forward(self, x):
        h = self.a(x)
        if h.abs().max().item() > 50:
            h = h / 50
        return self.b(h)


model = torch.compile(Net())
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
X = torch.randn(2048, 64)
Y = torch.randint(0, 10, (2048,))
for step in range(300):
    i = (step * 32) % 2048
    loss = nn.functional.cross_entropy(model(X[i : i + 32]), Y[i : i + 32])
    opt.zero_grad()
    loss.backward()
    opt.step()
print(loss.item())
