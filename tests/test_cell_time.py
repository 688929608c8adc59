"""The cell's wall time outside its training steps: the spans before the first step and after the
last (the step clock's), the lines the edge sampler caught in them, and the finding when the
steps are a minority of the cell (issue 26: an evaluation before training that dominated the
cell was weighed nowhere)."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path
from typing import Any

import pytest

from gpu_notebook.analysis.cell_time import cell_time
from gpu_notebook.capture.stacks import _QUIET_MAX_S, StackSampler, _StepGate
from gpu_notebook.capture.threads import live_hidden_threads
from gpu_notebook.records import EDGE_AFTER, EDGE_BEFORE, EDGE_STEPS
from gpu_notebook.rules.cell_time import OUTSIDE_SHARE
from tests.scenarios import synthetic as syn


class _Frame:
    """A frame as the sampler walks it (code, last instruction, caller): a recorded sample."""

    def __init__(self, code: Any, back: Any = None) -> None:
        self.f_code, self.f_lasti, self.f_back = code, 0, back


def test_the_edge_sampler_keeps_the_time_outside_the_steps_and_drops_the_steps():
    """Driven by a recorded sequence of (clock position, stack) samples: before any step, steps
    counted at each DataLoader read (an evaluation over a loader) that the optimizer's steps
    then superseded, the optimizer's steps, and what follows the last of them."""

    def setup() -> None: ...

    def evaluate() -> None: ...

    def step() -> None: ...

    def save() -> None: ...

    segment: list[tuple[str, int]] = [("none", 0)]
    sampler = StackSampler(
        threading.get_ident(), 0.05, root_codes=(), segment_provider=lambda: segment[0]
    )
    sampler._last_sample_ns = now_ns = 1_000_000_000
    sequence = (
        (("none", 0), setup, 3),
        *((("dataloader", i), evaluate, 2) for i in range(1, 5)),  # 4 "steps", 2 samples each
        (("optimizer", 0), step, 1),  # the upgrade: the first optimizer step still open
        *((("optimizer", i), step, 3) for i in range(1, 6)),  # 5 steps, 3 samples each
        (("optimizer", 6), save, 4),  # after the last step's end: the cell ends here
    )
    for position, function, count in sequence:
        segment[0] = position
        for _ in range(count):
            now_ns += 50_000_000
            sampler._sample_frame(_Frame(function.__code__), 0, now_ns)  # type: ignore[arg-type]
    sampler._release_held(final=True)  # what stop() does once the sampler's thread has ended
    raw = sampler._resolve(thread_alive=False)

    by_label: dict[str | None, dict[str, int]] = {}
    for stack in raw.stacks:
        name = raw.functions[stack.frames[-1][0]].function.rsplit(".", 1)[-1]
        counts = by_label.setdefault(stack.phase, {})
        counts[name] = counts.get(name, 0) + stack.count
    assert by_label == {
        EDGE_BEFORE: {"setup": 3, "step": 1},
        EDGE_STEPS + "dataloader": {"evaluate": 8},
        EDGE_AFTER + "optimizer": {"save": 4},
    }, by_label
    # Every sample kept weighs its 50 ms; the optimizer's steps' 15 samples are nowhere.
    assert raw.samples == 16 and raw.time_us == 16 * 50_000


