"""Rules: the source scan, live objects, each rule's trigger/evidence/bound, ranking and fixes.

GPU-only rules run on synthetic records (tests/scenarios/synthetic.py) and on the Analysis of
real-GPU reference traces; CPU rules also run end to end in tests/scenarios/.
"""

from __future__ import annotations

import dataclasses

import pytest

from gpu_notebook.analysis.analyze import with_run_figures
from gpu_notebook.analysis.steady import without_stalls
from gpu_notebook.analysis.verdict import amdahl_bound
from gpu_notebook.cell.facts import SourceFacts
from gpu_notebook.cell.live import LiveFacts, live_facts
from gpu_notebook.cell.scan import scan_source
from gpu_notebook.fixes import Refusal, apply_fix
from gpu_notebook.records import (
    CopyStats,
    Finding,
    FunctionStat,
    LineStat,
    OpStat,
    RunPhase,
    StackProfile,
)
from gpu_notebook.rules import cell_facts, rank_key, run_rules
from gpu_notebook.words import word_findings as words
from gpu_notebook.words.proposals import attach_fixes, rebuild_loader_source
from tests.scenarios import synthetic as syn

A100 = syn.gpu()
V100 = syn.gpu("Tesla V100-SXM2-32GB", "7.0", 32)
P100 = syn.gpu("Tesla P100", "6.0", 16)

TRAIN = """\
model = Net(); opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
loader = DataLoader(ds, batch_size=32)
for x, y in loader:
    x = x.to(device)
    loss = loss_fn(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
"""


def rules_for(run, analysis, **kw):
    return words(run_rules(run, analysis, syn.VERDICT, **kw))


def ids(findings) -> list[str]:
    return [f.rule_id for f in findings]


def only(findings, rule_id: str) -> Finding:
    hits = [f for f in findings if f.rule_id == rule_id]
    assert len(hits) == 1, ids(findings)
    return hits[0]


# ============================================================================ source scan


def test_lines_are_notebook_lines_even_after_a_multiline_shell_escape():
    src = "!echo \\\n  two lines\n%time x = 1\nfor s in range(3):\n    v = loss.item()\n"
    facts = scan_source(src, line_offset=1)  # the %%gpucheck line is line 1
    assert facts.parsed
    assert [(s.line, s.kind) for s in facts.syncs] == [(6, "item")]
    assert facts.loops[0].line == 5


def test_per_step_reads_and_logs_are_found_and_gated_ones_flagged():
    src = """\
for step, (x, y) in enumerate(loader):
    out = model(x)
    loss = loss_fn(out, y)
    loss.backward()
    losses.append(loss.item())
    acc = float(out.mean())
    print(f"loss {loss}")
    print("epoch", step)
    logger.info("done %d", step)
    if step % 10 == 0:
        print(loss.item())
    preds = out.cpu()
    msg = f"{loss:.3f}"
"""
    facts = scan_source(src)
    kinds = {(s.line, s.kind, s.gated) for s in facts.syncs}
    assert kinds == {
        (5, "item", False), (6, "float", False), (7, "print-tensor", False),
        (11, "item", True), (12, "cpu", False), (13, "fstring-tensor", False),
    }  # fmt: skip
    # print of the step counter and a logger call read no tensor: logging, not syncs
    assert [(s.line, s.kind) for s in facts.logging] == [(8, "print"), (9, "logger")]
    assert [s.line for s in facts.per_step(facts.syncs)] == [5, 6, 7, 12, 13]


def test_per_epoch_work_is_not_per_step_and_nested_loops_are():
    src = """\
for epoch in range(3):
    for x, y in loader:
        loss = loss_fn(model(x), y); loss.backward(); opt.step()
        for p in model.parameters():
            norms.append(p.grad.norm().item())
        if i % 100 == 0:
            for p in model.parameters():
                print(p.grad.norm().item())
    print(f"epoch {epoch}: {loss.item()}")
    model.eval()
    evaluate(model, val_loader)
"""
    facts = scan_source(src)
    from gpu_notebook.rules.syncs import loop_lines

    # line 5 runs for every parameter of every step; line 8 only every 100 steps; line 9 per epoch
    assert [s.line for s in loop_lines(facts, facts.syncs)] == [5]
    assert facts.validation == ()  # validation once per epoch is the advice, not a finding


def test_dataloader_arguments_literal_default_and_opaque():
    src = """\
a = DataLoader(ds, batch_size=16, num_workers=4, pin_memory=True, persistent_workers=True)
b = torch.utils.data.DataLoader(ds, 8)
c = DataLoader(ds, **cfg)
d = DataLoader(ds, batch_size=bs, num_workers=n)
"""
    a, b, c, d = scan_source(src).loaders
    assert (a.name, a.num_workers, a.pin_memory, a.persistent_workers, a.batch_size) == (
        "a",
        4,
        True,
        True,
        16,
    )
    assert (b.num_workers, b.pin_memory, b.batch_size, b.dataset) == (
        0,
        False,
        8,
        "ds",
    )  # torch defaults
    assert c.num_workers is None  # **cfg may set anything
    assert d.num_workers is None and d.batch_size is None  # names, not literals


def test_validation_inside_the_training_loop_and_its_gate():
    src = """\
loss_fn = nn.CrossEntropyLoss()
for step, (x, y) in enumerate(train_loader):
    loss = loss_fn(model(x), y); loss.backward(); opt.step()
    model.eval()
    with torch.no_grad():
        v = [model(a) for a, _ in val_loader]
    if step % 100 == 0:
        evaluate(model, test_loader)
    model.train()
"""
    facts = scan_source(src)
    found = {(s.line, s.kind, s.gated) for s in facts.validation}
    assert found == {
        (4, "eval", False),
        (5, "no_grad", False),
        (6, "val-loop", False),
        (8, "val-call", True),
    }


@pytest.mark.parametrize(
    "update",
    ["w -= 0.01 * w.grad", "w.add_(w.grad, alpha=-0.01)", "w.data = w.data - 0.01 * w.grad",
     "for p in params: p.sub_(0.01 * p.grad)"],
)  # fmt: skip
def test_a_manual_update_under_no_grad_is_not_validation(update):
    src = f"for x, y in loader:\n    loss = f(x, y); loss.backward()\n    with torch.no_grad():\n        {update}\n"
    assert scan_source(src).validation == ()
    assert [v.kind for v in scan_source(src.replace(update, "val = model(x)")).validation] == [
        "no_grad"
    ]


@pytest.mark.parametrize(
    "block",
    ["with torch.no_grad():\n        target = teacher(x)",
     "with torch.inference_mode():\n        target, _ = teacher(x).chunk(2, dim=1)",
     "with torch.no_grad():\n        if ema:\n            target = teacher(x).detach()"],
)  # fmt: skip
def test_a_no_grad_forward_the_loss_reads_is_training_not_validation(block):
    # Issue 26 (unseen round 5): a student/teacher loop computes the teacher's targets under
    # no_grad every step (self-distillation, EMA teachers, BYOL, DINO). It was told "[low]
    # Validation runs inside every training step: put the validation block under `if step % 10
    # == 0:`": the loss reads those targets every step, so the advice would break training.
    src = (
        "for x, y in loader:\n"
        f"    {block}\n"
        "    loss = loss_fn(student(x), target)\n"
        "    opt.zero_grad(); loss.backward(); opt.step()\n"
        "    with torch.no_grad():\n"
        "        val = student(xv)\n"
        "    print(val.mean())\n"
    )
    val_line = src.splitlines().index("        val = student(xv)")  # its `with` line, 1-based
    assert [(v.kind, v.line) for v in scan_source(src).validation] == [("no_grad", val_line)]


def test_inference_loops_with_and_without_grad_mode():
    plain = "model = Net()\nfor x in batches:\n    outs.append(model(x))\n"
    guarded = "model = Net()\nwith torch.no_grad():\n    for x in batches:\n        outs.append(model(x))\n"
    decorated = "model = Net()\n@torch.inference_mode()\ndef run():\n    for x in batches:\n        model(x)\n"
    assert [s.line for s in scan_source(plain).inference_loops] == [2]
    assert scan_source(guarded).inference_loops == ()
    assert scan_source(decorated).inference_loops == ()
    # A name is a model when the namespace says so, even if the cell never builds it.
    assert scan_source("for x in b:\n    f(x)\n").inference_loops == ()
    assert len(scan_source("for x in b:\n    f(x)\n", model_names=["f"]).inference_loops) == 1


def test_flags_and_constructs():
    src = """\
torch.backends.cudnn.benchmark = False
torch.set_float32_matmul_precision("high")
scaler = torch.cuda.amp.GradScaler()
model = nn.DataParallel(nn.Conv2d(3, 8, 3))
cmodel = torch.compile(model)
opt = torch.optim.SGD(model.parameters(), lr=0.1, fused=True)
for x in loader:
    with torch.autocast("cuda"):
        y = cmodel(x.to("cuda", non_blocking=True))
"""
    f = scan_source(src)
    assert (
        f.cudnn_benchmark is False
        and f.tf32 is True
        and f.grad_scaler
        and f.autocast
        and f.compiled
    )
    assert [s.line for s in f.data_parallel] == [4] and f.convolutions
    assert f.optimizers[0].cls == "SGD" and f.optimizers[0].fused is True
    assert f.blocking_copies == () and f.non_blocking_copies == 1


def test_a_cell_that_is_not_python_is_reported_not_raised():
    assert scan_source("%%bash\nls").parsed is False
    broken = scan_source("for x in :\n    pass\n")
    assert broken.parsed is False and "not valid Python" in (broken.parse_error or "")


# ============================================================================ live objects


@pytest.fixture
def torch_ns():
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader, RandomSampler, TensorDataset

    ds = TensorDataset(torch.arange(40.0).reshape(20, 2))
    return {
        "torch": torch,
        "plain": DataLoader(ds, batch_size=4),
        "shuffled": DataLoader(ds, batch_size=5, shuffle=True, drop_last=True),
        "custom": DataLoader(ds, batch_size=2, sampler=RandomSampler(ds, num_samples=6)),
        "net": torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3)),
        "opt": torch.optim.SGD([torch.nn.Parameter(torch.zeros(2))], lr=0.1),
    }


def test_live_facts_read_loader_model_and_optimizer(torch_ns):
    facts = live_facts(torch_ns, ["plain", "shuffled", "custom", "net", "opt", "missing"])
    plain, shuffled, custom = (facts.loader(n) for n in ("plain", "shuffled", "custom"))
    assert plain and (plain.num_workers, plain.batch_size, plain.shuffle) == (0, 4, False)
    assert shuffled and (shuffled.shuffle, shuffled.drop_last) == (True, True)
    assert custom and custom.shuffle is None
    assert plain.dataset_type == "TensorDataset" and plain.dataset_len == 20
    (net,) = facts.models
    assert net.has_conv and net.training and not net.data_parallel
    assert facts.optimizers[0].type_name == "SGD"
    assert live_facts(torch_ns, ["nothing"]).loaders == ()
    assert live_facts(None, ["plain"]) == LiveFacts()


@pytest.mark.parametrize("name", ["plain", "shuffled", "custom"])
def test_rebuilt_loader_keeps_data_and_order_settings_and_changes_workers(torch_ns, name):
    loader = live_facts(torch_ns, [name]).loader(name)
    code = rebuild_loader_source(loader, num_workers=2, pin_memory=False, persistent_workers=True)
    ns = dict(torch_ns)
    exec(compile(code, "<fix>", "exec"), ns)
    old, new = torch_ns[name], ns[name]
    assert new is not old and new.dataset is old.dataset
    assert (new.num_workers, new.persistent_workers) == (2, True)
    assert (new.batch_size, new.drop_last, type(new.sampler)) == (
        old.batch_size,
        old.drop_last,
        type(old.sampler),
    )
    if name == "plain":  # sequential: same batches in the same order
        assert [b[0].tolist() for b in new] == [b[0].tolist() for b in old]


