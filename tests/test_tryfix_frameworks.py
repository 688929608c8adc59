"""gpucheck run --try-fixes on a Lightning and an HF Trainer script (real frameworks): the runs
happen interleaved, the fix reaches the loader the framework builds in the patched copy only,
and the verdict comes from the measured samples."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_notebook.tryfix.plan import schedule
from gpu_notebook.tryfix.sequential import decide

LIGHTNING = """
import sys, time, torch, lightning as L
from torch import nn
from torch.utils.data import DataLoader, Dataset
torch.set_num_threads(1)
class Slow(Dataset):
    def __len__(self): return 100000
    def __getitem__(self, i):
        time.sleep(0.003)
        return torch.randn(16), torch.randn(1)
class DM(L.LightningDataModule):
    def train_dataloader(self):
        loader = DataLoader(Slow(), batch_size=4)
        with open(sys.argv[1], "a") as log:
            log.write(f"{loader.num_workers}\\n")
        return loader
class Lit(L.LightningModule):
    def __init__(self):
        super().__init__(); self.net = nn.Linear(16, 1)
    def training_step(self, batch, i):
        x, y = batch
        return nn.functional.mse_loss(self.net(x), y)
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)
trainer = L.Trainer(max_steps=40, accelerator="cpu", logger=False, enable_checkpointing=False,
                    enable_progress_bar=False, enable_model_summary=False)
trainer.fit(Lit(), datamodule=DM())
"""

HF = """
import os, sys, time, torch
os.environ["HF_HUB_OFFLINE"] = "1"
from transformers import (BertConfig, BertForSequenceClassification, Trainer, TrainerCallback,
                          TrainingArguments)
from transformers.utils import logging as hf_logging
hf_logging.set_verbosity_error()
torch.set_num_threads(1)
class Slow(torch.utils.data.Dataset):
    def __len__(self): return 100000
    def __getitem__(self, i):
        time.sleep(0.004)
        return {"input_ids": torch.randint(5, 60, (12,)),
                "attention_mask": torch.ones(12, dtype=torch.long), "labels": torch.tensor(i % 2)}
class LogWorkers(TrainerCallback):
    def on_train_begin(self, args, state, control, train_dataloader=None, **kw):
        with open(sys.argv[1], "a") as log:
            log.write(f"{train_dataloader.num_workers}\\n")
config = BertConfig(vocab_size=64, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                    intermediate_size=32, max_position_embeddings=16, num_labels=2)
args = TrainingArguments(output_dir=os.path.join(os.path.dirname(__file__), "hf_out"),
                         per_device_train_batch_size=4, max_steps=40, report_to=[], use_cpu=True,
                         save_strategy="no", disable_tqdm=True, logging_steps=1000)
Trainer(model=BertForSequenceClassification(config), args=args, train_dataset=Slow(),
        callbacks=[LogWorkers()]).train()
"""


def _try_fixes(source: str, tmp_path: Path) -> tuple[dict, list[str]]:
    script = tmp_path / "train.py"
    script.write_text(source)
    out = tmp_path / "r.json"
    res = subprocess.run(
        [sys.executable, "-m", "gpu_notebook", "run", "--no-profile", "-q", "--json", str(out),
         "--try-fixes", "4", "--try-budget", "400", "--try-rounds", "2", str(script),
         str(tmp_path / "workers.log")],
        capture_output=True, text=True, timeout=900, cwd=tmp_path,
        env=dict(os.environ, TMPDIR=str(tmp_path)),
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    assert script.read_text() == source  # the user's file is never edited
    return json.loads(out.read_text()), (tmp_path / "workers.log").read_text().split()


def _check(data: dict, seen: list[str]) -> None:
    tf = data["try_fixes"]
    t = next(t for t in tf["trials"] if t["fix_id"] == "dataloader_workers")
    rounds = tf["rounds"]
    assert rounds >= 2 and len(t["baseline_steps_s"]) == t["rounds"] == len(t["variant_steps_s"])
    # At least the 4 steps asked a run, as many as the runs were sized to (plan.run_size).
    assert tf["steps"] >= 4
    assert all(len(r) == tf["steps"] for r in t["baseline_steps_s"] + t["variant_steps_s"])
    arms = schedule(len(tf["trials"]), rounds)
    # The measured run, (a first run that only sized the runs,) then the trials in their
    # interleaved order (then any added rounds of an undecided fix): the framework built its
    # loader with workers in the fix's runs only.
    start = 2 if any("is not compared" in n for n in tf["notes"]) else 1
    assert seen[:start] == ["0"] * start and len(seen) >= start + len(arms)
    assert [s != "0" for s in seen[start : start + len(arms)]] == [arm != 0 for arm in arms]
    # The verdict replays from the samples the report carries (too busy: the rounds' interval).
    busy = "too busy to judge" in (t["note"] or "")
    c = decide(
        t["baseline_steps_s"], t["variant_steps_s"], rounds, t["predicted_model_low"], busy=busy
    )
    assert c is not None and t["verdict"] == c.verdict and t["speedup"] == c.speedup
    assert t["recommended"] == (c.verdict == "verified")


def test_try_fixes_on_a_lightning_script(tmp_path):
    pytest.importorskip("lightning")
    _check(*_try_fixes(LIGHTNING, tmp_path))


def test_try_fixes_on_an_hf_trainer_script(tmp_path):
    pytest.importorskip("transformers")
    data, seen = _try_fixes(HF, tmp_path)
    _check(data, seen)


DDP = """
import sys, time, torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
torch.set_num_threads(1)
dist.init_process_group("gloo")
rank = dist.get_rank()
class Slow(Dataset):
    def __len__(self): return 100000
    def __getitem__(self, i):
        time.sleep(0.003)
        return torch.randn(16), torch.randn(1)
