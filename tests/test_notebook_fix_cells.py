"""The patched cell a notebook user inserts: it runs in the shell that measured the cell and in
a fresh kernel where only the earlier cells ran, whatever IPython lines the cell holds.

Found on notebook programs nobody had seen (issue 26): a cell that makes its loader on a
``%time`` line got a rebuild of the live loader *above* that line (overwritten by it: the fix did
nothing, and a fresh kernel raised NameError); a cell that sets two attributes of the live
Trainer was taken as binding it twice, so the next fix was refused; one ``!`` line hid every
call of the cell from the reading of what it trains.
"""

from __future__ import annotations

import dataclasses

import pytest

from gpu_notebook.analysis.elsewhere import source_trains
from gpu_notebook.cell.scan import scan_source
from gpu_notebook.words.proposals import attach_fixes
from tests.scenarios import synthetic as syn
from tests.test_rules import ids, only, rules_for

DATASET = (
    "from torch.utils.data import DataLoader, Dataset\n"
    "class Sevens(Dataset):\n"
    "    def __len__(self): return 16\n"
    "    def __getitem__(self, i): return (torch.full((2,), 7.0 * i),)\n"
)


@pytest.mark.parametrize(
    "making",
    [
        "%time ipy_loader = DataLoader(Sevens(), batch_size=4)\n",
        "%time ipy_loader = DataLoader(Sevens(), \\\n    batch_size=4)\n",
        "%prun -q ipy_loader = DataLoader(Sevens(), batch_size=4)\n",
    ],
    ids=["time", "time-continued", "prun"],
)
def test_a_loader_an_ipython_line_binds_is_rebuilt_below_that_line_and_runs_fresh(ip, making):
    assert ip.run_cell(DATASET).success
    cell = "!echo reading\n" + making + "for (x,) in ipy_loader:\n    y = x * 2\n"
    assert ip.run_cell(cell).success  # the measured run: `ipy_loader` now lives in the shell
    run = syn.make_run(cell, cpu_count=2)
    finding = only(
        rules_for(run, syn.make_analysis({"data": 0.5}), namespace=ip.user_ns),
        "input.loader_workers",
    )
    (fixed,) = attach_fixes([finding], cell, namespace=ip.user_ns)
    after = fixed.proposal.source_after
    assert after is not None, fixed.proposal.refusal
    # Below the line that makes the loader (above it, that line would replace the rebuilt one).
    made = after.index(making)
    assert made < after.index("# gpucheck fix: ") < after.index("for (x,) in ipy_loader")
    ip.user_ns.pop("ipy_loader")  # a fresh kernel: only the earlier cells ran
    result = ip.run_cell(after)
    assert result.success, result.error_in_exec
    assert ip.user_ns["ipy_loader"].num_workers == finding.fix_params["num_workers"]


def test_ipython_lines_that_assign_bind_their_names_and_attributes_bind_none():
    cell = (
        "files = !ls\n"
        "%time a, (b, *c) = 1, (2, 3)\n"
        "%timeit t = 1\n"  # timeit runs it in a function of its own: nothing stays bound
        "trainer.args.dataloader_num_workers = 2\n"
        "trainer.args.dataloader_persistent_workers = True\n"
        "cache['k'] = 1\n"
    )
    bound = {name: (first, last) for name, first, last, _top in scan_source(cell).bindings}
    assert bound == {"files": (1, 1), "a": (2, 2), "b": (2, 2), "c": (2, 2)}


def test_a_cell_that_sets_attributes_of_the_live_datamodule_still_gets_its_loader_fix(ip):
    """Setting attributes of an object from an earlier cell does not bind its name: the fix
    is placed as for any object of an earlier cell (the first fix of a framework writes such
    lines; the next one was refused as "bound in this cell more than once")."""
    from tests.test_frameworks import DATAMODULE

    assert ip.run_cell(DATAMODULE).success
    cell = (
        "dm.num_workers = 0\n"
        "dm.note = 'first try'\n"
        "trainer = L.Trainer(max_steps=2, accelerator='cpu', logger=False, enable_checkpointing=False,\n"
        "                    enable_progress_bar=False, enable_model_summary=False)\n"
        "trainer.fit(lit, datamodule=dm)\n"
    )
    run = syn.make_run(cell, cpu_count=8)
    finding = only(
        rules_for(run, syn.make_analysis({"data": 0.6}), namespace=ip.user_ns),
        "input.loader_workers",
    )
    (fixed,) = attach_fixes([finding], cell, namespace=ip.user_ns)
    after = fixed.proposal.source_after
    assert after is not None, fixed.proposal.refusal
    wanted = finding.fix_params["num_workers"]
    assert after.index(f"dm.num_workers = {wanted}") < after.index("trainer.fit")


