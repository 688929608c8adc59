"""Batches are a Tensor subclass whose __torch_function__ counts every call (by name) and
refuses size queries it did not expect: the loop must see the same calls measured as plain,
and the loader's `for` line must not fail."""

CELLS = [
    """
import collections, random, numpy as np, torch
torch.manual_seed(0); random.seed(0); np.random.seed(0)
calls = collections.Counter()
class Tagged(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", str(func))
        calls[name] += 1
        if name in ("dim", "is_nested"):
            raise RuntimeError(f"Tagged refuses {name}")
        return super().__torch_function__(func, types, args, kwargs or {})
class Shards(torch.utils.data.Dataset):
    def __len__(self):
        return 48
    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return torch.randn(8, generator=g).as_subclass(Tagged), i % 2
loader = torch.utils.data.DataLoader(Shards(), batch_size=6)
model = torch.nn.Linear(8, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
""",
    """
for x, y in loader:
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
print(sorted(calls.items()))
print(round(float(loss), 5))
""",
]
MEASURED = 1