def test_the_step_gate_closes_while_step_marks_come_and_opens_once_they_stop():
    """The gate's decisions at given times (no clock read): closed at each look that saw the
    optimizer's count move and within the quiet span after it, open before any step and under a
    lower anchor (a later optimizer may make those steps the time before the first)."""
    gate = _StepGate(0.05)  # 20 Hz: the quiet span is at least 4 intervals
    assert gate.look(("none", 0), 10.0) == 0.0
    assert gate.look(("dataloader", 5), 10.05) == 0.0
    assert gate.look(("optimizer", 0), 10.1) == 0.0  # the upgrade, before its first step ends
    # The first mark: no period yet, the quiet span is its floor.
    assert gate.look(("optimizer", 1), 10.15) == gate.quiet_s() == pytest.approx(0.2)
    # 40 steps in the 0.2 s to the next look: 5 ms steps, three of them well under the floor.
    assert gate.look(("optimizer", 41), 10.35) == pytest.approx(0.2)
    assert gate.period_s == pytest.approx(0.2 / 40)
    # No new mark, still within the quiet span; then none for longer: the steps have stopped.
    assert gate.look(("optimizer", 41), 10.45) == pytest.approx(0.1)
    assert gate.look(("optimizer", 41), 10.56) == 0.0
    # Long steps (2 s): the quiet span is bounded, the rest of each step is sampled (and dropped).
    assert gate.look(("optimizer", 42), 12.56) == _QUIET_MAX_S
    assert gate.period_s is not None and gate.period_s > 1.0
    assert gate.look(("optimizer", 42), 12.57 + _QUIET_MAX_S) == 0.0
    # The optimizer's hook given up (torch.compile): steps restart under a lower anchor, sampled.
    assert gate.look(("backward", 3), 13.0) == 0.0


class _ScriptedClock:
    """The step clock as the edge sampler reads it, moved by the sampler's own looks (so no
    look can miss a step mark, however loaded the machine): ``before`` looks at no step,
    ``loader`` steps counted at the DataLoader (one a look: an evaluation the optimizer later
    supersedes), then the optimizer's steps, ten a look, until the cell's thread is in its save;
    from then on the count stands: the steps have ended. Records each look: (where the clock
    stood, the samples the sampler had taken before it)."""

    def __init__(self, before: int, loader: int, after: int) -> None:
        self.script = [("none", 0)] * before + [("dataloader", i) for i in range(1, loader + 1)]
        self.after = after
        self.looks: list[tuple[tuple[str, int], int]] = []
        self.sampler: StackSampler | None = None
        self.count = 0
        self.saving = threading.Event()  # the cell's thread is in its save
        self.saved = threading.Event()  # the sampler took `after` samples of the save
        self._save_from: int | None = None

    def __call__(self) -> tuple[str, int]:
        assert self.sampler is not None
        taken = self.sampler.samples_taken
        segment: tuple[str, int]
        if len(self.looks) < len(self.script):
            segment = self.script[len(self.looks)]
        elif not self.saving.is_set() or not self.count:
            self.count += 10
            segment = ("optimizer", self.count)
        else:
            if self._save_from is None:
                self._save_from = taken
            elif taken - self._save_from >= self.after:
                self.saved.set()
            segment = ("optimizer", self.count)
        self.looks.append((segment, taken))
        return segment


def _edge_save(clock: _ScriptedClock, sampler: StackSampler) -> None:
    """The cell's work after its last step: it lasts until the sampler has taken samples of it."""
    clock.saving.set()
    assert clock.saved.wait(120), "the edge sampler never sampled again after the steps"
    sampler.pause()  # here, so that no sample can catch this thread past the save