def test_an_ipython_line_does_not_hide_that_the_cell_trains(ip):
    """A training cell that stopped before its first backward (an error on its first lines) is
    not read as an inference loop because it also holds a ``!`` line."""
    assert ip.run_cell("ipy_model = torch.nn.Linear(2, 1)").success
    cell = "!echo start\nfor x in batches:\n    loss = ipy_model(x).sum()\n    loss.backward()\n"
    assert source_trains(cell)
    run = syn.make_run(cell, cpu_count=2)  # no backward counted: the cell raised before it
    found = rules_for(run, syn.make_analysis({"forward": 0.5}), namespace=ip.user_ns)
    assert "inference.autograd_on" not in ids(found)


def test_a_finished_trainer_fit_again_is_not_read_as_inference(ip):
    """A Lightning Trainer that reached its max_steps fits nothing the second time: the rerun
    (or a patched cell run in the same kernel) counts no backward while the module it hands to
    ``fit`` stays in train mode. That is no inference loop to put under inference_mode."""
    from tests.test_frameworks import DATAMODULE

    assert ip.run_cell(DATAMODULE).success
    setup = (
        "done_lit = Lit()\n"
        "done_trainer = L.Trainer(max_steps=3, accelerator='cpu', logger=False,\n"
        "    enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)\n"
    )
    assert ip.run_cell(setup).success
    cell = "done_trainer.fit(done_lit, datamodule=DM())\n"
    for name in ("first_fit", "second_fit"):
        result = ip.run_cell(f"%%gpucheck -q -o {name}\n" + cell)
        assert result.success, result.error_in_exec
    first, second = ip.user_ns["first_fit"], ip.user_ns["second_fit"]
    assert first.run.steps.event_counts.get("backward", 0) > 0
    assert second.run.steps.event_counts.get("backward", 0) == 0  # nothing fitted again
    rules = [f.rule_id for f in second.findings]
    assert "inference.autograd_on" not in rules
    assert rules[0] == "compare.no_step_after"  # the before/after without figures, said first


def test_a_fix_that_did_nothing_is_not_offered_again_by_another_rule_of_its_cause():
    """The workers fix measured no effect (it did not reach the loop); the next run's data
    wait is then read as a slow dataset whose fix is the same change with more of it. The card
    says what the fix measured and offers no patch, whichever rule names it now."""
    from gpu_notebook.report.compare import FIX_HEADER, compare, findings_after

    cell = "for x, y in loader:\n    step(x, y)\n"
    fixed_cell = "%%gpucheck\n" + FIX_HEADER + "DataLoader workers\n" + cell
    tried = syn.proposal_finding("dataloader_workers", fixed_cell, bound=2.3)
    tried = dataclasses.replace(
        tried, rule_id="input.loader_workers", fix_params={"num_workers": 2}
    )
    proposer = syn.make_report(cell, step_median_s=0.1, findings=[tried])
    more = syn.proposal_finding("dataloader_workers", fixed_cell + "# 4 workers\n", bound=20.0)
    more = dataclasses.replace(more, rule_id="input.slow_dataset", fix_params={"num_workers": 4})
    other = syn.proposal_finding("bigger_batch", fixed_cell + "# x4\n", bound=1.3)
    after = syn.make_report(
        fixed_cell, step_median_s=0.1, started_at="2026-01-01T00:01:00+0000", findings=[more, other]
    )
    comparison = compare(proposer, after)
    assert comparison.samples is not None and comparison.fix_id == "dataloader_workers"
    assert comparison.samples.outcome == "no measurable change"
    again, kept = findings_after(proposer, after, comparison)
    assert again.proposal is not None and again.proposal.source_after is None
    assert "not offered again" in (again.proposal.refusal or "")
    assert kept == other  # another fix is offered as it was


