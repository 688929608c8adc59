"""Step-loop fixes: autocast, throttled host syncs and logging, inference mode.

Patched cells run with real torch on the CPU (autocast with ``device_type="cpu"``) and are
compared with the original cell's own run: the steps that are kept must behave the same.
"""

from __future__ import annotations

import contextlib
import io
import os
from typing import Any

import pytest

from gpu_notebook.fixes import Patch, Refusal, apply_fix

torch = pytest.importorskip("torch")

SETUP = """\
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
ds = TensorDataset(torch.randn(48, 8), torch.randint(0, 3, (48,)))
loader = DataLoader(ds, batch_size=8, shuffle=True)
model = nn.Sequential(nn.Linear(8, 16), nn.Dropout(0.1), nn.Linear(16, 3))
criterion = nn.CrossEntropyLoss()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
"""

TRAIN = (
    SETUP
    + """\
losses = []
for epoch in range(2):
    for xb, yb in loader:
        opt.zero_grad()
        # forward pass
        out = model(xb)
        loss = criterion(out, yb)  # mean over the batch
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        print(f"epoch {epoch} loss {loss.item():.4f}")
"""
)


def _patch(fix_id: str, source: str, **params: Any) -> Patch:
    result = apply_fix(fix_id, source, **params)
    assert isinstance(result, Patch), result
    return result


def _refusal(fix_id: str, source: str, **params: Any) -> str:
    result = apply_fix(fix_id, source, **params)
    assert isinstance(result, Refusal), result.diff
    return result.reason


def _run(source: str) -> tuple[dict[str, Any], str]:
    namespace: dict[str, Any] = {"__name__": "__gpucheck_cell__"}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(source, "<cell>", "exec"), namespace)
    return namespace, printed.getvalue()


# --------------------------------------------------------------------------------------------
# autocast
# --------------------------------------------------------------------------------------------


def test_autocast_wraps_forward_and_loss_and_keeps_their_comments() -> None:
    after = _patch("autocast", TRAIN).source_after
    assert (
        after.splitlines()[0]
        == "# gpucheck fix: Mixed precision with torch.autocast (dtype=bfloat16)"
    )
    assert (
        "        opt.zero_grad()\n"
        "        # forward pass\n"
        '        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):\n'
        "            out = model(xb)\n"
        "            loss = criterion(out, yb)  # mean over the batch\n"
        "        loss.backward()\n"
        "        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
        "        opt.step()\n"
    ) in after


def test_autocast_on_cpu_runs_the_forward_pass_in_bfloat16() -> None:
    after = _patch("autocast", TRAIN, device_type="cpu").source_after
    namespace, printed = _run(after)
    assert namespace["out"].dtype == torch.bfloat16
    assert len(namespace["losses"]) == 12 and len(printed.splitlines()) == 12


def test_autocast_float16_adds_a_grad_scaler_and_unscales_before_clipping() -> None:
    after = _patch("autocast", TRAIN, dtype="float16").source_after
    assert after.splitlines()[0] == (
        "# gpucheck fix: Mixed precision with torch.autocast (dtype=float16, GradScaler)"
    )
    assert 'losses = []\nscaler = torch.amp.GradScaler("cuda")\nfor epoch in range(2):\n' in after
    assert (
        "        scaler.scale(loss).backward()\n"
        "        scaler.unscale_(opt)\n"
        "        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
        "        scaler.step(opt)\n"
        "        scaler.update()\n"
        "        losses.append(loss.item())\n"
    ) in after
    assert "loss.backward()" not in after and "opt.step()" not in after


def test_autocast_float16_on_cpu_trains_through_the_scaler() -> None:
    after = _patch("autocast", TRAIN, dtype="float16", device_type="cpu").source_after
    namespace, _ = _run(after)
    assert namespace["out"].dtype == torch.float16
    assert isinstance(namespace["scaler"], torch.amp.GradScaler)
    assert len(namespace["losses"]) == 12


