"""A full validation pass before training (and a checkpoint after it) that outweighs the steps.

Class of problem: the cell's wall time goes mostly outside the training loop. Here a baseline
evaluation over the whole validation set under ``torch.no_grad()`` (with a per-batch metric)
runs before a short training loop, and a checkpoint is saved after it. The steps are a minority
of the cell; a report that speaks only of the steps does not answer "why is my cell slow?".

What the product should say: the share of the cell's wall time outside the training steps,
split into before the first step and after the last, with the lines that took it (the
``evaluate(...)`` call before the loop, its forward inside); the advice that the pre-training
evaluation can run after training or every N epochs, measured by its own share (no patch: moving
it changes what the user measures).
"""

import os
import tempfile

import torch

torch.manual_seed(0)
torch.set_num_threads(1)

model = torch.nn.Sequential(
    torch.nn.Linear(256, 512),
    torch.nn.ReLU(),
    torch.nn.Linear(512, 512),
    torch.nn.ReLU(),
    torch.nn.Linear(512, 10),
)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
val_x = torch.randn(1200 * 64, 256)
val_y = torch.randint(0, 10, (1200 * 64,))
train_x = torch.randn(40 * 64, 256)
train_y = torch.randint(0, 10, (40 * 64,))


def evaluate(model, xs, ys, batch=64):
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(xs), batch):
            logits = model(xs[i : i + batch])
            correct += (logits.argmax(1) == ys[i : i + batch]).sum().item()
    model.train()
    return correct / len(xs)


print("baseline accuracy", evaluate(model, val_x, val_y))

for i in range(0, len(train_x), 64):
    loss = torch.nn.functional.cross_entropy(model(train_x[i : i + 64]), train_y[i : i + 64])
    opt.zero_grad()
    loss.backward()
    opt.step()

with tempfile.TemporaryDirectory() as d:
    torch.save(model.state_dict(), os.path.join(d, "ckpt.pt"))
