"""Workers not offered on a busy machine still leave the advice that needs no core: make each
item cheaper. Unseen round 21 (stft_per_item_ctc, log-mel features computed per item every
epoch, 1.44x by hand from caching them): "[info] The step waits for data loaded in the main
process; workers may not help on this machine now", unbounded, ranked under every bounded
finding, though line 40 of its ``__getitem__`` held most of the wait. Where the stack sampler
places the data wait in the dataset's own code, the finding is levelled and bounded by that
part of the step (Amdahl over the dataset code's share of the wait), still with no patch."""

from __future__ import annotations

import dataclasses

import pytest

from gpu_notebook.records import LineStat, StackProfile
from gpu_notebook.rules import run_rules
from gpu_notebook.rules.input_pipeline import LOADING_SAMPLES, LoaderWorkers
from gpu_notebook.words import word_findings
from tests.scenarios import synthetic as syn
from tests.test_fix_ranges import _analysis, _loader_record, _sampled, with_run_figures

CELL = """\
class Feats(Dataset):
    def __len__(self):
        return 6400
    def __getitem__(self, i):
        spec = torch.stft(self.wavs[i], 512, 128, return_complex=True)
        return spec.abs().log(), self.labels[i]
loader = DataLoader(Feats(), batch_size=32, num_workers=0)
for x, y in loader:
    loss = loss_fn(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
"""
BODY = CELL.splitlines()
ITEM_LINE = (
    1 + BODY.index("        spec = torch.stft(self.wavs[i], 512, 128, return_complex=True)") + 1
)
RETURN_LINE = ITEM_LINE + 1  # `return spec.abs().log(), ...`: the same method's next line
LOOP_LINE = 1 + BODY.index("for x, y in loader:") + 1


def _found(item_samples: int, data_samples: int, busy: bool = True, returned: int = 0):
    series = _sampled(30.0, 100.0, 90.0) if busy else _sampled(30.0, 65.0, 90.0)
    run = syn.make_run(CELL, steps=_loader_record(), cpu_count=2, series=series)
    hot = LineStat(ITEM_LINE, BODY[ITEM_LINE - 2], item_samples, 0.5, {"data": item_samples})
    loop = LineStat(LOOP_LINE, BODY[LOOP_LINE - 2], data_samples, 0.7, {"data": data_samples})
    back = LineStat(RETURN_LINE, BODY[RETURN_LINE - 2], returned, 0.1, {"data": returned})
    lines = (hot, back, loop) if returned else (hot, loop)
    stacks = StackProfile(0.005, data_samples + 10, 0.06, lines=lines)
    analysis = dataclasses.replace(with_run_figures(run, _analysis(run)), stacks=stacks)
    raw = {f.rule_id: f for f in run_rules(run, analysis, syn.VERDICT)}["input.loader_workers"]
    worded = {f.rule_id: f for f in word_findings((raw,))}["input.loader_workers"]
    return raw, worded


def test_the_item_advice_is_levelled_and_bounded_by_the_dataset_code_s_share_of_the_wait():
    raw, f = _found(item_samples=36, data_samples=40)
    said = raw.said
    assert isinstance(said, LoaderWorkers) and said.busy and said.in_dataset is not None
    assert said.item_located
    assert f.fix_id is None and f.fix.startswith("Not offered: num_workers=2")
    # 36 of the wait's 40 samples in __getitem__: that part of the data share, its Amdahl bound.
    assert said.item_share == pytest.approx(said.data * 36 / 40)
    assert said.item_bound == pytest.approx(1 / (1 - said.item_share), rel=1e-6)
    assert f.severity != "info" and f.gain_bound == pytest.approx(said.item_bound)
    assert any("making each item cheaper gives up to" in e for e in f.evidence), f.evidence
    # Half as much of the wait in the dataset's code: a smaller bound.
    _, half = _found(item_samples=20, data_samples=40)
    assert half.gain_bound is not None and 1.0 < half.gain_bound < f.gain_bound
    # One frame's lines hold disjoint samples: the method's are their sum, not its hottest
    # line's (stft_per_item_ctc: the hottest line alone read 15 of 24).
    split_raw, split = _found(item_samples=20, data_samples=40, returned=16)
    assert isinstance(split_raw.said, LoaderWorkers) and split_raw.said.in_dataset is not None
    assert split_raw.said.in_dataset.samples == 36
    assert split_raw.said.in_dataset.line == ITEM_LINE  # the hottest line still named
    assert split.gain_bound == pytest.approx(f.gain_bound)


def test_too_few_samples_in_the_dataset_s_code_bound_it_by_the_whole_wait():
    """Round 23's hf_tokenize_getitem: an input-bound verdict (59% data wait) whose data finding
    was [info], two of the wait's samples in ``__getitem__``. Unlocated, the most any cheaper
    loading gives is the whole wait's Amdahl bound."""
    few = LOADING_SAMPLES - 1
    raw, f = _found(item_samples=few, data_samples=few)
    said = raw.said
    assert isinstance(said, LoaderWorkers) and not said.item_located
    assert said.item_share == pytest.approx(said.data)
    assert f.severity != "info" and f.fix_id is None
    assert f.gain_bound == pytest.approx(1 / (1 - said.data), rel=1e-6)
    assert any("too few stack samples fell in the dataset's code" in e for e in f.evidence)
    # Located, the bound is the dataset code's part only: never more than the whole wait's.
    _, located = _found(item_samples=20, data_samples=40)
    assert located.gain_bound is not None and located.gain_bound < f.gain_bound


def test_workers_offered_where_a_core_is_free_are_unchanged():
    raw, f = _found(item_samples=36, data_samples=40, busy=False)
    assert isinstance(raw.said, LoaderWorkers) and raw.said.item_bound is None
    assert f.fix_id == "dataloader_workers"