def test_autocast_refusals_say_what_is_missing() -> None:
    assert _refusal("autocast", SETUP) == "no for loop calling .backward() in this cell"
    once = _patch("autocast", TRAIN).source_after
    assert _refusal("autocast", once) == "this cell already uses autocast"
    while_loop = (
        SETUP
        + "step = 0\nwhile step < 5:\n    loss = model(x).sum()\n    loss.backward()\n"
        + "    step += 1\n"
    )
    assert _refusal("autocast", while_loop).startswith("the training loop is a while loop")
    one_line = (
        SETUP + "for xb, yb in loader:\n    criterion(model(xb), yb).backward()\n    opt.step()\n"
    )
    assert "split it into" in _refusal("autocast", one_line)
    no_step = (
        SETUP + "for xb, yb in loader:\n    loss = criterion(model(xb), yb)\n    loss.backward()\n"
    )
    assert "no optimizer.step()" in _refusal("autocast", no_step, dtype="float16")


# --------------------------------------------------------------------------------------------
# throttle_host_syncs
# --------------------------------------------------------------------------------------------


def test_throttle_gates_item_reads_and_prints_behind_an_enumerate_step() -> None:
    after = _patch("throttle_host_syncs", TRAIN, every=4).source_after
    assert (
        after.splitlines()[0]
        == "# gpucheck fix: Read values from the GPU every N steps (every 4 steps)"
    )
    assert "    for step, (xb, yb) in enumerate(loader):\n" in after
    assert (
        "        opt.step()\n"
        "        if step % 4 == 0:\n"
        "            # gpucheck: `losses` now keeps one value every 4 steps\n"
        "            losses.append(loss.item())\n"
        '            print(f"epoch {epoch} loss {loss.item():.4f}")\n'
    ) in after


def test_throttled_cell_prints_every_n_steps_with_the_same_values() -> None:
    original, original_printed = _run(TRAIN)
    patched, patched_printed = _run(_patch("throttle_host_syncs", TRAIN, every=4).source_after)
    assert len(original_printed.splitlines()) == 12
    # 6 steps per epoch: steps 0 and 4 of each epoch are kept.
    kept = [0, 4, 6, 10]
    assert patched_printed.splitlines() == [original_printed.splitlines()[i] for i in kept]
    assert patched["losses"] == [original["losses"][i] for i in kept]


def test_throttle_uses_the_existing_enumerate_index() -> None:
    source = SETUP + (
        "for i, (xb, yb) in enumerate(loader):\n"
        "    loss = criterion(model(xb), yb)\n"
        "    loss.backward()\n"
        "    print('loss', float(loss))\n"
    )
    after = _patch("throttle_host_syncs", source, every=3).source_after
    assert "for i, (xb, yb) in enumerate(loader):\n" in after
    assert "    if i % 3 == 0:\n        print('loss', float(loss))\n" in after
    assert "now keeps one value" not in after  # nothing stored: nothing to say


def test_throttle_keeps_one_read_in_n_steps_when_the_range_strides() -> None:
    """`for i in range(0, n, 64)`: `i` counts samples, not steps (`i % 10 == 0` kept 7 reads of
    32 steps, not 4). The gate counts steps with its own index, every N-th step read."""
    source = SETUP + (
        "xs, ys = ds.tensors\n"
        "losses = []\n"
        "for i in range(0, 48, 2):\n"
        "    loss = criterion(model(xs[i:i + 2]), ys[i:i + 2])\n"
        "    opt.zero_grad(); loss.backward(); opt.step()\n"
        "    losses.append(loss.item())\n"
    )
    after = _patch("throttle_host_syncs", source, every=4).source_after
    namespace, _printed = _run(after)
    assert len(namespace["losses"]) == 24 // 4
    assert "for i in range(0, 48, 2):" not in after  # the stride is kept, the index is new


