"""A framework's tracing profiler left on for the training run is named at its keyword, with
``profiler=None`` as the patch (rules/profiler_on_u23.py).

Unseen round 23 (benchmarks/unseen_programs/lightning_profiler_advanced.py): Lightning's
``Trainer(profiler="advanced")`` runs cProfile around every action of every step; no finding
named it on main. Asserted here: a real Lightning ``%%gpucheck`` run names the keyword's line and
patches it (the call's other arguments kept); the object forms (``AdvancedProfiler(...)`` in the
call, ``PyTorchProfiler`` bound to a name) are flagged; ``"simple"`` (a clock per action) and
``None`` are not.
"""

from __future__ import annotations

from gpu_notebook.records import Report
from gpu_notebook.rules.profiler_on_u23 import FIX
from gpu_notebook.words.proposals import attach_fixes
from tests.scenarios import synthetic as syn
from tests.test_rules import ids, only, rules_for

RULE = "debug.profiler_on"

LIGHTNING = """\
import warnings
import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
warnings.filterwarnings("ignore")
torch.manual_seed(0)
class Net(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(16, 4)
    def training_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.cross_entropy(self.net(x), y)
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)
data = TensorDataset(torch.randn(640, 16), torch.randint(0, 4, (640,)))
trainer = L.Trainer(max_epochs=1, accelerator="cpu", logger=False,
                    enable_checkpointing=False, enable_progress_bar=False,
                    enable_model_summary=False, profiler="advanced")
trainer.fit(Net(), DataLoader(data, batch_size=16))
"""


def _run(ip, body: str) -> Report:
    ip.user_ns.pop("rep", None)
    result = ip.run_cell(f"%%gpucheck -q -o rep\n{body}")
    assert result.success, result.error_in_exec
    return ip.user_ns["rep"]


def test_lightnings_advanced_profiler_is_named_at_its_keyword_and_patched(ip):
    rep = _run(ip, LIGHTNING)
    (f,) = [f for f in rep.findings if f.rule_id == RULE]
    # The %%gpucheck line is line 1: the keyword sits on the Trainer call's third line (21).
    assert f.line == 21 and f.fix_id == FIX.fix_id
    assert "cProfile" in " ".join(f.evidence) and f.gain_bound is None
    (fixed,) = attach_fixes([f], LIGHTNING)
    assert fixed.proposal is not None and fixed.proposal.source_after is not None
    after = fixed.proposal.source_after
    assert "profiler=None" in after and '"advanced"' not in after
    assert "enable_model_summary=False" in after  # the call's other arguments stand


OBJECTS = """\
import lightning.pytorch as pl
from lightning.pytorch.profilers import AdvancedProfiler, PyTorchProfiler
prof = PyTorchProfiler(filename="ops")
t1 = pl.Trainer(max_epochs=1, profiler=AdvancedProfiler(dirpath=".", filename="perf"))
t2 = pl.Trainer(max_epochs=1, profiler=prof)
"""


def test_a_profiler_object_in_the_call_or_by_name_is_flagged():
    f = only(rules_for(syn.make_run(OBJECTS), syn.make_analysis()), RULE)
    # Line numbers count the %%gpucheck line (1) above the cell.
    assert f.line == 5 and "cProfile" in " ".join(f.evidence)
    pytorch = OBJECTS.replace('AdvancedProfiler(dirpath=".", filename="perf")', "None")
    f = only(rules_for(syn.make_run(pytorch), syn.make_analysis()), RULE)
    assert f.line == 6 and "torch.profiler" in " ".join(f.evidence)


def test_the_simple_profiler_and_none_are_not_flagged():
    for value in ('"simple"', "None", '"Simple"'):
        source = LIGHTNING.replace('"advanced"', value)
        assert RULE not in ids(rules_for(syn.make_run(source), syn.make_analysis()))
