"""Input-pipeline fixes: DataLoader workers, non-blocking copies, bigger batches.

Each patched cell is checked line by line and, where it can run on a CPU, run with real torch
on tiny synthetic data.
"""

from __future__ import annotations

import contextlib
import io
from typing import Any

import pytest

from gpu_notebook.fixes import Patch, Refusal, apply_fix

torch = pytest.importorskip("torch")

TRAIN_CELL = """\
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
X, y = torch.randn(96, 8), torch.randint(0, 3, (96,))
train_ds = TensorDataset(X, y)

# the loader: shuffled, small batches
loader = DataLoader(
    train_ds,
    batch_size=16,
    shuffle=True,  # reshuffle every epoch
    num_workers=0,
)
val_loader = torch.utils.data.DataLoader(train_ds, batch_size=32, pin_memory=False)

device = "cpu"
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3)).to(device)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
seen = []
for epoch in range(2):
    for xb, yb in loader:
        xb, yb = xb.to(device), yb.to(device)
        seen.append(xb.shape[0])
        loss = nn.functional.cross_entropy(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def _patch(fix_id: str, source: str, **params: Any) -> Patch:
    result = apply_fix(fix_id, source, **params)
    assert isinstance(result, Patch), result
    return result


def _refusal(fix_id: str, source: str, **params: Any) -> str:
    result = apply_fix(fix_id, source, **params)
    assert isinstance(result, Refusal), result.diff
    return result.reason


def _run(source: str) -> tuple[dict[str, Any], str]:
    """Run a patched cell as plain Python; its namespace and what it printed."""
    namespace: dict[str, Any] = {"__name__": "__gpucheck_cell__"}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(source, "<cell>", "exec"), namespace)
    return namespace, printed.getvalue()


# --------------------------------------------------------------------------------------------
# dataloader_workers
# --------------------------------------------------------------------------------------------


def test_workers_are_set_in_the_loaders_own_layout_and_comments_stay() -> None:
    after = _patch("dataloader_workers", TRAIN_CELL, num_workers=2).source_after
    assert after.splitlines()[0] == (
        "# gpucheck fix: DataLoader workers and pinned memory "
        "(num_workers=2, pin_memory=True, persistent_workers=True)"
    )
    assert (
        "# the loader: shuffled, small batches\n"
        "loader = DataLoader(\n"
        "    train_ds,\n"
        "    batch_size=16,\n"
        "    shuffle=True,  # reshuffle every epoch\n"
        "    num_workers=2,\n"
        "    pin_memory=True,\n"
        "    persistent_workers=True,\n"
        ")\n"
    ) in after
    # A dotted DataLoader is patched too, and pin_memory=False is the thing being fixed.
    assert (
        "val_loader = torch.utils.data.DataLoader(train_ds, batch_size=32, pin_memory=True, "
        "num_workers=2, persistent_workers=True)\n"
    ) in after


@pytest.mark.filterwarnings("ignore:'pin_memory' argument is set as true but no accelerator")
@pytest.mark.parametrize(
    ("call", "patched"),
    [
        pytest.param(
            "DataLoader(\n    ds,\n    batch_size=8,  # fits in memory\n)\n",
            "DataLoader(\n    ds,\n    batch_size=8,  # fits in memory\n    num_workers=2,\n"
            "    pin_memory=True,\n    persistent_workers=True,\n)\n",
            id="one-per-line-trailing-comma-and-comment",
        ),
        pytest.param(
            "DataLoader(ds,  # the data\n           batch_size=8)\n",
            "DataLoader(ds,  # the data\n           batch_size=8,\n           num_workers=2,\n"
            "           pin_memory=True,\n           persistent_workers=True)\n",
            id="aligned-no-trailing-comma",
        ),
        pytest.param(
            "DataLoader(\n    ds\n)\n",
            "DataLoader(\n    ds,\n    num_workers=2,\n    pin_memory=True,\n"
            "    persistent_workers=True\n)\n",
            id="single-argument-on-its-own-line",
        ),
        pytest.param(
            "DataLoader(ds, batch_size=8, )\n",
            "DataLoader(ds, batch_size=8, num_workers=2, pin_memory=True, "
            "persistent_workers=True, )\n",
            id="one-line-trailing-comma",
        ),
        pytest.param(
            "DataLoader()\n",
            "DataLoader(num_workers=2, pin_memory=True, persistent_workers=True)\n",
            id="no-arguments",
        ),
    ],
)
def test_new_arguments_follow_the_layout_of_the_call(call: str, patched: str) -> None:
    after = _patch("dataloader_workers", "loader = " + call, num_workers=2).source_after
    assert after.split("\n", 1)[1] == "loader = " + patched


@pytest.mark.filterwarnings("ignore:'pin_memory' argument is set as true but no accelerator")
def test_the_patched_cell_trains_with_worker_processes() -> None:
    after = _patch("dataloader_workers", TRAIN_CELL, num_workers=2).source_after
    namespace, _ = _run(after)
    try:
        assert namespace["loader"].num_workers == 2
        assert namespace["loader"].persistent_workers is True
        assert namespace["seen"] == [16] * 12  # 2 epochs x 6 batches went through workers
    finally:
        del namespace["loader"], namespace["val_loader"]  # stop the persistent workers


def test_prefetch_factor_only_when_asked_and_only_with_workers() -> None:
    after = _patch("dataloader_workers", TRAIN_CELL, num_workers=2, prefetch_factor=4).source_after
    assert "    prefetch_factor=4,\n" in after
    with pytest.raises(ValueError, match="prefetch_factor"):
        apply_fix("dataloader_workers", TRAIN_CELL, prefetch_factor=0)


def test_num_workers_none_pins_memory_and_leaves_the_worker_count() -> None:
    patch = _patch("dataloader_workers", TRAIN_CELL, num_workers=None)
    assert "    num_workers=0,\n    pin_memory=True,\n)" in patch.source_after
    # persistent_workers is rejected by torch when num_workers == 0: never added there.
    assert "persistent_workers" not in patch.source_after
    assert patch.source_after.startswith(
        "# gpucheck fix: DataLoader workers and pinned memory (pin_memory=True)"
    )


def test_dataloader_workers_refuses_a_cell_without_a_loader() -> None:
    reason = _refusal("dataloader_workers", "import torch\nx = torch.ones(3)\n")
    assert reason.startswith("no DataLoader(...) call in this cell")


def test_dataloader_workers_refuses_loaders_built_from_kwargs() -> None:
    source = "kw = dict(batch_size=8)\nloader = DataLoader(ds, **kw)\n"
    assert "**kwargs" in _refusal("dataloader_workers", source)


def test_dataloader_workers_twice_is_refused() -> None:
    once = _patch("dataloader_workers", TRAIN_CELL, num_workers=2).source_after
    reason = _refusal("dataloader_workers", once, num_workers=2)
    assert reason == (
        "every DataLoader in this cell already has num_workers=2, pin_memory=True, "
        "persistent_workers=True"
    )
    # A different worker count is a new fix, not a repeat.
    again = _patch("dataloader_workers", once, num_workers=4).source_after
    assert "    num_workers=4,\n" in again and "num_workers=2" not in again.split("\n", 2)[2]


# --------------------------------------------------------------------------------------------
# non_blocking_copies
# --------------------------------------------------------------------------------------------


def test_batch_copies_in_the_loop_become_non_blocking_and_the_model_copy_does_not() -> None:
    patch = _patch("non_blocking_copies", TRAIN_CELL)
    after = patch.source_after
    assert (
        "        xb, yb = xb.to(device, non_blocking=True), yb.to(device, non_blocking=True)\n"
        in after
    )
    assert "nn.Linear(16, 3)).to(device)\n" in after  # the model's .to is outside: unchanged
    assert after.startswith("# gpucheck fix: Non-blocking copies to the GPU (2 copies)\n")
    namespace, _ = _run(after)
    assert namespace["seen"] == [16] * 12


def test_copies_to_the_host_dtype_casts_and_modules_stay_blocking() -> None:
    source = """\