def test_a_value_the_loop_uses_every_step_keeps_its_sync() -> None:
    source = SETUP + (
        "best = float('inf')\n"
        "for xb, yb in loader:\n"
        "    loss = criterion(model(xb), yb)\n"
        "    loss.backward()\n"
        "    loss_val = loss.item()\n"
        "    if loss_val < best:\n"
        "        best = loss_val\n"
        "    print('loss', loss_val)\n"
    )
    # Its only read decides a branch (the rule names it, with no fix): the print of the number
    # it read syncs nothing, so the sync fix has nothing to gate; the logging fix gates it.
    refused = apply_fix("throttle_host_syncs", source, every=5)
    assert isinstance(refused, Refusal), refused.diff
    after = _patch("log_every_n", source, every=5).source_after
    assert "    loss.backward()\n    loss_val = loss.item()\n    if loss_val < best:\n" in after
    assert "    if step % 5 == 0:\n        print('loss', loss_val)\n" in after
    # A value only the gated print reads is gated with it.
    only_printed = source.replace("    if loss_val < best:\n        best = loss_val\n", "")
    after = _patch("throttle_host_syncs", only_printed, every=5).source_after
    assert (
        "    if step % 5 == 0:\n        loss_val = loss.item()\n        print('loss', loss_val)\n"
        in after
    )


CIFAR_STYLE = (
    SETUP
    + """\
for epoch in range(2):
    running_loss = 0.0
    for i, data in enumerate(loader, 0):
        inputs, labels = data
        opt.zero_grad()
        loss = criterion(model(inputs), labels)
        loss.backward()
        opt.step()
        running_loss += loss.item()
        if i % 3 == 2:    # print every 3 mini-batches
            print(f'[{epoch + 1}, {i + 1:5d}] loss: {running_loss / 3:.3f}')
            running_loss = 0.0
"""
)


def test_a_value_read_after_the_loop_is_still_computed_every_step() -> None:
    # Gated, `last` would hold a stale value after the loop (or none at all).
    source = SETUP + (
        "for batch in loader:\n"
        "    loss = criterion(model(batch[0]), batch[1])\n"
        "    loss.backward()\n"
        "    last = loss.item()\n"
        "    print(loss.item())\n"
        "print('final', last)\n"
    )
    after = _patch("throttle_host_syncs", source, every=3).source_after
    assert (
        "for step, batch in enumerate(loader):\n"
        "    loss = criterion(model(batch[0]), batch[1])\n"
        "    loss.backward()\n"
        "    last = loss.item()\n"
        "    if step % 3 == 0:\n"
        "        print(loss.item())\n"
        "print('final', last)\n"
    ) in after


def test_a_running_total_printed_by_f_strings_is_summed_on_the_device_with_the_same_output() -> (
    None
):
    patch = _patch("throttle_host_syncs", CIFAR_STYLE)
    assert "        running_loss += loss.detach()\n" in patch.source_after
    assert patch.source_after.splitlines()[0].endswith("(sums on the device)")
    _, original_printed = _run(CIFAR_STYLE)
    _, patched_printed = _run(patch.source_after)
    assert len(original_printed.splitlines()) == 4
    assert patched_printed == original_printed


def test_a_running_total_used_as_a_number_keeps_its_sync_and_says_so() -> None:
    as_number = CIFAR_STYLE.replace(
        "            running_loss = 0.0\n",
        "            history.append(running_loss)\n            running_loss = 0.0\n",
    )
    assert _refusal("throttle_host_syncs", as_number) == (
        "`running_loss += loss.item()` syncs every step and its total is used as a number; "
        "sum .detach() tensors instead and call .item() where the total is read"
    )
    # Next to a gated print, the remaining sync is marked rather than silently kept.
    with_print = as_number.replace(
        "        running_loss += loss.item()\n",
        "        running_loss += loss.item()\n        print(loss.item())\n",
    )
    after = _patch("throttle_host_syncs", with_print).source_after
    assert (
        "        # gpucheck: this still syncs every step (the total is used as a number)\n"
        "        running_loss += loss.item()\n"
        "        if i % 10 == 0:\n"
        "            print(loss.item())\n"
    ) in after


def test_an_attribute_with_the_totals_name_is_another_variable() -> None:
    source = CIFAR_STYLE + "stats.running_loss = running_loss_history = 1\n"
    after = _patch("throttle_host_syncs", source).source_after
    assert "        running_loss += loss.detach()\n" in after


