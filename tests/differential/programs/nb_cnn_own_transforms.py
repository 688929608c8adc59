"""A small CNN on synthetic images with hand-written transforms (torchvision is not used)."""

CELLS = [
    """
import random, numpy as np, torch
from torch import nn
from torch.utils.data import Dataset, DataLoader
torch.manual_seed(0); random.seed(0); np.random.seed(0)

class RandomFlip:
    def __init__(self, p): self.p = p
    def __call__(self, img): return img.flip(-1) if torch.rand(()) < self.p else img

class Normalize:
    def __init__(self, mean, std): self.mean, self.std = mean, std
    def __call__(self, img): return (img - self.mean) / self.std

class Shapes(Dataset):
    def __init__(self, n, transforms):
        self.x = torch.rand(n, 1, 12, 12); self.y = (self.x.mean((1, 2, 3)) > 0.5).long()
        self.transforms = transforms
    def __len__(self): return len(self.x)
    def __getitem__(self, i):
        img = self.x[i]
        for t in self.transforms: img = t(img)
        return img, self.y[i]

dataset = Shapes(256, [RandomFlip(0.5), Normalize(0.5, 0.25)])
loader = DataLoader(dataset, batch_size=32, shuffle=True)
model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Flatten(), nn.Linear(4 * 5 * 5, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
""",
    """
for epoch in range(2):
    correct = 0
    for x, y in loader:
        out = model(x)
        loss = nn.functional.cross_entropy(out, y)
        opt.zero_grad(); loss.backward(); opt.step()
        correct += (out.argmax(1) == y).sum().item()
    print(epoch, round(loss.item(), 5), correct)
""",
]
MEASURED = 1