def test_the_edge_sampler_takes_no_sample_between_the_optimizers_step_marks():
    """Before the first step and under a lower anchor every look samples; while the optimizer's
    marks come no look does (the sampler's own counters); once they stop it samples again, and
    what it took after the last step is that span's, down to the lines that cell_time names."""
    before, loader, after = 3, 4, 5
    clock = _ScriptedClock(before, loader, after)
    sampler = StackSampler(
        threading.get_ident(), 0.005, root_codes=(), cell_filename=__file__, segment_provider=clock
    )
    clock.sampler = sampler
    sampler.start()
    try:
        while len(clock.looks) < len(clock.script) + 4:  # a few looks into the steps
            clock.saved.wait(0.001)
        _edge_save(clock, sampler)
    finally:
        raw = sampler.stop()
    assert not [t for t in live_hidden_threads() if t.name.startswith("gpu_notebook-stacks")]

    # The looks that saw a new optimizer mark: none of them sampled (the next look's count of
    # samples is the same), and none did from the first mark to the last.
    marks = [
        i
        for i, (segment, _) in enumerate(clock.looks)
        if segment[0] == "optimizer" and segment != clock.looks[i - 1][0]
    ]
    first, last = marks[0], marks[-1]
    assert len(marks) >= 4, marks
    assert {taken for _, taken in clock.looks[first : last + 2]} == {before + loader}
    assert sampler.gated_looks >= len(marks)
    # Every sample taken is kept (none fell in the steps) but those that caught the save's
    # thread pausing the sampler (ours, dropped).
    assert raw.samples + raw.own_samples == sampler.samples_taken
    counts: dict[str | None, int] = {}
    for stack in raw.stacks:
        counts[stack.phase] = counts.get(stack.phase, 0) + stack.count
    assert counts.keys() == {EDGE_BEFORE, EDGE_STEPS + "dataloader", EDGE_AFTER + "optimizer"}
    assert counts[EDGE_BEFORE] == before and counts[EDGE_STEPS + "dataloader"] == loader
    assert counts[EDGE_AFTER + "optimizer"] >= after

    # The analysis reads the span after the last step from those samples: the save's line.
    source = Path(__file__).read_text()
    steps = dataclasses.replace(syn.steps_record(10), anchor="optimizer")
    run = dataclasses.replace(syn.make_run(source, steps=steps), edge_stacks=raw, first_line=1)
    ct = cell_time(run)
    assert ct is not None and ct.after_samples == counts[EDGE_AFTER + "optimizer"]
    wait_line = next(
        i for i, text in enumerate(source.splitlines(), 1) if "clock.saved.wait(120)" in text
    )
    assert any(line.line == wait_line and line.share == 1.0 for line in ct.after_lines), ct


def _held_at_stop(moved_on: bool) -> tuple[int, set[str | None]]:
    """Three samples held in the optimizer's step 5, then (``moved_on``) a step mark, then stop."""

    def step() -> None: ...

    segment = [("optimizer", 5)]
    sampler = StackSampler(
        threading.get_ident(), 0.05, root_codes=(), segment_provider=lambda: segment[0]
    ).start(paused=True)  # its thread waits; the samples are given by hand
    for i in range(3):
        sampler._sample_frame(_Frame(step.__code__), 0, 1_000_000_000 + i * 50_000_000)  # type: ignore[arg-type]
    if moved_on:
        segment[0] = ("optimizer", 6)
    raw = sampler.stop()
    return raw.samples, {s.phase for s in raw.stacks}


def test_samples_held_past_a_step_mark_the_sampler_never_looked_at_are_that_steps():
    """A step mark after the last sample (the cell ended before the next look): the samples held
    since the previous mark were inside a step, not after the last one."""
    assert _held_at_stop(moved_on=False) == (3, {EDGE_AFTER + "optimizer"})
    assert _held_at_stop(moved_on=True) == (0, set())


def _warm_optimizer(ip: Any) -> None:
    """The process's first optimizer imports torch._dynamo (seconds on a loaded machine): built
    once beforehand, as an earlier cell of a notebook would have, so that the cell's time before
    its first step is its own work."""
    warm = ip.run_cell("torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)")
    assert warm.success, warm.error_in_exec


EVAL_FIRST_CELL = """%%gpucheck -q -o rep -w 1 -s 1
model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
xv = torch.randn(128, 256)
def evaluate(passes):
    with torch.no_grad():
        return sum(model(xv).argmax(1).sum().item() for _ in range(passes))
score = evaluate(150)
xt, yt = torch.randn(64, 256), torch.randint(0, 10, (64,))
for _ in range(10):
    loss = nn.functional.cross_entropy(model(xt), yt)
    opt.zero_grad(); loss.backward(); opt.step()
"""
EVAL_LINE = 8  # `score = evaluate(150)`, as the notebook numbers it (line 1: %%gpucheck)