def test_every_read_of_a_summed_line_moves_to_the_device() -> None:
    # The facts keep one line per kind, with every read of it: all three move to the device.
    source = CIFAR_STYLE.replace(
        "running_loss += loss.item()", "running_loss += loss.item() + float(loss) + loss.item()"
    )
    after = _patch("throttle_host_syncs", source).source_after
    assert "        running_loss += loss.detach() + loss.detach() + loss.detach()\n" in after


def test_a_total_shown_with_repr_in_an_f_string_stays_a_number() -> None:
    # f"{t!r}" of a tensor reads "tensor(0.5)", not "0.5": such a total cannot move to the device.
    source = CIFAR_STYLE.replace("{running_loss / 3:.3f}", "{running_loss!r}")
    assert "syncs every step and its total is used as a number" in _refusal(
        "throttle_host_syncs", source
    )


def test_a_second_fix_stacks_its_header_above_the_first() -> None:
    first = _patch("throttle_host_syncs", TRAIN).source_after
    second = _patch("autocast", first).source_after.splitlines()
    assert second[0].startswith("# gpucheck fix: Mixed precision with torch.autocast")
    assert second[1].startswith("# gpucheck fix: Read values from the GPU every N steps")


def test_throttle_refuses_a_loop_with_nothing_to_gate_and_a_second_pass() -> None:
    quiet = (
        SETUP + "for xb, yb in loader:\n    loss = criterion(model(xb), yb)\n    loss.backward()\n"
    )
    assert "nothing to throttle" in _refusal("throttle_host_syncs", quiet)
    once = _patch("throttle_host_syncs", TRAIN).source_after
    assert "nothing to throttle" in _refusal("throttle_host_syncs", once)
    with pytest.raises(ValueError, match="every"):
        apply_fix("throttle_host_syncs", TRAIN, every=1)


def test_an_assert_that_stops_the_loop_is_never_thinned_its_message_reads_on_failure_only():
    """`assert torch.isfinite(loss), f"... {float(loss)}"`: the message's read runs on the
    failing step only (unseen round 13's 25_assert_inside_capture_time got the assert behind
    `if step % 10 == 0:`, so the loop ran on past the blow-up and stopped at another step)."""
    diverging = SETUP.replace(
        "lr=0.1", "lr=0.1)\nsched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=1.5"
    ) + (
        "for step in range(200):\n"
        "    xb, yb = ds[(step * 8) % 48 : (step * 8) % 48 + 8]\n"
        "    loss = criterion(model(xb), yb)\n"
        "    opt.zero_grad(); loss.backward(); opt.step(); sched.step()\n"
        "    print(step, round(loss.item(), 4))\n"
        "    assert torch.isfinite(loss), f'loss is {float(loss)} at step {step}'\n"
    )
    patched = _patch("throttle_host_syncs", diverging).source_after
    assert "\n    assert torch.isfinite(loss), f'loss is {float(loss)}" in patched  # every step
    assert "    if step % 10 == 0:\n        print(step, round(loss.item(), 4))\n" in patched
    stopped = []
    for source in (diverging, patched):
        with pytest.raises(AssertionError) as raised:
            _run(source)
        stopped.append(str(raised.value))
    assert stopped[0] == stopped[1] and stopped[0].startswith("loss is ")
    # Only the message reads the value on the host: nothing per step to gate.
    quiet = diverging.replace("    print(step, round(loss.item(), 4))\n", "")
    assert "nothing to throttle" in _refusal("throttle_host_syncs", quiet)


# --------------------------------------------------------------------------------------------
# log_every_n
# --------------------------------------------------------------------------------------------


