"""The scenarios: one planted bottleneck per cell (or none, for the healthy controls).

Each scenario is what a user would have in a notebook: ``setup`` is an earlier cell (data,
model classes, sometimes the DataLoader itself), ``cell`` the body put under ``%%gpucheck``.
Cells are sized for 2 CPU cores: steps of a few milliseconds, so the planted cost dominates
the scheduler noise of a small machine, and each cell runs in about a second.

``planted`` is the rule that must come out on top; ``fix_shows_on_cpu`` marks the scenarios
whose generated fix can show a speedup without a GPU (benchmarks/fix_speedups.py runs them).
Apart from the planted cause the cells are healthy: optimizers are fused (an unfused optimizer
is a finding of its own, planted only in ``unfused_optimizer``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Scenario:
    name: str
    planted: str | None  # rule_id expected first; None: healthy control (no high finding)
    cell: str
    setup: str = ""
    options: str = "-w 2 -s 8"
    fix_shows_on_cpu: bool = False
    what: str = ""  # one line: the planted cause
    verdict: str | None = None  # the verdict category it must get, where one is certain
    # Severities the top finding may have on this CPU-only machine. A per-step print's cost here
    # is its formatting (no device to wait for), and a validation pass is timed as part of the
    # step's forward (no hook of ours sits on modules to count model calls): both are found
    # first, at the severity their measured share gives.
    severities: tuple[str, ...] = ("medium", "high")
    # The planted cause costs nothing measurable on a CPU (the product says so in its evidence,
    # at severity low, unbounded): a finding with a measured cost may rank above it there. On a
    # loaded 2-core machine a 1.08x workers finding or the tiny-ops finding did, in 2 of ~10 runs.
    costless_on_cpu: bool = False
    # The planted finding's level line: where the profiled steps mostly waited for a core, each
    # step is split as its wall time holds it and the share's interval is as wide as where the
    # slices fell; the level its low end clears may be [low] while the share as read clears
    # this line (the scenario's level as read). None: no such allowance.
    level_line: float | None = None


COMMON_SETUP = """
import time, torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset
torch.manual_seed(0)
torch.set_num_threads(1)

def mlp(d=32, hidden=256, depth=1):
    layers = [nn.Linear(d, hidden), nn.ReLU()]
    for _ in range(depth - 1):
        layers += [nn.Linear(hidden, hidden), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(hidden, 1))

class SleepyDataset(Dataset):
    '''__getitem__ waits 1 ms per sample: a slow read or decode (I/O-like, releases the CPU).'''
    def __init__(self, n=96, d=32):
        self.x = torch.randn(n, d); self.y = torch.randn(n, 1)
    def __len__(self): return len(self.x)
    def __getitem__(self, i):
        time.sleep(0.001)
        return self.x[i], self.y[i]

class AugmentedImages(Dataset):
    '''A CPU-heavy transform redone for every sample and every epoch.'''
    def __init__(self, n=192):
        self.x = torch.randn(n, 3, 32, 32); self.y = torch.randint(0, 10, (n,))
    def __len__(self): return len(self.x)
    def __getitem__(self, i):
        img = self.x[i][None]
        for _ in range(12):
            img = torch.nn.functional.avg_pool2d(img, 3, 1, 1) * 1.01
        return img[0], self.y[i]

class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(4))
        self.head = nn.Linear(16 * 16, 10)
    def forward(self, x):
        return self.head(self.conv(x).flatten(1))
"""

SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        name="slow_getitem",
        planted="input.loader_workers",
        what="__getitem__ sleeps 1 ms a sample; DataLoader num_workers=0",
        fix_shows_on_cpu=True,
        cell="""
