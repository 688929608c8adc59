"""Every offered fix changes what its finding measured, and never repeats a setting that
already holds (issue 26 item 1): real torch loaders and the real step clock."""

from __future__ import annotations

import dataclasses
import time

import pytest

from gpu_notebook.cell.blocks import periodic_blocks
from gpu_notebook.cell.scan import scan_source
from gpu_notebook.fixes import Patch, apply_fix
from tests.scenarios import synthetic as syn
from tests.test_rules import only, rules_for

LBFGS = """
import torch
seq = torch.nn.Linear(4, 1)
criterion = torch.nn.MSELoss()
optimizer = torch.optim.LBFGS(seq.parameters(), lr=0.1, max_iter=3)
input, target = torch.randn(8, 4), torch.randn(8, 1)
READS = []
for i in range(12):
    print('STEP: ', i)
    def closure():
        optimizer.zero_grad()
        loss = criterion(seq(input), target)
        READS.append(1)
        print('loss:', loss.item())
        loss.backward()
        return loss
    optimizer.step(closure)
"""


def test_the_sync_fix_gates_the_closures_device_reads_not_a_print_of_the_step_counter():
    patch = apply_fix("throttle_host_syncs", LBFGS)
    assert isinstance(patch, Patch)
    after = patch.source_after
    assert "    print('STEP: ', i)\n" in after  # an int: no device read, left as it is
    assert "        if i % 10 == 0:\n            print('loss:', loss.item())" in after
    ns: dict = {}
    exec(compile(after, "<patched>", "exec"), ns)  # a fresh namespace: every name bound
    # The closure still runs every step; its printed read only on steps 0 and 10.
    assert len(ns["READS"]) >= 12


def test_the_sync_fix_gates_every_closure_read_the_rule_names_a_stored_one_too():
    # The facts see the closure's reads as per-step reads (issue 23): the fix gates the lines
    # they point at, a read stored into a dict included (its own finder skipped that one).
    source = LBFGS.replace("READS.append(1)", "LAST['loss'] = loss.item()").replace(
        "READS = []", "LAST = {}"
    )
    (line,) = [s for s in scan_source(source).syncs if "LAST" in s.text]
    assert (line.kind, line.gated, line.step_loop_line) == ("item", False, 8)
    patch = apply_fix("throttle_host_syncs", source)
    assert isinstance(patch, Patch)
    after = patch.source_after
    assert "        if i % 10 == 0:\n            LAST['loss'] = loss.item()\n" in after
    ns: dict = {}
    exec(compile(after, "<patched>", "exec"), ns)
    assert set(ns["LAST"]) == {"loss"}


def test_a_variable_modulus_is_a_periodic_block_with_its_value_when_the_cell_gives_it():
    src = (
        "eval_interval = 2000\nlog_interval = 1\niter_num = 0\nwhile True:\n"
        "    if iter_num % eval_interval == 0:\n        torch.save(model.state_dict(), 'ckpt.pt')\n"
        "    if iter_num % log_interval == 0:\n        print(loss)\n    iter_num += 1\n"
    )
    (block,) = periodic_blocks(scan_source(src).tree)
    assert (block.line, block.every, block.work) == (5, 2000, "a checkpoint save")
    # nanoGPT's configurator may rebind it at run time: periodic, period unknown.
    (first, _second) = periodic_blocks(
        scan_source("exec(open('configurator.py').read())\n" + src).tree
    )
    assert first.every == 0 and first.line == 6


def _loader_run(num_workers: int, pin: bool):
    """A real DataLoader iterated under the real step clock; its record."""
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    from gpu_notebook.capture.stepclock import StepClock

    loader = DataLoader(TensorDataset(torch.randn(64, 4)), batch_size=8,
                        num_workers=num_workers, pin_memory=pin)  # fmt: skip
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    clock = StepClock(time.perf_counter_ns())
    clock.install()
    try:
        for (x,) in loader:
            model(x).sum().backward()
            opt.step()
    finally:
        clock.uninstall()
    return clock.record()


def test_the_step_clock_reads_the_iterated_loaders_settings():
    record = _loader_run(2, False)
    assert (record.loader_num_workers, record.loader_pin_memory) == (2, False)
    assert record.loader_batch_tensors == 1  # a TensorDataset of one tensor: (x,) batches


