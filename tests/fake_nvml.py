"""A fake ``pynvml`` module with scripted GPUs and faults, for the NVML door (after gpustat's).

It behaves like the real binding where the door can tell: the exception classes and constants
*are* the real ones from ``pynvml`` (so ``except pynvml.NVMLError_NotSupported`` in the door is
tested for real), readings come back in the real ctypes structs (``c_nvmlMemory_t`` with
``.total/.free/.used``, ``c_nvmlUtilization_t`` with ``.gpu/.memory``), handles are opaque,
calls before ``nvmlInit`` (or after the last ``nvmlShutdown``) raise ``NVMLError_Uninitialized``,
and a function the fake does not implement is an ``AttributeError`` rather than a silent call
into the real library.

Scenarios are named constructors; each docstring names the bug it guards against.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pynvml as _real  # type: ignore[import-untyped]

GiB = 2**30

NVMLErrorClass = type[_real.NVMLError]


@dataclass
class FakeGpu:
    """One scripted GPU. Values are in NVML's own units (mW, KB/s, bytes)."""

    name: str = "NVIDIA A100-SXM4-80GB"
    uuid: str = "GPU-4a1f3c2e-0000-0000-0000-000000000000"
    memory_total_bytes: int = 80 * GiB
    memory_used_bytes: int = 12 * GiB
    utilization_pct: int = 87
    memory_utilization_pct: int = 41
    power_mw: int = 312_500
    power_limit_mw: int = 400_000
    temperature_c: int = 54
    pcie_rx_kb_per_s: int = 1_500_000
    pcie_tx_kb_per_s: int = 250_000
    compute_capability: tuple[int, int] = (8, 0)
    pcie_max_generation: int = 4
    pcie_max_width: int = 16
    nvlink_states: tuple[int, ...] = (1,) * 12  # A100 SXM4: 12 links; () = a board without NVLink
    processes: tuple[tuple[int, int | None], ...] = ((4242, 11 * GiB),)  # (pid, usedGpuMemory)
    failures: dict[str, NVMLErrorClass] = field(default_factory=dict)  # function -> error raised
    lost_after_reads: int | None = None  # utilization readings answered before the GPU is lost
    lost_error: NVMLErrorClass = _real.NVMLError_GpuIsLost
    reads: int = 0  # utilization readings asked so far
    lost: bool = False


class FakeHandle:
    """Opaque like ``c_nvmlDevice_t``: the door must not look inside."""

    __slots__ = ("_index",)

    def __init__(self, index: int) -> None:
        self._index = index


