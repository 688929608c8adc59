"""The loop shapes users bring, for ``overhead.py``: frameworks, closures, many small modules.

Each shape is a set-up (run once in the shell: imports, classes, data) and a cell: ``make``
builds a fresh model and optimizer, ``loop`` is the timed training loop (the harness puts the
``perf_counter``/``process_time`` marks around it, as for the other workloads). Sizes are
chosen for a loop of about a second on an idle core (``torch.set_num_threads(1)``).

* ``lstm``: an LSTM language model (embedding, 2-layer LSTM, dropout, tied-size head), gradient
  clipping, SGD: many small modules and ops a step.
* ``lbfgs``: the time-sequence shape of pytorch/examples (two ``LSTMCell`` unrolled over the
  sequence) trained by LBFGS with a closure: 20 forward/backward inside each optimizer step.
* ``nanogpt``: a nanoGPT-shaped decoder (token + position embeddings, pre-norm causal
  self-attention blocks, weight-tied head), AdamW, ``clip_grad_norm_``.
* ``compiled``: an MLP under ``torch.compile`` (inductor), compiled in the set-up's warm-up.
* ``lightning``: ``L.Trainer.fit`` (automatic optimization: a closure optimizer step).
* ``hf``: Hugging Face ``Trainer.train`` on a 2-layer BERT built from a config (no downloads).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Shape:
    name: str
    label: str
    setup: str  # run once: imports, classes, data
    make: str  # a fresh model/optimizer for each cell
    loop: str  # the timed loop
    needs: tuple[str, ...] = ()  # modules that must import, else the row says not available


COMMON = """
import time, math, tempfile, torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
torch.set_num_threads(1)
"""

LSTM = Shape(
    "lstm",
    "LSTM language model (embedding, 2-layer LSTM, dropout, head), SGD + clipping",
    """
class LSTMLM(nn.Module):
    def __init__(self, vocab=1000, d=64, layers=2):
        super().__init__()
        self.emb = nn.Embedding(vocab, d); self.drop = nn.Dropout(0.2)
        self.rnn = nn.LSTM(d, d, layers, dropout=0.2, batch_first=True); self.head = nn.Linear(d, vocab)
    def forward(self, x):
        h, _ = self.rnn(self.drop(self.emb(x)))
        return self.head(self.drop(h))
_LM_DATA = torch.randint(0, 1000, (120, 16, 21), generator=torch.Generator().manual_seed(0))
""",
    "torch.manual_seed(0); model = LSTMLM(); opt = torch.optim.SGD(model.parameters(), lr=1.0)\n",
    """
for batch in _LM_DATA:
    x, y = batch[:, :-1], batch[:, 1:]
    loss = nn.functional.cross_entropy(model(x).reshape(-1, 1000), y.reshape(-1))
    opt.zero_grad(); loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
    opt.step()
""",
)

LBFGS = Shape(
    "lbfgs",
    "LBFGS closure loop (time-sequence model: two LSTMCells unrolled), 20 iterations a step",
    """
class Sequence(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm1 = nn.LSTMCell(1, 32); self.lstm2 = nn.LSTMCell(32, 32); self.linear = nn.Linear(32, 1)
    def forward(self, x):
        h = c = h2 = c2 = torch.zeros(x.size(0), 32)
        outputs = []
        for t in x.split(1, dim=1):
            h, c = self.lstm1(t, (h, c)); h2, c2 = self.lstm2(h, (h2, c2))
            outputs.append(self.linear(h2))
        return torch.cat(outputs, dim=1)
_SEQ = torch.sin(torch.arange(41.0)[None, :] / 4 + torch.arange(16.0)[:, None])
""",
    "torch.manual_seed(0); model = Sequence(); opt = torch.optim.LBFGS(model.parameters(), lr=0.8, max_iter=20)\n",
    """
_inp, _tgt = _SEQ[:, :-1], _SEQ[:, 1:]
for step in range(4):
    def closure():
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(_inp), _tgt)
        loss.backward()
        return loss
    opt.step(closure)
""",
)

NANOGPT = Shape(
    "nanogpt",
    "nanoGPT-shaped decoder (4 pre-norm causal attention blocks, d=64), AdamW + clipping",
    """
