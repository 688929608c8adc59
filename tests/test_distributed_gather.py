"""The gather through a real c10d TCPStore: rank 0 gets every summary, names the missing ranks
after its bounded wait, and the other ranks never wait; output paths per rank."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
import torch.distributed as dist

from gpu_notebook.capture.ranks import expand, from_env
from gpu_notebook.gather import exchange
from gpu_notebook.records import RankInfo


@pytest.fixture
def store_env(monkeypatch: pytest.MonkeyPatch) -> dist.TCPStore:
    """A TCPStore served here, reached as torchrun's agent store is (MASTER_ADDR/PORT)."""
    master = dist.TCPStore(
        "127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=10)
    )
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(master.port))
    monkeypatch.setenv("TORCHELASTIC_USE_AGENT_STORE", "True")
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "test-gather")
    return master


def _info(rank: int, world: int) -> RankInfo:
    return RankInfo(rank=rank, world_size=world, local_rank=rank, host="h")


def test_rank_0_gets_every_summary(store_env):
    senders = [
        threading.Thread(target=exchange, args=(_info(r, 4), f"rank{r}".encode(), 5.0))
        for r in (1, 2, 3)
    ]
    for t in senders:
        t.start()
    for t in senders:
        t.join(timeout=30)
    got = exchange(_info(0, 4), b"rank0", 30.0)
    assert got is not None and got.missing == () and got.note is None
    assert dict(got.payloads) == {r: f"rank{r}".encode() for r in range(4)}


def test_a_rank_that_never_arrives_is_named_missing_after_the_bounded_wait(store_env):
    assert exchange(_info(1, 3), b"one", 5.0) is None  # rank 1 sends and returns at once
    got = exchange(_info(0, 3), b"zero", 0.5)  # rank 2 never comes
    assert got is not None and got.missing == (2,)
    assert set(got.payloads) == {0, 1} and "GPUCHECK_GATHER_TIMEOUT_S" in (got.note or "")


def test_no_store_to_reach_names_every_other_rank_missing(monkeypatch):
    for name in ("MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_USE_AGENT_STORE"):
        monkeypatch.delenv(name, raising=False)
    got = exchange(_info(0, 2), b"zero", 0.5)
    assert got is not None and got.missing == (1,) and "store" in (got.note or "")
    assert exchange(_info(1, 2), b"one", 0.5) is None


@pytest.mark.parametrize(
    ("path", "rank", "world", "expected"),
    [
        ("out/r{rank}.json", 2, 4, "out/r2.json"),
        ("out/report.json", 2, 4, "out/report.rank2.json"),
        ("trace.json.gz", 1, 2, "trace.rank1.json.gz"),
        ("report.json", 0, 1, "report.json"),  # one rank: the name as given
        ("noext", 3, 4, "noext.rank3"),
    ],
)
def test_output_paths_never_collide_across_ranks(path, rank, world, expected):
    assert expand(path, _info(rank, world)) == expected


def test_rank_facts_from_the_launchers_variables():
    info = from_env({"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1"})
    assert info is not None and (info.rank, info.world_size, info.local_rank) == (3, 8, 1)
    assert from_env({"RANK": "9", "WORLD_SIZE": "8"}) is None  # not a rank of that job
    assert from_env({}) is None