class FakeNvml:
    """Stands in for the ``pynvml`` module: pass it to ``nvml.use_library``."""

    def __init__(
        self,
        gpus: list[FakeGpu] | None = None,
        *,
        init_error: NVMLErrorClass | None = None,
        driver_version: str = "550.54.15",
        bytes_strings: bool = False,
        init_delay_s: float = 0.0,
    ) -> None:
        self.gpus: list[FakeGpu] = gpus if gpus is not None else []
        self.init_error = init_error
        self.init_delay_s = init_delay_s  # the real nvmlInit takes 0.1-1 s without persistence mode
        self.driver_version = driver_version
        self.bytes_strings = bytes_strings  # nvidia-ml-py < 11.515 returned bytes for strings
        self.calls: Counter[str] = Counter()  # function name -> calls, to check what the door asks
        self.refcount = 0  # like NVML: every nvmlInit needs its nvmlShutdown

    def __getattr__(self, name: str) -> Any:
        # Only the real module's constants and exception classes fall through, never functions.
        if name.startswith("NVML"):
            return getattr(_real, name)
        raise AttributeError(f"the fake pynvml has no {name!r}: add it to tests/fake_nvml.py")

    # --- library ---------------------------------------------------------------------------

    def nvmlInit(self) -> None:
        self.calls["nvmlInit"] += 1
        time.sleep(self.init_delay_s)
        if self.init_error is not None:
            raise self.init_error()
        self.refcount += 1

    def nvmlShutdown(self) -> None:
        self._check_init("nvmlShutdown")
        self.refcount -= 1

    def nvmlSystemGetDriverVersion(self) -> str | bytes:
        self._check_init("nvmlSystemGetDriverVersion")
        return self._string(self.driver_version)

    def nvmlDeviceGetCount(self) -> int:
        self._check_init("nvmlDeviceGetCount")
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeHandle:
        self._check_init("nvmlDeviceGetHandleByIndex")
        if not 0 <= index < len(self.gpus):
            raise _real.NVMLError_InvalidArgument()
        if self.gpus[index].lost:
            raise self.gpus[index].lost_error()
        return FakeHandle(index)

    # --- static facts ----------------------------------------------------------------------

    def nvmlDeviceGetName(self, handle: FakeHandle) -> str | bytes:
        return self._string(self._gpu(handle, "nvmlDeviceGetName").name)

    def nvmlDeviceGetUUID(self, handle: FakeHandle) -> str | bytes:
        return self._string(self._gpu(handle, "nvmlDeviceGetUUID").uuid)

    def nvmlDeviceGetCudaComputeCapability(self, handle: FakeHandle) -> tuple[int, int]:
        return self._gpu(handle, "nvmlDeviceGetCudaComputeCapability").compute_capability

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle: FakeHandle) -> int:
        return self._gpu(handle, "nvmlDeviceGetMaxPcieLinkGeneration").pcie_max_generation

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle: FakeHandle) -> int:
        return self._gpu(handle, "nvmlDeviceGetMaxPcieLinkWidth").pcie_max_width

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: FakeHandle) -> int:
        return self._gpu(handle, "nvmlDeviceGetEnforcedPowerLimit").power_limit_mw

    def nvmlDeviceGetNvLinkState(self, handle: FakeHandle, link: int) -> int:
        gpu = self._gpu(handle, "nvmlDeviceGetNvLinkState")
        if not gpu.nvlink_states:
            raise _real.NVMLError_NotSupported()
        if not 0 <= link < len(gpu.nvlink_states):
            raise _real.NVMLError_InvalidArgument()
        return gpu.nvlink_states[link]

    # --- readings --------------------------------------------------------------------------

    def nvmlDeviceGetUtilizationRates(self, handle: FakeHandle) -> Any:
        gpu = self._gpu(handle, "nvmlDeviceGetUtilizationRates")
        return _real.c_nvmlUtilization_t(gpu=gpu.utilization_pct, memory=gpu.memory_utilization_pct)

    def nvmlDeviceGetMemoryInfo(self, handle: FakeHandle) -> Any:
        gpu = self._gpu(handle, "nvmlDeviceGetMemoryInfo")
        free = gpu.memory_total_bytes - gpu.memory_used_bytes
        return _real.c_nvmlMemory_t(
            total=gpu.memory_total_bytes, free=free, used=gpu.memory_used_bytes
        )

    def nvmlDeviceGetPowerUsage(self, handle: FakeHandle) -> int:
        return self._gpu(handle, "nvmlDeviceGetPowerUsage").power_mw

    def nvmlDeviceGetTemperature(self, handle: FakeHandle, sensor: int) -> int:
        gpu = self._gpu(handle, "nvmlDeviceGetTemperature")
        if sensor != _real.NVML_TEMPERATURE_GPU:
            raise _real.NVMLError_InvalidArgument()
        return gpu.temperature_c

    def nvmlDeviceGetPcieThroughput(self, handle: FakeHandle, counter: int) -> int:
        gpu = self._gpu(handle, "nvmlDeviceGetPcieThroughput")
        if counter == _real.NVML_PCIE_UTIL_RX_BYTES:
            return gpu.pcie_rx_kb_per_s
        if counter == _real.NVML_PCIE_UTIL_TX_BYTES:
            return gpu.pcie_tx_kb_per_s
        raise _real.NVMLError_InvalidArgument()

    def nvmlDeviceGetComputeRunningProcesses(self, handle: FakeHandle) -> list[Any]:
        gpu = self._gpu(handle, "nvmlDeviceGetComputeRunningProcesses")
        return [
            _real.nvmlFriendlyObject(
                {"pid": pid, "usedGpuMemory": used, "gpuInstanceId": 0, "computeInstanceId": 0}
            )
            for pid, used in gpu.processes
        ]

    # --- the rules every device call obeys -------------------------------------------------

    def _check_init(self, function: str) -> None:
        self.calls[function] += 1
        if self.refcount <= 0:
            raise _real.NVMLError_Uninitialized()

    def _gpu(self, handle: FakeHandle, function: str) -> FakeGpu:
        self._check_init(function)
        if not isinstance(handle, FakeHandle):
            raise _real.NVMLError_InvalidArgument()
        gpu = self.gpus[handle._index]
        if function == "nvmlDeviceGetUtilizationRates":
            gpu.reads += 1
            if gpu.lost_after_reads is not None and gpu.reads > gpu.lost_after_reads:
                gpu.lost = True
        if gpu.lost:
            # A lost GPU answers every question with the same error until it is reset.
            raise gpu.lost_error()
        error = gpu.failures.get(function)
        if error is not None:
            raise error()
        return gpu

    def _string(self, value: str) -> str | bytes:
        return value.encode() if self.bytes_strings else value


