"""Work that runs every N steps, read from the step clock alone (issue 26 item 2): the steps
that ran it against the others of the same run, a natural A/B with no sampler.

Seeded step series with a planted cost on every 5th step: the share is the construction's; a
real HF Trainer with ``logging_steps=5``: the framework finding carries the share its recorded
step times give. Nothing here depends on how fast the machine ran.
"""

from __future__ import annotations

import numpy as np
import pytest

from gpu_notebook.analysis import framework_stacks
from gpu_notebook.analysis.analyze import analyze
from gpu_notebook.analysis.run_trend import periodic_cost
from gpu_notebook.cell.scan import CELL_LINE_OFFSET, scan_source
from gpu_notebook.records import StepClockRecord, StepTiming
from gpu_notebook.rules import step_logging as sl
from gpu_notebook.rules.common import SUGGEST
from gpu_notebook.words.step_logging import periodic_evidence
from tests.scenarios import synthetic as syn

HF_CELL = (
    "args = TrainingArguments(output_dir='o', logging_steps={every})\n"
    "Trainer(model=model, args=args, train_dataset=ds).train()\n"
)
COST_S = 0.002  # the planted logging, every 5th step


def _series(cost_s: float, every: int = 5, phase: int = 3, n: int = 400) -> list[float]:
    rng = np.random.default_rng(7)
    base = 0.010 * rng.lognormal(0.0, 0.08, n)
    return [float(b) + (cost_s if i % every == phase else 0.0) for i, b in enumerate(base)]


def _run(durations: list[float], cell: str):
    rows, t = [], 0.0
    for i, d in enumerate(durations):
        rows.append(StepTiming(i, t, d, 0.0, 0.0, 0.0, 0.0))
        t += d
    return syn.make_run(cell, steps=StepClockRecord("optimizer", len(rows), tuple(rows)))


def _recomputed(run, period: int, phase: int) -> float:
    """The A/B by hand from the recorded steps our own windows left alone."""
    from gpu_notebook.analysis.own_cost import disturbed_steps

    ours = disturbed_steps(run)
    kept = [
        s for s in run.steps.steps if s.index >= run.window.warmup_steps and s.index not in ours
    ]
    # Each step's own time where every one carries its wait for a core (a loaded machine), a
    # wait read across a step end in the step that holds it (tests/test_step_wait).
    from gpu_notebook.analysis.interference import in_step_waits

    own = all(s.wait_s is not None for s in kept)
    waits = in_step_waits(kept) if own else [0.0] * len(kept)
    times = [max(0.0, s.duration_s - w) for s, w in zip(kept, waits, strict=True)]
    on = [t for s, t in zip(kept, times, strict=True) if s.index % period == phase]
    off = [t for s, t in zip(kept, times, strict=True) if s.index % period != phase]
    total = sum(times)
    return (float(np.median(on)) - float(np.median(off))) * len(on) / total


def test_the_share_of_logging_every_5_steps_is_the_planted_cost():
    run = _run(_series(COST_S), HF_CELL.format(every=5))
    analysis = analyze(run)
    (cost,) = analysis.periodic
    assert (cost.period, cost.phase) == (5, 3)
    assert cost.share == pytest.approx(_recomputed(run, 5, 3))
    # The construction: 2 ms on each of the logging steps, over the steps' total time.
    planted = COST_S * cost.on_steps / cost.total_s
    assert cost.share == pytest.approx(planted, rel=0.15)
    assert cost.on_median_s - cost.off_median_s == pytest.approx(COST_S, rel=0.15)


def test_no_planted_cost_reads_none_and_every_step_has_nothing_to_set_it_against():
    # The slowest of 5 noisy phases is no cost: the rank test over all phases tried says so.
    assert analyze(_run(_series(0.0), HF_CELL.format(every=5))).periodic == ()
    # logging_steps=1: every step logs, no step without it (the stack samplers measure it).
    assert analyze(_run(_series(COST_S), HF_CELL.format(every=1))).periodic == ()
    assert periodic_cost(_run(_series(COST_S), ""), 1) is None


def test_the_framework_the_samples_name_picks_its_own_setting_period():
    run = _run(_series(COST_S), HF_CELL.format(every=5))
    analysis = analyze(run)
    facts = scan_source(run.cell_source, line_offset=CELL_LINE_OFFSET)
    assert sl._periodic(analysis, {"transformers"}, facts) == analysis.periodic[0]
    assert sl._periodic(analysis, {"lightning"}, facts) is None  # its setting is not set


