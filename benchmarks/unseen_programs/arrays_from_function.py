"""A list of numpy rows made by a function of the script, made a tensor every step by
``torch.tensor([rows[i] for i in idx])`` (unseen, branch scriptns).

Class: a live object only the namespace shows: the source binds ``rows = load_rows(512)``, a
function whose loop appends arrays, so the source alone does not say the list holds numpy
arrays (numpy_list_batch binds it by a list comprehension of numpy calls, which the source
reading knows). The product should read the list from the script's globals, as a notebook's
namespace, and say the step parses every number in Python, with the np.stack patch.

Seen 2026-12-05 (branch scriptns, load 12-16): on main no word of the list (``gpucheck run``
handed the rules no namespace); since: "[medium] Each step builds a tensor from a list of numpy
arrays, one number at a time", the patch ``torch.from_numpy(np.stack([rows[i] for i in idx]))``.
"""

import numpy as np
import torch

torch.manual_seed(0)
torch.set_num_threads(1)


def load_rows(n):
    rng = np.random.default_rng(0)
    rows = []
    for _ in range(n):
        rows.append(rng.standard_normal(32).astype(np.float32))
    return rows


rows = load_rows(512)
labels = np.random.default_rng(1).integers(0, 4, 512)
model = torch.nn.Linear(32, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
rng = np.random.default_rng(2)
for _step in range(40):
    idx = rng.integers(0, len(rows), 16)
    x = torch.tensor([rows[i] for i in idx])
    y = torch.tensor(labels[idx])
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
