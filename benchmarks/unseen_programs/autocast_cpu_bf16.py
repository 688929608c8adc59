"""A small conv net under torch.autocast("cpu", dtype=torch.bfloat16), no GradScaler (unseen
round 8). Class: CPU autocast. Seen 2026-12-05: cpu-only, phases forward 66% / backward 32%;
the top operator was max_pool2d_with_indices in bf16 (105 ms for 6 calls in the window); no
finding on whether bf16 pays on this CPU (open: measure fp32 against bf16 autocast)."""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
torch.set_num_threads(1)

X = torch.randn(2048, 3, 32, 32)
Y = torch.randint(0, 10, (2048,))
loader = DataLoader(TensorDataset(X, Y), batch_size=64, shuffle=True, drop_last=True)
model = nn.Sequential(
    nn.Conv2d(3, 16, 3, padding=1),
    nn.ReLU(),
    nn.MaxPool2d(2),
    nn.Conv2d(16, 32, 3, padding=1),
    nn.ReLU(),
    nn.MaxPool2d(2),
    nn.Flatten(),
    nn.Linear(32 * 8 * 8, 128),
    nn.ReLU(),
    nn.Linear(128, 10),
)
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
for epoch in range(2):
    for x, y in loader:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    print(epoch, loss.item())