def test_an_evaluation_before_training_is_the_cells_time_before_its_first_step(ip):
    # Sized by work, not time: 150 no-grad forwards of 128 rows against 10 training steps of
    # 64 (a forward, a backward twice its cost, an update): the evaluation is about ten times
    # the steps' arithmetic, whatever the machine's speed.
    _warm_optimizer(ip)
    result = ip.run_cell(EVAL_FIRST_CELL)
    assert result.success, result.error_in_exec
    rep = ip.user_ns["rep"]
    run, ct = rep.run, rep.analysis.cell_time
    assert ct is not None
    # The spans are the step clock's, recomputed from the record: the cell's start to the first
    # step's start, that to the last step's end, that to the cell's end.
    steps = run.steps
    assert steps.anchor == "optimizer" and steps.step_count == ct.steps == 10
    assert steps.last_end_s is not None
    assert ct.before_s == steps.steps[0].start_s
    assert ct.after_s == run.wall_s - steps.last_end_s
    assert abs(ct.before_s + ct.steps_s + ct.after_s - run.wall_s) < 1e-9
    # No edge sample fell inside the optimizer's steps: they are dropped as each step ends.
    edges = run.edge_stacks
    assert edges is not None
    labels = {s.phase for s in edges.stacks}
    assert labels <= {EDGE_BEFORE, EDGE_AFTER + "optimizer"}, labels
    # The evaluation's call line holds the samples before the first step (its forwards run
    # under it, inside the cell's own `evaluate`).
    assert ct.before_samples == sum(s.count for s in edges.stacks if s.phase == EDGE_BEFORE) > 0
    assert ct.before_lines and ct.before_lines[0].line == EVAL_LINE, ct.before_lines
    # The finding speaks exactly when the steps are a minority of the cell (recomputed).
    outside = (steps.steps[0].start_s + run.wall_s - steps.last_end_s) / run.wall_s
    finding = next((f for f in rep.findings if f.rule_id == "cell.outside_steps"), None)
    assert (finding is not None) == (outside >= OUTSIDE_SHARE), (outside, rep.findings)
    assert outside >= OUTSIDE_SHARE, "the evaluation's work no longer outweighs the steps'"
    assert finding is not None and finding.line == EVAL_LINE
    assert "evaluation before training" in finding.fix and "No patch" in finding.fix


def test_a_run_without_edge_samples_still_splits_the_cells_wall_time(ip):
    """``--lines off``: no sampler, no lines named; the spans are the step clock's alone."""
    result = ip.run_cell(EVAL_FIRST_CELL.replace("-s 1\n", "-s 1 --lines off\n", 1))
    assert result.success, result.error_in_exec
    rep = ip.user_ns["rep"]
    assert rep.run.edge_stacks is None
    ct = cell_time(rep.run)
    assert ct is not None and ct == rep.analysis.cell_time
    assert ct.before_lines == () and ct.before_samples == 0
    assert ct.before_s == rep.run.steps.steps[0].start_s


LOADER_EVAL_FIRST_CELL = """%%gpucheck -q -o rep -w 1 -s 1
model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
val = DataLoader(TensorDataset(torch.randn(400 * 64, 256), torch.randint(0, 4, (400 * 64,))), batch_size=64)
train = DataLoader(TensorDataset(torch.randn(12 * 64, 256), torch.randint(0, 4, (12 * 64,))), batch_size=64)
def validate():
    with torch.no_grad():
        return sum((model(x).argmax(1) == y).sum().item() for x, y in val)
score = validate()
for x, y in train:
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
"""
VALIDATE_LINE = 9  # `score = validate()`