def test_the_step_clock_counts_the_tensors_a_batch_holds():
    """Each tensor of a batch is a shared-memory storage a worker fills and the main process
    receives (the workers fix's low end pays for each): read from the loader's first batch,
    in tuples, lists and dicts, without calling the user's code."""
    from collections import UserDict

    import torch

    from gpu_notebook.capture.stepclock import _batch_tensors

    x = torch.zeros(2, 3)
    assert _batch_tensors((x, x)) == 2
    assert _batch_tensors({"input_ids": x, "mask": x, "labels": [x, (x,)]}) == 4
    assert _batch_tensors(UserDict({"a": x, "b": x, "c": 3})) == 2
    assert _batch_tensors(x) == 1
    assert _batch_tensors(("no", 3)) is None
    assert _batch_tensors([[x] * 40] * 40) == 64  # counted no further


def test_a_loader_with_enough_workers_at_run_time_gets_no_workers_advice():
    # num_workers=args.workers: no literal in the source; the iterator had 4.
    cell = "loader = DataLoader(ds, batch_size=8, num_workers=args.workers)\nfor x, y in loader:\n    step(x)\n"
    run = syn.make_run(cell, cpu_count=4)
    steps = dataclasses.replace(run.steps, loader_num_workers=4, loader_pin_memory=True)
    findings = rules_for(dataclasses.replace(run, steps=steps), syn.make_analysis({"data": 0.6}))
    assert "input.loader_workers" not in [f.rule_id for f in findings]


def test_a_loader_with_enough_workers_at_run_time_that_still_waits_names_the_dataset():
    # num_workers=d["workers"] in a factory: no literal; the iterator had 2 on 2 cores and the
    # step still waited. The workers rule steps aside; the dataset rule must speak (neither did).
    cell = (
        "def make_loader(d):\n"
        "    return DataLoader(ds, batch_size=8, num_workers=d['workers'], persistent_workers=True)\n"
        "for x, y in make_loader(cfg):\n    step(x)\n"
    )
    run = syn.make_run(cell, cpu_count=2)
    steps = dataclasses.replace(run.steps, loader_num_workers=2, loader_pin_memory=True)
    findings = rules_for(dataclasses.replace(run, steps=steps), syn.make_analysis({"data": 0.6}))
    assert "input.loader_workers" not in [f.rule_id for f in findings]
    slow = only(findings, "input.slow_dataset")
    assert "already 2 worker(s)" in " ".join(slow.evidence) and slow.fix_id is None


def test_workers_that_wait_rather_than_compute_are_told_to_grow_not_to_stop():
    # 2 workers on 2 cores that used 4% of a core in all (a remote store's latency): on main
    # "adding more would compete for the same cores", with no fix; they do not compete.
    cell = (
        "loader = DataLoader(ds, batch_size=8, num_workers=2)\nfor x, y in loader:\n    step(x)\n"
    )
    analysis = syn.make_analysis({"data": 0.6})
    idle = dataclasses.replace(analysis.utilization, children_cpu_mean_pct=4.0)
    read = syn.make_run(cell, cpu_count=2, series=syn.worker_samples(2, 3, 4.0))
    f = only(rules_for(read, dataclasses.replace(analysis, utilization=idle)), "input.slow_dataset")
    assert "they wait" in f.title and "num_workers=4" in f.fix
    assert f.fix_id == "dataloader_workers" and f.fix_params["num_workers"] == 4
    # A run whose sampler never read the workers (listed once, or never: a short cell) says
    # nothing of their waiting and offers no more of them (notebook 24: num_workers=4 on 2
    # cores after 60 ms of steps, "0% of a core").
    for series in (syn.worker_samples(2, 0), syn.worker_samples(2, 2), None):
        unread = syn.make_run(cell, cpu_count=2, series=series)
        f = only(
            rules_for(unread, dataclasses.replace(analysis, utilization=idle)),
            "input.slow_dataset",
        )
        assert f.fix_id is None and "they wait" not in f.title, series
    busy = dataclasses.replace(analysis.utilization, children_cpu_mean_pct=180.0)
    f = only(
        rules_for(syn.make_run(cell, cpu_count=2), dataclasses.replace(analysis, utilization=busy)),
        "input.slow_dataset",
    )
    assert f.fix_id is None and "compete for the same cores" in " ".join(f.evidence)


def test_too_few_workers_at_run_time_are_named_and_pinned_memory_is_not_asked_again():
    cell = "loader = DataLoader(ds, batch_size=8, num_workers=args.workers)\nfor x, y in loader:\n    step(x)\n"
    run = syn.make_run(cell, cpu_count=8)
    steps = dataclasses.replace(run.steps, loader_num_workers=1, loader_pin_memory=True)
    f = only(
        rules_for(dataclasses.replace(run, steps=steps), syn.make_analysis({"data": 0.6})),
        "input.loader_workers",
    )
    assert "num_workers=1 now" in f.fix and "pin_memory" not in f.fix
    assert f.fix_params["pin_memory"] is False


