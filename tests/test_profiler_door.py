"""The profiler door (capture/profiler.py) starts torch's profiler without importing inductor."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

# A fresh process: this test process may have imported inductor already (an optimizer does).
PROGRAM = textwrap.dedent(
    """
    import sys
    import torch
    import torch.profiler.profiler as profiler_mod
    from gpu_notebook.capture.profiler import ProfilerWindow

    assert "torch._inductor" not in sys.modules  # no optimizer, no compile: not imported yet
    window = ProfilerWindow(warmup=1, profile_steps=2, cuda=False)
    x = torch.randn(8, 8)
    for step in range(4):
        window.on_boundary(step)
        x = x @ x.T / 8
    print("recorded", window.status)
    window.close()
    print("inductor", "torch._inductor" in sys.modules)
    print("shadow left", "hasattr" in vars(profiler_mod))
    """
)


def test_the_first_window_does_not_import_inductor():
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1]), "KINETO_LOG_LEVEL": "6"}
    res = subprocess.run(
        [sys.executable, "-c", PROGRAM], capture_output=True, text=True, env=env, timeout=240
    )
    assert res.returncode == 0, res.stderr
    assert "recorded recorded" in res.stdout, res.stdout
    # torch.profiler's prepare_trace asks hasattr(torch, "_inductor"), which imports inductor and
    # dynamo (seconds, inside the user's loop); the door answers without the import, and leaves
    # no name behind in torch's module.
    assert "inductor False" in res.stdout, res.stdout
    assert "shadow left False" in res.stdout
