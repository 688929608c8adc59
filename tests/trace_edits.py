"""Edits of recorded Kineto traces that replay what a busy machine does to a real run."""

from __future__ import annotations

import json


def time_lost(path: str, at_us: float, lost_us: float) -> str:
    """The trace at ``path`` as if the machine took ``lost_us`` from the recorded thread at
    ``at_us``: every event around that moment lasts longer by it, every later event starts later
    by it. Written beside it (``-sliced.json``); returns its path."""
    with open(path) as f:
        doc = json.load(f)
    for e in doc["traceEvents"]:
        if "ts" not in e:
            continue
        if e["ts"] > at_us:
            e["ts"] += lost_us
        elif e.get("ph") == "X" and e["ts"] + e.get("dur", 0) > at_us:
            e["dur"] += lost_us
    out = path.replace(".json", "-sliced.json")
    with open(out, "w") as f:
        json.dump(doc, f)
    return out