def test_a_refusal_asks_only_for_what_would_change():
    refused = apply_fix("dataloader_workers", "for x in loader:\n    step(x)\n",
                        num_workers=2, pin_memory=False)  # fmt: skip
    assert "num_workers=2" in refused.reason and "pin_memory" not in refused.reason


@pytest.mark.parametrize(
    "setup",
    ["model = torch.compile(model)\n", "model.compile()\n"],
)
def test_a_compiled_model_is_never_told_to_compile(setup):
    cell = "model = nn.Linear(4, 4)\n" + setup + "for x in data:\n    model(x).sum().backward()\n"
    assert scan_source(cell).compiled


def test_the_fused_optimizer_fix_says_the_loss_can_change_in_its_last_digits():
    cell = "opt = torch.optim.Adam(model.parameters())\nfor x in loader:\n    loss = model(x)\n    loss.backward(); opt.step()\n"
    f = only(
        rules_for(syn.make_run(cell), syn.make_analysis({"optimizer": 0.3})),
        "launch.unfused_optimizer",
    )
    assert "last digits" in f.fix


def test_a_datamodule_the_cell_builds_gets_its_setting_after_that_line_and_runs_fresh(ip):
    from gpu_notebook.words.proposals import attach_fixes
    from tests.test_frameworks import DATAMODULE

    assert ip.run_cell(DATAMODULE).success  # dm = DM() lives from an earlier cell too
    cell = (
        "dm = DM()\n"
        "trainer = L.Trainer(max_steps=2, accelerator='cpu', logger=False, enable_checkpointing=False,\n"
        "                    enable_progress_bar=False, enable_model_summary=False)\n"
        "trainer.fit(lit, datamodule=dm)\n"
    )
    run = syn.make_run(cell, cpu_count=8)
    f = only(
        rules_for(run, syn.make_analysis({"data": 0.6}), namespace=ip.user_ns),
        "input.loader_workers",
    )
    (fixed,) = attach_fixes([f], cell, namespace=ip.user_ns)
    after = fixed.proposal.source_after
    assert after is not None
    wanted = f.fix_params["num_workers"]
    # Below the cell's own binding, not above it (there `dm` is the old object, or unbound).
    assert (
        after.index("dm = DM()")
        < after.index(f"dm.num_workers = {wanted}")
        < after.index("trainer.fit")
    )
    ip.user_ns.pop("dm")  # a fresh kernel has no `dm` before the cell binds it
    assert ip.run_cell(after).success
    assert ip.user_ns["dm"].train_dataloader().num_workers == wanted


def test_the_logging_fix_reaches_the_logs_inside_the_closure_the_loop_defines():
    patch = apply_fix("log_every_n", LBFGS)
    assert isinstance(patch, Patch)
    after = patch.source_after
    assert "    if i % 10 == 0:\n        print('STEP: ', i)" in after
    assert "        if i % 10 == 0:\n            print('loss:', loss.item())" in after
    exec(compile(after, "<patched>", "exec"), {})


def test_a_periodic_block_of_a_cell_with_ipython_lines_is_found_at_its_notebook_line():
    # The blocks are read from the facts' parse (IPython lines hidden, lines as the notebook
    # numbers them); a parse of the raw body found none in such a cell.
    src = "%time x = 1\nfor i in range(100):\n    !echo hi\n    if i % 10 == 0:\n        print(i)\n"
    (block,) = periodic_blocks(scan_source(src, line_offset=1).tree)
    assert (block.line, block.every, block.text) == (5, 10, "if i % 10 == 0:")


UNSPLIT_STREAMS = '''
import torch
from torch.utils.data import IterableDataset, get_worker_info


class Whole(IterableDataset):
    """Yields every item from a nested generator: each worker would yield them all."""
    def __iter__(self):
        def gen():
            for i in range(32):
                yield torch.full((4,), float(i))
        return gen()


def _mine(n):
    info = get_worker_info()
    start, step = (0, 1) if info is None else (info.id, info.num_workers)
    return range(start, n, step)


class Split(IterableDataset):
    """Splits its stream by worker through a module-level helper."""
    def __iter__(self):
        return (torch.full((4,), float(i)) for i in _mine(32))
'''