model = Net().cuda()
for batch in loader:
    x = batch["x"].cuda()
    model.to(device)
    y = batch["y"].to(device=device)
    half = x.to(torch.float16)
    preds = model(x).to("cpu")
    z = batch["z"].to(device, non_blocking=True)
"""
    after = _patch("non_blocking_copies", source).source_after
    assert '    x = batch["x"].cuda(non_blocking=True)\n' in after
    assert "    model.to(device)\n" in after
    assert '    y = batch["y"].to(device=device, non_blocking=True)\n' in after
    assert "    half = x.to(torch.float16)\n" in after
    assert '    preds = model(x).to("cpu")\n' in after
    assert after.count("non_blocking=True") == 3


def test_non_blocking_refuses_when_there_is_no_copy_in_a_loop_or_all_are_done() -> None:
    assert _refusal("non_blocking_copies", "x = x.to(device)\n").startswith(
        "no .to(device) or .cuda() copy"
    )
    done = "for x in xs:\n    x = x.to(device, non_blocking=True)\n"
    assert "already has non_blocking=True" in _refusal("non_blocking_copies", done)


# --------------------------------------------------------------------------------------------
# bigger_batch
# --------------------------------------------------------------------------------------------


KWARGS_CELL = """\
import torch
from torch.utils.data import DataLoader, TensorDataset
ds = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
loader_kwargs = dict(batch_size=16, shuffle=True)
dl = DataLoader(ds, **loader_kwargs)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in dl:
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
"""


def test_bigger_batch_leaves_a_batch_size_that_comes_from_kwargs() -> None:
    """u6nb: `DataLoader(ds, **loader_kwargs)` with the batch size in the dict was patched to
    `DataLoader(ds, **loader_kwargs, batch_size=2)`: a TypeError (batch_size twice), and 2 for
    16 had it run. The batch size is where the dict is made: a refusal that says so. A batch
    size written beside the **kwargs is still scaled."""
    assert "**" in _refusal("bigger_batch", KWARGS_CELL, factor=2)
    written = KWARGS_CELL.replace("**loader_kwargs", "batch_size=16, **{'shuffle': True}")
    after = _patch("bigger_batch", written, factor=2).source_after
    assert "batch_size=32" in after
    namespace, _ = _run(after)
    assert namespace["dl"].batch_size == 32


def test_bigger_batch_multiplies_batch_size_and_a_literal_learning_rate() -> None:
    after = _patch("bigger_batch", TRAIN_CELL, factor=2).source_after
    assert after.splitlines()[0] == "# gpucheck fix: Bigger batch (batch size x2, lr x2)"
    assert (
        "# the loader: shuffled, small batches\n"
        "# gpucheck: batch size x2; optimizer lr scaled x2 too (linear scaling rule)\n"
        "loader = DataLoader(\n"
        "    train_ds,\n"
        "    batch_size=32,\n"
    ) in after
    # The loader no training loop iterates keeps its batch and gets no lr comment.
    assert (
        "\nval_loader = torch.utils.data.DataLoader(train_ds, batch_size=32, pin_memory=False)"
        in after
    )
    assert "opt = torch.optim.AdamW(model.parameters(), lr=1e-3 * 2)\n" in after
    namespace, _ = _run(after)
    assert namespace["seen"] == [32] * 6
    assert namespace["opt"].param_groups[0]["lr"] == pytest.approx(2e-3)


def test_bigger_batch_scales_names_and_positional_arguments_and_says_when_lr_is_not_literal() -> (
    None
):
    source = """\
