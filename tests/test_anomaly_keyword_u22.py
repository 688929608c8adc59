"""Anomaly detection turned on by a framework's keyword (rules/debug_apis.py), read at that
keyword: Lightning's ``Trainer(detect_anomaly=True)``, a trainer function of the user's.

Seen (unseen round 22, lightning_detect_anomaly): Lightning runs ``fit`` inside
``torch.autograd.set_detect_anomaly(True)`` when its Trainer takes ``detect_anomaly=True``. On
main the clock read it on in every backward and the card said "set outside this script ... the
`with torch.autograd.detect_anomaly()` in `LightningModule.backward`", no line, no fix: only the
torch calls were read in the cell. By hand ``detect_anomaly=False`` ran the fit 1.5x faster.
"""

from __future__ import annotations

import dataclasses

import torch

from gpu_notebook.records import Report
from gpu_notebook.rules.debug_apis import FIX
from gpu_notebook.words.proposals import attach_fixes
from tests.scenarios import synthetic as syn
from tests.test_rules import ids, only, rules_for

RULE = "debug.anomaly_detection"

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
                    enable_model_summary=False, detect_anomaly=True)
trainer.fit(Net(), DataLoader(data, batch_size=16))
"""

# A trainer function of the user's (an earlier cell's, or a library's) that takes the keyword
# and passes it to torch: the cell's call is the place to act.
HELPER = """\
import torch
u22_model = torch.nn.Linear(4, 1)
u22_opt = torch.optim.SGD(u22_model.parameters(), lr=0.1)
def u22_fit(steps, detect_anomaly=False):
    with torch.autograd.set_detect_anomaly(detect_anomaly):
        for _ in range(steps):
            loss = u22_model(torch.randn(8, 4)).pow(2).mean()
            loss.backward()
            u22_opt.step()
            u22_opt.zero_grad()
"""
HELPER_CALL = "u22_fit(60, detect_anomaly=True)\n"


def _run(ip, body: str) -> Report:
    ip.user_ns.pop("rep", None)
    result = ip.run_cell(f"%%gpucheck -q -o rep\n{body}")
    assert result.success, result.error_in_exec
    return ip.user_ns["rep"]


def _patched(rep: Report, body: str) -> str:
    (f,) = [f for f in rep.findings if f.rule_id == RULE]
    assert f.fix_id == FIX.fix_id
    (fixed,) = attach_fixes([f], body)
    assert fixed.proposal is not None and fixed.proposal.source_after is not None
    return fixed.proposal.source_after


def test_lightnings_detect_anomaly_keyword_is_the_line_and_the_fix(ip):
    rep = _run(ip, LIGHTNING)
    # The clock read it on in the fit's backward calls (Lightning's own switch).
    assert rep.run.steps.anomaly_backwards and rep.run.steps.anomaly_backwards > 0
    (f,) = [f for f in rep.findings if f.rule_id == RULE]
    # The %%gpucheck line is line 1: the keyword sits on the Trainer call's third line (21).
    assert f.line == 21 and "set outside" not in " ".join(f.evidence)
    after = _patched(rep, LIGHTNING)
    assert "detect_anomaly=False" in after and "detect_anomaly=True" not in after
    assert "enable_model_summary=False" in after  # the call's other arguments stand
    assert not torch.is_anomaly_enabled()


def test_a_user_trainer_function_taking_the_keyword_is_the_line_and_the_fix(ip):
    assert ip.run_cell(HELPER).success
    rep = _run(ip, HELPER_CALL)
    assert rep.run.steps.anomaly_backwards and rep.run.steps.anomaly_backwards > 0
    (f,) = [f for f in rep.findings if f.rule_id == RULE]
    assert f.line == 2
    after = _patched(rep, HELPER_CALL)
    assert "u22_fit(60, detect_anomaly=False)" in after and "=True" not in after


def _live(on: int, read: int):
    return dataclasses.replace(
        syn.steps_record(), anomaly_backwards=on, anomaly_backward_reads=read, anomaly_caller="fit"
    )


def test_the_keyword_off_or_read_off_in_the_steps_is_not_flagged():
    off = LIGHTNING.replace("detect_anomaly=True", "detect_anomaly=False")
    assert RULE not in ids(rules_for(syn.make_run(off, steps=_live(0, 0)), syn.make_analysis()))
    # The keyword there, but every backward read ran without it (a flag the function ignores).
    run = syn.make_run(HELPER_CALL, steps=_live(0, 9))
    assert RULE not in ids(rules_for(run, syn.make_analysis()))


def test_a_trainer_the_cell_makes_with_the_keyword_is_flagged_where_no_backward_was_read():
    f = only(rules_for(syn.make_run(LIGHTNING, steps=_live(0, 0)), syn.make_analysis()), RULE)
    assert f.line == 21 and f.fix_id == FIX.fix_id
    # A user's function with no reading to confirm it is not presumed on.
    run = syn.make_run(HELPER_CALL, steps=_live(0, 0))
    assert RULE not in ids(rules_for(run, syn.make_analysis()))
