"""nanoGPT's train.py shape: a while loop over iter_num, get_batch from in-memory data, gradient
accumulation, periodic evaluation at `iter_num % eval_interval` and logging at log_interval."""

import time

import torch
from torch import nn

torch.set_num_threads(1)
torch.manual_seed(0)
eval_interval = 25
log_interval = 1
eval_iters = 10
gradient_accumulation_steps = 2
block_size, batch_size, vocab = 32, 8, 64
data = torch.randint(0, vocab, (20_000,))


def get_batch():
    ix = torch.randint(len(data) - block_size, (batch_size,))
    x = torch.stack([data[i : i + block_size] for i in ix])
    y = torch.stack([data[i + 1 : i + 1 + block_size] for i in ix])
    return x, y


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(vocab, 64)
        self.mlp = nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 64))
        self.head = nn.Linear(64, vocab)

    def forward(self, x, y):
        logits = self.head(self.mlp(self.emb(x)))
        return logits, nn.functional.cross_entropy(logits.view(-1, vocab), y.view(-1))


model = Tiny()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)


@torch.no_grad()
def estimate_loss():
    model.eval()
    losses = torch.zeros(eval_iters)
    for k in range(eval_iters):
        _, loss = model(*get_batch())
        losses[k] = loss.item()
    model.train()
    return losses.mean()


iter_num = 0
X, Y = get_batch()
t0 = time.time()
while True:
    if iter_num % eval_interval == 0:
        print(f"step {iter_num}: val loss {estimate_loss():.4f}")
    for micro_step in range(gradient_accumulation_steps):  # noqa: B007 - as nanoGPT writes it
        logits, loss = model(X, Y)
        loss = loss / gradient_accumulation_steps
        X, Y = get_batch()
        loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    if iter_num % log_interval == 0:
        lossf = loss.item() * gradient_accumulation_steps
        print(f"iter {iter_num}: loss {lossf:.4f}, time {(time.time() - t0) * 1000:.2f}ms")
        t0 = time.time()
    iter_num += 1
    if iter_num > 200:
        break
