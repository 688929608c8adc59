"""A plain training loop whose collate pads every batch to 256 tokens where the texts are 10-40
long (``F.pad`` to a constant length; the key-padding mask from the pad id).

Class: compute spent on padding (the plain-loop sibling of hf_pad_max_length). The product
should say what share of the columns computed are real tokens (read from the token ids' trailing
pad runs: the batch has no attention mask) and offer padding each batch to its longest row (the
collate's ``MAX_LEN`` replaced by the batch's longest, ``MAX_LEN`` kept as the cap), bounded by
the share of the step forward and backward take.
"""

import random

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

MAX_LEN = 256
PAD = 0


class Texts(Dataset):
    def __init__(self, n: int) -> None:
        rnd = random.Random(0)
        self.rows = [
            torch.tensor([rnd.randrange(1, 3000) for _ in range(rnd.randint(10, 40))])
            for _ in range(n)
        ]
        self.labels = [rnd.randrange(4) for _ in range(n)]

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int):
        return self.rows[i], self.labels[i]


def collate(batch):
    ids = torch.stack([F.pad(x, (0, MAX_LEN - len(x)), value=PAD) for x, _ in batch])
    return ids, torch.tensor([y for _, y in batch])


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(3000, 64, padding_idx=PAD)
        layer = nn.TransformerEncoderLayer(64, 4, 128, batch_first=True, dropout=0.0)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(64, 4)

    def forward(self, ids):
        pad = ids == PAD
        h = self.encoder(self.embed(ids), src_key_padding_mask=pad)
        keep = (~pad).unsqueeze(-1).float()
        return self.head((h * keep).sum(1) / keep.sum(1))


torch.manual_seed(0)
model = Classifier()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
loader = DataLoader(Texts(2000), batch_size=16, shuffle=True, collate_fn=collate)
for step, (ids, labels) in enumerate(loader):
    loss = F.cross_entropy(model(ids), labels)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step == 20:
        break