pytest.importorskip("transformers")

HF_TINY = """
import os, torch
from torch import nn
from transformers import Trainer, TrainingArguments
from transformers.utils import logging as hf_logging
hf_logging.set_verbosity_error()
torch.manual_seed(0); torch.set_num_threads(1)
class Pairs(torch.utils.data.Dataset):
    def __len__(self): return 1600
    def __getitem__(self, i):
        return {"x": torch.full((4,), float(i % 7)), "labels": torch.tensor(float(i % 3))}
class Tiny(nn.Module):
    def __init__(self):
        super().__init__(); self.net = nn.Linear(4, 1)
    def forward(self, x, labels):
        return {"loss": ((self.net(x).squeeze(1) - labels) ** 2).mean()}
"""


def test_a_real_hf_trainer_logging_every_5_steps_reads_the_share_its_step_times_give(ip, tmp_path):
    ip.user_ns["OUT"] = str(tmp_path)
    assert ip.run_cell(HF_TINY).success
    cell = (
        "%%gpucheck -q -o rep\n"
        "args = TrainingArguments(output_dir=os.path.join(OUT, 'hf'), logging_steps=5,\n"
        "    per_device_train_batch_size=4, num_train_epochs=1, report_to=[], use_cpu=True,\n"
        "    save_strategy='no', seed=0, dataloader_num_workers=0, disable_tqdm=True)\n"
        "Trainer(model=Tiny(), args=args, train_dataset=Pairs()).train()\n"
    )
    assert ip.run_cell(cell).success
    run = ip.user_ns["rep"].run
    assert run.steps.step_count >= 400
    analysis = analyze(run)
    # Computed from the recorded step times, whatever it reads: the same A/B by hand.
    expected = periodic_cost(run, 5)
    assert analysis.periodic == ((expected,) if expected is not None else ())
    if expected is not None:
        assert expected.share == pytest.approx(_recomputed(run, 5, expected.phase))


LIGHTNING_FIT = """
import torch, lightning as L
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from lightning.pytorch.loggers import CSVLogger
torch.manual_seed(0); torch.set_num_threads(1)
ds = TensorDataset(torch.randn(4800, 16), torch.randint(0, 3, (4800,)))
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
"""


def test_a_real_lightning_fit_logging_every_5_steps_carries_the_share_its_step_times_give(
    ip, tmp_path
):
    # self.log x3 on every step: the framework finding is there (the samples see it); the
    # logger's writes every 5 steps are set against the other steps from the step clock.
    pytest.importorskip("lightning")
    ip.user_ns["OUT"] = str(tmp_path)
    assert ip.run_cell(LIGHTNING_FIT).success
    cell = (
        "%%gpucheck -q -o rep\n"
        "trainer = L.Trainer(max_epochs=1, accelerator='cpu', log_every_n_steps=5,\n"
        "    logger=CSVLogger(OUT), enable_checkpointing=False, enable_model_summary=False)\n"
        "trainer.fit(Logs(), DataLoader(ds, batch_size=16))\n"
    )
    assert ip.run_cell(cell).success
    report = ip.user_ns["rep"]
    run = report.run
    analysis = analyze(run)
    expected = periodic_cost(run, 5)
    assert analysis.periodic == ((expected,) if expected is not None else ())
    if expected is not None:
        assert expected.share == pytest.approx(_recomputed(run, 5, expected.phase))
    facts = scan_source(run.cell_source, line_offset=CELL_LINE_OFFSET)
    finding = sl.framework_overhead(run, analysis, facts)
    # How many stack samples fell in the logging hangs on the machine's speed (a quiet fresh
    # clone caught too few to say it ran, and the finding went with the step clock's A/B): with
    # too few for a share, a step-clock cost over the level is said whatever the samples caught.
    sampled = framework_stacks.sampled_stacks(run)
    samples = sum(framework_stacks.loop_time(raw)[0] for raw in sampled)
    if finding is None:
        # Nothing to say, by the gate of the path the rule took (recomputed from the samples).
        by_label: dict[str, int] = {}
        for raw in sampled:
            framework_stacks.count_overhead(raw, by_label, {}, set())
        loop_us = sum(framework_stacks.loop_time(raw)[1] for raw in sampled)
        share = sum(by_label.values()) / loop_us if loop_us > 0 else 0.0
        judged = sl.judged_share(share, samples) if samples >= sl.MIN_SHARE_SAMPLES else None
        if judged is None:
            assert expected is None or expected.share < SUGGEST, expected
            sparse = run.framework_stacks
            assert sparse is not None
            hits = framework_stacks.count_overhead(sparse, {}, {}, set(), weigh=False)
            assert hits < sl.MIN_SEEN or hits < SUGGEST * framework_stacks.loop_time(sparse)[0], (
                hits
            )
        else:
            assert judged < SUGGEST, (share, samples)
        return
    assert isinstance(finding.said, (sl.FrameworkOverhead, sl.FrameworkSeen))
    # The rule's record carries the step clock's A/B (whatever it reads), the report words it.
    assert finding.said.periodic == expected
    if expected is not None:
        f = next(f for f in report.findings if f.rule_id == finding.rule_id)
        assert periodic_evidence(expected) in f.evidence