# ---------------------------------------------------------------------------------------------
# Scenarios
# ---------------------------------------------------------------------------------------------


def healthy(n: int = 2, *, bytes_strings: bool = False) -> FakeNvml:
    """``n`` A100s answering everything: guards against wrong units or field mix-ups."""
    return FakeNvml(
        [
            FakeGpu(uuid=f"GPU-4a1f3c2e-0000-0000-0000-00000000000{i}", utilization_pct=80 + i)
            for i in range(n)
        ],
        bytes_strings=bytes_strings,
    )


def library_missing() -> FakeNvml:
    """No libnvidia-ml.so (a laptop, a CPU node): guards against crashing a CPU-only run."""
    return FakeNvml(init_error=_real.NVMLError_LibraryNotFound)


def driver_not_loaded() -> FakeNvml:
    """Library installed but no driver (container without --gpus): guards against a traceback."""
    return FakeNvml(init_error=_real.NVMLError_DriverNotLoaded)


def permission_denied() -> FakeNvml:
    """/dev/nvidia* not accessible to the user: guards against a traceback instead of a hint."""
    return FakeNvml(init_error=_real.NVMLError_NoPermission)


def no_device() -> FakeNvml:
    """NVML starts but lists no GPU: guards against reporting GPU sampling that reads nothing."""
    return FakeNvml([])


def one_metric_unsupported() -> FakeNvml:
    """GPU 1 (a GeForce) has no power or PCIe counters: guards against one failed metric
    dropping the whole reading, or the other GPU's."""
    unsupported = _real.NVMLError_NotSupported
    return FakeNvml(
        [
            FakeGpu(),
            FakeGpu(
                name="NVIDIA GeForce RTX 3090",
                uuid="GPU-4a1f3c2e-0000-0000-0000-000000000001",
                compute_capability=(8, 6),
                nvlink_states=(),
                failures={
                    "nvmlDeviceGetPowerUsage": unsupported,
                    "nvmlDeviceGetEnforcedPowerLimit": unsupported,
                    "nvmlDeviceGetPcieThroughput": unsupported,
                },
            ),
        ]
    )


def gpu_lost_after(
    reads: int, index: int = 0, *, n: int = 2, error: NVMLErrorClass = _real.NVMLError_GpuIsLost
) -> FakeNvml:
    """GPU ``index`` answers ``reads`` utilization readings, then every call raises ``error``
    (an Xid 79 "fell off the bus"): guards against the sampler dying, or polling a dead GPU."""
    fake = healthy(n)
    fake.gpus[index].lost_after_reads = reads
    fake.gpus[index].lost_error = error
    return fake


def mig_or_permission_denied() -> FakeNvml:
    """A MIG slice inside a container: no utilization or PCIe counters, and the process list is
    refused. Guards against reporting 0% utilization or "no processes" for what is unknown."""
    return FakeNvml(
        [
            FakeGpu(
                name="NVIDIA H100 80GB HBM3 MIG 3g.40gb",
                compute_capability=(9, 0),
                memory_total_bytes=40 * GiB,
                failures={
                    "nvmlDeviceGetUtilizationRates": _real.NVMLError_NotSupported,
                    "nvmlDeviceGetPcieThroughput": _real.NVMLError_NotSupported,
                    "nvmlDeviceGetComputeRunningProcesses": _real.NVMLError_NoPermission,
                    "nvmlDeviceGetNvLinkState": _real.NVMLError_NoPermission,
                },
            )
        ]
    )