class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(d); self.ln2 = nn.LayerNorm(d); self.heads = heads
        self.qkv = nn.Linear(d, 3 * d); self.proj = nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).contiguous().view(B, T, C))
        return x + self.mlp(self.ln2(x))
class GPT(nn.Module):
    def __init__(self, vocab=256, d=64, layers=4, heads=4, block=64):
        super().__init__()
        self.tok = nn.Embedding(vocab, d); self.pos = nn.Embedding(block, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d); self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight
    def forward(self, idx, targets):
        x = self.tok(idx) + self.pos(torch.arange(idx.size(1)))
        for b in self.blocks:
            x = b(x)
        logits = self.head(self.ln(x))
        return nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))
_GPT_DATA = torch.randint(0, 256, (60, 8, 65), generator=torch.Generator().manual_seed(0))
""",
    "torch.manual_seed(0); model = GPT(); opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)\n",
    """
for batch in _GPT_DATA:
    loss = model(batch[:, :-1], batch[:, 1:])
    opt.zero_grad(set_to_none=True); loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
""",
)

COMPILED = Shape(
    "compiled",
    "torch.compile'd MLP (inductor, compiled before the timed cells), AdamW, DataLoader",
    """
_CMLP = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
_CMODEL = torch.compile(_CMLP)
_CDATA = TensorDataset(torch.randn(300 * 32, 64), torch.randint(0, 10, (300 * 32,)))
_copt = torch.optim.AdamW(_CMLP.parameters(), lr=1e-3)
for _x, _y in DataLoader(_CDATA, batch_size=32):  # compile (forward and backward) once
    _l = nn.functional.cross_entropy(_CMODEL(_x), _y); _copt.zero_grad(); _l.backward(); _copt.step()
    break
""",
    "model = _CMODEL; opt = torch.optim.AdamW(_CMLP.parameters(), lr=1e-3); loader = DataLoader(_CDATA, batch_size=32)\n",
    """
for x, y in loader:
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
""",
)

LIGHTNING = Shape(
    "lightning",
    "Lightning Trainer.fit (MLP, automatic optimization: closure step), 200 steps",
    """
import lightning as L
import logging
logging.getLogger("lightning").setLevel(logging.ERROR)
logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
class LitMLP(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    def training_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.cross_entropy(self.net(x), y)
    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-3)
_LDATA = TensorDataset(torch.randn(200 * 32, 64), torch.randint(0, 10, (200 * 32,)))
""",
    """torch.manual_seed(0); model = LitMLP(); loader = DataLoader(_LDATA, batch_size=32)
trainer = L.Trainer(max_steps=200, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                    enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0)
""",
    """
trainer.fit(model, loader)
""",
    needs=("lightning",),
)

HF = Shape(
    "hf",
    "Hugging Face Trainer.train (2-layer BERT from a config, no downloads), 100 steps",
    """
import os
os.environ["HF_HUB_OFFLINE"] = "1"
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments
from transformers.utils import logging as hf_logging
hf_logging.set_verbosity_error()
class _Synthetic(torch.utils.data.Dataset):
    def __init__(self, n):
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(5, 500, (n, 32), generator=g); self.labels = (self.ids[:, 0] > 250).long()
    def __len__(self): return len(self.ids)
    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "attention_mask": torch.ones(32, dtype=torch.long), "labels": self.labels[i]}
_HF_SET = _Synthetic(800)
_HF_OUT = tempfile.mkdtemp(prefix="gpucheck-bench-hf-")
""",
    """torch.manual_seed(0)
model = BertForSequenceClassification(BertConfig(vocab_size=512, hidden_size=64, num_hidden_layers=2,
    num_attention_heads=2, intermediate_size=128, max_position_embeddings=64, num_labels=2))
trainer = Trainer(model=model, train_dataset=_HF_SET, args=TrainingArguments(output_dir=_HF_OUT,
    per_device_train_batch_size=8, max_steps=100, learning_rate=5e-4, report_to=[], use_cpu=True,
    save_strategy="no", logging_strategy="no", disable_tqdm=True, seed=0, dataloader_num_workers=0))
""",
    """
trainer.train()
""",
    needs=("transformers",),
)

SHAPES: tuple[Shape, ...] = (LSTM, LBFGS, NANOGPT, COMPILED, LIGHTNING, HF)