def _stream_run(dataset_name: str):
    """A real IterableDataset iterated under the real step clock; its record."""
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    from gpu_notebook.capture.stepclock import StepClock

    space: dict = {}
    exec(compile(UNSPLIT_STREAMS, "<streams>", "exec"), space)
    dataset = space[dataset_name]() if dataset_name in space else TensorDataset(torch.randn(32, 4))
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    clock = StepClock(time.perf_counter_ns())
    clock.install()
    try:
        for x in DataLoader(dataset, batch_size=8):
            model(x[0] if isinstance(x, list) else x).sum().backward()
            opt.step()
    finally:
        clock.uninstall()
    return clock.record()


def test_the_step_clock_reads_whether_the_loops_stream_is_split_by_worker():
    # An IterableDataset is copied into every worker (torch's "Multi-process data loading");
    # one whose code never asks get_worker_info yields every item once per worker.
    assert _stream_run("Whole").loader_unsplit_stream is True
    assert _stream_run("Split").loader_unsplit_stream is False
    assert _stream_run("map-style").loader_unsplit_stream is False


def test_an_unsplit_stream_gets_no_workers_patch_and_is_told_to_split_first():
    # issue 26 (unseen round 3): a generator-backed IterableDataset in a class method got
    # `num_workers=2` patched in: two workers each yielding the whole stream, every item twice.
    cell = "loader = DataLoader(Stream(), batch_size=8)\nfor x in loader:\n    step(x)\n"
    run = syn.make_run(cell, cpu_count=4)
    unsplit = dataclasses.replace(
        run, steps=dataclasses.replace(run.steps, loader_unsplit_stream=True)
    )
    f = only(rules_for(unsplit, syn.make_analysis({"data": 0.6})), "input.loader_workers")
    assert f.fix_id is None and "get_worker_info" in f.fix
    # The same stream with a worker_init_fn (the user's own split) keeps its patch.
    given = cell.replace("batch_size=8", "batch_size=8, worker_init_fn=shard")
    run = syn.make_run(given, cpu_count=4)
    unsplit = dataclasses.replace(
        run, steps=dataclasses.replace(run.steps, loader_unsplit_stream=True)
    )
    f = only(rules_for(unsplit, syn.make_analysis({"data": 0.6})), "input.loader_workers")
    assert f.fix_id == "dataloader_workers"


def _zipped_run(lean_after: int | None, train: bool = True):
    """Two DataLoaders zipped, a manual update (no optimizer object: the loader anchors the
    steps, as in a loop whose torch.compile removed the optimizer hooks); the record."""
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    from gpu_notebook.capture.stepclock import StepClock

    a = DataLoader(TensorDataset(torch.randn(320, 4)), batch_size=8)
    b = DataLoader(TensorDataset(torch.randn(480, 4)), batch_size=8)
    model = torch.nn.Linear(4, 1)
    clock = StepClock(time.perf_counter_ns())
    clock.install()
    try:
        for i, ((xa,), (xb,)) in enumerate(zip(a, b, strict=False)):
            if train:
                (model(xa).sum() + model(xb).sum()).backward()
                with torch.no_grad():
                    for p in model.parameters():
                        p -= 0.01 * p.grad
                        p.grad = None
            else:
                with torch.no_grad():
                    model(xa), model(xb)
            if i == lean_after:
                clock.lean()
    finally:
        clock.uninstall()
    return clock.record()


@pytest.mark.parametrize("lean_after", [None, 10])
def test_a_loader_anchored_step_that_reads_two_loaders_is_one_step(lean_after):
    # issue 26 (unseen round 3): `for (xa, ya), (xb, yb) in zip(a, b)` under a torch.compile'd
    # model (its optimizer hooks gone, steps anchored at the DataLoader) counted each read as a
    # step: 400 steps for 200 iterations, twice the samples/s, a bigger batch's factor misread.
    record = _zipped_run(lean_after)
    assert record.anchor == "dataloader"
    # 40 iterations (+ the warm-up's first read, + the read that ends the shorter loader).
    assert 40 <= record.step_count <= 42, record.step_count
    assert [s.batch_size for s in record.steps][4:8] == [16, 16, 16, 16]
    # A loop with no backward (inference) reading the two zipped loaders is one step an
    # iteration too: a read from another iterator joins the open step (steps2, 2154ca5).
    inference = _zipped_run(None, train=False)
    assert 40 <= inference.step_count <= 42, inference.step_count
    assert [s.batch_size for s in inference.steps][4:8] == [16, 16, 16, 16]