BATCH = 64
loader = DataLoader(ds, BATCH, shuffle=True)
eval_loader = DataLoader(ds)
opt = torch.optim.SGD(model.parameters(), LR, momentum=0.9)
"""
    after = _patch("bigger_batch", source, factor=4).source_after
    assert "loader = DataLoader(ds, BATCH * 4, shuffle=True)\n" in after
    assert "eval_loader = DataLoader(ds, batch_size=4)\n" in after  # the default batch is 1
    assert "opt = torch.optim.SGD(model.parameters(), LR, momentum=0.9)\n" in after
    assert after.count("# gpucheck: batch size x4; scale the learning rate x4 as well") == 2


def test_bigger_batch_refuses_twice_and_without_a_loader() -> None:
    once = _patch("bigger_batch", TRAIN_CELL).source_after
    assert "already scaled the batch size" in _refusal("bigger_batch", once)
    assert _refusal("bigger_batch", "x = 1\n").startswith("no DataLoader(...) call")
    with pytest.raises(ValueError, match="factor"):
        apply_fix("bigger_batch", TRAIN_CELL, factor=1)


DICT_CONFIG = """\
import torch
from torch.utils.data import DataLoader, TensorDataset
CFG = {"batch_size": 8, "num_workers": 0}
def make_loader(cfg):
    return DataLoader(TensorDataset(torch.randn(32, 4)), batch_size=cfg["batch_size"],
                      num_workers=cfg["num_workers"])
