"""Words of the debugging-API rule (rules/debug_apis.py)."""

from __future__ import annotations

from gpu_notebook.rules.debug_apis import AnomalyOn
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
        "Turn it off for training (torch.autograd.set_detect_anomaly(False)); turn it on only "
        "to find where a NaN gradient comes from.",
        "PyTorch performance tuning guide: disable debugging APIs (anomaly detection)",
    )