def test_a_checkpoint_saved_every_step_is_found_as_per_step_work_and_gated() -> None:
    """``torch.save`` of the state every step (unseen round 8): on main it was no fact at all,
    so its serialisation read as Python between operators and the tiny-ops rule offered
    torch.compile, which leaves the save as it is. It is now per-step work like a log (kind
    "checkpoint", never a tensor read even when the loss is in the saved dict), and the
    every-N gate saves every N steps."""
    from gpu_notebook.cell.scan import scan_source

    source = (
        SETUP
        + """\
import os, tempfile
where = tempfile.mkdtemp()
for i, (xb, yb) in enumerate(loader):
    loss = criterion(model(xb), yb)
    opt.zero_grad()
    loss.backward()
    opt.step()
    torch.save({"model": model.state_dict(), "loss": loss, "step": i}, os.path.join(where, f"{i}.pt"))
"""
    )
    facts = scan_source(source)
    saves = [line for line in facts.saves if line.kind == "checkpoint"]
    assert not facts.logging  # said by its own rule, gated by the same fix
    assert len(saves) == 1 and not saves[0].gated and saves[0].step_loop_line is not None
    assert not [line for line in facts.syncs if line.line == saves[0].line]
    after = _patch("log_every_n", source, every=2).source_after
    assert "    if i % 2 == 0:\n        torch.save(" in after
    namespace, _ = _run(after)
    assert sorted(os.listdir(namespace["where"])) == ["0.pt", "2.pt", "4.pt"]


def test_log_every_n_gates_every_logging_call_and_the_values_made_for_it() -> None:
    source = (
        SETUP
        + """\
import logging
logger = logging.getLogger("train")
class Writer:
    def __init__(self):
        self.calls = []
    def add_scalar(self, tag, value, step):
        self.calls.append((tag, value, step))
writer = Writer()
for i, (xb, yb) in enumerate(loader):
    loss = criterion(model(xb), yb)
    loss.backward()
    lv = loss.item()
    logger.info("loss %.3f", lv)
    writer.add_scalar("loss", lv, i)
"""
    )
    after = _patch("log_every_n", source, every=2).source_after
    assert after.splitlines()[0] == "# gpucheck fix: Log every N steps (every 2 steps)"
    assert (
        "    if i % 2 == 0:\n"
        "        lv = loss.item()\n"
        '        logger.info("loss %.3f", lv)\n'
        '        writer.add_scalar("loss", lv, i)\n'
    ) in after
    namespace, _ = _run(after)
    assert [step for _, _, step in namespace["writer"].calls] == [0, 2, 4]


def test_log_every_n_without_training_gates_the_loop_that_logs() -> None:
    source = SETUP + "for xb, yb in loader:\n    out = model(xb)\n    print(out.shape)\n"
    after = _patch("log_every_n", source, every=4).source_after
    assert (
        "for step, (xb, yb) in enumerate(loader):\n    out = model(xb)\n    if step % 4 == 0:\n"
        in after
    )
    _, printed = _run(after)
    assert printed.splitlines() == ["torch.Size([8, 3])"] * 2


# --------------------------------------------------------------------------------------------
# inference_mode
# --------------------------------------------------------------------------------------------

EVAL = (
    SETUP
    + """\
correct = 0
# evaluate on the training set
for xb, yb in loader:
    out = model(xb)
    correct += (out.argmax(1) == yb).sum().item()
print(correct)
"""
)


def test_an_inference_loop_runs_under_inference_mode_in_eval_mode() -> None:
    patch = _patch("inference_mode", EVAL)
    assert (
        patch.source_after.splitlines()[0] == "# gpucheck fix: Inference without autograd (model)"
    )
    assert (
        "correct = 0\n"
        "# evaluate on the training set\n"
        "model.eval()\n"
        "with torch.inference_mode():\n"
        "    for xb, yb in loader:\n"
        "        out = model(xb)\n"
        "        correct += (out.argmax(1) == yb).sum().item()\n"
        "print(correct)\n"
    ) in patch.source_after
    namespace, printed = _run(patch.source_after)
    assert namespace["out"].is_inference()
    assert namespace["model"].training is False
    assert 0 <= int(printed) <= 48


def test_inside_a_training_epoch_the_eval_loop_gives_training_mode_back() -> None:
    source = (
        SETUP
        + """\
for epoch in range(2):
    model.train()
    for xb, yb in loader:
        loss = criterion(model(xb), yb)
        loss.backward()
        opt.step()
    for xb, yb in loader:
        val = criterion(model(xb), yb)
"""
    )
    after = _patch("inference_mode", source).source_after
    assert (
        "    model.eval()\n"
        "    with torch.inference_mode():\n"
        "        for xb, yb in loader:\n"
        "            val = criterion(model(xb), yb)\n"
        "    model.train()\n"
    ) in after
    namespace, _ = _run(after)
    assert namespace["model"].training is True