def test_an_evaluation_over_a_dataloader_before_training_is_before_the_first_step(ip):
    """The step clock first counts the evaluation's 400 DataLoader reads as steps (no optimizer
    yet), goes lean past 64 of them, and must still see the optimizer that comes after: its 12
    steps are the run's, the evaluation's reads the time before the first of them. (It dropped
    the optimizer's hook when it went lean: the report's 412 'steps' were mostly the
    evaluation's, and its window profiled three of them.)"""
    _warm_optimizer(ip)
    result = ip.run_cell(LOADER_EVAL_FIRST_CELL)
    assert result.success, result.error_in_exec
    rep = ip.user_ns["rep"]
    steps = rep.run.steps
    assert (steps.anchor, steps.step_count) == ("optimizer", 12), (steps.anchor, steps.step_count)
    ct = rep.analysis.cell_time
    assert ct is not None and ct.steps == 12 and ct.before_s == steps.steps[0].start_s
    # The evaluation's samples were taken inside steps counted at the DataLoader, which the
    # optimizer superseded: they are the time before the first step, under its call line.
    edges = rep.run.edge_stacks
    assert edges is not None
    before = {EDGE_BEFORE, EDGE_STEPS + "dataloader"}
    assert ct.before_samples == sum(s.count for s in edges.stacks if s.phase in before) > 0
    assert ct.before_lines and ct.before_lines[0].line == VALIDATE_LINE, ct.before_lines
    # The optimizer's steps were timed again after the upgrade: the phases are theirs.
    assert rep.analysis.phases is not None and rep.analysis.phases.share("backward")
    # The window recorded the evaluation's reads: said as work before training, not as a
    # step's micro-batches.
    assert rep.run.window.status == "within-step"
    assert "before training" in (rep.run.window.message or ""), rep.run.window.message


SLOW_TRACEBACK_SETUP = """
class Diverged(Exception):
    def _render_traceback_(self):
        # IPython calls this from showtraceback, inside the cell's run: sized by work, so
        # showing the error outweighs the 10 steps on any machine (a long traceback formatted
        # on a busy one, as a DataLoader worker's error in unseen round 12). ~2 s quiet: at
        # ~0.2 s a quiet machine's edge sampler, which resumes a span or two after the last
        # step, took no sample of it (failed 3/3 alone, once in a quiet fresh-clone CI).
        return [f"Diverged ({sum(i * i for i in range(40_000_000)) % 7})"]
"""
FAILING_CELL = """%%gpucheck -q -o rep -w 1 -s 1
model = nn.Linear(16, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(10):
    loss = model(torch.randn(8, 16)).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
raise Diverged("loss went to nan")
"""


def test_ipython_showing_a_failed_cells_traceback_is_not_the_cells_time_after_its_steps(ip):
    """The edge sampler's tail after the last step holds IPython formatting the cell's
    exception (run_code calls showtraceback): its file is not the cell's (the report named
    "line 2279 ``" of interactiveshell.py as a cell line) and its time is not the cell's code
    (a finding said most of the cell's time was after its steps)."""
    _warm_optimizer(ip)
    assert ip.run_cell(SLOW_TRACEBACK_SETUP).success
    result = ip.run_cell(FAILING_CELL)
    assert type(result.error_in_exec).__name__ == "Diverged"
    rep = ip.user_ns["rep"]
    ct = rep.analysis.cell_time
    assert rep.run.status == "error" and ct is not None and ct.steps == 10
    assert ct.after_samples > 0, "no edge sample caught IPython showing the traceback"
    cell_lines = len(FAILING_CELL.splitlines())
    assert all(1 <= s.line <= cell_lines for s in ct.after_lines), ct.after_lines
    assert 0 < ct.after_error_s <= ct.after_s
    # The finding weighs the cell's own time outside the steps only (recomputed).
    own = (ct.before_s + ct.after_s - ct.after_error_s) / ct.wall_s
    finding = next((f for f in rep.findings if f.rule_id == "cell.outside_steps"), None)
    assert (finding is not None) == (own >= OUTSIDE_SHARE), (own, ct, rep.findings)
    if ct.share(ct.after_error_s) >= 0.1:
        from gpu_notebook.views.text import render_text

        assert "IPython showing the exception" in render_text(rep)
