"""Where this process sits in a multi-process job: rank, world size, local rank and host.

Read from an initialized ``torch.distributed`` process group when there is one (it is the truth
after ``init_process_group``), else from the environment torchrun and most launchers set
(``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``). Never imports torch: the user's code does that.
"""

from __future__ import annotations

import os
import re
import socket
import sys
from collections.abc import Mapping

from gpu_notebook.records import RankInfo

RANK_PLACEHOLDER = "{rank}"


def _int(env: Mapping[str, str], name: str) -> int | None:
    try:
        return int(env[name])
    except (KeyError, ValueError):
        return None


def from_env(env: Mapping[str, str] | None = None) -> RankInfo | None:
    """Rank facts from launcher variables, or None outside a multi-process launch."""
    env = os.environ if env is None else env
    rank, world = _int(env, "RANK"), _int(env, "WORLD_SIZE")
    if rank is None or world is None or world < 1 or not 0 <= rank < world:
        return None
    return RankInfo(
        rank=rank,
        world_size=world,
        local_rank=_int(env, "LOCAL_RANK"),
        host=socket.gethostname(),
        source="env",
    )


def from_process_group() -> RankInfo | None:
    """Rank facts of torch.distributed's default group, if one is initialized now."""
    torch = sys.modules.get("torch")
    dist = sys.modules.get("torch.distributed")
    if torch is None or dist is None:
        return None
    try:
        if not (dist.is_available() and dist.is_initialized()):
            return None
        backend = str(dist.get_backend())
        rank, world = int(dist.get_rank()), int(dist.get_world_size())
    except (
        RuntimeError,
        ValueError,
    ):  # a group being torn down: the environment still says where we are
        return None
    local = _int(os.environ, "LOCAL_RANK")
    return RankInfo(
        rank=rank,
        world_size=world,
        local_rank=local,
        host=socket.gethostname(),
        source="process-group",
        backend=backend,
    )


def current(seen: RankInfo | None = None) -> RankInfo | None:
    """The best knowledge now: the process group, else what was seen earlier, else the env."""
    return from_process_group() or seen or from_env()


def expand(path: str, info: RankInfo | None) -> str:
    """``path`` with ``{rank}`` replaced; in a job of more than one rank, a path without the
    placeholder gets the rank before its suffixes (``report.json`` -> ``report.rank1.json``),
    so that ranks never overwrite each other's files. A path that already names this rank
    and no other (``t.rank0.json.gz`` on rank 0, made per rank by a wrapper) stays as it is:
    the one rank whose number it holds writes it, every other rank adds its own."""
    rank = info.rank if info is not None else 0
    if RANK_PLACEHOLDER in path:
        return path.replace(RANK_PLACEHOLDER, str(rank))
    if info is None or info.world_size <= 1 or _holds_rank(path, rank):
        return path
    head, sep, name = path.rpartition("/")
    stem, dot, suffixes = name.partition(".")
    named = f"{stem}.rank{rank}{dot}{suffixes}" if dot else f"{name}.rank{rank}"
    return f"{head}{sep}{named}"


# A rank number written into a path: "rank0", "rank_0", "rank-0", "r0" (not the "r0" of "hr0").
_RANK_TOKEN = re.compile(r"(?i)(?:rank|(?<![a-z0-9])r)[._-]?(\d+)(?!\d)")


def _holds_rank(path: str, rank: int) -> bool:
    return {int(n) for n in _RANK_TOKEN.findall(path)} == {rank}
