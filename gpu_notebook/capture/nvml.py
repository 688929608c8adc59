"""The only door to NVML: GPU facts and readings as typed records, failures as values.

Nothing else in the package imports ``pynvml``; it is imported here lazily, on the first question,
so ``import gpu_notebook`` stays cheap and works on machines without NVIDIA software. The model is
nvitop's ``libnvml``: initialise once under a lock, shut down at exit, and sort failures by what
the caller can do about them:

* NVML cannot start at all (``pynvml`` missing, library not found, driver not loaded, no
  permission, ...): not an exception. :func:`status` says so in one line and every question
  answers "nothing" (``()``, ``None``).
* One reading fails (``NotSupported`` on this board, ``NoData`` yet, ``NoPermission`` for one
  query, ...): that metric is ``None``; the other metrics of the same reading still arrive.
* The GPU falls off the bus (``GpuIsLost``, ``ResetRequired``, or ``Unknown`` from a GPU that
  answered before): :class:`GpuLostError`, so the sampler can note it once and stop asking; the
  door refuses further questions about that GPU without touching the driver again.

Tests swap the library for a fake with :func:`use_library` (see ``tests/fake_nvml.py``).
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from gpu_notebook.records import GpuInfo, GpuSample

__all__ = [
    "GpuLostError",
    "GpuProcess",
    "NvmlStatus",
    "driver_version",
    "gpu_infos",
    "gpu_processes",
    "read_gpu",
    "reset",
    "status",
    "use_library",
]

_T = TypeVar("_T")

# NVML's PCIe counters are in KB/s with KB = 1024 bytes (nvidia-smi and nvitop read them so).
_PCIE_BYTES_PER_KB = 1024
# usedGpuMemory is NVML_VALUE_NOT_AVAILABLE (2**64 - 1) when the driver will not say (WDDM, MIG);
# newer nvidia-ml-py maps it to None itself, older releases hand the raw sentinel through.
_NOT_AVAILABLE_ULL = 2**64 - 1


@dataclass(frozen=True)
class NvmlStatus:
    """Whether GPUs can be read, and if not, one line that says why and what still works."""

    available: bool
    message: str | None  # None when available
    gpu_count: int = 0  # GPUs NVML lists (0 when not available)


@dataclass(frozen=True)
class GpuProcess:
    """One compute process on a GPU."""

    pid: int
    used_memory_bytes: int | None  # None: the driver does not say (WDDM, MIG without privileges)


class GpuLostError(RuntimeError):
    """GPU ``index`` stopped answering (fell off the bus, needs a reset): stop reading it."""

    def __init__(self, index: int, reason: str = "GPU is lost") -> None:
        super().__init__(f"GPU {index} is lost ({reason}); it needs a reset or a reboot")
        self.index = index
        self.reason = reason


# ---------------------------------------------------------------------------------------------
# Library state. One lock guards initialisation and reset; readings themselves run unlocked
# because NVML is thread-safe and the sampler thread must not wait behind a slow gpu_infos().
# ---------------------------------------------------------------------------------------------

_lock = threading.RLock()
_override: Any = None  # a fake module installed by use_library(); None: the real pynvml
# (status, the module whose nvmlInit succeeded or None); one tuple so that a reader never sees
# the status of one start with the library of another. None: not asked yet.
_started: tuple[NvmlStatus, Any] | None = None
_handles: dict[int, Any] = {}
_answered: set[int] = set()  # GPUs that gave at least one reading: "Unknown" from them means lost
_lost: dict[int, str] = {}  # index -> reason
_atexit_registered = False


def status() -> NvmlStatus:
    """Start NVML on first use (once) and say whether GPUs can be read. Never raises NVML errors."""
    return _state()[0]


def driver_version() -> str | None:
    """The NVIDIA driver version, e.g. ``"550.54.15"``; None when NVML is not running."""
    _, lib = _state()
    if lib is None:
        return None
    try:
        return _text(lib.nvmlSystemGetDriverVersion())
    except lib.NVMLError:
        return None


def gpu_infos() -> tuple[GpuInfo, ...]:
    """Static facts about every GPU NVML lists (``()`` when NVML is not available).

    A GPU lost before or during the question is listed with the name ``"GPU <i> (lost)"`` and no
    facts rather than hiding the others.
    """
    state, lib = _state()
    if not state.available:
        return ()
    infos = []
    for index in range(state.gpu_count):
        try:
            infos.append(_gpu_info(lib, index))
        except GpuLostError:
            infos.append(GpuInfo(index=index, name=f"GPU {index} (lost)"))
    return tuple(infos)


def read_gpu(index: int, *, pcie: bool = True) -> GpuSample:
    """One reading of GPU ``index``; each metric the board cannot give right now is None.

    ``pcie=False`` skips the PCIe throughput counters: NVML measures them over a 20 ms window
    inside the call, so they cost wall time (not CPU) and the sampler rations them on many GPUs.

    Raises:
        GpuLostError: the GPU is lost (now or earlier in this session).
        IndexError: NVML is not available or lists no GPU ``index``.
    """
    lib, handle = _device(index)
    if handle is None:
        return GpuSample(index=index)
    worked_before = index in _answered

    def query(func: Callable[..., _T], *args: Any) -> _T | None:
        return _query(lib, index, worked_before, func, handle, *args)

    utilization = query(lib.nvmlDeviceGetUtilizationRates)
    memory = query(lib.nvmlDeviceGetMemoryInfo)
    power_mw = query(lib.nvmlDeviceGetPowerUsage)
    temperature_c = query(lib.nvmlDeviceGetTemperature, lib.NVML_TEMPERATURE_GPU)
    rx_kb_per_s = tx_kb_per_s = None
    if pcie:
        rx_kb_per_s = query(lib.nvmlDeviceGetPcieThroughput, lib.NVML_PCIE_UTIL_RX_BYTES)
        tx_kb_per_s = query(lib.nvmlDeviceGetPcieThroughput, lib.NVML_PCIE_UTIL_TX_BYTES)

    sample = GpuSample(
        index=index,
        utilization_pct=None if utilization is None else float(utilization.gpu),
        memory_used_bytes=None if memory is None else int(memory.used),
        memory_total_bytes=None if memory is None else int(memory.total),
        power_w=None if power_mw is None else power_mw / 1000.0,
        pcie_rx_bytes_per_s=_pcie_bytes_per_s(rx_kb_per_s),
        pcie_tx_bytes_per_s=_pcie_bytes_per_s(tx_kb_per_s),
        temperature_c=None if temperature_c is None else float(temperature_c),
    )
    if any(v is not None for v in (utilization, memory, power_mw, temperature_c)):
        _answered.add(index)
    return sample


def gpu_processes(index: int) -> tuple[GpuProcess, ...] | None:
    """Compute processes on GPU ``index`` with their memory; None when NVML will not list them.

    Inside a container or on a MIG slice without privileges NVML refuses the list (None), which
    is not the same as an idle GPU (``()``).

    Raises:
        GpuLostError: the GPU is lost.
        IndexError: NVML is not available or lists no GPU ``index``.
    """
    lib, handle = _device(index)
    if handle is None:
        return None
    processes = _query(
        lib, index, index in _answered, lib.nvmlDeviceGetComputeRunningProcesses, handle
    )
    if processes is None:
        return None
    return tuple(
        GpuProcess(pid=int(p.pid), used_memory_bytes=_memory_or_none(p.usedGpuMemory))
        for p in processes
    )


def reset() -> None:
    """Shut NVML down if this module started it and forget everything (lost GPUs included)."""
    global _started
    with _lock:
        lib = None if _started is None else _started[1]
        _started = None
        _handles.clear()
        _answered.clear()
        _lost.clear()
        if lib is not None:
            # A shutdown that fails (driver gone, already shut down by the user's code) leaves
            # nothing for anyone to do: the process is leaving NVML either way.
            with contextlib.suppress(lib.NVMLError):
                lib.nvmlShutdown()


@contextlib.contextmanager
def use_library(library: Any) -> Iterator[None]:
    """Test seam: answer every question from ``library`` (a fake pynvml) inside the block.

    The door is reset on entry and on exit, so no handle or status leaks between the fake and
    the real library.
    """
    global _override
    with _lock:
        previous = _override
        reset()
        _override = library
    try:
        yield
    finally:
        with _lock:
            reset()
            _override = previous


# ---------------------------------------------------------------------------------------------
# Internals
# ---------------------------------------------------------------------------------------------


def _state() -> tuple[NvmlStatus, Any]:
    """(status, initialised library or None), starting NVML on the first call."""
    global _started
    started = _started
    if started is not None:  # fast path: the sampler asks every tick
        return started
    with _lock:
        if _started is None:
            _started = _start()
        return _started


def _start() -> tuple[NvmlStatus, Any]:
    """Load and initialise the library; say why not when it cannot start."""
    global _atexit_registered
    lib = _override
    if lib is None:
        try:
            lib = importlib.import_module("pynvml")  # the one place pynvml is imported
        except ImportError:
            return NvmlStatus(False, _cpu_only("nvidia-ml-py is not installed")), None
    try:
        lib.nvmlInit()
    except lib.NVMLError as exc:
        return NvmlStatus(False, _cpu_only(_init_failure_reason(lib, exc))), None
    if not _atexit_registered:
        # Registered once for the process; reset() shuts down whichever library is live then.
        atexit.register(reset)
        _atexit_registered = True
    try:
        count = int(lib.nvmlDeviceGetCount())
    except lib.NVMLError as exc:
        return NvmlStatus(False, _cpu_only(f"NVML started but cannot count GPUs: {exc}")), lib
    if count == 0:
        return NvmlStatus(False, _cpu_only("NVML lists no device")), lib
    return NvmlStatus(True, None, count), lib


# Why nvmlInit failed, in the user's words, with what to do next where there is something to do.
_INIT_FAILURES: tuple[tuple[str, str], ...] = (
    ("NVMLError_LibraryNotFound", "NVML library not found"),
    ("NVMLError_DriverNotLoaded", "NVIDIA driver not loaded"),
    ("NVMLError_NoPermission", "no permission to use NVML; in a container, start it with --gpus"),
    ("NVMLError_LibRmVersionMismatch", "NVML and driver differ; reboot after a driver update"),
    ("NVMLError_FunctionNotFound", "NVML library too old for nvidia-ml-py; update the driver"),
)


def _init_failure_reason(lib: Any, exc: BaseException) -> str:
    for class_name, reason in _INIT_FAILURES:
        error_class = getattr(lib, class_name, None)
        if error_class is not None and isinstance(exc, error_class):
            return reason
    return f"NVML failed to start: {exc}"


def _cpu_only(reason: str) -> str:
    return f"no NVIDIA GPU visible ({reason}): CPU-side analysis only"


def _device(index: int) -> tuple[Any, Any]:
    """(library, handle or None) for a visible, not-lost GPU."""
    state, lib = _state()
    if not state.available or not 0 <= index < state.gpu_count:
        raise IndexError(
            f"GPU {index} is not visible: "
            + (state.message or f"NVML lists {state.gpu_count} GPU(s)")
        )
    reason = _lost.get(index)
    if reason is not None:
        # Asking a lost GPU again can block for seconds inside the driver: refuse here.
        raise GpuLostError(index, reason)
    handle = _handles.get(index)
    if handle is None:
        handle = _query(lib, index, index in _answered, lib.nvmlDeviceGetHandleByIndex, index)
        if handle is not None:
            _handles[index] = handle
    return lib, handle


def _query(
    lib: Any, index: int, worked_before: bool, func: Callable[..., _T], *args: Any
) -> _T | None:
    """``func(*args)``; None when this one reading fails, GpuLostError when the GPU is gone."""
    try:
        return func(*args)
    except lib.NVMLError as exc:
        _raise_if_lost(lib, index, worked_before, exc)
        return None


def _raise_if_lost(lib: Any, index: int, worked_before: bool, exc: BaseException) -> None:
    lost = isinstance(exc, (lib.NVMLError_GpuIsLost, lib.NVMLError_ResetRequired))
    # "Unknown" is also what a board that just fell off the bus answers; from a GPU that never
    # answered it is more likely an unsupported query, so only then is it a plain missing value.
    lost = lost or (worked_before and isinstance(exc, lib.NVMLError_Unknown))
    if lost:
        reason = str(exc)
        _lost[index] = reason
        _handles.pop(index, None)
        raise GpuLostError(index, reason) from exc


def _gpu_info(lib: Any, index: int) -> GpuInfo:
    _, handle = _device(index)
    if handle is None:
        return GpuInfo(index=index, name=f"GPU {index}")
    worked_before = index in _answered

    def query(func: Callable[..., _T], *args: Any) -> _T | None:
        return _query(lib, index, worked_before, func, handle, *args)

    name = _text(query(lib.nvmlDeviceGetName))
    memory = query(lib.nvmlDeviceGetMemoryInfo)
    capability = query(lib.nvmlDeviceGetCudaComputeCapability)
    power_limit_mw = query(lib.nvmlDeviceGetEnforcedPowerLimit)
    return GpuInfo(
        index=index,
        name=name if name is not None else f"GPU {index}",
        uuid=_text(query(lib.nvmlDeviceGetUUID)),
        memory_total_bytes=None if memory is None else int(memory.total),
        compute_capability=None if capability is None else f"{capability[0]}.{capability[1]}",
        pcie_generation=query(lib.nvmlDeviceGetMaxPcieLinkGeneration),
        pcie_width=query(lib.nvmlDeviceGetMaxPcieLinkWidth),
        nvlink_links=_nvlink_links(lib, index, worked_before, handle),
        power_limit_w=None if power_limit_mw is None else power_limit_mw / 1000.0,
    )


def _nvlink_links(lib: Any, index: int, worked_before: bool, handle: Any) -> int | None:
    """Active NVLink links; 0 for a board without NVLink, None when NVML will not say."""
    active = 0
    # NVML has no "how many links" query: ask link by link until it says there is no such link.
    for link in range(int(lib.NVML_NVLINK_MAX_LINKS)):
        try:
            state = lib.nvmlDeviceGetNvLinkState(handle, link)
        except (lib.NVMLError_NotSupported, lib.NVMLError_InvalidArgument):
            # Past the last link; at link 0 it means the board has no NVLink: a measured zero.
            return active
        except lib.NVMLError as exc:
            _raise_if_lost(lib, index, worked_before, exc)
            return None
        if state == lib.NVML_FEATURE_ENABLED:
            active += 1
    return active


def _text(value: str | bytes | None) -> str | None:
    # nvidia-ml-py < 11.515 returns bytes for names, UUIDs and versions; newer ones return str.
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value


def _pcie_bytes_per_s(kb_per_s: int | None) -> float | None:
    return None if kb_per_s is None else float(kb_per_s * _PCIE_BYTES_PER_KB)


def _memory_or_none(value: int | None) -> int | None:
    if value is None or value >= _NOT_AVAILABLE_ULL:
        return None
    return int(value)
