"""Train, then validate every epoch with early stopping, where the validation forgets
torch.no_grad() (unseen round 9); the best weights kept by copy.deepcopy(state_dict()).

Class: a second loader read between steps with autograd on. The step clock counted the
validation's 32 batches of 64 as the next step's samples ("batch 2112" at each epoch's first
step; samples/s and a bigger batch's per-sample reading wrong); with no_grad those reads are
already left out. Fixed (step clock: an iterator read again with no backward since is not a
training micro-batch). The missing no_grad itself costs little here (the eval forward 1.06x-1.18x
slower with grad, about 2% of the run): no finding is right; the product should say cpu-only.
The validation pass itself stalls each epoch's first step (every 32 steps): read "every 64" (the
capture's look at the run every 64 steps left every other epoch's step out as ours) with no
line; now "Every 32 steps a step stalls (validation)" at line 43 (`for x, y in val:`, the loop
beside the step loop in the epoch loop), once an epoch.
"""

import copy

import torch
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
torch.set_num_threads(1)
Xtr, Xva = torch.randn(2048, 128), torch.randn(2048, 128)
w = torch.randn(128, 1)
Ytr, Yva = Xtr @ w + 0.1 * torch.randn(2048, 1), Xva @ w + 0.1 * torch.randn(2048, 1)
train = DataLoader(TensorDataset(Xtr, Ytr), batch_size=64, shuffle=True)
val = DataLoader(TensorDataset(Xva, Yva), batch_size=64)

model = torch.nn.Sequential(
    torch.nn.Linear(128, 512),
    torch.nn.ReLU(),
    torch.nn.Linear(512, 512),
    torch.nn.ReLU(),
    torch.nn.Linear(512, 1),
)
opt = torch.optim.Adam(model.parameters(), lr=3e-4)
best, bad, best_state = float("inf"), 0, None
for epoch in range(30):
    model.train()
    for x, y in train:
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    vloss = 0.0
    for x, y in val:  # no torch.no_grad(): graphs built and dropped
        vloss += torch.nn.functional.mse_loss(model(x), y).item() * len(x)
    vloss /= len(val.dataset)
    print(f"epoch {epoch} val {vloss:.4f}")
    if vloss < best - 1e-4:
        best, bad, best_state = vloss, 0, copy.deepcopy(model.state_dict())
    else:
        bad += 1
        if bad >= 3:
            print("early stop")
            break
model.load_state_dict(best_state)
