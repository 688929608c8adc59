"""An ``if step % N == 0:`` block in a loop inside another loop (the batches' loop in the epochs'
loop, the common shape) is one block, whatever N is.

Unseen round 16 (benchmarks/unseen_programs/call_fitter_eval_every_k.py): a class's ``__call__``
loops epochs and batches and runs ``self.evaluate()`` under ``if self.step %
self.eval_every == 0:``. The report read "Every 10 steps a step stalls" and named no line: the
block was found once from each enclosing loop, and two blocks of unknown period (a modulus the
cell does not give) matched none. Recorded step times with planted stalls, and cell sources:
the line is checked against the plant, never against timing."""

from __future__ import annotations

import dataclasses

from gpu_notebook.cell.blocks import periodic_blocks
from gpu_notebook.cell.scan import CELL_LINE_OFFSET, scan_source
from gpu_notebook.records import ProfileWindow, Run, StepClockRecord, StepTiming
from gpu_notebook.report.build import build_report
from tests.scenarios import synthetic as syn

# A training loop in a class's __call__, the period an attribute set at run time.
CLASS_CELL = """\
class Fitter:
    def __call__(self, epochs):
        for _epoch in range(epochs):
            for x, y in self.train_loader:
                loss = loss_fn(self.model(x), y)
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
                self.step += 1
                if self.step % self.eval_every == 0:
                    self.history.append(self.evaluate())

fit = Fitter()
fit(3)
"""
CLASS_LINE = 10 + CELL_LINE_OFFSET

# A second shape: plain nested loops, a checkpoint every `args.save_every` (a config), in a
# while loop inside the epochs' for loop.
CONFIG_CELL = """\
for epoch in range(args.epochs):
    it = iter(train)
    while True:
        try:
            x, y = next(it)
        except StopIteration:
            break
        loss = loss_fn(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        global_step += 1
        if global_step % args.save_every == 0:
            torch.save(model.state_dict(), "ckpt.pt")
"""
CONFIG_LINE = 13 + CELL_LINE_OFFSET


def _steps(n: int, every: int, stall_ms: float) -> StepClockRecord:
    """``n`` steps of ~3 ms (a deterministic wobble), ``stall_ms`` more every ``every`` steps;
    every step its wait for a core (none) and its CPU time read."""
    rows, t = [], 0.0
    for i in range(n):
        base = 3e-3 * (1.0 + 0.04 * (((i * 7919) % 17) / 8.0 - 1.0))
        dur = base + (stall_ms / 1e3 if i % every == every - 1 else 0.0)
        part = 0.3 * base
        timing = StepTiming(i, t, dur, 3e-4, part, part, part, 1, 1, 64)
        rows.append(dataclasses.replace(timing, wait_s=0.0, cpu_s=dur))
        t += dur
    return StepClockRecord("optimizer", n, tuple(rows))


def _run(cell: str, steps: StepClockRecord) -> Run:
    run = syn.make_run(cell, steps=steps)
    window = ProfileWindow("recorded", 2, 3, first_step=2, recorded_steps=3)
    return dataclasses.replace(run, window=window, first_line=2)


def test_a_block_in_the_batches_loop_inside_the_epochs_loop_is_one_block():
    for cell, line in ((CLASS_CELL, CLASS_LINE), (CONFIG_CELL, CONFIG_LINE)):
        blocks = periodic_blocks(scan_source(cell, line_offset=CELL_LINE_OFFSET).tree)
        assert [(b.line, b.every) for b in blocks] == [(line, 0)]  # main: the block twice


def test_the_stalls_name_the_block_of_a_period_set_at_run_time():
    for cell, line, work in (
        (CLASS_CELL, CLASS_LINE, "validation"),
        (CONFIG_CELL, CONFIG_LINE, "a checkpoint save"),
    ):
        report = build_report(_run(cell, _steps(120, 10, 30.0)))
        stall = next(f for f in report.findings if f.rule_id == "run.periodic_stall")
        assert stall.title.startswith("Every 10 steps"), stall.title
        assert stall.line == line, (stall.title, stall.evidence)  # main: no line
        assert work in stall.title, stall.title