# ============================================================================ input rules


def test_input_rule_fires_with_the_amdahl_bound_of_the_data_share():
    run = syn.make_run(TRAIN, cpu_count=8)
    analysis = syn.make_analysis({"data": 0.40})
    f = only(rules_for(run, analysis), "input.loader_workers")
    assert f.severity == "high" and f.phase_share == pytest.approx(0.40)
    # 10 ms steps, 4 ms loading: the main process still runs 6 ms plus each batch's handoff.
    assert f.gain_bound == pytest.approx(10.0 / (6.0 + 0.5)) and f.gain_bound < amdahl_bound(0.40)
    assert f.line == 3 and f.fix_id == "dataloader_workers"
    assert f.fix_params["num_workers"] == 6  # ceil(70% of 8 cores)
    assert f.fix_params["pin_memory"] is False  # nothing to pin for without a GPU


def busy(analysis, process_cpu_pct):
    util = dataclasses.replace(analysis.utilization, process_cpu_mean_pct=process_cpu_pct)
    return dataclasses.replace(analysis, utilization=util)


def test_workers_are_bounded_by_the_cores_and_the_per_batch_cost():
    # 9 ms loading + 1 ms model per 10 ms step, one core busy throughout (p = 100%), 2 cores.
    # Without a GPU: at least 8 of the 9 ms are CPU work, which 2 cores share beside the model's
    # 1 ms: 1 + 8/2 = 5 ms. Amdahl over the data share would say 10x.
    analysis = busy(syn.make_analysis({"data": 0.90}), 100.0)
    f = only(rules_for(syn.make_run(TRAIN, cpu_count=2), analysis), "input.loader_workers")
    assert f.fix_params["num_workers"] == 2
    assert f.gain_bound == pytest.approx(2.0)
    assert any("8.00 ms of it CPU work" in e and "2 core(s)" in e for e in f.evidence)
    # With a GPU all 10 ms of CPU work per step spread over 2 cores: 2x at most.
    g = only(
        rules_for(syn.make_run(TRAIN, cpu_count=2, gpus=[A100]), analysis), "input.loader_workers"
    )
    assert g.gain_bound == pytest.approx(2.0)
    # 16 cores and a GPU: the rest of the step (1 ms) plus the handoff decides.
    h = only(
        rules_for(syn.make_run(TRAIN, cpu_count=16, gpus=[A100]), analysis), "input.loader_workers"
    )
    assert h.gain_bound == pytest.approx(10.0 / 1.5)
    # A loader that sleeps (file reads): the process barely used the CPU, the cores cap nothing,
    # but each of the 2 workers takes the 9 ms a batch: one every 4.5 ms at best (not the rest
    # and the handoff's 1.5 ms).
    idle = busy(syn.make_analysis({"data": 0.90}), 10.0)
    k = only(rules_for(syn.make_run(TRAIN, cpu_count=2), idle), "input.loader_workers")
    assert k.gain_bound == pytest.approx(10.0 / 4.5)


@pytest.mark.parametrize(
    "cell",
    [
        TRAIN.replace("DataLoader(ds,", "DataLoader(TensorDataset(X, Y),"),
        "ds = torch.utils.data.TensorDataset(X, Y)\n" + TRAIN,
    ],
)
def test_no_workers_for_an_in_memory_tensor_dataset(cell):
    findings = rules_for(syn.make_run(cell, cpu_count=8), syn.make_analysis({"data": 0.40}))
    assert "input.loader_workers" not in ids(findings)
    f = only(findings, "input.in_memory_batches")
    assert f.fix_id is None and "BatchSampler" in f.fix and "TensorDataset" in " ".join(f.evidence)


@pytest.mark.parametrize(
    ("loader", "sampler", "drop_last", "order"),
    [
        (
            "DataLoader(ds, batch_size=32, shuffle=True)",
            "RandomSampler(ds)",
            "drop_last=False",
            "randperm",
        ),
        (
            "DataLoader(ds, batch_size=32, drop_last=True)",
            "SequentialSampler(ds)",
            "drop_last=True",
            "arange",
        ),
        (
            "DataLoader(ds, 32, False, drop_last=True)",
            "SequentialSampler(ds)",
            "drop_last=True",
            "arange",
        ),
    ],
)
def test_whole_batches_keep_the_loaders_order_and_last_batch(loader, sampler, drop_last, order):
    # Issue 26 (unseen round 4): a TensorDataset(X, Ya, Yb) loader with drop_last=True (a
    # OneCycleLR sized by len(loader), a BatchNorm that cannot take a batch of 1) was told
    # `BatchSampler(RandomSampler(ds), drop_last=False)` and `x, y = X[idx], Y[idx]`: the advice
    # changed the program's order and batches unsaid, and named a tensor it does not have.
    cell = "ds = TensorDataset(X, Ya, Yb)\n" + TRAIN.replace(
        "DataLoader(ds, batch_size=32)", loader
    )
    findings = rules_for(syn.make_run(cell, cpu_count=8), syn.make_analysis({"data": 0.40}))
    fix = only(findings, "input.in_memory_batches").fix
    assert f"BatchSampler({sampler}, batch_size=32, {drop_last})" in fix
    assert f"torch.{order}(len(ds))" in fix and "ds.tensors" in fix and "Y[idx]" not in fix
    assert ("shorter than 32" in fix) == (drop_last == "drop_last=True")


SAMPLER_TRAIN = """\
class Balanced(Sampler):
    def __iter__(self):
        for _ in range(self.n):
            yield random.choices(self.pop, weights=self.w)[0]
""" + TRAIN.replace("DataLoader(ds, batch_size=32)", "DataLoader(TensorDataset(X, Y), LOADER)")


@pytest.mark.parametrize(
    ("loader", "kept"),
    [
        ("batch_size=32, sampler=Balanced(w)", "sampler=BatchSampler(Balanced(w), batch_size=32"),
        ("32, False, Balanced(w)", "sampler=BatchSampler(Balanced(w), batch_size=32"),
        ("batch_sampler=ByClass(Y, 32)", "sampler=ByClass(Y, 32), batch_size=None"),
    ],
)
def test_whole_batches_keep_the_users_own_sampler(loader, kept):
    # Issue 26 (unseen python_sampler.py): a TensorDataset read through the user's balancing
    # sampler was told `BatchSampler(RandomSampler(ds) ...)` or `torch.randperm(len(ds))`: the
    # advice dropped the sampler that decides what the model trains on.
    cell = SAMPLER_TRAIN.replace("LOADER", loader)
    findings = rules_for(syn.make_run(cell, cpu_count=8), syn.make_analysis({"data": 0.40}))
    fix = only(findings, "input.in_memory_batches").fix
    assert kept in fix and "RandomSampler" not in fix and "randperm" not in fix


def test_a_wait_in_the_users_sampler_names_the_sampler_not_the_datasets_reads():
    # Issue 26 (unseen python_sampler.py): random.choices over every weight for each index in
    # the sampler's __iter__ held 7 of the data wait's 8 stack samples; the finding blamed the
    # TensorDataset's per-sample reads. The sampler runs in the main process: it is named (its
    # line, its hot line), workers are not offered, and the advice keeps it.
    cell = SAMPLER_TRAIN.replace("LOADER", "batch_size=32, sampler=Balanced(w)")
    hot = LineStat(5, "            yield random.choices(self.pop, weights=self.w)[0]", 7, 0.6,
                   {"data": 7})  # fmt: skip
    functions = (
        FunctionStat("Balanced.__iter__", "cell", 3, 1, 7),
        FunctionStat("_BaseDataLoaderIter.__next__", "torch/utils/data/dataloader.py", 720, 0, 8),
    )
    stacks = StackProfile(0.005, 12, 0.06, lines=(hot,), functions=functions)
    analysis = dataclasses.replace(syn.make_analysis({"data": 0.80}), stacks=stacks)
    findings = rules_for(syn.make_run(cell, cpu_count=8), analysis)
    assert "input.loader_workers" not in ids(findings)
    f = only(findings, "input.in_memory_batches")
    evidence = " ".join(f.evidence)
    assert "`Balanced.__iter__` (line 3; line 5 `yield random.choices" in evidence
    assert "7 of the 8" in evidence and "one sample at a time" not in evidence
    assert "keep your sampler" in f.fix and "Balanced.__iter__" in f.fix
    assert "BatchSampler" not in f.fix and "num_workers=0" in f.fix
    # Only the sampler's share of the wait is what changing it can remove.
    assert f.gain_bound == pytest.approx(amdahl_bound(0.80 * 7 / 8), rel=0.05)
    # The functions kept are the top ones by self time: with neither __iter__ nor __next__
    # among them (a whole-cell sampling), the lines' data samples say the same.
    loop = LineStat(7, "for x, y in loader:", 8, 0.7, {"data": 8})
    by_lines = StackProfile(0.005, 12, 0.06, lines=(hot, loop))
    named = rules_for(
        syn.make_run(cell, cpu_count=8), dataclasses.replace(analysis, stacks=by_lines)
    )
    assert "`Balanced.__iter__` (line 3; line 5 `yield" in " ".join(
        only(named, "input.in_memory_batches").evidence
    )
    # 3 of 8 of the wait's samples in the sampler show neither (up to 69% of it): cannot tell.
    few = StackProfile(0.005, 12, 0.06, lines=(dataclasses.replace(hot, samples=3,
                       phase_samples={"data": 3}), loop))  # fmt: skip
    other = rules_for(syn.make_run(cell, cpu_count=8), dataclasses.replace(analysis, stacks=few))
    unsure = only(other, "input.in_memory_batches")
    assert "cannot tell" in unsure.title and "3 of the 8" in " ".join(unsure.evidence)
    # Shown to hold under half (3 of 20: at most 33%): the dataset's reads are named.
    many = dataclasses.replace(few, lines=(few.lines[0], dataclasses.replace(
        loop, samples=20, phase_samples={"data": 20})))  # fmt: skip
    other = rules_for(syn.make_run(cell, cpu_count=8), dataclasses.replace(analysis, stacks=many))
    assert "one sample at a time" in " ".join(only(other, "input.in_memory_batches").evidence)


def test_workers_are_not_credited_with_the_wait_of_a_users_sampler():
    # The same sampler over a dataset that is not in memory: workers may hide the reads, never
    # the sampler's time (it runs in the main process). The sampler is named, and the workers'
    # bound covers only the rest of the wait.
    cell = SAMPLER_TRAIN.replace(
        "TensorDataset(X, Y), LOADER", "ds, batch_size=32, sampler=Balanced(w)"
    )
    functions = (
        FunctionStat("Balanced.__iter__", "cell", 3, 1, 7),
        FunctionStat("_BaseDataLoaderIter.__next__", "torch/utils/data/dataloader.py", 720, 0, 8),
    )
    stacks = StackProfile(0.005, 12, 0.06, functions=functions)
    analysis = dataclasses.replace(syn.make_analysis({"data": 0.80}), stacks=stacks)
    findings = rules_for(syn.make_run(cell, cpu_count=8), analysis)
    f = only(findings, "input.in_memory_batches")
    assert f.fix.startswith("Keep your sampler: make the sampler's `Balanced.__iter__` (line 3)")
    assert "TensorDataset" not in " ".join(f.evidence)
    workers = only(findings, "input.loader_workers")
    assert workers.gain_bound is not None
    assert workers.gain_bound <= amdahl_bound(0.80 / 8) + 1e-9


def test_no_workers_when_a_batch_loads_faster_than_a_worker_hands_it_over():
    split = syn.phases({"data": 0.30}, step_us=1000.0)  # 0.3 ms a batch
    findings = rules_for(syn.make_run(TRAIN, cpu_count=8), syn.make_analysis(phase_split=split))
    assert "input.loader_workers" not in ids(findings)
    assert "0.30 ms" in " ".join(only(findings, "input.in_memory_batches").evidence)


