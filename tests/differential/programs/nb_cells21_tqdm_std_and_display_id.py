"""std tqdm on stderr (a fixed bar format, redrawn every step) and a metrics line the cell updates
in place through display(..., display_id=True).update(...): the same messages as plain."""

CELLS = [
    '''
import random, numpy as np, torch
from torch import nn
torch.manual_seed(0); random.seed(0); np.random.seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
data = [(torch.randn(8, 16), torch.randint(0, 4, (8,))) for _ in range(40)]
from tqdm import tqdm
from IPython.display import display
''',
    '''
handle = display("starting", display_id=True)
for i, (x, y) in enumerate(tqdm(data, bar_format="{n_fmt}/{total_fmt}", mininterval=0, miniters=1)):
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
    if i % 10 == 9:
        handle.update(f"step {i} loss {loss.item():.4f}")
handle.display_id is not None
''',
]
MEASURED = 1
REPORT = "kept"
NORMALISE = [(r"[0-9a-f]{32}", "<display-id>")]
