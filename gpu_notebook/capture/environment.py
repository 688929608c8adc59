"""Read the facts about where a run happens: Python, torch, CUDA and the GPUs NVML sees."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import platform
import sys

from gpu_notebook.capture import nvml
from gpu_notebook.capture.cpu_bf16_flags import cpu_bf16_flags
from gpu_notebook.records import Environment


def torch_installed() -> bool:
    return importlib.util.find_spec("torch") is not None


def torch_facts() -> dict[str, object]:
    """torch's version and whether CUDA is usable, read from an already imported torch only.

    Never imports torch: the user's code does that, after setting what torch reads at import
    (``OMP_NUM_THREADS``, ``CUDA_VISIBLE_DEVICES``...). Before that, the version comes from the
    installed distribution and CUDA counts as not available until torch arrives.
    """
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "cuda"):
        return {
            "torch_version": str(torch.__version__),
            "cuda_available": bool(torch.cuda.is_available()),
        }
    version: str | None = None
    if torch_installed():
        try:
            version = importlib.metadata.version("torch")
        except importlib.metadata.PackageNotFoundError:
            version = None
    return {"torch_version": version, "cuda_available": False}


def read_environment() -> Environment:
    """One Environment record; never raises for a missing torch, driver or GPU; imports no torch."""
    facts = torch_facts()
    torch_version = facts["torch_version"]
    cuda_available = bool(facts["cuda_available"])
    status = nvml.status()
    return Environment(
        python_version=platform.python_version(),
        platform=f"{sys.platform}-{platform.machine()}",
        cpu_count=os.cpu_count() or 1,
        torch_version=torch_version if isinstance(torch_version, str) else None,
        cuda_available=cuda_available,
        nvml_available=status.available,
        nvml_message=status.message,
        driver_version=nvml.driver_version() if status.available else None,
        gpus=nvml.gpu_infos() if status.available else (),
        usable_cores=usable_cores(),
        memory_total_bytes=machine_memory_bytes(),
        cpu_bf16_flags=cpu_bf16_flags(),
    )


def machine_memory_bytes() -> int | None:
    """The machine's RAM (psutil), None where it cannot be read: the headroom a CPU run has."""
    import psutil

    try:
        return int(psutil.virtual_memory().total)
    except (OSError, RuntimeError, AttributeError):
        return None


def usable_cores() -> int | None:
    """The cores this process may run on (its CPU affinity), None where it cannot be read."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


def torch_threads() -> int | None:
    """torch's intra-op threads now, from an already imported torch only (never imports it)."""
    torch = sys.modules.get("torch")
    get = getattr(torch, "get_num_threads", None)
    try:
        return int(get()) if get is not None else None
    except Exception:  # noqa: BLE001 -- a half-imported torch: not known
        return None