def test_a_fast_batch_of_a_dataset_of_its_own_is_not_told_to_index_as_a_tensor_dataset():
    # Issue 26: a padded-sequence dataset of the user's own class (one sample per __getitem__,
    # a collate_fn that pads) was told to pass a BatchSampler with batch_size=None, "a
    # TensorDataset takes a list of indices": its __getitem__ does not, and its collate_fn would
    # get a whole batch as one sample. The DataLoader's own door for that is __getitems__.
    cell = "class Tokens(Dataset):\n    def __getitem__(self, i): return seqs[i]\n" + TRAIN.replace(
        "DataLoader(ds, batch_size=32)", "DataLoader(Tokens(), batch_size=32, collate_fn=pad)"
    )
    split = syn.phases({"data": 0.30}, step_us=1000.0)  # 0.3 ms a batch
    findings = rules_for(syn.make_run(cell, cpu_count=8), syn.make_analysis(phase_split=split))
    f = only(findings, "input.in_memory_batches")
    assert "TensorDataset" not in f.fix and "BatchSampler" not in f.fix
    assert "__getitems__" in f.fix and "num_workers=0" in f.fix


def test_live_tensor_dataset_is_known_by_its_type(torch_ns):
    import torch

    ns = {"ds": torch.utils.data.TensorDataset(torch.zeros(4, 2)), "X": torch.zeros(3)}
    assert live_facts(ns, ["ds", "X"]).dataset_types == (("ds", "TensorDataset"),)


@pytest.mark.parametrize(
    "data, severity", [(0.04, None), (0.06, "low"), (0.12, "medium"), (0.25, "high")]
)
def test_input_severity_follows_the_published_levels(data, severity):
    # 100 ms steps: a worker's handoff of a batch (0.5 ms) is small beside the wait.
    analysis = syn.make_analysis(phase_split=syn.phases({"data": data}, step_us=100_000.0))
    found = [
        f for f in rules_for(syn.make_run(TRAIN), analysis) if f.rule_id == "input.loader_workers"
    ]
    assert [f.severity for f in found] == ([severity] if severity else [])


def test_input_rule_is_silent_when_data_wait_was_not_measured():
    split = syn.phases({}, measured=("forward", "backward", "optimizer", "other"), source="hooks")
    findings = rules_for(syn.make_run(TRAIN), syn.make_analysis(phase_split=split))
    assert not [f for f in findings if f.rule_id.startswith("input.")]


def test_enough_workers_turns_the_diagnosis_to_the_dataset():
    cell = TRAIN.replace("batch_size=32)", "batch_size=32, num_workers=8)")
    findings = rules_for(syn.make_run(cell, cpu_count=8), syn.make_analysis({"data": 0.30}))
    assert "input.loader_workers" not in ids(findings)
    slow = only(findings, "input.slow_dataset")
    assert "persistent_workers=True" in slow.fix and slow.fix_id is None


def test_cpu_saturated_while_gpu_idles():
    series = syn.samples([(97.0, 3.0)] * 6 + [(50.0, 80.0)] * 2)
    run = syn.make_run(TRAIN, gpus=[A100], series=series)
    f = only(rules_for(run, syn.make_analysis({"data": 0.3})), "input.cpu_saturated")
    assert f.severity == "high" and "75% of 8 samples" in f.evidence[0]
    calm = syn.make_run(
        TRAIN, gpus=[A100], series=syn.samples([(97.0, 3.0)] * 3 + [(50.0, 80.0)] * 5)
    )
    assert "input.cpu_saturated" not in ids(rules_for(calm, syn.make_analysis({"data": 0.3})))


def test_busy_cores_that_are_the_main_process_s_own_threads_are_not_a_cpu_bottleneck():
    # The H200 host's reading (tests/test_recorded_h200_script.py) on 8 cores: the machine
    # 97% busy while the GPU idles, but this process's own threads hold 7.6 of the 8 cores
    # (torch's intra-op pool) and the loader has no workers. Loading is serial in one process:
    # workers are the fix, not more cores per GPU.
    def series(process_pct: float):
        base = syn.samples([(97.0, 3.0)] * 6 + [(50.0, 80.0)] * 2)
        ticks = tuple(dataclasses.replace(t, process_cpu_pct=process_pct) for t in base.samples)
        return dataclasses.replace(base, samples=ticks)

    own = syn.make_run(TRAIN, gpus=[A100], series=series(760.0))
    found = rules_for(own, syn.make_analysis({"data": 0.3}))
    assert "input.cpu_saturated" not in ids(found) and "input.loader_workers" in ids(found)
    # The same busy machine with workers that load: the cores are the pipeline's, the rule
    # speaks (more cores per GPU, or the work moved to the GPU).
    loading = TRAIN.replace("batch_size=32)", "batch_size=32, num_workers=8)")
    with_workers = syn.make_run(loading, gpus=[A100], series=series(760.0))
    f = only(rules_for(with_workers, syn.make_analysis({"data": 0.3})), "input.cpu_saturated")
    assert f.severity == "high"
    # Others' load (this process at one core) keeps the rule with a 0-worker loader too.
    others = syn.make_run(TRAIN, gpus=[A100], series=series(100.0))
    assert "input.cpu_saturated" in ids(rules_for(others, syn.make_analysis({"data": 0.3})))


# ============================================================================ copies


def test_pageable_copies_point_at_pinned_memory_with_the_copy_share_bound():
    tl = syn.timeline(
        busy=0.6, copies=(CopyStats("HtoD (Pageable -> Device)", 40, 8000.0, 40 * 2**20),)
    )
    f = only(
        rules_for(
            syn.make_run(TRAIN, gpus=[A100]), syn.make_analysis({"copy": 0.15}, gpu_timeline=tl)
        ),
        "copies.pageable",
    )
    assert f.severity == "medium" and f.gain_bound == pytest.approx(amdahl_bound(0.15))
    assert f.fix_id == "dataloader_workers" and f.fix_params["num_workers"] is None  # pin only
    pinned = syn.timeline(copies=(CopyStats("HtoD (Pinned -> Device)", 40, 8000.0, None),))
    assert "copies.pageable" not in ids(
        rules_for(
            syn.make_run(TRAIN, gpus=[A100]), syn.make_analysis({"copy": 0.15}, gpu_timeline=pinned)
        )
    )


def test_a_copy_the_profiler_does_not_slow_is_read_against_an_unprofiled_step():
    """Traced steps of 10 ms hold 5 ms of copies; the run's median step is 6 ms (the profiler
    lengthened the small operators around the copy, not the copy): the bound rests on 5 of 6
    ms, the low end on the traced share (the H200 kit: 3.52x bound, measured 6.76x)."""
    tl = syn.timeline(
        busy=0.05, copies=(CopyStats("HtoD (Pageable -> Device)", 40, 8000.0, 40 * 2**20),)
    )
    window = syn.phase_window([(10_000.0, 5_000.0)] * 3, phase="copy")
    traced = syn.make_analysis(phase_split=window, gpu_timeline=tl, step_median_s=0.010)
    lean = syn.make_analysis(phase_split=window, gpu_timeline=tl, step_median_s=0.006)
    run = syn.make_run(TRAIN, gpus=[A100])
    f = only(rules_for(run, traced), "copies.pageable")
    assert f.gain_bound == pytest.approx(amdahl_bound(0.5))
    f = only(rules_for(run, lean), "copies.pageable")
    assert f.gain_bound == pytest.approx(amdahl_bound(5 / 6))
    assert f.bound_low is not None and f.bound_low < amdahl_bound(5 / 6)
    assert any("of an unprofiled step" in e for e in f.evidence)
    # A run whose steps are longer than the traced ones: the traced share stands.
    slow = syn.make_analysis(phase_split=window, gpu_timeline=tl, step_median_s=0.020)
    assert only(rules_for(run, slow), "copies.pageable").gain_bound == pytest.approx(
        amdahl_bound(0.5)
    )


def test_copies_that_fill_the_span_before_the_backward_are_bounded_by_that_span():
    """Traced steps of 10 ms: 7 ms of copies, 3 ms of model forward; the run's unprofiled steps
    (10 ms) spend 90% before the backward (the step clock's forward span). The traced copies are
    no measure of the run's (the H100 kit: 7.3-8.0 ms traced, ~9 ms unprofiled, pinned copies
    measured 6.98x against "up to 3.58x"): the bound's upper end is the span's 10x, the low end
    stays on the traced share. Where the model's forward fills as much of the span as the
    copies, the span says nothing of the copies and the bound stays theirs."""
    span = RunPhase(0.9, 200, 0.009, 0.010, 0.88, 0.92)
    run = syn.make_run(TRAIN, gpus=[A100])
    # Pageable copies; pinned ones, which TRAIN's x.to(device) copies blocking.
    for kind, rule in (("Pageable", "copies.pageable"), ("Pinned", "copies.blocking")):
        tl = syn.timeline(busy=0.05, copies=(CopyStats(f"HtoD ({kind} -> Device)", 6, 1.0, None),))
        window = syn.phase_window([(10_000.0, 7_000.0)] * 3, phase="copy")
        base = syn.make_analysis(phase_split=window, gpu_timeline=tl, step_median_s=0.010)
        f = only(rules_for(run, base), rule)
        assert f.gain_bound == pytest.approx(amdahl_bound(0.7))  # no span: the traced share
        spanned = dataclasses.replace(base, run_forward=span)
        f = only(rules_for(run, spanned), rule)
        assert f.gain_bound == pytest.approx(amdahl_bound(0.9))
        assert f.bound_low is not None and f.bound_low <= amdahl_bound(0.7)
        assert any("the span before the backward" in e for e in f.evidence)
        # A model forward as long as the copies (3 ms of copies, 7 ms of forward): theirs.
        small = syn.phase_window([(10_000.0, 3_000.0)] * 3, phase="copy")
        heavy = syn.make_analysis(phase_split=small, gpu_timeline=tl, step_median_s=0.010)
        heavy = dataclasses.replace(heavy, run_forward=span)
        f = only(rules_for(run, heavy), rule)
        assert f.gain_bound == pytest.approx(amdahl_bound(0.3))


def test_blocking_copies_of_pinned_batches():
    tl = syn.timeline(busy=0.6, copies=(CopyStats("HtoD (Pinned -> Device)", 40, 8000.0, None),))
    f = only(
        rules_for(
            syn.make_run(TRAIN, gpus=[A100]), syn.make_analysis({"copy": 0.12}, gpu_timeline=tl)
        ),
        "copies.blocking",
    )
    assert f.line == 5 and f.fix_id == "non_blocking_copies"


# ============================================================================ syncs and logging


SYNC_CELL = """\
for x, y in loader:
    loss = loss_fn(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
    print(f"loss {loss}")
"""


def sampled_lines(**shares: float) -> StackProfile:
    """A stack profile with ``line_N=share`` for each sampled line."""
    lines = tuple(LineStat(int(k.split("_")[1]), "", int(v * 1000), v) for k, v in shares.items())
    return StackProfile(0.01, 1000, 1.0, lines=lines)


def test_per_step_sync_points_at_its_line_and_bounds_by_what_reading_less_removes():
    shares = {"sync": 0.05, "other": 0.10, "unattributed": 0.15}
    # Without line samples only the measured sync wait counts, not all host time outside the
    # model (on a GPU, where the read waits for the queued kernels).
    gpu_run = syn.make_run(SYNC_CELL, gpus=[A100])
    f = only(rules_for(gpu_run, syn.make_analysis(shares)), "syncs.per_step")
    assert f.phase_share == pytest.approx(0.05 * 0.9)  # read every 10 steps
    # Its bound (1.05x) is under what two runs differ by: said as small, no recommendation.
    assert (
        f.line == 5
        and f.severity == "info"
        and f.fix.startswith("Small: may have no measurable effect")
    )
    assert any("other Python work" in e for e in f.evidence)
    # The sampler saw 25% of the time on the print line (its wait, formatting, printing).
    analysis = dataclasses.replace(
        syn.make_analysis(shares), stacks=sampled_lines(line_5=0.25, line_3=0.5)
    )
    g = only(rules_for(syn.make_run(SYNC_CELL), analysis), "syncs.per_step")
    assert g.severity == "high" and g.phase_share == pytest.approx(0.25 * 0.9)
    assert g.gain_bound == pytest.approx(amdahl_bound(0.225))
    assert g.fix_id == "throttle_host_syncs" and g.fix_params == {"every": 10}