def test_a_rerun_that_took_no_step_says_so_first_instead_of_a_before_after():
    from gpu_notebook.report.compare import compare, find_baseline, findings_after

    cell = "trainer.fit(lit, datamodule=dm)\n"
    before = syn.make_report(cell, step_median_s=0.1)
    again = syn.make_report(cell, step_median_s=None, started_at="2026-01-01T00:01:00+0000")
    again = dataclasses.replace(
        again,
        run=dataclasses.replace(
            again.run, steps=dataclasses.replace(again.run.steps, steps=(), step_count=0)
        ),
    )
    assert find_baseline([before, again], again) is before
    comparison = compare(before, again)
    assert comparison.speedup is None
    first, *_ = findings_after(before, again, comparison)
    assert first.rule_id == "compare.no_step_after"
    # A run that took steps, or a cell that failed before its first one, gets no such note.
    assert findings_after(before, before, comparison) == before.findings
    failed = dataclasses.replace(again, run=dataclasses.replace(again.run, status="error"))
    assert findings_after(before, failed, comparison) == failed.findings


def test_a_loader_made_by_a_function_of_an_earlier_cell_is_refused_naming_that_function(ip):
    """`for x, y in batches():` makes a new loader on each call inside a function of an earlier
    cell: no patch of this cell reaches it, and the refusal says where to act."""
    assert ip.run_cell(DATASET).success
    assert ip.run_cell(
        "def sevens_batches(bs=4):\n    return DataLoader(Sevens(), batch_size=bs)\n"
    ).success
    cell = "for epoch in range(2):\n    for (x,) in sevens_batches():\n        y = x * 2\n"
    run = syn.make_run(cell, cpu_count=2)
    finding = only(
        rules_for(run, syn.make_analysis({"data": 0.5}), namespace=ip.user_ns),
        "input.loader_workers",
    )
    (fixed,) = attach_fixes([finding], cell, namespace=ip.user_ns)
    assert fixed.proposal.source_after is None
    assert "`sevens_batches()`" in fixed.proposal.refusal


STACKED_LOOP = (
    "st_opt = torch.optim.Adam(st_model.parameters())\n"
    "for x in st_xs:\n"
    "    loss = st_model(x).pow(2).mean(); loss.backward(); st_opt.step(); st_opt.zero_grad()\n"
    "    st_losses.append(loss.item())\n"
)


@pytest.mark.parametrize("outer", ["%%time\n", "%%capture st_cap\n"], ids=["time", "capture"])
def test_the_patched_cell_keeps_the_magics_stacked_above_gpucheck(ip, outer):
    """The inserted cell of a `%%time`'d (or `%%capture`d) cell lost its `%%time` (unseen
    notebooks, nb8): the patched cell is the cell the user ran, and its run is compared with
    the run that proposed it."""
    setup = "st_model = torch.nn.Linear(8, 1)\nst_xs = [torch.randn(16, 8) for _ in range(40)]\n"
    assert ip.run_cell(setup + "st_losses = []").success
    for name in ("st_rep", "st_rep2"):
        ip.user_ns.pop(name, None)
    assert ip.run_cell(outer + "%%gpucheck -q -o st_rep\n" + STACKED_LOOP).success
    patched = [f for f in ip.user_ns["st_rep"].findings if f.proposal and f.proposal.source_after]
    assert patched  # the per-step .item() at least
    for f in patched:
        assert f.proposal.source_after.startswith(outer + "%%gpucheck -q -o st_rep\n")
    fix = patched[0]
    after = fix.proposal.source_after.replace("-o st_rep\n", "-o st_rep2\n", 1)
    result = ip.run_cell(after)
    assert result.success, result.error_in_exec
    comparison = ip.user_ns["st_rep2"].comparison
    assert comparison is not None and comparison.fix_id == fix.fix_id


def test_a_gpucheck_called_inside_another_magics_body_keeps_only_its_own_line(ip):
    """Only magics stacked on the cell's first lines are the cell's: a run_cell_magic call
    from a body is not under them."""
    assert ip.run_cell(
        "st_model = torch.nn.Linear(8, 1)\nst_xs = [torch.randn(16, 8)] * 40"
    ).success
    ip.user_ns["st_losses"] = []
    ip.user_ns.pop("st_rep", None)
    cell = f"%%time\nst_n = 1\nget_ipython().run_cell_magic('gpucheck', '-q -o st_rep', {STACKED_LOOP!r})\n"
    assert ip.run_cell(cell).success
    patched = [f for f in ip.user_ns["st_rep"].findings if f.proposal and f.proposal.source_after]
    assert patched
    assert all(f.proposal.source_after.startswith("%%gpucheck") for f in patched)
