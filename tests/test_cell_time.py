"""The cell's wall time outside its training steps: the spans before the first step and after the
last (the step clock's), the lines the edge sampler caught in them, and the finding when the
steps are a minority of the cell (issue 26: an evaluation before training that dominated the
cell was weighed nowhere)."""

from __future__ import annotations

import threading
from typing import Any

from gpu_notebook.analysis.cell_time import cell_time
from gpu_notebook.capture.stacks import StackSampler
from gpu_notebook.records import EDGE_AFTER, EDGE_BEFORE, EDGE_STEPS
from gpu_notebook.rules.cell_time import OUTSIDE_SHARE


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