def test_a_printed_tensor_on_the_cpu_with_too_few_line_samples_is_unmeasured_not_small():
    # A busy machine left the sampler 3 samples, none on the print line: "0% of the step" was
    # read from them, and the CPU's ~0 sync wait made the print "Small" (info), ranked under
    # any noise finding.
    shares = {"sync": 0.002, "other": 0.10, "unattributed": 0.15}
    starved = StackProfile(0.005, 3, 0.014, lines=(LineStat(3, "", 3, 1.0),))
    analysis = dataclasses.replace(syn.make_analysis(shares), stacks=starved)
    # The print is written in the loop: the step clock's 25% outside the model holds its cost.
    f = only(rules_for(syn.make_run(SYNC_CELL), analysis), "syncs.per_step")
    assert f.severity == "high" and f.gain_bound == pytest.approx(amdahl_bound(0.252 * 0.9))
    assert any("step clock's host time outside the model" in e for e in f.evidence)
    # In a closure the optimizer runs, nothing measured it: unmeasured, so not offered.
    g = only(rules_for(syn.make_run(CLOSURE_SYNC_CELL), analysis), "syncs.per_step")
    assert g.severity == "info" and g.gain_bound is None and g.fix_id is None
    assert any("not measured: too few stack samples" in e for e in g.evidence)
    # With enough samples the same 0% on the line is a measurement: small, said as such.
    sampled = dataclasses.replace(starved, samples=300, lines=(LineStat(3, "", 300, 1.0),))
    g = only(
        rules_for(syn.make_run(SYNC_CELL), dataclasses.replace(analysis, stacks=sampled)),
        "syncs.per_step",
    )
    assert g.severity == "info" and g.fix.startswith("Small: may have no measurable effect")


HOOK_PHASES = ("data", "forward", "backward", "optimizer", "other")


def test_a_printed_read_in_the_optimizer_s_closure_on_the_cpu_is_not_offered_unbounded():
    # lbfgs_closure (issue 26): the closure's `print("loss", loss.item())` runs inside
    # optimizer.step, where the step clock's time outside the model does not hold it, and no
    # line was sampled. On the CPU a read waits for nothing: its cost is the call and the
    # print, which nothing measured. The fix was offered "up to -" and measured 1.03x,
    # undecided after 10 added rounds. Not offered: said at info, with "not measured".
    split = syn.phases({"optimizer": 0.6, "other": 0.02}, measured=HOOK_PHASES, source="hooks")
    f = only(
        rules_for(syn.make_run(CLOSURE_SYNC_CELL), syn.make_analysis(phase_split=split)),
        "syncs.per_step",
    )
    assert f.fix_id is None and f.proposal is None and f.severity == "info"
    assert f.gain_bound is None and f.phase_share is None and f.line == 7
    assert any("not measured: no line samples" in e for e in f.evidence)
    assert f.fix.startswith("No patch offered: on the CPU a read waits for nothing")
    # The same read on a GPU still waits for the queued kernels: offered there as before.
    g = only(
        rules_for(
            syn.make_run(CLOSURE_SYNC_CELL, gpus=[A100]), syn.make_analysis(phase_split=split)
        ),
        "syncs.per_step",
    )
    assert g.fix_id == "throttle_host_syncs"


def test_a_cheap_per_step_print_on_the_cpu_is_bounded_by_the_step_clock_and_small():
    # A read written in the loop itself runs between the model's and the optimizer's calls:
    # its whole cost (call, formatting, print) is within the host time outside them, which the
    # step clock measures. 2% of the step: no measurable effect, said so, not offered unbounded.
    f = only(
        rules_for(syn.make_run(SYNC_CELL), syn.make_analysis({"sync": 0.001, "other": 0.02})),
        "syncs.per_step",
    )
    assert f.gain_bound == pytest.approx(amdahl_bound(0.021 * 0.9))
    assert f.severity == "info" and f.fix.startswith("Small: may have no measurable effect")


def test_a_costly_per_step_print_on_the_cpu_is_offered_with_the_step_clock_s_bound():
    # A slow formatting call every step (30% of the step outside the model, no line samples):
    # offered, bounded by what the step clock measured, not "up to -".
    f = only(
        rules_for(syn.make_run(SYNC_CELL), syn.make_analysis({"sync": 0.001, "other": 0.3})),
        "syncs.per_step",
    )
    assert f.fix_id == "throttle_host_syncs" and f.severity != "info"
    assert f.gain_bound == pytest.approx(amdahl_bound(0.301 * 0.9))
    # A plain read in the closure (no formatting): the trace's time in .item() is its cost.
    cell = CLOSURE_SYNC_CELL.replace('print("loss", loss.item())', "LOSSES.append(loss.item())")
    g = only(
        rules_for(syn.make_run(cell), syn.make_analysis({"sync": 0.2, "optimizer": 0.5})),
        "syncs.per_step",
    )
    assert g.fix_id == "throttle_host_syncs" and g.gain_bound == pytest.approx(amdahl_bound(0.18))


CLOSURE_SYNC_CELL = """\
for x, y in loader:
    def closure():
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        print("loss", loss.item())
        return loss
    opt.step(closure)
"""


def test_a_read_inside_a_closure_the_step_loop_hands_to_the_optimizer_is_a_per_step_sync():
    # LBFGS's pattern: the closure runs within every step (several times a step), so its
    # `.item()` reads the device every step, like one written in the loop itself.
    facts = scan_source(CLOSURE_SYNC_CELL)
    assert [(s.line, s.kind, s.gated, s.step_loop_line) for s in facts.syncs] == [
        (6, "item", False, 1)
    ]
    shares = {"sync": 0.05, "other": 0.10, "unattributed": 0.15}
    analysis = dataclasses.replace(syn.make_analysis(shares), stacks=sampled_lines(line_7=0.25))
    f = only(rules_for(syn.make_run(CLOSURE_SYNC_CELL), analysis), "syncs.per_step")
    assert (
        f.line == 7 and f.fix_id == "throttle_host_syncs"
    )  # the cell's 6th line, under %%gpucheck


STOP_CELL = """\
for x, y in loader:
    loss = loss_fn(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
    if loss.item() < 0.01:
        break
"""


@pytest.mark.parametrize(
    "cell",
    [
        STOP_CELL,
        STOP_CELL.replace(
            "    if loss.item() < 0.01:",
            "    current = loss.item()\n    if current < best: best = current\n    elif patience_left() == 0:",
        ),
        STOP_CELL.replace(
            "    if loss.item() < 0.01:\n        break",
            "    while loss.item() > 5: loss = loss / 2",
        ),
    ],
)
def test_a_read_the_loop_needs_is_named_with_its_alternative_and_not_patched(cell):
    facts = scan_source(cell)
    assert [s.needed for s in facts.syncs] == [True] and not facts.syncs[0].gated
    findings = rules_for(syn.make_run(cell), syn.make_analysis({"sync": 0.04, "unattributed": 0.3}))
    assert "syncs.per_step" not in ids(findings)
    f = only(findings, "syncs.needed_read")
    assert f.fix_id is None and "every 10 steps" in f.fix and f.line == 5
    assert f.phase_share == pytest.approx(0.04 * 0.9)  # the read's own cost, not the 30% residual


def test_an_optional_read_beside_a_needed_one_is_throttled_and_the_needed_one_named():
    cell = STOP_CELL.replace("    if loss.item()", "    print(loss.item())\n    if loss.item()")
    f = only(rules_for(syn.make_run(cell), syn.make_analysis({"sync": 0.04})), "syncs.per_step")
    assert f.line == 5 and any("line 6 reads a value the loop needs" in e for e in f.evidence)


def test_sync_bound_is_capped_by_the_gpu_work_of_the_step():
    tl = syn.timeline(busy=0.9)
    shares = {"sync": 0.2, "other": 0.2, "unattributed": 0.2}
    f = only(
        rules_for(syn.make_run(SYNC_CELL, gpus=[A100]), syn.make_analysis(shares, gpu_timeline=tl)),
        "syncs.per_step",
    )
    assert f.gain_bound == pytest.approx(1 / 0.9)  # the step is never shorter than its GPU work


def test_sync_share_without_source_lines_still_fires_on_a_gpu():
    plain = SYNC_CELL.replace('    print(f"loss {loss}")\n', "")
    ops = (OpStat("aten::_local_scalar_dense", 24, 900.0, 900.0),)
    f = only(
        rules_for(syn.make_run(plain, gpus=[A100]), syn.make_analysis({"sync": 0.25}, ops=ops)),
        "syncs.per_step",
    )
    assert f.line is None and any("3.0 scalar read(s) per step" in e for e in f.evidence)


def test_gated_reads_and_logs_raise_nothing():
    cell = SYNC_CELL.replace(
        '    print(f"loss {loss}")', '    if i % 50 == 0:\n        print(f"loss {loss}")'
    )
    findings = rules_for(syn.make_run(cell), syn.make_analysis({"unattributed": 0.3}))
    assert not {"syncs.per_step", "logging.per_step"} & set(ids(findings))


def test_logging_every_step_of_python_values():
    cell = SYNC_CELL.replace('print(f"loss {loss}")', 'print("step done")')
    f = only(
        rules_for(syn.make_run(cell), syn.make_analysis({"other": 0.05, "unattributed": 0.1})),
        "logging.per_step",
    )
    assert f.severity == "medium" and f.fix_id == "log_every_n"


def test_per_step_logging_whose_host_time_was_not_measured_is_said_not_offered():
    # No phase holds the logs' time (the step's split has no time outside the model): nothing
    # bounds what logging less often saves. Offered "up to -" before; said at info now.
    cell = SYNC_CELL.replace('print(f"loss {loss}")', 'print("step done")')
    split = syn.phases({"optimizer": 0.2}, measured=("data", "forward", "backward", "optimizer"))
    f = only(
        rules_for(syn.make_run(cell), syn.make_analysis(phase_split=split)), "logging.per_step"
    )
    assert f.fix_id is None and f.gain_bound is None and f.severity == "info"
    assert f.fix.startswith("No patch offered")


VAL_CELL = """\
model = Net(); loss_fn = nn.MSELoss()
for step in range(10):
    loss = loss_fn(model(xs[step]), ys[step]); loss.backward(); opt.step()
    with torch.no_grad():
        v = sum(loss_fn(model(a), b) for a, b in val_batches)
"""


def test_validation_share_is_the_time_outside_the_training_phases():
    # The validation's no_grad forward lands outside the inferred forward (autograd numbers no
    # op there), in "other": running it every 10 steps removes 90% of that.
    run = syn.make_run(VAL_CELL, steps=syn.steps_record(10, forward_calls=1, backward_calls=1))
    analysis = syn.make_analysis({"forward": 0.3, "backward": 0.2, "optimizer": 0.1, "other": 0.4})
    f = only(rules_for(run, analysis), "logging.validation_every_step")
    assert f.phase_share == pytest.approx(0.4 * 0.9)
    assert f.severity == "high" and f.line == 5 and f.fix_id == "validate_every_n"


# ============================================================================ GPU rules


MATMULS = (
    OpStat("aten::addmm", 100, 5000.0, 5000.0),
    OpStat("ampere_sgemm_128x64_tn", 100, 30_000.0, 30_000.0, "gpu"),
)


