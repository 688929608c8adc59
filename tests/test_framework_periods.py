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


# Unseen round 15 (nb 31): the cell's own torch.profiler on a schedule records 4 of every 8
# steps and hands each cycle to its on_trace_ready at the cycle's end; those steps stall every
# 8 steps, read as "Every 8 steps a step stalls" [high] with the advice to make checkpoints
# cheaper, with no cause named.
PROFILER_CELL = """\
with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=2, warmup=2, active=4, repeat=3), on_trace_ready=on_ready) as prof:
    it = iter(loader)
    for step in range(len(loader)):
        with record_function('data'):
            x, y = next(it)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(); loss.backward()
        opt.step()
        prof.step()
"""
PROFILER_LINE = 1 + CELL_LINE_OFFSET


def _cycle_steps(n: int, every: int, cycles: int, stall_ms: float) -> StepClockRecord:
    """``_steps`` whose stalls stop after ``cycles`` cycles (the schedule's ``repeat``)."""
    steps = _steps(n, every, stall_ms)
    rows = []
    for row in steps.steps:
        if row.index > every * cycles and row.index % every == 0:
            base = row.duration_s - stall_ms / 1e3
            row = dataclasses.replace(row, duration_s=base, cpu_s=base)
        rows.append(row)
    return dataclasses.replace(steps, steps=tuple(rows))


def test_a_profiler_schedule_of_the_cell_is_a_periodic_block_of_its_cycle():
    (block,) = periodic_blocks(scan_source(PROFILER_CELL, line_offset=CELL_LINE_OFFSET).tree)
    assert (block.line, block.every, block.work, block.setting) == (
        PROFILER_LINE, 8, "the cell's own torch.profiler", "schedule"
    )  # fmt: skip
    assert "schedule(wait=2, warmup=2, active=4, repeat=3)" in block.text  # its line


@pytest.mark.parametrize(
    ("cell", "every"),
    [
        # A schedule made apart from the profiler, its parts named by constants of the cell.
        (
            "w = 1\nsched = torch.profiler.schedule(skip_first=3, wait=w, warmup=1, active=3)\n"
            "prof = torch.profiler.profile(schedule=sched)\nprof.start()\n"
            "for x, y in loader:\n    train_step(x, y)\n    prof.step()\nprof.stop()\n",
            5,
        ),
        # A part the cell does not give (a config): a period set at run time.
        (
            "with profile(schedule=schedule(wait=cfg.wait, warmup=1, active=2)) as p:\n"
            "    for x, y in loader:\n        train_step(x, y)\n        p.step()\n",
            0,
        ),
    ],
)
def test_profiler_schedules_of_other_shapes_are_blocks_too(cell, every):
    (block,) = periodic_blocks(scan_source(cell).tree)
    assert (block.every, block.setting) == (every, "schedule")


def test_a_schedule_that_is_not_torchs_profiler_is_no_block():
    cell = "lr = schedule(base=0.1, steps=100)\nfor x, y in loader:\n    train_step(x, y, lr)\n"
    assert periodic_blocks(scan_source(cell).tree) == []


@pytest.mark.parametrize("cycles", [3, 12])  # repeat=3 of a 96-step run; a profiler to the end
def test_the_stalls_of_the_cells_own_profiler_name_it_and_no_checkpoint(cycles):
    report = build_report(_run(PROFILER_CELL, _cycle_steps(96, 8, cycles, 150.0)))
    stall = next(f for f in report.findings if f.rule_id == "run.periodic_stall")
    assert stall.title == "Every 8 steps a step stalls (the cell's own torch.profiler)"
    assert stall.line == PROFILER_LINE and stall.severity == "low"
    assert any("on_trace_ready" in e for e in stall.evidence)
    assert "checkpoint" not in stall.fix and "`profile(...)`" in stall.fix
    assert "% 80" not in stall.fix and "schedule=80" not in stall.fix
