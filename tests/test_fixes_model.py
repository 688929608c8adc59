"""Model-side fixes: torch.compile, cuDNN/TF32 flags, fused optimizers, DataParallel -> DDP."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from typing import Any

import pytest

from gpu_notebook.fixes import Patch, Refusal, apply_fix

torch = pytest.importorskip("torch")

CELL = """\
import torch
from torch import nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x)

torch.manual_seed(0)
model = Net()  # tiny on purpose
model.to("cpu")
model.load_state_dict(model.state_dict())
opt = torch.optim.AdamW(model.parameters(), lr=1e-2, foreach=True)
x, y = torch.randn(16, 4), torch.randint(0, 2, (16,))
for step in range(3):
    loss = nn.functional.cross_entropy(model(x), y)
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


def _run(source: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "__gpucheck_cell__"}
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(source, "<cell>", "exec"), namespace)
    return namespace


# --------------------------------------------------------------------------------------------
# torch_compile
# --------------------------------------------------------------------------------------------


def test_compile_goes_after_the_model_is_created_moved_and_loaded() -> None:
    after = _patch("torch_compile", CELL).source_after
    assert after.splitlines()[0] == "# gpucheck fix: Compile the model with torch.compile (model)"
    assert (
        "model = Net()  # tiny on purpose\n"
        'model.to("cpu")\n'
        "model.load_state_dict(model.state_dict())\n"
        "model = torch.compile(model)\n"
        "opt = torch.optim.AdamW("
    ) in after


LIGHTNING_CELL = """\
import torch, lightning as L
from torch import nn

class Lit(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(4, 1)

    def training_step(self, batch, i):
        return self.net(batch[0]).sum()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)

model = Lit()
trainer = L.Trainer(max_steps=3)
trainer.fit(model, loader)
"""


def test_a_lightning_module_is_compiled_where_the_cell_makes_it_never_as_self() -> None:
    # The optimizer is over self.parameters() in configure_optimizers: the model is what the
    # cell makes of the class (main offered "add self = torch.compile(self)").
    after = _patch("torch_compile", LIGHTNING_CELL).source_after
    assert "self = torch.compile" not in after
    assert "model = Lit()\nmodel = torch.compile(model)\ntrainer = L.Trainer(" in after


def test_the_compiled_cell_trains() -> None:
    # backend="eager" runs TorchDynamo's capture without Inductor's C++ build (seconds, not a
    # minute on two cores); the codemod and the cell are the same either way.
    after = _patch("torch_compile", CELL, backend="eager").source_after
    assert 'model = torch.compile(model, backend="eager")\n' in after
    namespace = _run(after)
    assert type(namespace["model"]).__name__ == "OptimizedModule"
    assert namespace["loss"].requires_grad


def test_compile_finds_a_model_made_in_a_tuple_assignment() -> None:
    """``gen, disc = mlp(...), mlp(...)`` (unseen gan_two_adam): each name is created by its
    own call; the fix refused "gen is not created in this cell" before."""
    source = (
        "import torch\n"
        "from torch import nn\n"
        "gen, disc = nn.Linear(4, 4), nn.Linear(4, 1)\n"
        "opt_g = torch.optim.Adam(gen.parameters())\n"
        "for step in range(2):\n"
        "    opt_g.zero_grad(); gen(torch.randn(2, 4)).sum().backward(); opt_g.step()\n"
    )
    after = _patch("torch_compile", source, model_name="gen", backend="eager").source_after
    assert (
        "gen, disc = nn.Linear(4, 4), nn.Linear(4, 1)\n"
        'gen = torch.compile(gen, backend="eager")\n'
        "opt_g = " in after
    )
    namespace = _run(after)
    assert type(namespace["gen"]).__name__ == "OptimizedModule"
    assert type(namespace["disc"]).__name__ == "Linear"


def test_compile_options_and_a_missing_torch_import() -> None:
    source = (
        "from torch import nn\n"
        "net = nn.Sequential(nn.Linear(2, 2)).cuda()\n"
        "for x in xs:\n"
        "    net(x).sum().backward()\n"
    )
    after = _patch("torch_compile", source, mode="reduce-overhead").source_after
    assert after.splitlines()[1:3] == ["import torch", "from torch import nn"]
    assert (
        "net = nn.Sequential(nn.Linear(2, 2)).cuda()\n"
        'net = torch.compile(net, mode="reduce-overhead")\n' in after
    )


def test_compile_refusals() -> None:
    once = _patch("torch_compile", CELL).source_after
    assert _refusal("torch_compile", once) == "this cell already calls torch.compile"
    elsewhere = (
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for x in xs:\n"
        "    model(x).sum().backward()\n"
    )
    assert _refusal("torch_compile", elsewhere).startswith(
        "model is not created in this cell (it may come from an earlier cell"
    )
    assert _refusal("torch_compile", "x = 1\n").startswith("cannot tell which name holds the model")
    # Said to the user: what to write, never the codemod's own parameter (it said
    # "pass model_name" under an HF Trainer cell, 14_hf_trainer_callback).
    assert "model_name" not in _refusal("torch_compile", "x = 1\n")


HF_CELL = """\
args = TrainingArguments(
    output_dir=out,
    report_to="none",
    max_steps=40,
)
trainer = Trainer(model=model, args=args, train_dataset=train)
trainer.train()
"""