def test_fp32_on_tensor_core_gpu_asks_for_autocast():
    tl = syn.timeline(busy=0.9, tensor_core_us=0.0)
    f = only(
        rules_for(
            syn.make_run(TRAIN, gpus=[A100]), syn.make_analysis(gpu_timeline=tl, ops=MATMULS)
        ),
        "precision.fp32_tensor_cores",
    )
    assert f.severity == "high" and f.fix_params == {"dtype": "bfloat16", "device_type": "cuda"}
    assert f.phase_share == pytest.approx(30_000 / 80_000)  # fp32 GEMM kernels of the window
    v100 = only(
        rules_for(
            syn.make_run(TRAIN, gpus=[V100]), syn.make_analysis(gpu_timeline=tl, ops=MATMULS)
        ),
        "precision.fp32_tensor_cores",
    )
    assert v100.fix_params["dtype"] == "float16"


@pytest.mark.parametrize(
    "gpus, cell, tc_us",
    [
        ([P100], TRAIN, 0.0),
        ([], TRAIN, 0.0),
        (
            [A100],
            TRAIN.replace("    loss =", "    with torch.autocast('cuda'):\n        loss ="),
            50_000.0,
        ),
        ([A100], TRAIN, 50_000.0),
    ],
    ids=["pascal", "no-gpu", "autocast-on", "tensor-cores-used"],
)
def test_precision_rule_stays_silent(gpus, cell, tc_us):
    tl = syn.timeline(busy=0.9, tensor_core_us=tc_us) if gpus else None
    assert "precision.fp32_tensor_cores" not in ids(
        rules_for(syn.make_run(cell, gpus=gpus), syn.make_analysis(gpu_timeline=tl, ops=MATMULS))
    )


def test_an_autocast_the_trace_shows_idle_does_not_silence_the_precision_rule():
    """The cell has torch.autocast, yet its GEMMs ran in float32 on no tensor core (the H200
    kit loop's ``torch.autocast(..., enabled=self.bf16)`` with bf16 off): the trace decides."""
    cell = TRAIN.replace(
        "    loss =", "    with torch.autocast('cuda', enabled=amp):\n        loss ="
    )
    tl = syn.timeline(busy=0.9, tensor_core_us=0.0)
    found = rules_for(
        syn.make_run(cell, gpus=[A100]), syn.make_analysis(gpu_timeline=tl, ops=MATMULS)
    )
    f = only(found, "precision.fp32_tensor_cores")
    assert any("the cell has torch.autocast, but no matmul ran" in e for e in f.evidence)
    assert "backend.tf32" in ids(found)


def test_tf32_and_cudnn_benchmark_flags():
    cell = "torch.backends.cudnn.benchmark = False\n" + TRAIN
    conv = (
        OpStat("aten::cudnn_convolution", 10, 1.0, 1.0),
        OpStat("cudnn_ampere_scudnn_128x64_relu", 10, 20_000.0, 20_000.0, "gpu"),
    )
    findings = rules_for(
        syn.make_run(cell, gpus=[A100]),
        syn.make_analysis(gpu_timeline=syn.timeline(busy=0.9), ops=MATMULS + conv),
    )
    bench = only(findings, "backend.cudnn_benchmark")
    assert bench.fix_params == {"cudnn_benchmark": True, "tf32": False}
    assert bench.phase_share == pytest.approx(20_000 / 80_000)
    tf32 = only(findings, "backend.tf32")
    assert tf32.fix_params == {"cudnn_benchmark": False, "tf32": True}
    on = (
        "torch.backends.cuda.matmul.allow_tf32 = True\ntorch.backends.cudnn.benchmark = True\n"
        + TRAIN
    )
    assert not {"backend.tf32", "backend.cudnn_benchmark"} & set(
        ids(
            rules_for(
                syn.make_run(on, gpus=[A100]),
                syn.make_analysis(gpu_timeline=syn.timeline(busy=0.9), ops=MATMULS + conv),
            )
        )
    )


@pytest.mark.parametrize("peak_gib, severity", [(76, "high"), (66, "medium"), (40, None)])
def test_memory_near_full_has_no_speed_bound(peak_gib, severity):
    util = syn.utilization(gpu_util_pct=60.0, memory_peak_gib=peak_gib, memory_total_gib=80)
    found = [
        f
        for f in rules_for(syn.make_run(TRAIN, gpus=[A100]), syn.make_analysis(util=util))
        if f.rule_id == "memory.near_oom"
    ]
    assert [f.severity for f in found] == ([severity] if severity else [])
    if found:
        assert found[0].gain_bound is None and any("no speed bound" in e for e in found[0].evidence)


def test_small_batch_with_an_idle_gpu_and_free_memory():
    util = syn.utilization(gpu_util_pct=25.0, memory_peak_gib=10, memory_total_gib=80)
    f = only(
        rules_for(syn.make_run(TRAIN, gpus=[A100]), syn.make_analysis(util=util, batch_size=16)),
        "batch.small_batch",
    )
    assert (
        f.gain_bound == 2.0
        and f.fix_params == {"factor": 2, "scale_lr": True}
        and f.severity == "medium"
    )
    with_data = only(
        rules_for(syn.make_run(TRAIN, gpus=[A100]), syn.make_analysis({"data": 0.05}, util=util)),
        "batch.small_batch",
    )
    assert with_data.gain_bound == pytest.approx(
        1 / (0.05 + 0.95 / 2)
    )  # data per sample does not shrink
    full = syn.utilization(gpu_util_pct=25.0, memory_peak_gib=60, memory_total_gib=80)
    assert "batch.small_batch" not in ids(
        rules_for(syn.make_run(TRAIN, gpus=[A100]), syn.make_analysis(util=full))
    )


def test_gpu_starved_by_launches_bounded_by_host_idle():
    tl = syn.timeline(busy=0.3, host_wait=0.4, kernel_wait=0.1)
    f = only(
        rules_for(syn.make_run(TRAIN, gpus=[A100]), syn.make_analysis(gpu_timeline=tl)),
        "launch.gpu_starved",
    )
    assert f.severity == "high" and f.gain_bound == pytest.approx(amdahl_bound(0.5))
    assert f.fix_id == "torch_compile"
    # the same idle GPU while the step waits for data: the input rule speaks instead
    assert "launch.gpu_starved" not in ids(
        rules_for(
            syn.make_run(TRAIN, gpus=[A100]), syn.make_analysis({"data": 0.3}, gpu_timeline=tl)
        )
    )


def test_compile_is_bounded_by_the_waits_inside_the_model():
    """The H200 kit's launch-bound run: the whole host wait bounded compile at 16.2x, measured
    1.09x compiled; 17% of the wait was AdamW's launches. The bound rests on the model's part;
    a wait mostly outside the model is said, compile not offered."""
    tl = syn.timeline(busy=0.3, host_wait=0.4, kernel_wait=0.1)
    model = dataclasses.replace(tl, idle_model_wait_us=0.2 * tl.window_us)
    f = only(
        rules_for(syn.make_run(TRAIN, gpus=[A100]), syn.make_analysis(gpu_timeline=model)),
        "launch.gpu_starved",
    )
    assert f.severity == "high" and f.fix_id == "torch_compile"
    assert f.gain_bound == pytest.approx(amdahl_bound(0.2))
    assert any("forward and backward" in e for e in f.evidence)
    outside = dataclasses.replace(tl, idle_model_wait_us=0.01 * tl.window_us)
    f = only(
        rules_for(syn.make_run(TRAIN, gpus=[A100]), syn.make_analysis(gpu_timeline=outside)),
        "launch.gpu_starved",
    )
    assert f.severity == "info" and f.fix_id is None


def test_communication_and_data_parallel():
    tl = syn.timeline(busy=0.8, comm=0.25)
    cell = "model = nn.DataParallel(Net())\n" + TRAIN
    findings = rules_for(syn.make_run(cell, gpus=[A100, A100]), syn.make_analysis(gpu_timeline=tl))
    comm = only(findings, "distributed.communication")
    assert comm.severity == "high" and comm.gain_bound == pytest.approx(amdahl_bound(0.25))
    # Overlapped by computation, the same collectives delay nothing: no finding.
    hidden = syn.timeline(busy=0.8, comm=0.25, comm_overlap=0.9)
    assert "distributed.communication" not in ids(
        rules_for(syn.make_run(cell, gpus=[A100, A100]), syn.make_analysis(gpu_timeline=hidden))
    )
    dp = only(findings, "distributed.data_parallel")
    assert dp.line == 2 and dp.fix_id == "dataparallel_to_ddp" and dp.gain_bound is None


def test_a_recompile_storm_is_read_from_dynamo_counters(ip):
    """torch.compile on the CPU (eager backend: no C++ build), static shapes, 11 batch sizes."""
    res = ip.run_cell(
        "import torch\nstorm = torch.compile(torch.nn.Linear(4, 2), backend='eager', dynamic=False)\n"
        "for n in range(1, 12):\n    storm(torch.randn(n, 4))"
    )
    assert res.success, res.error_in_exec
    cell = "for n in range(1, 12):\n    storm(torch.randn(n, 4))\n"
    f = only(
        rules_for(syn.make_run(cell), syn.make_analysis(), namespace=ip.user_ns),
        "compile.recompiles",
    )
    assert f.severity == "medium" and "cumulative" in f.evidence[0]
    assert "recompile limit (8) reached" in f.evidence[1]
    # a cell that compiles nothing says nothing about Dynamo, whatever the counters hold
    assert "compile.recompiles" not in ids(
        rules_for(syn.make_run("x = 1\n"), syn.make_analysis(), namespace=ip.user_ns)
    )


def test_shapes_change_every_step_but_a_short_last_batch_is_normal():
    changing = syn.steps_record(batch_sizes=[32, 64, 17, 90, 32, 64, 17, 90])
    f = only(rules_for(syn.make_run(TRAIN, steps=changing), syn.make_analysis()), "shapes.changing")
    assert (
        f.severity == "low" and f.gain_bound is None and any("best-effort" in e for e in f.evidence)
    )
    last_partial = syn.steps_record(batch_sizes=[32] * 7 + [5])
    assert "shapes.changing" not in ids(
        rules_for(syn.make_run(TRAIN, steps=last_partial), syn.make_analysis())
    )


def test_inference_with_autograd_from_counts_and_source():
    cell = "for x in batches:\n    outs.append(model(x))\n"
    steps = syn.steps_record(backward_calls=0, event_counts={"forward": 10, "backward": 0})
    f = only(
        rules_for(syn.make_run(cell, steps=steps), syn.make_analysis(), namespace={"model": None}),
        "inference.autograd_on",
    )
    assert f.line is None or f.line == 2
    trained = syn.steps_record(event_counts={"forward": 10, "backward": 10, "optimizer": 10})
    assert "inference.autograd_on" not in ids(
        rules_for(syn.make_run(cell, steps=trained), syn.make_analysis())
    )


# ============================================================================ ranking, confidence


def test_findings_are_ranked_by_severity_then_bound_unbounded_last():
    def f(sev, bound):
        return Finding("r", "t", sev, (), None, bound, "x")

    ranked = sorted(
        [f("low", 5.0), f("high", None), f("high", 1.5), f("medium", 3.0), f("high", 2.0)],
        key=rank_key,
    )
    assert [(x.severity, x.gain_bound) for x in ranked] == [
        ("high", 2.0),
        ("high", 1.5),
        ("high", None),
        ("medium", 3.0),
        ("low", 5.0),
    ]


def test_few_profiled_steps_are_said_in_the_evidence():
    analysis = syn.make_analysis(phase_split=syn.phases({"data": 0.4}, steps=2))
    f = only(rules_for(syn.make_run(TRAIN), analysis), "input.loader_workers")
    assert any("only 2 profiled step(s)" in e for e in f.evidence)