def test_an_existing_eval_call_is_not_repeated() -> None:
    source = EVAL.replace("correct = 0\n", "model.eval()\ncorrect = 0\n")
    after = _patch("inference_mode", source).source_after
    assert after.count("model.eval()") == 1
    assert "# evaluate on the training set\nwith torch.inference_mode():\n" in after


def test_inference_mode_refuses_loops_already_without_grad_and_training_loops() -> None:
    guarded = EVAL.replace(
        "for xb, yb in loader:\n", "with torch.no_grad():\n  for xb, yb in loader:\n"
    )
    guarded = guarded.replace("    out = model", "    out = model").replace(
        "\n    correct +=", "\n    correct +="
    )
    assert "already runs under torch.no_grad()" in _refusal("inference_mode", guarded)
    assert (
        _refusal("inference_mode", TRAIN)
        == "no loop in this cell calls the model without .backward()"
    )


def test_a_model_the_caller_names_is_judged_like_one_the_cell_names() -> None:
    # `enc` is no model by its name: given as model_name, its call under no_grad inside the
    # loop reads as an inference loop already without autograd, as `model` would.
    cell = "enc = make()\nfor x in data:\n    with torch.no_grad():\n        y = enc(x)\n"
    refusal = _refusal("inference_mode", cell, model_name="enc")
    assert refusal == _refusal("inference_mode", cell.replace("enc", "model"))
    assert "already runs under torch.no_grad()" in refusal
    assert (
        "enc.eval()"
        in _patch(
            "inference_mode", cell.replace("    with torch.no_grad():\n    ", ""), model_name="enc"
        ).source_after
    )


def test_the_sync_fix_gates_every_per_step_read_the_rule_counts():
    # `metrics["loss"] = loss.item()` is a per-step sync for the rule (cell/syncs.py) but no
    # logging call, record or plain assignment: the fix reads the rule's facts and gates it too,
    # unless the container is read on the other steps (it would be stale there).
    cell = (
        "for i, (x, y) in enumerate(loader):\n"
        "    loss = loss_fn(model(x), y)\n"
        "    loss.backward()\n"
        "    opt.step()\n"
        '    metrics["loss"] = loss.item()\n'
    )
    patch = apply_fix("throttle_host_syncs", cell)
    assert isinstance(patch, Patch), patch
    assert '    if i % 10 == 0:\n        metrics["loss"] = loss.item()\n' in patch.source_after
    read = cell + "    report(metrics)\n"
    refused = apply_fix("throttle_host_syncs", read)
    assert isinstance(refused, Refusal), refused.source_after


STEP_FUNCTION_ITEM = """\
import torch
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
def train_step(model, x):
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.item()
running = 0.0
for step in range(3):
    running = 0.9 * running + 0.1 * train_step(model, torch.randn(8, 4))
"""


def test_a_read_in_the_step_function_is_named_and_the_refusal_says_where_to_act():
    # The cause lives in another function: on main the cell saw no step loop, so neither the
    # per-step .item() in train_step nor its loop was found.
    from gpu_notebook.cell.scan import scan_source

    (read,) = scan_source(STEP_FUNCTION_ITEM).syncs
    assert read.text == "return loss.item()" and read.step_loop_line is not None
    refused = apply_fix("throttle_host_syncs", STEP_FUNCTION_ITEM)
    assert isinstance(refused, Refusal)
    assert "`return loss.item()` runs in `train_step`" in refused.reason


STEP_METHOD_FIT = """\
import torch
class Fitter:
    def __init__(self, model):
        self.model = model
        self.opt = torch.optim.SGD(model.parameters(), lr=0.1)
        self.history = []
    def step(self, x):
        loss = self.model(x).pow(2).mean()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return loss.detach()
    def fit(self, batches, epochs):
        for epoch in range(epochs):
            for x in batches:
                self.history.append(self.step(x))
            print(f"epoch {epoch} loss {torch.stack(self.history).mean():.3f}")
Fitter(torch.nn.Linear(4, 1)).fit([torch.randn(8, 4)] * 3, epochs=2)
"""