loader = DataLoader(Slow(), batch_size=4)
with open(f"{sys.argv[1]}.{rank}", "a") as log:
    log.write(f"{loader.num_workers}\\n")
model = DDP(torch.nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step, (x, y) in enumerate(loader):
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
    if step == 40:
        break
dist.destroy_process_group()
"""


def test_try_fixes_under_torchrun_runs_the_same_variant_on_every_rank(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(DDP)
    out = tmp_path / "r.json"
    res = subprocess.run(
        [str(Path(sys.executable).parent / "torchrun"), "--nproc_per_node", "2", "-m",
         "gpu_notebook", "run", "--no-profile", "-q", "--json", str(out), "--try-fixes", "4",
         "--try-budget", "400", "--try-rounds", "2", str(script), str(tmp_path / "workers.log")],
        capture_output=True, text=True, timeout=900, cwd=tmp_path,
        env=dict(os.environ, OMP_NUM_THREADS="1", GPUCHECK_GATHER_TIMEOUT_S="60"),
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    data = json.loads((tmp_path / "r.rank0.json").read_text())
    t = next(t for t in data["try_fixes"]["trials"] if t["fix_id"] == "dataloader_workers")
    assert len(t["variant_steps_s"]) == data["try_fixes"]["rounds"] >= 2
    # Both ranks ran the same runs in the same order: the measured run, then the trials.
    logs = [(tmp_path / f"workers.log.{r}").read_text().split() for r in (0, 1)]
    assert logs[0] == logs[1] and len(logs[0]) > 1 and "0" in logs[0][1:] and set(logs[0]) - {"0"}


HOOKED = """
import sys, torch, lightning as L
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
torch.set_num_threads(1)
class Stats(L.Callback):
    def on_train_start(self, trainer, pl_module):
        with open(sys.argv[1], "a") as log:
            log.write("run\\n")
    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        w = torch.randn(96, 96)
        for _ in range(240):  # the hook outweighs the framework's own step on a busy machine too
            w = (w @ w).tanh()
        with open(sys.argv[1], "a") as log:
            log.write("work\\n")
class Lit(L.LightningModule):
    def __init__(self):
        super().__init__(); self.net = nn.Linear(16, 1)
    def training_step(self, batch, i):
        x, y = batch
        return nn.functional.mse_loss(self.net(x), y)
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)
ds = TensorDataset(torch.randn(4000, 16), torch.randn(4000, 1))
trainer = L.Trainer(max_steps=45, accelerator="cpu", logger=False, enable_checkpointing=False,
                    enable_progress_bar=False, enable_model_summary=False, callbacks=[Stats()])
trainer.fit(Lit(), DataLoader(ds, batch_size=8))
"""


def test_try_fixes_gates_a_lightning_callbacks_hook_in_the_copy_only(tmp_path):
    # Issue 26: the finding that names a Callback's hook offers the gate (a patch of the hook's
    # top, fixes/codemods_framework); the trial runs it: its runs do the hook's work on no step
    # under 50, the script's runs on every step.
    pytest.importorskip("lightning")
    data, seen = _try_fixes(HOOKED, tmp_path)
    tf = data["try_fixes"]
    t = next(t for t in tf["trials"] if t["fix_id"] == "gate_callback_hook")
    rounds = tf["rounds"]
    assert rounds >= 2 and len(t["baseline_steps_s"]) == t["rounds"] == len(t["variant_steps_s"])
    runs = " ".join(seen).split("run")[1:]  # each run's hook work, in the order the runs went
    arms = schedule(len(tf["trials"]), rounds)
    variant = 1 + [x["fix_id"] for x in tf["trials"]].index("gate_callback_hook")
    # The measured run (and a first run that only sized the runs), then the trials' order.
    start = 2 if any("is not compared" in n for n in tf["notes"]) else 1
    assert len(runs) >= start + len(arms) and all("work" in r for r in runs[:start])
    for arm, run in zip(arms, runs[start : start + len(arms)], strict=True):
        assert ("work" in run) == (arm != variant), (arm, run)
    # The verdict replays from the samples the report carries (too busy: the rounds' interval).
    busy = "too busy to judge" in t["note"]
    c = decide(
        t["baseline_steps_s"], t["variant_steps_s"], rounds, t["predicted_model_low"], busy=busy
    )
    assert c is not None and t["verdict"] == c.verdict and t["speedup"] == c.speedup
