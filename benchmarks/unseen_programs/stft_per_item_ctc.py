"""A CTC speech loop whose dataset computes log-mel features per item, every epoch (unseen
round 21).

Class: on-the-fly feature extraction in ``__getitem__``: ``torch.stft`` + a mel filterbank
matmul + log for one utterance at a time, in the main process (``num_workers=0``), with no
augmentation, so every epoch recomputes the same features. A padding collate, a small
two-conv acoustic model, ``nn.CTCLoss``. The cut: compute the features once (in
``__init__``, a cache) and index them.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

torch.set_num_threads(1)
torch.manual_seed(0)
SR, NFFT, HOP, NMEL, VOCAB = 16000, 512, 128, 64, 30


def mel_fb():
    fb = torch.rand(NFFT // 2 + 1, NMEL)
    return fb / fb.sum(0, keepdim=True)


class Speech(Dataset):
    def __init__(self, n):
        g = torch.Generator().manual_seed(1)
        self.wavs = [
            torch.randn(int(torch.randint(16000, 48000, (1,), generator=g))) for _ in range(n)
        ]
        self.texts = [torch.randint(1, VOCAB, (len(w) // 1600,), generator=g) for w in self.wavs]
        self.window = torch.hann_window(NFFT)
        self.fb = mel_fb()

    def __len__(self):
        return len(self.wavs)

    def __getitem__(self, i):
        spec = torch.stft(self.wavs[i], NFFT, HOP, window=self.window, return_complex=True)
        mel = (spec.abs() ** 2).T @ self.fb
        return torch.log(mel + 1e-6), self.texts[i]


def collate(items):
    feats, texts = zip(*items, strict=True)
    flens = torch.tensor([f.shape[0] for f in feats])
    tlens = torch.tensor([len(t) for t in texts])
    return (
        nn.utils.rnn.pad_sequence(feats, batch_first=True),
        torch.cat(texts),
        flens,
        tlens,
    )


class Acoustic(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(NMEL, 64, 5, padding=2)
        self.conv2 = nn.Conv1d(64, 64, 3, padding=1)
        self.out = nn.Linear(64, VOCAB)

    def forward(self, x):
        h = torch.relu(self.conv2(torch.relu(self.conv(x.transpose(1, 2)))))
        return self.out(h.transpose(1, 2)).log_softmax(-1)


ds = Speech(640)
loader = DataLoader(ds, batch_size=16, shuffle=True, collate_fn=collate)
model = Acoustic()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
ctc = nn.CTCLoss(zero_infinity=True)
for epoch in range(3):
    for feats, targets, flens, tlens in loader:
        logp = model(feats).transpose(0, 1)
        loss = ctc(logp, targets, flens, tlens)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(epoch, loss.item())