def test_a_step_method_makes_its_callers_loop_the_step_loop_and_the_epoch_print_is_not_per_step():
    # A hand-written trainer class (issue 26): fit()'s batch loop calls self.step(x), whose body
    # runs the backward. On main no loop trained, so every loop counted as a step loop and the
    # epoch loop's print read 'The loop logs on every step'.
    from gpu_notebook.cell.scan import scan_source
    from gpu_notebook.rules.syncs import loop_lines

    facts = scan_source(STEP_METHOD_FIT)
    (loop,) = facts.training_loops()
    assert loop.line == 15  # `for x in batches:`, not the epoch loop
    assert loop_lines(facts, facts.logging) == ()
    assert loop_lines(facts, facts.syncs) == ()


FRAMEWORK_TRAINS_DATASET_BUILDS = """\
import torch
class Seqs(torch.utils.data.Dataset):
    def __init__(self, n):
        self.items = []
        for i in range(n):
            self.items.append(torch.randint(5, 500, (8,)).tolist())
            print("built", i)
    def __len__(self):
        return len(self.items)
    def __getitem__(self, i):
        return self.items[i]
trainer = make_trainer(Seqs(100))
trainer.train()
"""


def test_a_loop_in_a_constructor_is_not_a_step_loop_when_a_framework_trains():
    # Issue 26: an HF Trainer cell (no loop of its own trains) had its dataset's __init__ loop,
    # `torch.randint(...).tolist()` run once per item when the dataset is built, named as 'every
    # step reads device values on the host' with a throttle fix.
    from gpu_notebook.cell.scan import scan_source
    from gpu_notebook.rules.syncs import loop_lines

    facts = scan_source(FRAMEWORK_TRAINS_DATASET_BUILDS)
    assert loop_lines(facts, facts.syncs) == ()
    assert loop_lines(facts, facts.logging) == ()


def test_a_list_the_loop_reads_on_other_steps_is_not_thinned() -> None:
    # 10_live_display (unseen round 9): `hist.append(loss.item())` was gated every 10 steps
    # while a live display every 16 steps read `hist[-1]`: the patched cell showed step 10's
    # loss as step 16's (and `hist[step]` would have raised IndexError).
    source = SETUP + (
        "hist = []\n"
        "for step, (xb, yb) in enumerate(loader):\n"
        "    loss = criterion(model(xb), yb)\n"
        "    opt.zero_grad(); loss.backward(); opt.step()\n"
        "    hist.append(loss.item())\n"
        "    if step % 4 == 0:\n"
        "        print(f'step {step} loss {hist[-1]:.3f}')\n"
    )
    reason = _refusal("throttle_host_syncs", source, every=3)
    assert "`hist` is read in the loop" in reason
    assert "print(f'step {step} loss {hist[-1]:.3f}')" in reason
    # Read only after the loop, the list is thinned and the patch says so (as before).
    after_only = source.replace(
        "    if step % 4 == 0:\n        print(f'step {step} loss {hist[-1]:.3f}')\n",
        "print(len(hist))\n",
    )
    patched = _patch("throttle_host_syncs", after_only, every=3).source_after
    assert "`hist` now keeps one value every 3 steps" in patched
    namespace, _printed = _run(patched)
    assert len(namespace["hist"]) == 2


# Issue 26 (unseen round 10, benchmarks/unseen_programs/probe_every_step.py): "Validation runs
# inside every training step" had no patch; --try-fixes had nothing to try.
PROBE = (
    SETUP
    + """\
Xv, Yv = torch.randn(32, 8), torch.randint(0, 3, (32,))
history = []
for xb, yb in loader:
    model.train()
    loss = criterion(model(xb), yb)
    opt.zero_grad()
    loss.backward()
    opt.step()
    model.eval()
    with torch.no_grad():
        acc = (model(Xv).argmax(1) == Yv).float().mean()
    history.append(float(acc))
print(len(history), history[-1] >= 0)
"""
)


