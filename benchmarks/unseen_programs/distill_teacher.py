"""Knowledge distillation (unseen round 8): a wide frozen teacher MLP in eval mode under
torch.no_grad each step, a small student trained on its softened logits (KL) plus the labels,
a DataLoader over a TensorDataset.

Class: most of the step is a no-grad forward of a second model. The product should say the
teacher's forward is the step (cache its logits, or run it in bf16 / compiled). Seen on main
2026-12-05: cpu-only (right), but the phases read "other 92.7%", forward 1.5% (autograd numbers
no op under no_grad, so the teacher's forward is outside the inferred forward) and no finding
named it. Fixed (rules/frozen_forward): "[high] A frozen model's forward takes 95% of every
step (up to 18.8x)", cache its outputs when the inputs repeat, else inference_mode / bf16 /
compile the teacher; no patch."""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
torch.set_num_threads(1)

X = torch.randn(8192, 256)
Y = (X[:, :8].sum(1) > 0).long() + 2 * (X[:, 8:16].sum(1) > 0).long()
loader = DataLoader(TensorDataset(X, Y), batch_size=128, shuffle=True)

teacher = nn.Sequential(
    nn.Linear(256, 1024),
    nn.GELU(),
    nn.Linear(1024, 1024),
    nn.GELU(),
    nn.Linear(1024, 1024),
    nn.GELU(),
    nn.Linear(1024, 4),
)
teacher.eval()
for p in teacher.parameters():
    p.requires_grad_(False)
student = nn.Sequential(nn.Linear(256, 64), nn.ReLU(), nn.Linear(64, 4))
opt = torch.optim.Adam(student.parameters(), lr=1e-3)
T = 4.0
for epoch in range(3):
    for x, y in loader:
        with torch.no_grad():
            t_logits = teacher(x)
        s_logits = student(x)
        kd = (
            nn.functional.kl_div(
                nn.functional.log_softmax(s_logits / T, -1),
                nn.functional.softmax(t_logits / T, -1),
                reduction="batchmean",
            )
            * T
            * T
        )
        loss = 0.7 * kd + 0.3 * nn.functional.cross_entropy(s_logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(epoch, loss.item())