def test_one_stalled_step_does_not_decide_the_shares():
    import dataclasses

    base = syn.phases({"data": 0.02}, steps=8, step_us=1000.0)
    stalled_step = dataclasses.replace(
        base.steps[3], duration_us=9000.0, phase_us={**base.steps[3].phase_us, "data": 8020.0}
    )
    steps = tuple(stalled_step if i == 3 else s for i, s in enumerate(base.steps))
    totals = dict(base.phase_total_us, data=base.phase_total_us["data"] + 8000.0)
    stalled = dataclasses.replace(
        base, steps=steps, total_us=base.total_us + 8000.0, phase_total_us=totals
    )
    assert stalled.share("data") > 0.5
    trimmed, dropped = without_stalls(syn.make_analysis(phase_split=stalled))
    assert dropped == 1 and trimmed.phases.share("data") == pytest.approx(0.02)
    assert "input.loader_workers" not in ids(
        rules_for(syn.make_run(TRAIN), syn.make_analysis(phase_split=stalled))
    )


def test_a_stall_in_the_removable_phase_still_counts_in_the_bound():
    import dataclasses

    base = syn.phases({"data": 0.30}, steps=8, step_us=10_000.0)
    slow = dataclasses.replace(
        base.steps[5], duration_us=90_000.0, phase_us={**base.steps[5].phase_us, "data": 83_000.0}
    )
    steps = tuple(slow if i == 5 else s for i, s in enumerate(base.steps))
    totals = dict(base.phase_total_us, data=base.phase_total_us["data"] + 80_000.0)
    split = dataclasses.replace(
        base, steps=steps, total_us=base.total_us + 80_000.0, phase_total_us=totals
    )
    f = only(
        rules_for(syn.make_run(TRAIN), syn.make_analysis(phase_split=split)), "input.loader_workers"
    )
    steady = only(
        rules_for(syn.make_run(TRAIN), syn.make_analysis(phase_split=base)), "input.loader_workers"
    )
    # decided on the 7 steady steps (30% data), bounded with every step counted (the larger)
    assert steady.gain_bound < f.gain_bound <= amdahl_bound(split.share("data"))
    assert any("left out to decide" in e for e in f.evidence)


def test_slower_profiled_steps_are_said_and_the_bound_stays_the_measured_one():
    import dataclasses

    steps = syn.steps_record(12, step_s=0.002)
    # the profiler window covered steps 0-5; after it the clock went lean and steps took half
    rows = tuple(
        dataclasses.replace(s, timed=s.index < 6, duration_s=0.002 if s.index < 6 else 0.001)
        for s in steps.steps
    )
    run = syn.make_run(TRAIN, steps=dataclasses.replace(steps, steps=rows))
    # The analysis's figure of the run (analyze gives it), not the window's.
    analysis = with_run_figures(run, syn.make_analysis({"data": 0.3}))
    f = only(rules_for(run, analysis), "input.loader_workers")
    assert f.gain_bound == pytest.approx(10.0 / (7.0 + 0.5))  # from the steps that were measured
    assert any("profiled steps took 2.00x as long as unprofiled ones" in e for e in f.evidence)


# ============================================================================ fixes


def test_attach_fixes_gives_a_patch_or_the_catalog_refusal():
    f_ok = Finding(
        "a",
        "t",
        "high",
        (),
        0.3,
        1.4,
        "x",
        fix_id="dataloader_workers",
        fix_params={"num_workers": 2, "pin_memory": False, "persistent_workers": True},
    )
    f_no = Finding("b", "t", "low", (), None, None, "x", fix_id="dataparallel_to_ddp")
    ok, no = attach_fixes([f_ok, f_no], TRAIN)
    assert ok.proposal.source_after.startswith("# gpucheck fix: ")
    assert "num_workers=2" in ok.proposal.source_after and ok.proposal.refusal is None
    assert no.proposal.source_after is None and no.proposal.refusal  # a reason, not broken code


def test_live_loader_fix_rebuilds_the_loader_defined_in_an_earlier_cell(ip):
    # A map-style dataset of its own (a TensorDataset would get no workers: in_memory_batches).
    ip.run_cell(
        "from torch.utils.data import DataLoader, Dataset\n"
        "class Squares(Dataset):\n"
        "    def __len__(self): return 16\n"
        "    def __getitem__(self, i): return (torch.full((2,), float(i * i)),)\n"
        "live_loader = DataLoader(Squares(), batch_size=4, shuffle=True)"
    )
    cell = "for (x,) in live_loader:\n    y = x * 2\n"
    run = syn.make_run(cell, cpu_count=2)
    findings = rules_for(run, syn.make_analysis({"data": 0.5}), namespace=ip.user_ns)
    f = only(findings, "input.loader_workers")
    assert "earlier cell" in f.evidence[1]
    (fixed,) = attach_fixes([f], cell, namespace=ip.user_ns)
    after = fixed.proposal.source_after
    assert after.startswith("# gpucheck fix: ") and "live `live_loader`" in after.splitlines()[0]
    assert ip.run_cell(after).success
    new = ip.user_ns["live_loader"]
    assert (new.num_workers, new.batch_size, type(new.sampler).__name__) == (2, 4, "RandomSampler")


@pytest.mark.parametrize(
    "cell",
    [
        "for epoch in range(2):\n    avg = train_one_epoch(net, handed_loader, handed_opt)\n",
        "trainer.fit(lit, train_dataloaders=handed_loader)\n",
    ],
    ids=["helper-from-earlier-cell", "framework-fit-keyword"],
)
def test_live_loader_fix_reaches_a_loader_the_cell_hands_to_a_call(ip, cell):
    """The loop iterates the loader inside a function of an earlier cell (`train_one_epoch`,
    `trainer.fit`): the cell only passes it. The fix rebuilds that loader, the one the steps
    wait on, and not the evaluation loader the cell passes elsewhere."""
    ip.run_cell(
        "from torch.utils.data import DataLoader, Dataset\n"
        "class Cubes(Dataset):\n"
        "    def __len__(self): return 16\n"
        "    def __getitem__(self, i): return (torch.full((2,), float(i ** 3)),)\n"
        "handed_loader = DataLoader(Cubes(), batch_size=4, shuffle=True)\n"
        "eval_loader = DataLoader(Cubes(), batch_size=8)\n"
        "net = torch.nn.Linear(2, 1); handed_opt = torch.optim.SGD(net.parameters(), lr=0.1)"
    )
    cell = cell + "print(evaluate(net, eval_loader))\n"
    run = syn.make_run(cell, cpu_count=2)
    findings = rules_for(run, syn.make_analysis({"data": 0.5}), namespace=ip.user_ns)
    f = only(findings, "input.loader_workers")
    (fixed,) = attach_fixes([f], cell, namespace=ip.user_ns)
    after = fixed.proposal.source_after
    assert after is not None, fixed.proposal.refusal
    assert "live `handed_loader`" in after.splitlines()[0] and "eval_loader =" not in after
    body = after.split(cell.splitlines()[0])[0]  # the snippet, above the user's own lines
    assert ip.run_cell(body).success
    new = ip.user_ns["handed_loader"]
    assert (new.num_workers, new.batch_size, type(new.sampler).__name__) == (2, 4, "RandomSampler")


def test_live_loader_fix_follows_a_loader_the_cell_builds_through_a_helper(ip):
    """`loader = make_loader(ds)` (the DataLoader call is in an earlier cell's helper): the
    rebuilt loader goes right after that line, where the loop reads it, not a refusal."""
    ip.run_cell(
        "from torch.utils.data import DataLoader, Dataset\n"
        "class Halves(Dataset):\n"
        "    def __len__(self): return 16\n"
        "    def __getitem__(self, i): return (torch.full((2,), i / 2),)\n"
        "def make_loader(ds, bs=4):\n"
        "    return DataLoader(ds, batch_size=bs, shuffle=True)"
    )
    cell = "helper_loader = make_loader(Halves())\nfor (x,) in helper_loader:\n    y = x * 2\n"
    assert ip.run_cell(cell).success
    run = syn.make_run(cell, cpu_count=2)
    findings = rules_for(run, syn.make_analysis({"data": 0.5}), namespace=ip.user_ns)
    (fixed,) = attach_fixes([only(findings, "input.loader_workers")], cell, namespace=ip.user_ns)
    after = fixed.proposal.source_after
    assert after is not None, fixed.proposal.refusal
    lines = after.splitlines()
    assert lines[0] == "helper_loader = make_loader(Halves())"
    assert lines[1].startswith("# gpucheck fix: ") and "live `helper_loader`" in lines[1]
    del ip.user_ns["helper_loader"]  # a fresh kernel: the name is bound by the cell only
    assert ip.run_cell(after).success
    assert ip.user_ns["helper_loader"].num_workers == 2
    # Bound after the loop that reads it: a rebuild after that line reaches no loop.
    late = "for (x,) in helper_loader:\n    y = x * 2\nhelper_loader = make_loader(Halves())\n"
    (fixed,) = attach_fixes([only(findings, "input.loader_workers")], late, namespace=ip.user_ns)
    assert fixed.proposal.source_after is None and "bound again" in fixed.proposal.refusal


def test_an_epoch_loop_that_hands_the_loader_to_a_function_reads_nothing_per_step(ip):
    """`for epoch in ...: avg = train_one_epoch(model, loader, opt); print(f"{avg:.4f}")`: the
    steps run inside the function (an earlier cell); the loop's lines run once per epoch, so
    they are neither per-step reads nor per-step logging. A loop that hands a step function
    its batch still has its reads counted per step."""
    ip.run_cell(
        "from torch.utils.data import DataLoader, Dataset\n"
        "class Ones(Dataset):\n"
        "    def __len__(self): return 16\n"
        "    def __getitem__(self, i): return (torch.ones(2),)\n"
        "epoch_loader = DataLoader(Ones(), batch_size=4)"
    )
    per_epoch = (
        "for epoch in range(2):\n"
        "    avg = train_one_epoch(net, epoch_loader, opt)\n"
        '    print(f"epoch {epoch}: {avg:.4f}")\n'
    )
    analysis = syn.make_analysis({"data": 0.5})
    findings = rules_for(syn.make_run(per_epoch), analysis, namespace=ip.user_ns)
    assert not {"syncs.per_step", "logging.per_step"} & set(ids(findings)), ids(findings)
    per_step = "for (x,) in epoch_loader:\n    loss = train_step(net, x)\n    print(loss.item())\n"
    findings = rules_for(syn.make_run(per_step), analysis, namespace=ip.user_ns)
    assert only(findings, "syncs.per_step").line == 4
    # The step loop is the one over the loader: the epoch loop around it reads once an epoch.
    nested = (
        "for epoch in range(2):\n"
        "    for (x,) in epoch_loader:\n"
        "        running += train_step(net, x)\n"
        "    print(epoch, float(running))\n"
    )
    findings = rules_for(syn.make_run(nested), analysis, namespace=ip.user_ns)
    assert "syncs.per_step" not in ids(findings), ids(findings)


def test_facts_from_the_namespace_name_the_models(ip):
    ip.run_cell("import torch\nlive_net = torch.nn.Linear(2, 2)")
    facts = cell_facts("for x in xs:\n    live_net(x)\n", ip.user_ns)
    assert isinstance(facts, SourceFacts) and "live_net" in facts.model_names
    assert facts.inference_loops and facts.live.models[0].name == "live_net"


# ============================================================================ reference traces (real GPUs)


def _reference(reference_traces, name):
    from gpu_notebook.analysis.analyze import analyze_trace_file

    phases, gpu, ops = analyze_trace_file(str(reference_traces / name))
    return syn.make_analysis(phase_split=phases, gpu_timeline=gpu, ops=ops)


def test_v100_reference_trace_runs_float32_on_tensor_cores(reference_traces):
    analysis = _reference(reference_traces, "v100_world1_rank0.json.gz")
    f = only(rules_for(syn.make_run(TRAIN, gpus=[V100]), analysis), "precision.fp32_tensor_cores")
    assert f.severity == "high"  # busy 97% of the window, no tensor-core kernel
    assert 0.1 < f.phase_share < 0.9 and 1.1 < f.gain_bound < 10