def test_validate_every_n_gates_the_validation_block_and_the_lines_that_use_it() -> None:
    patch = _patch("validate_every_n", PROBE, every=2)
    body = patch.source_after
    # The loop had no counter: it is enumerated; the block and the append that reads its
    # value move under one gate; the training step stays.
    assert "for step, (xb, yb) in enumerate(loader):" in body
    gate = body.index("    if step % 2 == 0:\n        model.eval()\n        with torch.no_grad():")
    assert body.index("history.append(float(acc))") > gate
    assert body.index("opt.step()") < gate and "    model.train()\n" in body
    # It runs in a fresh namespace (no name used before it is bound), and validates on the
    # kept steps: 6 batches, validated on 3.
    namespace, out = _run(patch.source_after)
    assert out.strip() == "3 True" and len(namespace["history"]) == 3


def test_validate_every_n_refuses_where_a_line_every_step_reads_the_validation() -> None:
    # A learning rate set from the validation's accuracy every step: `best` is read by a line
    # that stays, so the line computing it stays, and it reads `acc`.
    cell = PROBE.replace(
        "    history.append(float(acc))\n",
        "    history.append(float(acc))\n    best = max(0.0, acc)\n    opt.param_groups[0]['lr'] = 0.1 * best\n",
    )
    reason = _refusal("validate_every_n", cell, every=2)
    assert "`best = max(0.0, acc)` reads `acc` on every step" in reason


def test_validate_every_n_refuses_a_validation_inside_the_training_block() -> None:
    cell = PROBE.replace("    model.train()\n", "    model.train()\n    if True:\n        pass\n")
    mixed = PROBE.replace(
        "    loss = criterion(model(xb), yb)\n    opt.zero_grad()\n    loss.backward()\n"
        "    opt.step()\n    model.eval()\n    with torch.no_grad():\n"
        "        acc = (model(Xv).argmax(1) == Yv).float().mean()\n",
        "    with torch.autograd.set_detect_anomaly(False):\n"
        "        loss = criterion(model(xb), yb)\n        opt.zero_grad()\n        loss.backward()\n"
        "        opt.step()\n        model.eval()\n        with torch.no_grad():\n"
        "            acc = (model(Xv).argmax(1) == Yv).float().mean()\n",
    )
    assert mixed != PROBE and isinstance(apply_fix("validate_every_n", cell, every=2), Patch)
    reason = _refusal("validate_every_n", mixed, every=2)
    assert "with torch.autograd.set_detect_anomaly(False):" in reason


def test_a_loop_whose_last_line_ends_with_a_semicolon_is_still_the_training_loop() -> None:
    # ast ends a loop at its last line's `;`, libcst before it: the loop was not found, and
    # every loop fix said "no for loop calling .backward() in this cell".
    body = TRAIN[len(SETUP) :].split("\n")
    ended = SETUP + "\n".join(
        line + ";" if line.startswith("        ") and not line.lstrip().startswith("#") else line
        for line in body
    )
    assert 'print(f"epoch {epoch} loss {loss.item():.4f}");\n' in ended
    after = _patch("throttle_host_syncs", ended, every=4).source_after
    assert after.replace(";", "") == _patch("throttle_host_syncs", TRAIN, every=4).source_after
    # A one-line loop, its body on the header's line, ends with `;` too.
    oneline = SETUP + (
        "for xb, yb in loader: loss = criterion(model(xb), yb); loss.backward(); opt.step();\n"
        "print(loss.item())\n"
    )
    assert "no for loop" not in _refusal("throttle_host_syncs", oneline)


def test_a_quoted_statement_has_no_semicolon_of_the_line_it_shares() -> None:
    as_number = CIFAR_STYLE.replace(
        "            running_loss = 0.0\n",
        "            history.append(running_loss)\n            running_loss = 0.0\n",
    ).replace(
        "        running_loss += loss.item()\n", "        running_loss += loss.item(); n = 1\n"
    )
    assert _refusal("throttle_host_syncs", as_number).startswith(
        "`running_loss += loss.item()` syncs every step"
    )
    ended = as_number.replace(
        "running_loss += loss.item(); n = 1\n", "running_loss += loss.item();\n"
    )
    assert _refusal("throttle_host_syncs", ended).startswith(
        "`running_loss += loss.item()` syncs every step"
    )
