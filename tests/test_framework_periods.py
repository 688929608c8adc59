"""Work a framework runs every N steps, set by a keyword of the cell: HF ``TrainingArguments``'
``eval_steps`` (with ``eval_strategy="steps"``) and ``save_steps``. The work runs inside
``Trainer.train()``, so no ``if step % N`` of the cell names it.

Recorded step times with planted stalls, and the cell source: the period, the line and the
words are checked against the plant, never against timing (unseen round 11's
``hf_trainer_eval_steps``: an evaluation every 10 steps held about half the run's time, read as
"Every 10 steps a step stalls" with no cause, once, and not at all in a second run)."""

from __future__ import annotations

import dataclasses

import pytest

from gpu_notebook.cell.blocks import periodic_blocks
from gpu_notebook.cell.scan import CELL_LINE_OFFSET, scan_source
from gpu_notebook.records import ProfileWindow, Run, StepClockRecord, StepTiming
from gpu_notebook.report.build import build_report
from tests.scenarios import synthetic as syn

HF_CELL = """\
args = TrainingArguments(
    output_dir="hf_out",
    per_device_train_batch_size=16,
    max_steps=120,
    eval_strategy="steps",
    eval_steps=10,
    report_to=[],
    save_strategy="no",
)
trainer = Trainer(model=model, args=args, train_dataset=train, eval_dataset=val)
trainer.train()
"""
EVAL_LINE = 6 + CELL_LINE_OFFSET  # `eval_steps=10,`


def _steps(n: int, every: int, stall_ms: float) -> StepClockRecord:
    """``n`` steps of ~12 ms (a deterministic wobble), ``stall_ms`` more every ``every``-th
    step (the Trainer evaluates at the end of that step); no wait for a core."""
    rows, t = [], 0.0
    for i in range(n):
        base = 12e-3 * (1.0 + 0.04 * (((i * 7919) % 17) / 8.0 - 1.0))
        dur = base + (stall_ms / 1e3 if i and i % every == 0 else 0.0)
        part = 0.3 * base
        timing = StepTiming(i, t, dur, 3e-4, part, part, part, 1, 1, 16)
        rows.append(dataclasses.replace(timing, wait_s=0.0, cpu_s=dur))
        t += dur
    return StepClockRecord("optimizer", n, tuple(rows))


def _run(cell: str, steps: StepClockRecord) -> Run:
    run = syn.make_run(cell, steps=steps)
    window = ProfileWindow("recorded", 2, 3, first_step=2, recorded_steps=3)
    return dataclasses.replace(run, window=window, first_line=2)


def test_the_evaluation_every_n_steps_of_training_arguments_is_a_periodic_block():
    (block,) = periodic_blocks(scan_source(HF_CELL, line_offset=CELL_LINE_OFFSET).tree)
    assert (block.line, block.every, block.work, block.setting) == (
        EVAL_LINE, 10, "validation", "eval_steps"
    )  # fmt: skip
    assert block.text == "eval_steps=10,"


@pytest.mark.parametrize(
    "cell",
    [
        HF_CELL.replace('eval_strategy="steps"', 'eval_strategy="epoch"'),
        HF_CELL.replace('    eval_strategy="steps",\n', ""),  # HF's default: no evaluation
        HF_CELL.replace("eval_steps=10", "eval_steps=0.1"),  # a share of the run's steps
    ],
)
def test_no_block_where_the_arguments_do_not_evaluate_every_n_steps(cell):
    assert periodic_blocks(scan_source(cell, line_offset=CELL_LINE_OFFSET).tree) == []


def test_saves_every_n_steps_are_a_block_only_where_the_cell_gives_save_steps():
    saving = HF_CELL.replace('save_strategy="no"', "save_steps=200").replace(
        'eval_strategy="steps"', 'eval_strategy="no"'
    )
    (block,) = periodic_blocks(scan_source(saving).tree)
    assert (block.every, block.work, block.setting) == (200, "a checkpoint save", "save_steps")
    default = saving.replace("    save_steps=200,\n", "")  # HF's default 500: not the cell's
    assert periodic_blocks(scan_source(default).tree) == []


def test_the_stalls_every_10_steps_name_eval_steps_and_its_keyword_fix():
    report = build_report(_run(HF_CELL, _steps(120, 10, 150.0)))
    stall = next(f for f in report.findings if f.rule_id == "run.periodic_stall")
    assert stall.title == "Every 10 steps a step stalls (validation)"
    assert stall.line == EVAL_LINE
    assert any(f"line {EVAL_LINE}: `eval_steps=10,`" in e for e in stall.evidence)
    assert "`eval_steps=100`" in stall.fix and "% 100" not in stall.fix


LIGHTNING_CELL = """\
trainer = L.Trainer(
    max_epochs=1,
    val_check_interval=20,
    num_sanity_val_steps=0,
    accelerator="cpu",
)
trainer.fit(SeqNet(), train, val)
"""
VAL_LINE = 3 + CELL_LINE_OFFSET  # `val_check_interval=20,`


def test_a_lightning_validation_every_n_batches_names_val_check_interval():
    # Unseen round 14 (lightning_val_interval): a validation every 20 of 80 batches held about a
    # third of the run; read as "stalls: 2 step(s)" with no finding and no cause named.
    report = build_report(_run(LIGHTNING_CELL, _steps(80, 20, 300.0)))
    stall = next(f for f in report.findings if f.rule_id == "run.periodic_stall")
    assert "(validation)" in stall.title and stall.line == VAL_LINE
    assert "`val_check_interval=200`" in stall.fix and "% 200" not in stall.fix
    assert "check_val_every_n_epoch=None" in stall.fix and "eval_dataset" not in stall.fix


@pytest.mark.parametrize(
    "cell",
    [
        LIGHTNING_CELL.replace("val_check_interval=20", "val_check_interval=0.25"),  # a share
        LIGHTNING_CELL.replace("max_epochs=1,", "max_epochs=1, accumulate_grad_batches=4,"),
        LIGHTNING_CELL.replace("    val_check_interval=20,\n", ""),  # once an epoch
    ],
)
def test_no_lightning_block_where_the_batches_are_not_the_counted_steps(cell):
    assert periodic_blocks(scan_source(cell, line_offset=CELL_LINE_OFFSET).tree) == []
