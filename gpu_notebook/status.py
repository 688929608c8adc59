"""``%gpustatus``: every GPU's load and the processes holding its memory, for shared machines.

Reads the machine through the NVML door (capture/nvml.py) and psutil into the status records
of ``records.py``; ``views/gpustatus.py`` renders them without touching the capture."""

from __future__ import annotations

import psutil

from gpu_notebook.capture import nvml
from gpu_notebook.records import GpuStatus, MachineStatus, ProcessInfo


def _process(pid: int, used: int | None) -> ProcessInfo:
    # Processes of other users or containers may be invisible or vanish: say so, don't fail.
    try:
        proc = psutil.Process(pid)
        with proc.oneshot():
            user = proc.username()
            cmd = " ".join(proc.cmdline()) or proc.name()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        user, cmd = None, None
    return ProcessInfo(pid=pid, user=user, command=cmd, used_memory_bytes=used)


def machine_status() -> MachineStatus:
    state = nvml.status()
    if not state.available:
        return MachineStatus(available=False, message=state.message, driver_version=None)
    gpus = []
    for info in nvml.gpu_infos():
        try:
            reading = nvml.read_gpu(info.index, pcie=False)
            procs = nvml.gpu_processes(info.index)
        except nvml.GpuLostError as exc:
            gpus.append(GpuStatus(info=info, reading=None, processes=None, note=str(exc)))
            continue
        processes = (
            None if procs is None else tuple(_process(p.pid, p.used_memory_bytes) for p in procs)
        )
        gpus.append(GpuStatus(info=info, reading=reading, processes=processes))
    return MachineStatus(
        available=True, message=None, driver_version=nvml.driver_version(), gpus=tuple(gpus)
    )
