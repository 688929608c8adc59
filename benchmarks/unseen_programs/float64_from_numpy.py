"""Float64 training from numpy arrays (unseen round 19).

Class: numpy's float64 data handed to torch with ``torch.from_numpy`` (float64), and the model
cast with ``model.double()`` so the dtypes match ("expected scalar type Double but found Float"
is the error users fix this way). The default dtype stays float32; every parameter, activation
and gradient is float64. Written before the first run: an MLP regression, batch 128, 240
steps, matmul bound; float32 (``.astype(np.float32)`` and no ``.double()``) about 2x faster on
this CPU. The product should name the float64 parameters and offer float32.

Seen 2026-12-07 (main dfe5334, load 2-12): CPU-ONLY (high), 240 steps (right), forward/backward
/optimizer 26/26/43%, fused Adam offered; nothing on float64 (only a float64 default dtype was
read, ``modes.float64_default``). By hand (the loop's process CPU clock): float64 3.15 s,
float32 (no ``.double()``, ``.float()`` inputs) 1.50 s: 2.1x (medians of 3). Since (branch unseen19):
"[medium] The model trains in float64 (double precision)" at the ``.double()`` line, float32
advised (``precision.float64_params``: the step clock's float64 share of the trained bytes).
"""

import numpy as np
import torch
from torch import nn

torch.set_num_threads(1)
torch.manual_seed(0)
rng = np.random.default_rng(0)
X = rng.standard_normal((128 * 40, 256))
Y = (X[:, :8].sum(axis=1, keepdims=True) > 0).astype(X.dtype)
model = nn.Sequential(
    nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 1)
).double()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
loss_fn = nn.BCEWithLogitsLoss()
for epoch in range(6):
    perm = rng.permutation(len(X))
    for i in range(0, len(X), 128):
        idx = perm[i : i + 128]
        xb = torch.from_numpy(X[idx])
        yb = torch.from_numpy(Y[idx])
        loss = loss_fn(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"epoch {epoch} loss {loss.item():.4f}")
