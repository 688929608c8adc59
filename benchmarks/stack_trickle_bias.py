"""The sparse sampler's lean (issue 26): the framework share its samples read, side by side.

A default ``%%gpucheck`` run of a framework loop that logs every step, three ways, interleaved:
``own`` (the sparse sampler after the dense span, at the program's own switch interval: the
default), ``low`` (the same sampler, same spans, with the switch interval lowered to 0.2 ms as
the dense span does: a sample then waits at most that for the GIL) and ``all`` (``--lines all``:
the whole cell at 50 Hz, 0.2 ms). Each prints the share of the sampled loop time in the
framework's logging/callback/progress frames (rules/step_logging.py's labels). ``own`` against
``low`` is the lean of a sample that waits for the GIL.
``python benchmarks/stack_trickle_bias.py lightning|hf EVERY ROUNDS [MODES [K]]`` (EVERY: the
logging setting, log_every_n_steps / logging_steps; MODES: brief,own,low,all, default
brief,own,all; K: runs K times as long, 800 x K Lightning steps, 400 x K HF steps) (write stdout to a file: a pipe
that fills up stalls the HF Trainer's per-step prints, which then dominate every figure)
"""

from __future__ import annotations

import statistics
import sys
import tempfile

from IPython.testing import globalipapp

from gpu_notebook.capture import session as se
from gpu_notebook.capture.stacks import StackSampler
from gpu_notebook.rules import step_logging as sl

LIGHTNING = """
import torch, lightning as L, logging
logging.getLogger("lightning").setLevel(logging.ERROR); logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
torch.manual_seed(0); torch.set_num_threads(1)
ds = TensorDataset(torch.randn(12800 * K, 16), torch.randint(0, 3, (12800 * K,)))
class Logs(L.LightningModule):
    def __init__(self):
        super().__init__(); self.net = nn.Linear(16, 3)
    def training_step(self, batch, i):
        x, y = batch
        logits = self.net(x)
        loss = nn.functional.cross_entropy(logits, y)
        self.log("loss", loss, on_step=True, prog_bar=True)
        self.log("acc", (logits.argmax(1) == y).float().mean(), on_step=True, on_epoch=True)
        self.log("norm", logits.norm(), on_step=True, on_epoch=True)
        return loss
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)
def mk():
    return L.Trainer(max_epochs=1, accelerator="cpu", log_every_n_steps=EVERY, logger=False,
                    enable_checkpointing=False, enable_model_summary=False, enable_progress_bar=True)
"""
LCELL = "%%gpucheck -q -o rep {opts}\nmk().fit(Logs(), DataLoader(ds, batch_size=16))\n"
HF = """
import os, torch
os.environ["HF_HUB_OFFLINE"] = "1"
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments
from transformers.utils import logging as hf_logging
hf_logging.set_verbosity_error()
torch.manual_seed(0); torch.set_num_threads(1)
class Synthetic(torch.utils.data.Dataset):
    def __init__(self, n):
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(5, 60, (n, 12), generator=g)
        self.labels = (self.ids[:, 0] > 30).long()
    def __len__(self): return len(self.ids)
    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "attention_mask": torch.ones(12, dtype=torch.long), "labels": self.labels[i]}
config = BertConfig(vocab_size=64, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=32, max_position_embeddings=16, num_labels=2)
dataset = Synthetic(4000 * K)
def mk():
    model = BertForSequenceClassification(config)
    args = TrainingArguments(output_dir=OUT, per_device_train_batch_size=8, max_steps=400 * K,
                         learning_rate=5e-4, logging_steps=EVERY, report_to=[], use_cpu=True,
                         save_strategy="no", disable_tqdm=False, seed=0, dataloader_num_workers=0)
    return Trainer(model=model, args=args, train_dataset=dataset)
"""
HCELL = "%%gpucheck -q -o rep {opts}\nmk().train()\n"


def share(raw):  # type: ignore[no-untyped-def]
    if raw is None or not raw.stacks:
        return None, 0
    by, fn, fw = {}, {}, set()
    imp = [s for s in raw.stacks if sl._imports(raw, s)]
    loop = raw.time_us - sum(s.time_us for s in imp)
    sl._count_overhead(raw, by, fn, fw)
    return sum(by.values()) / loop, raw.samples


orig = (
    se.CaptureSession._start_trickle
)  # as shipped: a jittered clock, the interval lowered briefly


def own(self):  # type: ignore[no-untyped-def]
    self._trickle = StackSampler(
        self._thread_id,
        self.options.trickle_stack_interval_s,
        root_codes=self._stack_root_codes,
        switch_interval_s=None,
    ).start()  # 7ab2f81: the program's own switch interval throughout


def low(self):  # type: ignore[no-untyped-def]
    self._trickle = StackSampler(
        self._thread_id, self.options.trickle_stack_interval_s, root_codes=self._stack_root_codes
    ).start()  # 0.2 ms switch interval throughout


MODES = {"brief": orig, "own": own, "low": low, "all": orig}


def main() -> None:
    which, every, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    modes = sys.argv[4].split(",") if len(sys.argv) > 4 else ["brief", "own", "all"]
    ip = globalipapp.get_ipython()
    ip.run_cell("%load_ext gpu_notebook")
    ip.user_ns["OUT"] = tempfile.mkdtemp()
    ip.user_ns["EVERY"] = every
    ip.user_ns["K"] = int(sys.argv[5]) if len(sys.argv) > 5 else 1  # runs K times as long
    assert ip.run_cell(LIGHTNING if which == "lightning" else HF).success
    cell = LCELL if which == "lightning" else HCELL
    res: dict[str, list[float]] = {m: [] for m in modes}
    print(which, "every", every, "switch interval", sys.getswitchinterval(), flush=True)
    for r in range(rounds):
        for mode in modes if r % 2 == 0 else modes[::-1]:
            se.CaptureSession._start_trickle = MODES[mode]
            ip.run_cell(cell.format(opts="--lines all" if mode == "all" else ""), silent=True)
            rep = ip.user_ns["rep"]
            raw = rep.run.stacks if mode == "all" else rep.run.framework_stacks
            sh, n = share(raw)
            f = next((f for f in rep.findings if f.rule_id == "logging.framework_overhead"), None)
            print(
                mode,
                "share",
                None if sh is None else round(sh, 3),
                "samples",
                n,
                "late_ms",
                round(raw.mean_lateness_s * 1e3, 2) if raw else None,
                "wall_s",
                round(rep.run.wall_s, 1) if hasattr(rep.run, "wall_s") else None,
                "finding",
                f and (f.severity, f.title[:60], f.fix[:90]),
                "after",
                sys.getswitchinterval(),
                flush=True,
            )
            if sh is not None:
                res[mode].append(sh)
    se.CaptureSession._start_trickle = orig
    print(
        {k: (round(statistics.median(v), 3), [round(x, 3) for x in v]) for k, v in res.items() if v}
    )
    truth = statistics.median(res["all"]) if res.get("all") else None
    if truth:
        for k, v in res.items():
            if v and k != "all":
                print(
                    k,
                    "median / all",
                    round(statistics.median(v) / truth, 2),
                    "paired",
                    [round(x / y, 2) for x, y in zip(v, res["all"], strict=False)],
                )


if __name__ == "__main__":
    main()
