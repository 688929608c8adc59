"""Bring every rank's small summary to rank 0 through the job's own torch.distributed store.

Transport: the c10d key-value store the job already has: its initialized default group's store
when the process group is still up, else a client of the TCPStore torchrun's agent serves at
``MASTER_ADDR:MASTER_PORT`` (torchrun keeps it for the job's life, whatever the workers do).
Each rank ``set``s one key; rank 0 polls which keys exist until a deadline, then reads those.
Only O(world size) summaries of a few hundred bytes cross ranks; traces stay on each rank.

Why the store and not a collective (``gather_object``): a collective needs every rank to call
it, and a rank that died or never gets there blocks the others until the group's timeout
(30 minutes by default) with no word of who is missing. With keys, rank 0 knows exactly which
ranks arrived, waits a bounded time, and names the others; the other ranks never wait at all.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from gpu_notebook.records import RankInfo

# Rank 0 waits this long (from its own end) for the others' summaries: ranks of a lockstep job
# end within a step of each other, then build their reports (a few seconds on a slow host).
DEFAULT_TIMEOUT_S = 60.0
TIMEOUT_ENV = "GPUCHECK_GATHER_TIMEOUT_S"
_POLL_S = 0.05


@dataclass(frozen=True)
class Gathered:
    """What rank 0 received: rank -> payload, and why some ranks are missing (if any are)."""

    payloads: Mapping[int, bytes]
    missing: tuple[int, ...]
    note: str | None = None


def timeout_s(env: Mapping[str, str] | None = None) -> float:
    env = os.environ if env is None else env
    try:
        return max(0.0, float(env[TIMEOUT_ENV]))
    except (KeyError, ValueError):
        return DEFAULT_TIMEOUT_S


def _namespace() -> str:
    # Keys outlive a worker group restart in torchrun's store: one namespace per attempt.
    run_id = os.environ.get("TORCHELASTIC_RUN_ID", "job")
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    return f"gpucheck/{run_id}/{attempt}/"


def _store(wait_s: float) -> tuple[Any, str]:
    """(store, how it was reached); raises when the job offers none."""
    import torch.distributed as dist

    addr, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")
    # Every rank must reach the same store whether or not its script tore its group down:
    # torchrun's agent store outlives the groups, so it comes first when torchrun serves it.
    agent = os.environ.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true"
    if not (agent and addr and port) and dist.is_available() and dist.is_initialized():
        return dist.distributed_c10d._get_default_store(), "the process group's store"
    if not addr or not port:
        raise RuntimeError("no process group and no MASTER_ADDR/MASTER_PORT to reach a store")
    store = dist.TCPStore(
        addr,
        int(port),
        is_master=False,
        timeout=timedelta(seconds=max(1.0, wait_s)),
        wait_for_workers=False,
    )
    return store, f"the launcher's store at {addr}:{port}"


def exchange(info: RankInfo, payload: bytes, wait_s: float | None = None) -> Gathered | None:
    """Send ``payload``; on rank 0, return everyone's (None on the other ranks).

    Never raises and never waits longer than ``wait_s`` (plus one connection attempt): a
    failure to reach the store is reported on rank 0 as every other rank missing.
    """
    wait = timeout_s() if wait_s is None else wait_s
    if info.world_size <= 1:
        return Gathered({info.rank: payload}, ())
    if "torch" not in sys.modules:  # the script never imported torch: no job to speak of
        return _alone(info, payload, "torch was not imported: no store to gather through")
    try:
        import torch.distributed as dist

        store, _how = _store(wait)
        store = dist.PrefixStore(_namespace(), store)
        store.set(f"summary/{info.rank}", payload)
    except Exception as exc:  # noqa: BLE001 - any store failure means "gather unavailable"
        return _alone(
            info, payload, f"could not reach the job's store ({type(exc).__name__}: {exc})"
        )
    if info.rank != 0:
        return None
    keys = {r: f"summary/{r}" for r in range(info.world_size)}
    pending = set(keys) - {0}
    deadline = time.monotonic() + wait
    try:
        while pending and time.monotonic() < deadline:
            # One round trip while all are there (the usual case); key by key to name the late.
            if store.check([keys[r] for r in pending]):
                pending = set()
                break
            pending = {r for r in pending if not store.check([keys[r]])}
            if pending:
                time.sleep(_POLL_S)
        present = [r for r in keys if r not in pending]
        values = store.multi_get([keys[r] for r in present])  # one round trip for all
        payloads = {r: bytes(v) for r, v in zip(present, values, strict=True)}
    except Exception as exc:  # noqa: BLE001 - the store went away mid-gather (launcher gone)
        return _alone(
            info, payload, f"the job's store failed during the gather ({type(exc).__name__}: {exc})"
        )
    note = (
        f"no summary from {len(pending)} rank(s) within {wait:g} s ({TIMEOUT_ENV} sets the wait)"
        if pending
        else None
    )
    return Gathered(payloads, tuple(sorted(pending)), note)


def _alone(info: RankInfo, payload: bytes, why: str) -> Gathered | None:
    if info.rank != 0:
        return None
    others = tuple(r for r in range(info.world_size) if r != info.rank)
    return Gathered({info.rank: payload}, others, why)
