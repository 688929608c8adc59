"""Read the facts about where a run happens: Python, torch, CUDA and the GPUs NVML sees."""

from __future__ import annotations

import importlib.util
import os
import platform
import sys

from gpu_notebook.capture import nvml
from gpu_notebook.records import Environment


def torch_installed() -> bool:
    return importlib.util.find_spec("torch") is not None


def read_environment() -> Environment:
    """One Environment record; never raises for a missing torch, driver or GPU."""
    torch_version: str | None = None
    cuda_available = False
    if torch_installed():
        import torch

        torch_version = str(torch.__version__)
        cuda_available = bool(torch.cuda.is_available())
    status = nvml.status()
    return Environment(
        python_version=platform.python_version(),
        platform=f"{sys.platform}-{platform.machine()}",
        cpu_count=os.cpu_count() or 1,
        torch_version=torch_version,
        cuda_available=cuda_available,
        nvml_available=status.available,
        nvml_message=status.message,
        driver_version=nvml.driver_version() if status.available else None,
        gpus=nvml.gpu_infos() if status.available else (),
    )
