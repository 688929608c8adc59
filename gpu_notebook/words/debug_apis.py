"""Words of the debugging-API rule (rules/debug_apis.py)."""

from __future__ import annotations

from gpu_notebook.rules.debug_apis import AnomalyOn, AnomalyOnOutside
from gpu_notebook.words.common import Words, worder, words


@worder(AnomalyOn)
def anomaly_on(s: AnomalyOn) -> Words:
    return words(
        "Autograd's anomaly detection is on while the loop trains",
        [
            f"line {s.line}: `{s.text}` turns anomaly detection on for the training steps",
            "every forward operation records a traceback and every backward output is checked "
            "for NaN: debugging work on each step",
            "its cost is spread over the model's own operators and not measured apart: no bound",
        ],
        (
            "Pass detect_anomaly=False (the default) for training"
            if s.keyword
            else "Turn it off for training (torch.autograd.set_detect_anomaly(False))"
        )
        + "; turn it on only to find where a NaN gradient comes from.",
        "PyTorch performance tuning guide: disable debugging APIs (anomaly detection)",
    )


@worder(AnomalyOnOutside)
def anomaly_on_outside(s: AnomalyOnOutside) -> Words:
    if s.cell_line is not None:
        where = f"line {s.cell_line} of this cell turns it on, around the steps' backward calls"
        act = f"line {s.cell_line}"
    elif s.caller is not None:
        where = f"backward was called with it on from `{s.caller}`"
        act = f"the `with torch.autograd.detect_anomaly()` in `{s.caller}` or around its call"
    else:
        where = "no line of this cell turns it on: an earlier cell did"
        act = (
            "the earlier cell's torch.autograd.set_detect_anomaly(True) (or call "
            "torch.autograd.set_detect_anomaly(False) before training)"
        )
    on_while = "on while the loop ran" + (
        "" if s.cell_line is not None else " (set outside this cell)"
    )
    return words(
        "Autograd's anomaly detection is " + on_while,
        [
            f"{on_while}: {s.backwards_on} of the "
            f"{s.backwards_read} backward calls read found it on",
            where,
            "every forward operation records a traceback and every backward output is checked "
            "for NaN: debugging work on each step",
            "its cost is spread over the model's own operators and not measured apart: no bound",
        ],
        f"Turn it off where it is set: {act}; no change to this cell is offered.",
        "PyTorch performance tuning guide: disable debugging APIs (anomaly detection)",
    )