loader = make_loader(CFG)
"""


def test_num_workers_read_from_a_dict_config_is_set_in_that_dict():
    # A factory reading a dict config: on main the fix refused, saying the cell "does not set"
    # cfg["num_workers"] (it does, in CFG).
    patch = apply_fix("dataloader_workers", DICT_CONFIG, num_workers=2, pin_memory=False)
    assert isinstance(patch, Patch), patch
    after = patch.source_after
    assert 'CFG = {"batch_size": 8, "num_workers": 2}' in after
    assert 'num_workers=cfg["num_workers"]' in after  # the factory still reads its config
    scope: dict[str, Any] = {}
    exec(compile(after, "<cell>", "exec"), scope)
    assert scope["loader"].num_workers == 2 and scope["loader"].persistent_workers


@pytest.mark.parametrize(
    "cell",
    [
        DICT_CONFIG.replace("loader = make_loader(CFG)", "loader = make_loader(load_config())"),
        DICT_CONFIG + 'OTHER = {"num_workers": 0}\nsecond = make_loader(OTHER)\n',
    ],
    ids=["not-a-literal", "two-dicts"],
)
def test_a_dict_config_the_cell_does_not_pin_down_is_a_refusal(cell):
    refused = apply_fix("dataloader_workers", cell, num_workers=2, pin_memory=False)
    assert isinstance(refused, Refusal) and '`cfg["num_workers"]`' in refused.reason


ZIPPED_AND_VALIDATED = """\
import itertools
import torch
from torch.utils.data import DataLoader, TensorDataset
from mydata import Stream
stream_loader = DataLoader(Stream(), batch_size=64, num_workers=0)
aux = TensorDataset(torch.randn(256, 8), torch.randn(256, 1))
aux_loader = DataLoader(aux, batch_size=64, shuffle=True)
val_loader = DataLoader(Stream(), batch_size=64)
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for (xa, ya), (xb, yb) in itertools.islice(zip(stream_loader, aux_loader), 100):
    loss = (model(torch.cat([xa, xb])) - torch.cat([ya, yb])).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
with torch.no_grad():
    for x, y in val_loader:
        model(x)
"""


def test_workers_go_to_the_loader_the_step_waits_on_not_every_loader_of_the_cell():
    # Issue 26: a step zipping a streaming loader with an in-memory TensorDataset one got two
    # workers on both (four processes on two cores; the in-memory one only pays the handoff),
    # and a validation loader got them too. Only the stream the training loop iterates is set.
    patch = apply_fix("dataloader_workers", ZIPPED_AND_VALIDATED, num_workers=2)
    assert isinstance(patch, Patch)
    after = patch.source_after.splitlines()
    assert "num_workers=2" in next(ln for ln in after if ln.startswith("stream_loader ="))
    assert next(ln for ln in after if ln.startswith("aux_loader =")) == (
        "aux_loader = DataLoader(aux, batch_size=64, shuffle=True)"
    )
    assert next(ln for ln in after if ln.startswith("val_loader =")) == (
        "val_loader = DataLoader(Stream(), batch_size=64)"
    )


def test_workers_reach_every_loader_a_zipped_step_reads():
    """zip_two_loaders (issue 26, unseen round 8): each step reads a batch of two loaders over
    the same kind of Dataset; both wait in the main process, so the fix sets workers on both
    (one left at 0 keeps half of the wait), and the loop reads the knobs it sets."""
    from pathlib import Path

    source = Path(__file__).parent.parent / "benchmarks/unseen_programs/zip_two_loaders.py"
    patch = apply_fix("dataloader_workers", source.read_text(), num_workers=2, pin_memory=False)
    assert isinstance(patch, Patch)
    after = patch.source_after.splitlines()
    for name in ("loader_a", "loader_b"):
        line = next(ln for ln in after if ln.startswith(f"{name} = DataLoader("))
        assert "num_workers=2" in line and "persistent_workers=True" in line
    assert any("zip(loader_a, loader_b" in ln for ln in after)


CUDA_BRANCH = """import torch
cuda = torch.cuda.is_available()
loader = DataLoader(ds, batch_size=64, num_workers=4 if cuda else 0, pin_memory=cuda)
for x, y in loader:
    step(x)