@pytest.mark.parametrize("caught", [4, 1, 0])
def test_too_few_samples_for_a_share_take_the_step_clocks_with_its_gain(caught):
    # Issue 26 item 2: a short fit's sparse samples caught the Trainer's logging too few times
    # for a share (an info finding, count only): the step clock's A/B gives the share, and
    # logging every 50 steps instead of 5 keeps a tenth of it (Amdahl on the measured cost).
    # Caught once or never (too few to say it ran: a fast machine's short fit), the step clock
    # alone still measures the steps at the period the cell's setting names.
    import dataclasses
    import inspect

    from transformers import Trainer

    from gpu_notebook.records import CodeRef
    from gpu_notebook.rules.common import SUGGEST
    from tests.test_frameworks import _stacks

    def ref(fn) -> CodeRef:
        return CodeRef(inspect.getsourcefile(fn), fn.__qualname__, fn.__code__.co_firstlineno)

    cell, train = CodeRef("<cell>", "<module>", 1), ref(Trainer.train)
    log = ref(Trainer._maybe_log_save_evaluate)
    sparse = _stacks([([cell, train, log], 40_000), ([cell, train], 40_000)], 80_000)
    # 4 of 8 samples in the logging: a count, no share (under sl.MIN_SHARE_SAMPLES)
    counts = (caught, 8 - caught)
    sparse = dataclasses.replace(
        sparse,
        samples=8,
        clocked=True,
        stacks=tuple(
            dataclasses.replace(s, count=n) for s, n in zip(sparse.stacks, counts, strict=True)
        ),
    )
    run = dataclasses.replace(
        _run(_series(0.004), HF_CELL.format(every=5)), framework_stacks=sparse
    )
    analysis = analyze(run)
    (cost,) = analysis.periodic
    assert cost.share == pytest.approx(_recomputed(run, 5, 3)) and cost.share >= SUGGEST
    facts = scan_source(run.cell_source, line_offset=CELL_LINE_OFFSET)
    finding = sl.framework_overhead(run, analysis, facts)
    assert finding is not None and isinstance(finding.said, sl.FrameworkSeen)
    assert finding.said.periodic == cost and finding.severity != "info"
    assert finding.phase_share == pytest.approx(cost.share * (1 - 5 / sl.RARE_LOGS))
    assert finding.gain_bound is not None and finding.gain_bound > 1.0
    from gpu_notebook.report.build import build_report

    worded = next(f for f in build_report(run).findings if f.rule_id == finding.rule_id)
    assert periodic_evidence(cost) in worded.evidence and "every 5 steps" in worded.title
    assert ("too few to weigh" in " ".join(worded.evidence)) == (caught < sl.MIN_SEEN)
    assert worded.fix.startswith("Set `logging_steps=50`") or "logging_steps" in worded.fix
    # The framework's own default (500 steps) is not one to lengthen: no finding from the clock.
    if caught < sl.MIN_SEEN:
        quiet = dataclasses.replace(
            run, cell_source=HF_CELL.replace("logging_steps={every}", "x=1")
        )
        facts = scan_source(quiet.cell_source, line_offset=CELL_LINE_OFFSET)
        assert sl.framework_overhead(quiet, analyze(quiet), facts) is None


PLAIN_LOOP = """\
for step, (x, y) in enumerate(loader):
    opt.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
    if step % 5 == 0:
        print(step, loss.item())
"""


