"""A name bound by iterating over a tensor holds a tensor: its ``int()`` in a function the step
runs is a read (cell/syncs._iterated_values).

Unseen round 17 (benchmarks/unseen_programs/ddpm_timestep_embed.py): a DDPM denoiser's
``forward`` builds its timestep embedding one sample at a time,
``torch.stack([timestep_embedding(int(s)) for s in t])``: 64 reads a step on a GPU (the GPU
estimate counted them from the trace), named by no finding: ``s`` of the comprehension was not
read as a tensor. By hand the per-sample embedding is 1.26x of the loop's CPU time."""

from __future__ import annotations

from pathlib import Path

from gpu_notebook.cell.scan import scan_source

UNSEEN = Path(__file__).resolve().parents[1] / "benchmarks" / "unseen_programs"


def test_the_ddpm_embeddings_per_sample_int_is_a_needed_read_in_forward():
    facts = scan_source((UNSEEN / "ddpm_timestep_embed.py").read_text())
    reads = [(s.kind, s.needed, s.called_in, s.text) for s in facts.syncs if s.called_in]
    assert reads == [
        (
            "float",
            True,
            "Denoiser.forward",
            "emb = torch.stack([timestep_embedding(int(s)) for s in t])",
        )
    ]


TOKENS_BY_HAND = """\
import torch
from torch import nn


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(100, 8)

    def forward(self, ids, mask):
        for i in range(ids.size(0)):
            k = int(i)
        for j, tok in enumerate(ids):
            n = int(tok[0])
        return self.emb(ids).sum()


model = Tagger()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for ids, mask in loader:
    loss = model(ids, mask)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_a_row_of_enumerate_is_read_and_a_range_index_is_not():
    facts = scan_source(TOKENS_BY_HAND)
    assert [(s.line, s.called_in) for s in facts.syncs] == [(14, "Tagger.forward")]