"""


def test_workers_chosen_by_a_cuda_branch_are_set_in_the_branch_that_ran() -> None:
    # issue 26 (unseen round 3): `num_workers=4 if cuda else 0` on a CPU machine, a [high]
    # workers finding, was refused ("not one literal"): the fix never reached the knob the loop
    # read. The loop's iterator ran with 0: that branch is the knob.
    result = apply_fix("dataloader_workers", CUDA_BRANCH, num_workers=2, pin_memory=False,
                       running_workers=0)  # fmt: skip
    assert isinstance(result, Patch)
    assert "num_workers=4 if cuda else 2, pin_memory=cuda" in result.source_after
    assert "persistent_workers=True" in result.source_after  # both branches start workers
    # Held in a variable set by the branch: the same.
    held = CUDA_BRANCH.replace("4 if cuda else 0", "w").replace(
        "cuda = torch", "w = 8 if torch.cuda.is_available() else 0\ncuda = torch"
    )
    result = apply_fix("dataloader_workers", held, num_workers=2, pin_memory=False,
                       running_workers=0)  # fmt: skip
    assert isinstance(result, Patch)
    assert "w = 8 if torch.cuda.is_available() else 2" in result.source_after
    # Which branch ran is not known, or both read the same: refused, as before.
    for source, running in ((CUDA_BRANCH, None), (CUDA_BRANCH.replace("4 if", "0 if"), 0)):
        result = apply_fix("dataloader_workers", source, num_workers=2, running_workers=running)
        assert isinstance(result, Refusal), source


def test_the_workers_rule_hands_the_fix_the_count_the_loop_ran_with() -> None:
    import dataclasses

    from tests.scenarios import synthetic as syn
    from tests.test_rules import only, rules_for

    run = syn.make_run(CUDA_BRANCH, cpu_count=4)
    run = dataclasses.replace(run, steps=dataclasses.replace(run.steps, loader_num_workers=0))
    f = only(rules_for(run, syn.make_analysis({"data": 0.6})), "input.loader_workers")
    assert f.fix_params["running_workers"] == 0
    assert (
        f.proposal is None or f.proposal.source_after is None or "else 2" in f.proposal.source_after
    )


def test_bigger_batch_scales_the_literal_learning_rates_of_parameter_groups() -> None:
    # Issue 26 (unseen round 5): a backbone and a head in two parameter groups, each with its
    # own literal lr. The fix said "batch size x2 (learning rate x2)" and wrote only "scale the
    # learning rate x2 as well": the rates the optimizer reads are the groups'.
    source = """\
loader = DataLoader(TensorDataset(X, Y), batch_size=128, shuffle=True)
opt = torch.optim.Adam([
    {"params": backbone.parameters(), "lr": 1e-3},
    {"params": head.parameters(), "lr": 3e-3, "weight_decay": 0.01},
], lr=5e-4)
"""
    after = _patch("bigger_batch", source, factor=2).source_after
    assert '"lr": 1e-3 * 2}' in after and '"lr": 3e-3 * 2,' in after
    assert "lr=5e-4 * 2" in after and '"weight_decay": 0.01' in after
    assert "optimizer lr scaled x2 too" in after


LR_FINDER = """
import torch
from torch.utils.data import DataLoader, TensorDataset
loader = DataLoader(TensorDataset(torch.randn(256, 4), torch.randn(256)), batch_size=16)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
it = iter(loader)
for _ in range(16):
    x, y = next(it)
    loss = (model(x).squeeze(1) - y).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