def test_a100_alexnet_reference_trace_copies_from_pageable_memory(reference_traces):
    analysis = _reference(reference_traces, "a100_alexnet_cuda_sync.json.gz")
    f = only(rules_for(syn.make_run(TRAIN, gpus=[A100]), analysis), "copies.pageable")
    assert "16 host-to-device copies from pageable memory" in f.evidence[0]


def test_nccl_reference_trace_is_communication_heavy(reference_traces):
    analysis = _reference(reference_traces, "a100_world8_rank3.json.gz")
    f = only(rules_for(syn.make_run(TRAIN, gpus=[A100]), analysis), "distributed.communication")
    # 35% of the window in collectives, 46% of it overlapped: 19% exposed.
    assert f.severity == "medium" and 0.15 < f.phase_share < 0.25


def test_amd_reference_trace_raises_no_tensor_core_finding(reference_traces):
    analysis = _reference(reference_traces, "mi250_rocm_toy.json.gz")
    amd = syn.gpu("AMD Instinct MI250", None, 64)
    assert not [
        f
        for f in rules_for(syn.make_run(TRAIN, gpus=[amd]), analysis)
        if f.rule_id.startswith(("precision", "backend"))
    ]


def test_every_rule_module_is_a_family_and_its_own_fix_is_attached():
    """A rule is its module and its test: every module of rules/ but common is found as a
    family (none can be left unrun), and a FIX beside its check is known to attach_fixes."""
    from pathlib import Path

    import gpu_notebook.rules as rules_pkg

    modules = {p.stem for p in Path(rules_pkg.__file__).parent.glob("*.py")} - {
        "__init__",
        "common",
    }
    assert modules == {family.__name__.rsplit(".", 1)[1] for family in rules_pkg.FAMILIES}
    for family in rules_pkg.FAMILIES:
        fix = getattr(family, "FIX", None)
        assert fix is None or rules_pkg.RULE_FIXES[fix.fix_id] is fix


def test_found_families_run_in_the_verdict_tables_order_and_their_fixes_are_objects():
    """Families are found by package scan; ties between findings still break in the verdict
    table's order (each module's TIE), and a rule hands its own Fix to found(), not a string."""
    import gpu_notebook.rules as rules_pkg
    from gpu_notebook.records import Said
    from gpu_notebook.rules.checkpointing import FIX
    from gpu_notebook.rules.common import found

    names = [family.__name__.rsplit(".", 1)[1] for family in rules_pkg.FAMILIES]
    # Each module's TIE: the verdict table's order (input, padding, sync, host, GPU, memory,
    # multi-GPU), then the run's shape and the machine; modules without one after them, by name.
    tie_order = ["input_pipeline", "padding", "copies", "host_tensors", "syncs", "step_logging", "launch",
                 "batch", "precision", "backend_flags", "restacked_bank", "debug_apis", "global_modes",
                 "checkpointing", "memory", "shapes", "recompiles", "inference", "distributed",
                 "run_shape", "machine"]  # fmt: skip
    assert names[: len(tie_order)] == tie_order
    untied = names[len(tie_order) :]
    assert untied == sorted(untied) and all(
        not hasattr(m, "TIE") for m in rules_pkg.FAMILIES[len(tie_order) :]
    )
    f = found("checkpointing.unneeded", "low", Said(), fix=FIX)
    assert f.fix_id == FIX.fix_id and rules_pkg.RULE_FIXES[f.fix_id] is FIX


def test_every_fix_a_rule_names_exists_with_those_parameters():
    """Read each rule module's found(...) calls: a renamed fix or parameter fails here, not in a
    report."""
    import ast
    from pathlib import Path

    import gpu_notebook.rules as rules_pkg
    from gpu_notebook.fixes import FIXES

    named = 0
    for path in Path(rules_pkg.__file__).parent.glob("*.py"):
        for call in ast.walk(ast.parse(path.read_text())):
            if not isinstance(call, ast.Call) or getattr(call.func, "id", None) != "found":
                continue
            kw = {k.arg: k.value for k in call.keywords}
            fix = kw.get("fix_id")
            if not isinstance(fix, ast.Constant) or fix.value is None:
                continue
            named += 1
            assert fix.value in FIXES, f"{path.name}: unknown fix {fix.value!r}"
            params = kw.get("fix_params")
            if isinstance(params, ast.Dict):
                keys = {k.value for k in params.keys if isinstance(k, ast.Constant)}
                allowed = {p.name for p in FIXES[fix.value].params}
                assert keys <= allowed, (
                    f"{path.name}: {fix.value} takes {allowed}, not {keys - allowed}"
                )
    assert named >= 12  # every family with a codemod is covered


def test_whether_workers_pay_reads_the_runs_data_wait_where_the_step_clock_timed_it():
    # Issue 26 (unseen round 5): a text classifier tokenizing in __getitem__ (a pure-Python
    # tokenizer, a collate_fn that pads). Its profiled window read the data wait at 7.5%, 0.37 ms
    # a batch (the profiler's cost per op swells the compute around it), the step clock over 354
    # steps at 21%, 0.81 ms a batch. The rule said "[high] workers would cost more than they
    # save (up to 1.08x)": its level from the run, its share, bound and "a batch loads in 0.37
    # ms, less than a worker's handoff" from the window. A batch that loads in longer than a
    # worker takes to hand it over is the workers rule's to weigh.
    cell = "class Tokens(Dataset):\n    def __getitem__(self, i): return seqs[i]\n" + TRAIN.replace(
        "DataLoader(ds, batch_size=32)", "DataLoader(Tokens(), batch_size=32, collate_fn=pad)"
    )
    split = syn.phases({"data": 0.075}, step_us=5000.0)  # 0.375 ms a batch in the window
    analysis = dataclasses.replace(
        syn.make_analysis(phase_split=split),
        run_data=RunPhase(0.215, 354, 0.00081, 0.00375, low_share=0.21, high_share=0.22),
    )
    findings = rules_for(syn.make_run(cell, cpu_count=8), analysis)
    assert "input.in_memory_batches" not in ids(findings)
    # A batch the run read under the handoff stays the in-memory rule's, at the run's share.
    fast = dataclasses.replace(
        analysis,
        run_data=RunPhase(0.08, 354, 0.0003, 0.00375, low_share=0.075, high_share=0.085),
    )
    f = only(rules_for(syn.make_run(cell, cpu_count=8), fast), "input.in_memory_batches")
    assert f.phase_share == pytest.approx(0.08)
    assert "0.30 ms" in " ".join(f.evidence)


def test_a_value_handed_to_host_code_each_step_is_not_called_a_stop_condition():
    # Issue 26 (unseen round 5): REINFORCE on a numpy environment reads the sampled action for
    # the environment every step (`obs, r, done = env.step(a.item())`); `done` ends the episode,
    # so the read is needed. It was called "a stop condition" and told to compute it on the
    # device as `stop = loss.detach() < threshold`, read every 10 steps: the environment needs
    # the action as a number at every step, and no threshold is involved.
    cell = (
        "for episode in range(100):\n"
        "    obs = env.reset(); done = False; logps = []\n"
        "    while not done:\n"
        "        dist = Categorical(logits=policy(torch.from_numpy(obs)))\n"
        "        a = dist.sample(); logps.append(dist.log_prob(a))\n"
        "        obs, r, done = env.step(a.item())\n"
        "    loss = -torch.stack(logps).sum()\n"
        "    opt.zero_grad(); loss.backward(); opt.step()\n"
    )
    f = only(rules_for(syn.make_run(cell), syn.make_analysis({"sync": 0.02})), "syncs.needed_read")
    assert "stop condition" not in f.title and "threshold" not in f.fix
    assert "env.step" in f.title or "env.step" in " ".join(f.evidence)
    # A read an `if` tests stays a stop condition.
    stop = "for x, y in loader:\n    loss = f(x, y); loss.backward(); opt.step()\n    if loss.item() < 0.1:\n        break\n"
    g = only(rules_for(syn.make_run(stop), syn.make_analysis({"sync": 0.02})), "syncs.needed_read")
    assert "stop condition" in g.title


BEST_SNAPSHOT_CELL = """\
for step in range(150):
    loss = loss_fn(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
    if loss.item() < best_loss:
        best_loss = loss.item()
        best_state = copy.deepcopy(model.state_dict())
"""


def test_a_read_that_picks_work_in_the_step_is_a_branch_not_a_stop_condition():
    # Unseen round 11 (best_state_deepcopy): a best-so-far snapshot on each step's batch loss
    # was called "a stop condition" and told to compute `stop = loss.detach() < threshold` on
    # the device and `break` every 10 steps: the loop never stops on it.
    facts = scan_source(BEST_SNAPSHOT_CELL)
    assert {(s.needed, s.stops) for s in facts.syncs} == {(True, False)}
    f = only(
        rules_for(syn.make_run(BEST_SNAPSHOT_CELL), syn.make_analysis({"sync": 0.02})),
        "syncs.needed_read",
    )
    assert "stop" not in f.title and "break" not in f.fix and "threshold" not in f.fix
    assert f.fix_id is None and "every 10 steps" in f.fix and f.line == 5
    # The same test with a break in an arm, or a patience counter's elif: a stop.
    for stop in (
        BEST_SNAPSHOT_CELL.replace(
            "model.state_dict())", "model.state_dict())\n    else:\n        break"
        ),
        STOP_CELL,
    ):
        assert {s.stops for s in scan_source(stop).syncs} == {True}


def test_a_needed_read_on_the_cpu_under_its_line_is_said_at_info():
    # On the CPU the read waits for nothing: "[low] ... (no measurable gain expected: up to
    # 1.00x)" was a finding with nothing to do (unseen round 11, best_state_deepcopy).
    for run, severity in (
        (syn.make_run(BEST_SNAPSHOT_CELL), "info"),
        (syn.make_run(BEST_SNAPSHOT_CELL, gpus=[syn.gpu()]), "low"),
    ):
        f = only(rules_for(run, syn.make_analysis({"sync": 0.02})), "syncs.needed_read")
        assert f.severity == severity


PACKED_LOOP = """\
for x, lens, y in loader:
    x, y = x.to(device), y.to(device)
    packed = pack_padded_sequence(emb(x), lens.cpu(), batch_first=True, enforce_sorted=False)
    out, _ = rnn(nn.utils.rnn.pack_padded_sequence(out, lengths=lens.tolist()))
    loss = loss_fn(head(out), y)
    opt.zero_grad(); loss.backward(); opt.step()
"""


def test_packing_lengths_kept_on_the_cpu_are_no_device_reads():
    """pack_padded_sequence takes its lengths on the CPU; a collate function's lengths stay
    there while the loop moves the batch: ``lens.cpu()`` is no read of a device value (issue 26:
    an LSTM loop 'reads device values on the host every step' at such a line). Lengths the loop
    moves to the device and reads back are a read."""
    assert scan_source(PACKED_LOOP).syncs == ()
    moved = PACKED_LOOP.replace("x, y = x.to(device), y.to(device)",
                                "x, lens, y = x.to(device), lens.to(device), y.to(device)")  # fmt: skip
    assert [s.kind for s in scan_source(moved).syncs] == ["cpu", "tolist"]
    # A .cpu() read elsewhere in the loop is a read as before.
    logged = PACKED_LOOP.replace("opt.step()\n", "opt.step()\n    losses.append(loss.cpu())\n")
    assert [s.kind for s in scan_source(logged).syncs] == ["cpu"]