def test_a_plain_loops_logging_every_5_steps_is_said_with_the_share_its_steps_give():
    from gpu_notebook.report.build import build_report

    run = _run(_series(0.004), PLAIN_LOOP)
    analysis = analyze(run)
    (cost,) = analysis.periodic
    assert cost.share == pytest.approx(_recomputed(run, 5, 3))
    facts = scan_source(run.cell_source, line_offset=CELL_LINE_OFFSET)
    finding = sl.periodic_logging(run, analysis, facts)
    assert finding is not None and finding.line == 7  # the `if step % 5 == 0:` of the cell
    assert finding.phase_share == pytest.approx(cost.share * (1 - 1 / 10))
    worded = next(f for f in build_report(run).findings if f.rule_id == "logging.periodic")
    assert periodic_evidence(cost) in worded.evidence and "% 50" in worded.fix
    # No planted cost: nothing said.
    quiet = _run(_series(0.0), PLAIN_LOOP)
    assert sl.periodic_logging(quiet, analyze(quiet), facts) is None


@pytest.mark.parametrize(
    ("body", "work"),
    [
        ("val_loss = evaluate(model, val_loader)", "validation"),
        ("torch.save(model.state_dict(), 'ckpt.pt')", "a checkpoint save"),
        ("refresh_hard_negatives(pool)", "work"),
    ],
)
def test_a_block_that_validates_or_saves_every_5_steps_is_said_with_its_share(body, work):
    # The validation pass makes its steps 1.4x the others: no stall (rules/run_shape reads
    # steps over 3x the median), yet 8% of the run, measured by the same A/B as the logging.
    from gpu_notebook.report.build import build_report

    cell = PLAIN_LOOP.replace("print(step, loss.item())", body)
    run = _run(_series(0.004), cell)
    analysis = analyze(run)
    (cost,) = analysis.periodic
    assert cost.share == pytest.approx(_recomputed(run, 5, 3))
    assert analysis.shape is not None and analysis.shape.stalls is None
    facts = scan_source(run.cell_source, line_offset=CELL_LINE_OFFSET)
    assert sl.periodic_logging(run, analysis, facts) is None  # not logging
    finding = sl.periodic_work(run, analysis, facts)
    assert finding is not None and finding.line == 7 and finding.rule_id == "run.periodic_work"
    assert finding.phase_share == pytest.approx(cost.share * (1 - 1 / 10))
    worded = next(f for f in build_report(run).findings if f.rule_id == "run.periodic_work")
    assert worded.title.startswith(f"The {work.removeprefix('a ')} every 5 steps")  # no article
    assert periodic_evidence(cost) in worded.evidence and "% 50" in worded.fix
    assert worded.fix_id is None  # no patch: how often to validate is the training's choice
    quiet = _run(_series(0.0), cell)
    assert sl.periodic_work(quiet, analyze(quiet), facts) is None


def test_the_cost_of_the_cells_own_profiler_cycle_is_said_as_the_profilers():
    # Unseen round 15 (nb 31): a torch.profiler schedule's cycle (wait=2, warmup=1, active=2:
    # every 5 steps) ends in a step that hands the cycle's events to on_trace_ready. Under 3x the
    # median, no stall: the same A/B says its cost, as the profiler's, with no `% 50` to write.
    from gpu_notebook.report.build import build_report

    cell = (
        "with torch.profiler.profile(\n"
        "    schedule=torch.profiler.schedule(wait=2, warmup=1, active=2),\n"
        "    on_trace_ready=keep,\n"
        ") as prof:\n"
        "    for step, (x, y) in enumerate(loader):\n"
        "        loss = loss_fn(model(x), y)\n"
        "        loss.backward()\n"
        "        opt.step()\n"
        "        prof.step()\n"
    )
    run = _run(_series(0.004), cell)
    analysis = analyze(run)
    assert analysis.shape is not None and analysis.shape.stalls is None
    worded = next(f for f in build_report(run).findings if f.rule_id == "run.periodic_work")
    assert worded.title.startswith("The cell's own torch.profiler takes ")
    assert worded.severity == "low" and worded.line == 2 + CELL_LINE_OFFSET
    assert "on_trace_ready" in " ".join(worded.evidence)
    assert "`profile(...)`" in worded.fix and "% 50" not in worded.fix
    assert "schedule=50" not in worded.fix
