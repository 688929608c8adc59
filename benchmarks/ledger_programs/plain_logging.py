"""Plain loop that prints a tensor-derived line every step (a host sync on a GPU)."""

import torch

torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
opt = torch.optim.SGD(model.parameters(), lr=1e-2)
data = torch.randn(4096, 32)
target = torch.randn(4096, 1)
for step in range(400):
    idx = torch.randint(0, 4096, (16,))
    loss = torch.nn.functional.mse_loss(model(data[idx]), target[idx])
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.4f} grad {model[0].weight.grad.norm().item():.4f}")
