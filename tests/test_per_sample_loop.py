"""Issue 26 (unseen round 9): a step that runs the model once per sample of its batch.

``for seq, y in batch: loss = loss + ce(model(seq), y)`` (variable-length sequences, a loader
with ``collate_fn=lambda b: b``) was offered "batch size x8 (2.39x-7.24x)": a bigger batch adds
calls of the same size; only the optimizer step is shared by more samples. And its batch was
read as the first sequence's length ("batch 15"), so the trial's per-sample reading said
"0.10x, slower". Mechanisms: the cell's facts, the rule on a seeded window, the step clock's
batch reading.
"""

from __future__ import annotations

import pytest

from gpu_notebook.analysis.analyze import with_run_figures
from gpu_notebook.cell.scan import scan_source
from gpu_notebook.rules import run_rules
from gpu_notebook.words import word_findings as words
from tests.scenarios import synthetic as syn

PER_SAMPLE = """\
loader = DataLoader(ds, batch_size=16, shuffle=True, collate_fn=lambda b: b)
for step, batch in enumerate(loader):
    opt.zero_grad()
    loss = 0.0
    for seq, y in batch:
        loss = loss + loss_fn(model(seq)[None], torch.tensor([y]))
    loss.backward()
    opt.step()
"""

COLLATED = """\
loader = DataLoader(ds, batch_size=16, shuffle=True)
for step, (x, y) in enumerate(loader):
    opt.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
"""


@pytest.mark.parametrize(
    "inner",
    [
        "for seq, y in batch:",
        "for i in range(len(batch)):",
        "for i, (seq, y) in enumerate(batch):",
        "for seq, y in zip(xs, ys):",
        "for i in range(xs.size(0)):",
        "for i in range(xs.shape[0]):",
    ],
)
def test_a_loop_over_the_batch_s_samples_that_calls_the_model_is_per_sample(inner):
    cell = (
        "for step, batch in enumerate(loader):\n"
        "    xs, ys = batch\n"
        "    loss = 0.0\n"
        f"    {inner}\n"
        "        loss = loss + model(xs[0]).sum()\n"
        "    loss.backward()\n"
        "    opt.step()\n"
    )
    lines = scan_source(cell).per_sample_loops
    assert [s.line for s in lines] == [4] and lines[0].step_loop_line == 1


@pytest.mark.parametrize(
    "inner",
    [
        "for t in range(xs.size(1)):",  # time steps: each call gets the whole batch
        "for t in range(seq_len):",
        "for k, v in batch.items():",
        "for layer in layers:",
    ],
)
def test_loops_over_other_things_are_not_per_sample(inner):
    cell = (
        "for step, batch in enumerate(loader):\n"
        "    xs, ys = batch\n"
        "    loss = 0.0\n"
        f"    {inner}\n"
        "        loss = loss + model(xs).sum()\n"
        "    loss.backward()\n"
        "    opt.step()\n"
    )
    assert scan_source(cell).per_sample_loops == ()


def test_a_loop_over_samples_without_a_model_call_is_not_per_sample():
    cell = (
        "for x, y in loader:\n"
        "    names = [str(v) for v in y]\n"
        "    for v in y:\n"
        "        seen.add(int(v))\n"
        "    loss = model(x).sum()\n"
        "    loss.backward()\n"
        "    opt.step()\n"
    )
    assert scan_source(cell).per_sample_loops == ()


def _tiny_ops(cell: str):
    run = syn.make_run(cell)
    analysis = with_run_figures(run, syn.tiny_ops_window([(2_000.0, 0.0)] * 12))
    found = {f.rule_id: f for f in words(run_rules(run, analysis, syn.VERDICT))}
    return found["launch.tiny_ops"]


def test_a_per_sample_step_is_told_to_batch_its_samples_not_offered_a_bigger_batch():
    """The same window of tiny ops: a collated batch is offered the bigger batch; the
    per-sample loop is told to call the model once on the batch, with no patch and no bound."""
    assert _tiny_ops(COLLATED).fix_id == "bigger_batch"
    f = _tiny_ops(PER_SAMPLE)
    assert f.fix_id is None and f.gain_bound is None
    assert f.line == 6  # the cell under its %%gpucheck line: `for seq, y in batch:`
    assert f.fix.startswith("Batch the samples"), f.fix
    assert "batch size x" not in f.fix
    assert any("`for seq, y in batch:` calls the model once per sample" in e for e in f.evidence)