"""


def test_a_bigger_batch_is_declined_where_the_loop_draws_a_fixed_count_by_next():
    """lr_finder_runs: 40 next(it) from one pass over 4096 samples of 64; the bigger batch
    (128) left 32 batches and the patched script broke with StopIteration in --try-fixes."""
    result = apply_fix("bigger_batch", LR_FINDER, factor=2, scale_lr=True)
    assert isinstance(result, Refusal)
    assert "next(it)" in result.reason and "StopIteration" in result.reason
    # The same loader iterated by a for loop: the fix applies, and the patched cell runs.
    plain = LR_FINDER.replace("it = iter(loader)\nfor _ in range(16):\n    x, y = next(it)\n",
                              "for x, y in loader:\n")  # fmt: skip
    patched = apply_fix("bigger_batch", plain, factor=2, scale_lr=True)
    assert isinstance(patched, Patch) and "batch_size=32" in patched.source_after
    exec(compile(patched.source_after, "<patched>", "exec"), {})
    # Run as it was declined, the patched draw would have run out.
    broken = LR_FINDER.replace("batch_size=16", "batch_size=32")
    with pytest.raises(StopIteration):
        exec(compile(broken, "<broken>", "exec"), {})


# --------------------------------------------------------------------------------------------
# the user's sampler survives every data patch (issue 26, unseen python_sampler.py)
# --------------------------------------------------------------------------------------------

SAMPLER_CELL = """\
import random
import torch
from torch.utils.data import BatchSampler, DataLoader, Sampler, TensorDataset

class Balanced(Sampler):
    def __init__(self, n):
        self.n, self.drawn = n, 0
    def __iter__(self):
        for _ in range(self.n):
            self.drawn += 1
            yield random.randrange(self.n)
    def __len__(self):
        return self.n

balanced = Balanced(48)
loader = DataLoader(TensorDataset(torch.randn(48, 4), torch.randn(48, 1)), LOADER_ARGS)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
device = "cpu"
for epoch in range(2):
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
"""


@pytest.mark.parametrize(
    ("fix_id", "params"),
    [
        ("dataloader_workers", {"num_workers": 2}),
        ("dataloader_workers", {"num_workers": None}),
        ("bigger_batch", {"factor": 2}),
        ("non_blocking_copies", {}),
    ],
)
@pytest.mark.parametrize("args", ["batch_size=8, sampler=balanced", "8, False, balanced"])
def test_a_users_sampler_survives_every_data_patch(fix_id, params, args) -> None:
    # Issue 26: no patch may drop or replace the sampler the user passes (a balancing sampler
    # decides what the model trains on); the patched cell still draws every index from it.
    source = SAMPLER_CELL.replace("LOADER_ARGS", args)
    after = _patch(fix_id, source, **params).source_after
    namespace, _ = _run(after)
    assert namespace["loader"].sampler is namespace["balanced"]
    assert namespace["balanced"].drawn == 2 * 48


@pytest.mark.parametrize(
    "args",
    [
        "batch_sampler=BatchSampler(balanced, 8, False)",
        "1, False, None, BatchSampler(balanced, 8, False)",
    ],
)
def test_a_bigger_batch_keeps_a_batch_sampler_and_says_why_it_refuses(args) -> None:
    # A batch_size beside a batch_sampler is a ValueError in torch, and dropping the batch
    # sampler would drop the user's sampling: a refusal that names it, by keyword or position.
    source = SAMPLER_CELL.replace("LOADER_ARGS", args)
    reason = _refusal("bigger_batch", source, factor=2)
    assert "batch_sampler=BatchSampler(balanced, 8, False)" in reason and "keep it" in reason
    # The patches that do apply leave it where it is.
    namespace, _ = _run(_patch("dataloader_workers", source, num_workers=2).source_after)
    assert namespace["loader"].batch_sampler.sampler is namespace["balanced"]