def test_an_hf_trainer_cell_compiles_through_its_training_arguments() -> None:
    # The Trainer compiles the model it trains (TrainingArguments.torch_compile); the model
    # comes from an earlier cell, so `model = torch.compile(model)` had nowhere to go.
    patch = _patch("torch_compile", HF_CELL)
    assert (
        "args = TrainingArguments(\n"
        "    output_dir=out,\n"
        '    report_to="none",\n'
        "    max_steps=40,\n"
        "    torch_compile=True,\n"
        ")\n"
    ) in patch.source_after
    assert "torch.compile(" not in patch.source_after
    # Patched once, the cell reads as compiled: no second compile is offered.
    assert _refusal("torch_compile", patch.source_after) == "this cell already calls torch.compile"
    starred = HF_CELL.replace('    report_to="none",\n', "    **common,\n")
    assert "set torch_compile=True where they are defined" in _refusal("torch_compile", starred)


# --------------------------------------------------------------------------------------------
# backend_flags
# --------------------------------------------------------------------------------------------


@pytest.fixture
def restore_backend_flags() -> Iterator[None]:
    saved = (
        torch.backends.cudnn.benchmark,
        torch.backends.cuda.matmul.allow_tf32,
        torch.backends.cudnn.allow_tf32,
    )
    yield
    (
        torch.backends.cudnn.benchmark,
        torch.backends.cuda.matmul.allow_tf32,
        torch.backends.cudnn.allow_tf32,
    ) = saved


def test_backend_flags_go_after_the_imports_and_take_effect(restore_backend_flags: None) -> None:
    torch.backends.cudnn.benchmark = False
    torch.backends.cuda.matmul.allow_tf32 = False
    after = _patch("backend_flags", CELL).source_after
    assert after.startswith(
        "# gpucheck fix: cuDNN autotuner and TF32 math (cudnn.benchmark, TF32)\n"
        "import torch\n"
        "from torch import nn\n"
        "torch.backends.cudnn.benchmark = True\n"
        "torch.backends.cuda.matmul.allow_tf32 = True\n"
        "torch.backends.cudnn.allow_tf32 = True\n"
        "\n"
        "class Net(nn.Module):\n"
    )
    _run(after)
    assert torch.backends.cudnn.benchmark is True
    assert torch.backends.cuda.matmul.allow_tf32 is True


def test_backend_flags_respect_determinism_and_flip_explicit_false() -> None:
    source = (
        "from torch import nn\n"
        "torch.backends.cudnn.deterministic = True\n"
        "torch.backends.cuda.matmul.allow_tf32 = False  # was slow?\n"
    )
    after = _patch("backend_flags", source).source_after
    assert "benchmark" not in after
    assert "torch.backends.cuda.matmul.allow_tf32 = True  # was slow?\n" in after
    assert after.splitlines()[1:4] == [
        "import torch",
        "from torch import nn",
        "torch.backends.cudnn.allow_tf32 = True",
    ]
    assert "deterministic cuDNN" in _refusal("backend_flags", source, tf32=False)
    assert _refusal("backend_flags", after).startswith("this cell already sets")


# --------------------------------------------------------------------------------------------
# foreach_fused_optimizer
# --------------------------------------------------------------------------------------------


def test_fused_replaces_foreach_and_the_fused_optimizer_trains_on_cpu() -> None:
    after = _patch("foreach_fused_optimizer", CELL).source_after
    assert after.splitlines()[0] == "# gpucheck fix: Fused optimizer step (fused=True)"
    assert "opt = torch.optim.AdamW(model.parameters(), lr=1e-2, fused=True)\n" in after
    namespace = _run(after)
    assert namespace["opt"].defaults["fused"] is True


def test_fused_or_foreach_for_each_optimizer_spelling() -> None:
    source = (
        "from torch.optim import Adam\n"
        "import torch.optim as optim\n"
        "a = Adam(model.parameters())\n"
        "b = optim.SGD(\n    head.parameters(),\n    0.1,\n)\n"
        "c = optim.RMSprop(other.parameters())\n"
        "d = bnb.optim.AdamW8bit(model.parameters())\n"
    )
    fused = _patch("foreach_fused_optimizer", source).source_after
    assert "a = Adam(model.parameters(), fused=True)\n" in fused
    assert "b = optim.SGD(\n    head.parameters(),\n    0.1,\n    fused=True,\n)\n" in fused
    assert "c = optim.RMSprop(other.parameters())\n" in fused  # RMSprop has no fused kernel
    assert "AdamW8bit(model.parameters())\n" in fused
    foreach = _patch("foreach_fused_optimizer", source, implementation="foreach").source_after
    assert "c = optim.RMSprop(other.parameters(), foreach=True)\n" in foreach


def test_fused_optimizer_refusals() -> None:
    # An optimizer from an earlier cell: the refusal says what to write there.
    assert _refusal("foreach_fused_optimizer", "x = 1\n") == (
        "no torch.optim Adam, AdamW or SGD optimizer is created in this cell; pass fused=True "
        "where it is created (an earlier cell)"
    )
    done = "opt = torch.optim.SGD(p, lr=0.1, fused=True)\n"
    assert "already uses fused=True" in _refusal("foreach_fused_optimizer", done)
    differentiable = "opt = torch.optim.SGD(p, lr=0.1, differentiable=True)\n"
    assert "differentiable=True" in _refusal("foreach_fused_optimizer", differentiable)


# --------------------------------------------------------------------------------------------
# dataparallel_to_ddp
# --------------------------------------------------------------------------------------------


def test_dataparallel_is_refused_with_a_ddp_script_to_start_from() -> None:
    source = "from torch import nn\nmodel = nn.DataParallel(Net()).cuda()\n"
    reason = _refusal("dataparallel_to_ddp", source)
    assert reason.startswith("DistributedDataParallel runs one process per GPU")
    assert "torchrun --nproc_per_node=NUM_GPUS train_ddp.py" in reason
    assert "model = DDP(Net().to(rank), device_ids=[rank])" in reason
    assert _refusal("dataparallel_to_ddp", CELL) == "no nn.DataParallel(...) in this cell"