def test_live_loader_fix_reaches_a_loader_the_cell_pulls_through_iter_and_next(ip):
    """`it = iter(loader)` in the measured cell, then `next(it)` each step (the loop iterates a
    range): the loader is an earlier cell's, the iterator the cell's own. Rebuilt above the
    cell's lines, the new loader is the one `iter()` reads, in this kernel and in a fresh one.
    An iterator made in an earlier cell is left alone: rebuilding the loader would restart its
    epoch (a re-run continues where the last run stopped)."""
    ip.run_cell(
        "from torch.utils.data import DataLoader, Dataset\n"
        "class Fourths(Dataset):\n"
        "    def __len__(self): return 32\n"
        "    def __getitem__(self, i): return (torch.full((2,), i / 4),)\n"
        "pulled_loader = DataLoader(Fourths(), batch_size=4, shuffle=True)\n"
        "earlier_it = iter(pulled_loader)"
    )
    cell = "pull_it = iter(pulled_loader)\nfor step in range(3):\n    (x,) = next(pull_it)\n    y = x * 2\n"
    run = syn.make_run(cell, cpu_count=2)
    findings = rules_for(run, syn.make_analysis({"data": 0.5}), namespace=ip.user_ns)
    (fixed,) = attach_fixes([only(findings, "input.loader_workers")], cell, namespace=ip.user_ns)
    after = fixed.proposal.source_after
    assert after is not None, fixed.proposal.refusal
    assert "live `pulled_loader`" in after.splitlines()[0]
    assert after.index("pulled_loader = ") < after.index("iter(pulled_loader)")
    assert ip.run_cell(after).success
    new = ip.user_ns["pulled_loader"]
    assert (new.num_workers, new.batch_size, type(new.sampler).__name__) == (2, 4, "RandomSampler")
    # The iterator of an earlier cell: no rebuild reaches it without restarting its epoch.
    earlier = "for step in range(3):\n    (x,) = next(earlier_it)\n    y = x * 2\n"
    run = syn.make_run(earlier, cpu_count=2)
    findings = rules_for(run, syn.make_analysis({"data": 0.5}), namespace=ip.user_ns)
    (fixed,) = attach_fixes([only(findings, "input.loader_workers")], earlier, namespace=ip.user_ns)
    assert fixed.proposal.source_after is None
    assert "`earlier_it` is an iterator over a DataLoader, made in an earlier cell" in (
        fixed.proposal.refusal or ""
    )


@pytest.mark.parametrize(
    "cell",
    [
        "for epoch in range(2):\n    train_epoch()\n    print(score())\n",
        "fit_epochs(2)\n",
    ],
    ids=["called-by-the-cell", "called-by-a-function-the-cell-calls"],
)
def test_live_loader_fix_reaches_a_global_loader_a_function_of_an_earlier_cell_trains_on(ip, cell):
    """`def train_epoch(): for x in global_loader: ... loss.backward()` in an earlier cell; the
    measured cell only calls `train_epoch()`, naming no loader. The function reads the global at
    each call, so the loader rebuilt above the cell's lines is the one it iterates. The
    evaluation function's loader (no backward there) is not the one."""
    ip.run_cell(
        "from torch.utils.data import DataLoader, Dataset\n"
        "class Eighths(Dataset):\n"
        "    def __len__(self): return 32\n"
        "    def __getitem__(self, i): return (torch.full((2,), i / 8),)\n"
        "global_loader = DataLoader(Eighths(), batch_size=4, shuffle=True)\n"
        "global_eval = DataLoader(Eighths(), batch_size=8)\n"
        "gnet = torch.nn.Linear(2, 1); gopt = torch.optim.SGD(gnet.parameters(), lr=0.1)\n"
        "def train_epoch():\n"
        "    for (x,) in global_loader:\n"
        "        loss = gnet(x).pow(2).mean()\n"
        "        gopt.zero_grad(); loss.backward(); gopt.step()\n"
        "def score():\n"
        "    with torch.no_grad():\n"
        "        return sum(gnet(x).sum().item() for (x,) in global_eval)\n"
        "def fit_epochs(n):\n"
        "    for _ in range(n):\n"
        "        train_epoch()\n"
        "        print(score())\n"
    )
    run = syn.make_run(cell, cpu_count=2)
    findings = rules_for(run, syn.make_analysis({"data": 0.5}), namespace=ip.user_ns)
    (fixed,) = attach_fixes([only(findings, "input.loader_workers")], cell, namespace=ip.user_ns)
    after = fixed.proposal.source_after
    assert after is not None, fixed.proposal.refusal
    assert "live `global_loader`" in after.splitlines()[0] and "global_eval =" not in after
    assert after.endswith(cell)
    assert ip.run_cell(after).success
    new = ip.user_ns["global_loader"]
    assert (new.num_workers, new.batch_size, type(new.sampler).__name__) == (2, 4, "RandomSampler")


def test_train_mode_is_no_finding_for_a_model_whose_layers_ignore_it(ip):
    """An evaluation under torch.no_grad() of a model left in train mode: for Linear and ReLU
    layers (torch's own, none reads `training`) the mode changes nothing, so no card says
    "dropout and batch norm act as in training". A Dropout inside, or a module class of the
    user's (its forward may read self.training), keeps the finding."""
    ip.run_cell(
        "import torch.nn.functional as F\n"
        "blind = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))\n"
        "dropped = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.1), nn.Linear(8, 1))\n"
        "class Mine(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__(); self.l = nn.Linear(4, 1)\n"
        "    def forward(self, x): return F.dropout(self.l(x), 0.1, training=self.training)\n"
        "mine = Mine()\n"
        "xs = [torch.randn(2, 4) for _ in range(3)]"
    )
    steps = syn.steps_record(backward_calls=0, event_counts={"forward": 10, "backward": 0})
    for name, expected in (("blind", False), ("dropped", True), ("mine", True)):
        cell = f"with torch.no_grad():\n    tot = sum({name}(x).sum().item() for x in xs)\n"
        assert ip.run_cell(cell).success
        run = syn.make_run(cell, steps=steps)
        found = ids(rules_for(run, syn.make_analysis(), namespace=ip.user_ns))
        assert ("inference.autograd_on" in found) is expected, (name, found)


GAN_LOOP = (
    "for x in xs:\n"
    "    ld = D(x).mean(); opt_d.zero_grad(); ld.backward(); opt_d.step()\n"
    "    lg = -D(G(x)).mean(); opt_g.zero_grad(); lg.backward(); opt_g.step()\n"
)


def test_fused_fix_names_the_earlier_cells_optimizer_it_cannot_reach(ip):
    """Issue 26 (unseen round 7, a GAN): the cell re-makes D's Adam, G's comes from an earlier
    cell. The fix patches the cell's Adam only; the card must name `opt_g` as still unfused
    and claim no floor for a fix that reaches part of the update. After the fix (the cell's
    Adam fused), G's unfused Adam is still a finding, refused with where to act."""
    from gpu_notebook.fixes import Refusal, apply_fix
    from tests.test_fix_bounds import _series

    ip.run_cell(
        "G = nn.Linear(4, 4); D = nn.Linear(4, 1)\n"
        "opt_g = torch.optim.Adam(G.parameters()); opt_d = torch.optim.Adam(D.parameters())\n"
        "xs = [torch.randn(2, 4) for _ in range(3)]"
    )
    before = "opt_d = torch.optim.Adam(D.parameters(), lr=1e-4)\n" + GAN_LOOP
    assert ip.run_cell(before).success
    window = syn.make_analysis({"optimizer": 0.30})
    run = syn.make_run(before, steps=_series(0.30))
    found = {
        f.rule_id: f for f in rules_for(run, with_run_figures(run, window), namespace=ip.user_ns)
    }
    f = found["launch.unfused_optimizer"]
    assert f.gain_low is None, f.gain_low  # the patch reaches D's update only
    assert any("`opt_g`" in e and "earlier cell" in e for e in f.evidence), f.evidence
    patch = apply_fix(f.fix_id, before, **dict(f.fix_params))
    assert not isinstance(patch, Refusal)
    assert "fused=True" in patch.source_after and "opt_g = " not in patch.source_after

    after = "opt_d = torch.optim.Adam(D.parameters(), lr=1e-4, fused=True)\n" + GAN_LOOP
    assert ip.run_cell(after).success
    run = syn.make_run(after, steps=_series(0.30))
    found = {
        f.rule_id: f for f in rules_for(run, with_run_figures(run, window), namespace=ip.user_ns)
    }
    f = found["launch.unfused_optimizer"]
    assert any("`opt_g`" in e for e in f.evidence), f.evidence
    refusal = apply_fix(f.fix_id, after, **dict(f.fix_params))
    assert isinstance(refusal, Refusal)
    assert "opt_g" in refusal.reason and "already uses" not in refusal.reason, refusal.reason
    assert "(or fused=True)" not in refusal.reason, refusal.reason


def test_a_progress_line_written_by_hand_and_flushed_every_step_is_per_step_logging():
    # Issue 26 item 2: `sys.stdout.write("\rstep ..."); sys.stdout.flush()` every step was no
    # logging fact. In a Jupyter kernel each flush waits for the kernel's output thread to send
    # the text (benchmarks/README: 7.6 ms against 0.46 ms a step unflushed, load 26): named
    # with the log rule's gate, the flush said; a plain print has no such line.
    cell = (
        "import sys\nfor step in range(100):\n    loss = model(x).sum(); loss.backward(); "
        'opt.step()\n    sys.stdout.write(f"\\rstep {step}"); sys.stdout.flush()\n'
        '    print("step", step, flush=True)\n    print("plain")\n'
    )
    run = syn.make_run(cell, steps=syn.steps_record(100, forward_calls=1, backward_calls=1))
    f = only(rules_for(run, syn.make_analysis({"forward": 0.4, "other": 0.3})), "logging.per_step")
    assert f.fix_id == "log_every_n" and f.line == 5
    flush = next(e for e in f.evidence if "flushes on every step" in e)
    assert flush.startswith("line 5, 6 flushes") and "output thread" in flush


@pytest.mark.parametrize(
    "imports, clear, show",
    [
        ("from IPython.display import clear_output, display, HTML", "clear_output", "display"),
        ("import IPython\nfrom IPython.display import HTML", "IPython.display.clear_output",
         "IPython.display.display"),
        ("from IPython import display\nfrom IPython.display import HTML", "display.clear_output",
         "display.display"),
    ],
)  # fmt: skip
def test_a_redraw_every_step_is_logging_and_its_clear_is_gated_with_its_display(
    imports: str, clear: str, show: str
):
    # Unseen 44: `clear_output(wait=True); display(HTML(curve(losses)))` every step. The clear
    # was no logging fact: the fix gated the display alone, leaving the clear (a flush of the
    # cell's streams and a message) on every step. The pair is one redraw: both are logging
    # lines, the clear said as a flush, and the fix gates both (the picture shown every 10
    # steps as one, nothing stacked).
    cell = (
        f"{imports}\nfor step in range(100):\n"
        "    loss = model(x).sum(); loss.backward(); opt.step()\n"
        f"    {clear}(wait=True)\n    {show}(HTML(f'<b>{{step}}</b>'))\n"
    )
    clear_line = cell.splitlines().index(f"    {clear}(wait=True)") + 2  # Run.cell_source's
    run = syn.make_run(cell, steps=syn.steps_record(100, forward_calls=1, backward_calls=1))
    f = only(rules_for(run, syn.make_analysis({"forward": 0.4, "other": 0.3})), "logging.per_step")
    assert f.fix_id == "log_every_n" and f.line == clear_line, (f.line, cell)
    flush = next(e for e in f.evidence if "flushes on every step" in e)
    assert flush.startswith(f"line {clear_line} flushes") and "clear_output()" in flush, flush
    patch = apply_fix(f.fix_id, cell, **dict(f.fix_params))
    assert not isinstance(patch, Refusal), patch
    gated = patch.source_after.split("    if step % 10 == 0:\n", 1)[1]
    assert gated.startswith(
        f"        {clear}(wait=True)\n        {show}(HTML(f'<b>{{step}}</b>'))\n"
    ), patch.source_after
    assert f"\n    {clear}(" not in patch.source_after, patch.source_after  # none left ungated
