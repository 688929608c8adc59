"""GraphSAGE minibatches from a neighbour sampler written in Python (unseen round 21).

Class: a node-classification loop that samples each batch's 2-hop neighbourhood in the loop
body with Python: an adjacency dict of lists, ``random.sample`` per node per hop, a dict to
relabel the sampled nodes, then ``torch.tensor`` of the edge lists. The model (two mean-
aggregating SAGE layers over ``index_add_``) is small, so the sampler's per-node Python is
most of each step. The cut: the adjacency as CSR tensors and the sampling vectorised
(``torch.randint`` into each node's row span, ``torch.unique`` to relabel).
"""

import random

import torch
from torch import nn

torch.set_num_threads(1)
torch.manual_seed(0)
random.seed(0)
N, F, C, FANOUT = 20_000, 64, 8, 10
feats = torch.randn(N, F)
labels = torch.randint(0, C, (N,))
src = torch.randint(0, N, (N * 8,)).tolist()
dst = torch.randint(0, N, (N * 8,)).tolist()
adj = {i: [] for i in range(N)}
for s, d in zip(src, dst, strict=True):
    adj[s].append(d)
    adj[d].append(s)


def sample_block(seeds):
    """Two hops of FANOUT neighbours each; returns node ids and per-hop (src, dst) local edges."""
    nodes = list(seeds)
    local = {n: i for i, n in enumerate(nodes)}
    hops = []
    frontier = list(seeds)
    for _ in range(2):
        es, ed, nxt = [], [], []
        for n in frontier:
            nbrs = adj[n]
            pick = random.sample(nbrs, FANOUT) if len(nbrs) > FANOUT else nbrs
            for m in pick:
                if m not in local:
                    local[m] = len(nodes)
                    nodes.append(m)
                    nxt.append(m)
                es.append(local[m])
                ed.append(local[n])
        hops.append((torch.tensor(es), torch.tensor(ed)))
        frontier = nxt
    return torch.tensor(nodes), hops


class SAGE(nn.Module):
    def __init__(self, fin, fout):
        super().__init__()
        self.self_lin = nn.Linear(fin, fout)
        self.nbr_lin = nn.Linear(fin, fout)

    def forward(self, h, es, ed):
        agg = torch.zeros_like(h).index_add_(0, ed, h[es])
        deg = torch.zeros(h.shape[0]).index_add_(0, ed, torch.ones(len(ed))).clamp(min=1)
        return self.self_lin(h) + self.nbr_lin(agg / deg[:, None])


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1, self.l2 = SAGE(F, 128), SAGE(128, C)

    def forward(self, x, hops):
        (e1s, e1d), (e0s, e0d) = hops[1], hops[0]
        h = torch.relu(self.l1(x, torch.cat([e0s, e1s]), torch.cat([e0d, e1d])))
        return self.l2(h, e0s, e0d)


model = Net()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
train_nodes = torch.randperm(N)[:8192]
for epoch in range(2):
    for batch in train_nodes.split(256):
        nodes, hops = sample_block(batch.tolist())
        out = model(feats[nodes], hops)[: len(batch)]
        loss = nn.functional.cross_entropy(out, labels[batch])
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(epoch, loss.item())
