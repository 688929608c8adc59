"""Per-step device reads written without ``.item()``: a branch on a tensor's truth value
(Tensor.__bool__) in the step loop or in a function the step runs (the model's ``forward``).
Unseen round 14 (device_dataset_onecycle): ``if not torch.isfinite(norm): continue`` after
``clip_grad_norm_`` was in no source fact, so on a GPU run its sync wait read "the reads are
not in this cell's source" and the read-less-often patch was offered, with no line to gate."""

from __future__ import annotations

from gpu_notebook.cell.scan import scan_source
from gpu_notebook.records import OpStat
from gpu_notebook.rules import run_rules
from gpu_notebook.words import word_findings
from tests.scenarios import synthetic as syn

GUARD_CELL = """\
for x, y in loader:
    x, y = x.to(device), y.to(device)
    loss = loss_fn(model(x), y)
    opt.zero_grad(); loss.backward()
    norm = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    if not torch.isfinite(norm):
        continue
    opt.step()
"""

EXIT_CELL = """\
class EarlyExit(nn.Module):
    def forward(self, x):
        h = self.low(x)
        early = self.exit_head(h)
        if torch.all(early.softmax(-1).amax(-1) > self.threshold):
            return early, None
        return early, self.head(self.high(h))

model = EarlyExit()
for x, y in loader:
    x, y = x.to(device), y.to(device)
    early, final = model(x)
    loss = loss_fn(early, y)
    opt.zero_grad(); loss.backward(); opt.step()
"""


def _sync_findings(cell: str):
    ops = (OpStat("aten::_local_scalar_dense", 8, 900.0, 900.0),)
    run = syn.make_run(cell, gpus=[syn.gpu()])
    found = run_rules(run, syn.make_analysis({"sync": 0.25}, ops=ops), syn.VERDICT)
    return [f for f in word_findings(found) if f.rule_id.startswith("syncs.")]


def test_a_branch_on_a_tensors_truth_is_a_needed_read_named_and_never_patched():
    (f,) = _sync_findings(GUARD_CELL)
    assert f.rule_id == "syncs.needed_read" and f.fix_id is None and f.line == 7
    # `continue` skips a step, it ends nothing: no stop condition
    assert "stop condition" not in f.title and "every step" in f.title
    # Differently shaped: a predicate method on a torch predicate, beside a host test, ending
    # the loop; and a comparison on a tensor's `.any()`.
    stop = GUARD_CELL.replace(
        "if not torch.isfinite(norm):\n        continue",
        "if step > 10 and torch.isnan(loss).any():\n        break",
    )
    (g,) = _sync_findings(stop)
    assert g.rule_id == "syncs.needed_read" and g.line == 7 and "stop condition" in g.title
    big = GUARD_CELL.replace("torch.isfinite(norm)", "(norm > 1e3).any() == False")
    assert [(s.kind, s.needed) for s in scan_source(big).syncs] == [("bool", True)]


def test_tests_that_read_no_tensor_are_no_reads():
    for test in (
        "np.isnan(arr).any()",  # numpy
        "math.isfinite(total)",
        "loss < best",  # names alone: a float or a tensor, nothing here tells
        "norm.item() > 5",  # the call scan's (one fact, kind item)
        "torch.isfinite(norm).item()",
    ):
        cell = GUARD_CELL.replace("not torch.isfinite(norm)", test)
        kinds = [s.kind for s in scan_source(cell).syncs]
        assert "bool" not in kinds and len(kinds) <= 1, (test, kinds)


def test_a_truth_test_in_the_models_forward_is_a_read_of_every_step():
    (f,) = _sync_findings(EXIT_CELL)
    assert f.rule_id == "syncs.needed_read" and f.fix_id is None and f.line == 6
    assert "EarlyExit.forward" in f.title
    (s,) = scan_source(EXIT_CELL).syncs
    assert (s.kind, s.needed, s.stops, s.step_loop_line) == ("bool", True, False, 10)


def test_a_needed_read_does_not_hold_back_the_tiny_ops_finding():
    # A NaN guard in a loop of tiny ops: no fix of the reads removes it, so the host time of
    # the small operators is still said (with its bigger batch); an optional per-step read
    # still speaks first, as before.
    from gpu_notebook.analysis.analyze import with_run_figures

    cell = (
        "loader = DataLoader(TensorDataset(torch.randn(512, 16), torch.randn(512, 1)), batch_size=4)\n"
        "for x, y in loader:\n"
        "    loss = loss_fn(model(x), y)\n"
        "    opt.zero_grad(); loss.backward()\n"
        "    if torch.isnan(loss):\n"
        "        continue\n"
        "    opt.step()\n"
    )
    window = syn.tiny_ops_window([(2_000.0, 0.0) for _ in range(12)])

    def ids(source: str) -> set[str]:
        run = syn.make_run(source)
        return {f.rule_id for f in run_rules(run, with_run_figures(run, window), syn.VERDICT)}

    assert "launch.tiny_ops" in ids(cell)
    printed = cell.replace("    opt.step()\n", "    opt.step()\n    print(loss.item())\n")
    assert "launch.tiny_ops" not in ids(printed)
