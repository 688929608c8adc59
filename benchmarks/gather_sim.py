"""The job-report gather at scale: N simulated ranks post their summary to one real c10d TCPStore
(as torchrun's agent serves it), rank 0 collects them with gpu_notebook.gather.exchange.

Ranks are threads spread over a few processes, each with its own TCPStore client (its own TCP
connection, as a real rank has); the payload is a real RankFacts JSON of a DDP rank, padded to
the size given. Prints bytes gathered and the time rank 0 spends once every rank has posted
(the part the job waits for at its end), and the whole exchange from the first post.

    python benchmarks/gather_sim.py --ranks 1000 --procs 8
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import threading
import time
from datetime import timedelta

import msgspec


def payload_of(rank: int, size: int) -> bytes:
    from gpu_notebook.records import RankFacts, to_jsonable

    facts = RankFacts(
        rank=rank,
        world_size=1000,
        local_rank=rank % 8,
        host=f"node{rank // 8:03d}.cluster.example",
        status="ok",
        error=None,
        steps=120,
        step_s=0.0361,
        comm_s=0.0332,
        phase_s={
            "data": 2e-4,
            "forward": 1.1e-3,
            "backward": 2.2e-3,
            "optimizer": 2e-4,
            "comm": 0.0332,
            "sync": 0.0,
            "other": 1e-5,
            "unattributed": 1e-4,
        },
        verdict="comm-bound",
        headline="Waiting in collectives (all-reduce...) takes 89% of every "
        "step: this rank waits for its peers, it does not compute.",
        hot_line="line 25 `opt.zero_grad(); loss.backward(); opt.step()`",
        grad_bytes=37_892,
        files=(f"out/r{rank}.json", f"out/trace.rank{rank}.json.gz"),
    )
    raw = msgspec.json.encode(to_jsonable(facts))
    return raw + b" " * max(0, size - len(raw))


def _ranks(ranks: list[int], world: int, size: int, port: int) -> None:
    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        TORCHELASTIC_USE_AGENT_STORE="True",
        TORCHELASTIC_RUN_ID="sim",
    )
    import torch.distributed  # noqa: F401 - a rank's script has imported torch

    from gpu_notebook.gather import exchange
    from gpu_notebook.records import RankInfo

    def one(r: int) -> None:
        exchange(RankInfo(rank=r, world_size=world, host="h"), payload_of(r, size), 60.0)

    threads = [threading.Thread(target=one, args=(r,)) for r in ranks]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=1000)
    ap.add_argument("--procs", type=int, default=8)
    ap.add_argument("--size", type=int, default=0, help="pad each summary to this many bytes")
    args = ap.parse_args()
    import torch.distributed as dist

    master = dist.TCPStore(
        "127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=120)
    )
    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(master.port),
        TORCHELASTIC_USE_AGENT_STORE="True",
        TORCHELASTIC_RUN_ID="sim",
    )
    from gpu_notebook.gather import exchange
    from gpu_notebook.records import RankInfo

    others = list(range(1, args.ranks))
    chunks = [others[i :: args.procs] for i in range(args.procs)]
    t0 = time.perf_counter()
    ctx = mp.get_context("spawn")
    procs = [
        ctx.Process(target=_ranks, args=(c, args.ranks, args.size, master.port)) for c in chunks
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    posted = time.perf_counter()
    got = exchange(
        RankInfo(rank=0, world_size=args.ranks, host="h"), payload_of(0, args.size), 60.0
    )
    done = time.perf_counter()
    assert got is not None
    nbytes = sum(len(v) for v in got.payloads.values())
    print(
        f"ranks {args.ranks}: {len(got.payloads)} summaries, missing {len(got.missing)}, "
        f"{nbytes / 1e6:.2f} MB gathered ({nbytes / len(got.payloads):.0f} B each); rank 0 collects "
        f"in {1e3 * (done - posted):.0f} ms once all posted; {args.ranks - 1} ranks posted "
        f"(connect + set, {args.procs} processes) in {done - t0:.1f} s"
    )


if __name__ == "__main__":
    main()
