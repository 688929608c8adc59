"""A notebook split over helpers: `make_loader` and `train_step(model, batch, opt)` in an earlier
cell, dict batches, `model.train()`/`model.eval()` switches, a running sum kept on the device and
read once an epoch. The loop over the loader is the step loop (no backward in the cell); the
epoch loop's `float(running)` is read once an epoch, not per step."""

CELLS = [
    """
import random, time, numpy as np, torch
from torch import nn
from torch.utils.data import DataLoader, Dataset
torch.manual_seed(0); random.seed(0); np.random.seed(0)
class Rows(Dataset):
    def __len__(self): return 64
    def __getitem__(self, i):
        time.sleep(0.003)
        g = torch.Generator().manual_seed(i)
        return {"x": torch.randn(24, generator=g), "y": torch.tensor(float(i % 2))}
def make_loader(ds, bs=16, shuffle=True):
    return DataLoader(ds, batch_size=bs, shuffle=shuffle)
model = nn.Sequential(nn.Linear(24, 48), nn.ReLU(), nn.Linear(48, 1))
def train_step(model, batch, opt):
    model.train()
    out = model(batch["x"]).squeeze(-1)
    loss = nn.functional.binary_cross_entropy_with_logits(out, batch["y"])
    opt.zero_grad(); loss.backward(); opt.step()
    return loss.detach()
""",
    """
loader = make_loader(Rows(), bs=8)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
running = torch.zeros(())
for epoch in range(2):
    for batch in loader:
        running += train_step(model, batch, opt)
    model.eval()
    print(epoch, round(float(running), 5))
""",
]
MEASURED = 1
REPORT_HAS = [
    r"INPUT-BOUND|As read they would give input-bound",  # a busy machine: too busy to judge
    r"Steps: 16 ",
    r"\A(?![\s\S]*reads device values on the host every step)",
]
