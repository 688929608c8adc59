"""Issue 26 (unseen round 7): fused=True reaches only the optimizers torch can fuse.

A recommender with sparse embeddings stepped by SparseAdam and its MLP by Adam read "[medium] The
Adam step updates each parameter tensor separately (0.71x-1.58x) ... Pass fused=True to Adam":
the bound took the whole optimizer phase (61% of the step, most of it SparseAdam's update of
three embedding tables), while the patch changes only the Adam over the MLP's four tensors; the
trial measured it 0.69x. Where the cell steps an optimizer the fix does not reach (SparseAdam,
LBFGS, one already fused), the step clock's optimizer time is theirs together and their split was
not measured: the whole update still bounds what the patch can take (a ceiling), no floor is
claimed, and the card says whose step shares it. Mechanisms only: seeded step series. (These
analyses carry no trace split; with the trace's per-optimizer ranges the bound rests on the
reached part: tests/test_optimizer_split.py.)
"""

from __future__ import annotations

import dataclasses

from gpu_notebook.analysis.analyze import with_run_figures
from gpu_notebook.records import Finding
from gpu_notebook.rules import run_rules
from gpu_notebook.words import word_findings
from tests.scenarios import synthetic as syn
from tests.test_fix_bounds import ADAM_CELL, _series

SPARSE_CELL = """\
opt_sparse = torch.optim.SparseAdam(sparse_params, lr=1e-2)
opt_dense = torch.optim.Adam(model.mlp.parameters(), lr=1e-3)
for x, y in loader:
    loss = loss_fn(model(x), y)
    opt_sparse.zero_grad(); opt_dense.zero_grad(); loss.backward()
    opt_sparse.step(); opt_dense.step()
"""

TWO_ADAMS = """\
opt_g = torch.optim.Adam(gen.parameters())
opt_d = torch.optim.AdamW(disc.parameters())
for x, y in loader:
    loss = loss_fn(gen(x), y)
    opt_g.zero_grad(); opt_d.zero_grad(); loss.backward(); opt_g.step(); opt_d.step()
"""

FUSED_BESIDE = """\
opt_a = torch.optim.Adam(a.parameters(), fused=True)
opt_b = torch.optim.Adam(b.parameters())
for x, y in loader:
    loss = loss_fn(b(a(x)), y)
    opt_a.zero_grad(); opt_b.zero_grad(); loss.backward(); opt_a.step(); opt_b.step()
"""


def _finding(cell: str) -> Finding:
    record = dataclasses.replace(_series(0.27), grad_tensors=6, grad_bytes=299_016)
    run = syn.make_run(cell, steps=record)
    analysis = with_run_figures(run, syn.make_analysis({"optimizer": 0.30}))
    found = {f.rule_id: f for f in word_findings(run_rules(run, analysis, syn.VERDICT))}
    return found["launch.unfused_optimizer"]


def test_an_optimizer_the_fix_does_not_reach_takes_the_floor_away():
    f = _finding(SPARSE_CELL)
    assert f.fix_id == "foreach_fused_optimizer" and f.line == _finding(ADAM_CELL).line + 1
    assert f.gain_low is None
    assert f.gain_bound is not None and f.gain_bound <= _finding(ADAM_CELL).gain_bound
    text = " ".join(f.evidence)
    assert "SparseAdam" in text and "not measured" in text and "no least gain" in text


def test_an_already_fused_optimizer_beside_is_one_the_fix_does_not_reach():
    f = _finding(FUSED_BESIDE)
    assert f.fix_id == "foreach_fused_optimizer" and f.line == _finding(ADAM_CELL).line + 1
    assert f.gain_low is None
    assert any("holds the step of Adam" in e for e in f.evidence)


def test_optimizers_the_fix_all_reaches_keep_the_whole_update_as_bound():
    for cell in (ADAM_CELL, TWO_ADAMS):
        f = _finding(cell)
        assert f.gain_bound is not None and f.gain_bound > 1.0 and f.gain_low is not None
        assert not any("holds the step of" in e for e in f.evidence)
