"""Plain loop, input-bound on CPU work: a __getitem__ that builds each item in Python (hashed
character n-gram features of a synthetic text, a loop per item), no workers. Workers pay here
what they do not for a loader that sleeps: each item's Python work moves to processes that
share the cores with the model, plus each batch's collate into shared memory and its queue."""

import torch
from torch.utils.data import DataLoader, Dataset

torch.set_num_threads(1)
FEATURES = 64
WORDS = ("gpu", "notebook", "loader", "worker", "batch", "tensor", "python", "step")


class HashedText(Dataset):
    def __len__(self):
        return 100_000

    def __getitem__(self, i):
        text = " ".join(WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(60))
        feats = [0.0] * FEATURES
        for j in range(len(text) - 2):  # character trigrams, hashed: per-item Python
            feats[(ord(text[j]) * 31 + ord(text[j + 1]) * 7 + ord(text[j + 2])) % FEATURES] += 1.0
        return torch.tensor(feats), torch.tensor([float(i % 2)])


loader = DataLoader(HashedText(), batch_size=32, shuffle=True)
model = torch.nn.Sequential(
    torch.nn.Linear(FEATURES, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1)
)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for step, (x, y) in enumerate(loader):
    loss = torch.nn.functional.binary_cross_entropy_with_logits(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step == 400:
        break