model = mlp(32, 256); opt = torch.optim.SGD(model.parameters(), lr=0.01, fused=True); loss_fn = nn.MSELoss()
loader = DataLoader(SleepyDataset(n=192), batch_size=8, num_workers=0)
for x, y in loader:
    loss = loss_fn(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
""",
    ),
    Scenario(
        name="heavy_transform",
        planted="input.loader_workers",
        what="CPU-heavy per-sample augmentation in the main process (num_workers=0)",
        fix_shows_on_cpu=True,
        cell="""
model = SmallCNN(); opt = torch.optim.SGD(model.parameters(), lr=0.01, fused=True); loss_fn = nn.CrossEntropyLoss()
loader = DataLoader(AugmentedImages(), batch_size=16, num_workers=0)
for x, y in loader:
    loss = loss_fn(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
""",
    ),
    Scenario(
        name="loader_from_earlier_cell",
        planted="input.loader_workers",
        what="the slow DataLoader was built in an earlier cell: the fix rebuilds it from the live object",
        fix_shows_on_cpu=True,
        setup="""
train_loader = DataLoader(SleepyDataset(n=128), batch_size=8, shuffle=True, num_workers=0)
""",
        cell="""
model = mlp(32, 256); opt = torch.optim.SGD(model.parameters(), lr=0.01, fused=True); loss_fn = nn.MSELoss()
for x, y in train_loader:
    loss = loss_fn(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
""",
    ),
    Scenario(
        name="print_tensor_every_step",
        planted="syncs.per_step",
        severities=("low", "medium", "high"),
        what="prints the loss tensor and a slice of the predictions every step",
        fix_shows_on_cpu=True,
        cell="""
model = mlp(64, 256); opt = torch.optim.SGD(model.parameters(), lr=0.01, fused=True); loss_fn = nn.MSELoss()
xs = torch.randn(40, 32, 64); ys = torch.randn(40, 32, 1)
for step in range(40):
    out = model(xs[step])
    loss = loss_fn(out, ys[step])
    opt.zero_grad(); loss.backward(); opt.step()
    print("step", step, "loss", loss, "pred", out[:6, 0])
""",
    ),
    Scenario(
        name="validation_every_step",
        planted="logging.validation_every_step",
        severities=("low", "medium", "high"),
        what="a full validation pass inside every training step",
        cell="""
model = mlp(256, 512); opt = torch.optim.SGD(model.parameters(), lr=0.01, fused=True); loss_fn = nn.MSELoss()
xs = torch.randn(24, 64, 256); ys = torch.randn(24, 64, 1)
val_x = torch.randn(4, 128, 256); val_y = torch.randn(4, 128, 1)
for step in range(24):
    loss = loss_fn(model(xs[step]), ys[step])
    opt.zero_grad(); loss.backward(); opt.step()
    model.eval()
    with torch.no_grad():
        val_loss = sum(loss_fn(model(vx), vy) for vx, vy in zip(val_x, val_y))
    model.train()
""",
    ),
    Scenario(
        name="tiny_steps",
        planted="launch.tiny_ops",
        verdict="host-bound",
        what="a tiny model on batches of 4: Python and per-op overhead dominate",
        fix_shows_on_cpu=True,
        cell="""
model = mlp(16, 16); opt = torch.optim.SGD(model.parameters(), lr=0.01, fused=True); loss_fn = nn.MSELoss()
loader = DataLoader(TensorDataset(torch.randn(512, 16), torch.randn(512, 1)), batch_size=4)
for x, y in loader:
    loss = loss_fn(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
""",
    ),
    Scenario(
        name="batch_one_mlp",
        planted="launch.tiny_ops",
        verdict="host-bound",
        what="an MLP fed one sample at a time, a metric computed per step in Python",
        cell="""
model = mlp(32, 64, depth=2); opt = torch.optim.SGD(model.parameters(), lr=0.01, fused=True); loss_fn = nn.MSELoss()
loader = DataLoader(TensorDataset(torch.randn(192, 32), torch.randn(192, 1)), batch_size=1)
seen = 0
for x, y in loader:
    loss = loss_fn(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
    seen += len(x)
""",
    ),
    Scenario(
        name="unfused_optimizer",
        planted="launch.unfused_optimizer",
        what="AdamW over many parameter tensors, one small op per tensor (for-loop implementation)",
        fix_shows_on_cpu=True,
        level_line=0.20,  # medium where the optimizer share clears 20% (rules/launch.py)
        cell="""
model = mlp(128, 256, depth=8); opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
xs = torch.randn(20, 64, 128); ys = torch.randn(20, 64, 1)
for step in range(20):
    loss = ((model(xs[step]) - ys[step]) ** 2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
""",
    ),
    Scenario(
        name="inference_with_autograd",
        planted="inference.autograd_on",
        what="an inference loop without torch.no_grad()/inference_mode() and without model.eval()",
        fix_shows_on_cpu=True,
        cell="""
model = mlp(512, 1024, depth=2)
batches = torch.randn(24, 128, 512)
outs = []
for x in batches:
    outs.append(model(x))
""",
    ),
    Scenario(
        name="changing_shapes",
        planted="shapes.changing",
        what="the batch size changes every step (ready-made batches of varying sizes)",
        severities=("low", "medium", "high"),
        costless_on_cpu=True,
        cell="""
model = mlp(256, 512); opt = torch.optim.SGD(model.parameters(), lr=0.01, fused=True)
sizes = [64, 256, 128, 512, 96, 384, 192, 448, 160, 320, 224, 480, 64, 256, 128, 512]
batches = [(torch.randn(n, 256), torch.randn(n, 1)) for n in sizes]
loader = DataLoader(batches, batch_size=None)  # ready-made batches, no collation
for xs, ys in loader:
    loss = ((model(xs) - ys) ** 2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
""",
    ),
    # ---------------------------------------------------------------- healthy controls
    Scenario(
        name="healthy_compute",
        planted=None,
        what="pre-loaded tensors, big matmuls: the step is compute",
        cell="""
model = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 512))
opt = torch.optim.SGD(model.parameters(), lr=0.01, fused=True)
xs = torch.randn(256, 512); ys = torch.randn(256, 512)
for step in range(14):
    loss = ((model(xs) - ys) ** 2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
""",
    ),
    Scenario(
        name="healthy_cnn_logged_every_10",
        planted=None,
        what="a CNN on pre-loaded batches that reads its loss every 10 steps only",
        cell="""
model = SmallCNN(); opt = torch.optim.SGD(model.parameters(), lr=0.01, fused=True)
loss_fn = nn.CrossEntropyLoss()
xs = torch.randn(20, 64, 3, 32, 32); ys = torch.randint(0, 10, (20, 64))
for step in range(20):
    loss = loss_fn(model(xs[step]), ys[step])
    opt.zero_grad(); loss.backward(); opt.step()
    if step % 10 == 0:
        print(f"step {step}: loss {loss.item():.3f}")
""",
    ),
    Scenario(
        name="healthy_inference",
        planted=None,
        what="inference under torch.inference_mode() with model.eval()",
        cell="""
model = mlp(512, 1024, depth=2).eval()
batches = torch.randn(24, 128, 512)
outs = []
with torch.inference_mode():
    for x in batches:
        outs.append(model(x))
""",
    ),
)

BY_NAME = {s.name: s for s in SCENARIOS}
