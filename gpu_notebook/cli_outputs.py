"""The files ``gpucheck`` writes: paths fixed when the run starts, checked before the script runs,
written at the end without ever costing the report or the script's exit code.

A relative ``--json r.json`` means the folder the command was started in, whatever the script
did since (``chdir`` into its data folder, deleting its scratch folder); a folder named in a path
that is missing at the end is created; a path that cannot be written is said before a long
training starts, not after it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gpu_notebook.capture.ranks import expand
from gpu_notebook.records import RankInfo


@dataclass(frozen=True)
class OutputPath:
    """One output path as typed (``{rank}`` kept) and the folder it is relative to."""

    option: str  # "--json", "--html", ...
    typed: str  # as typed, ``~`` expanded: the rank part is decided on it
    start_dir: str  # the current folder when the run started

    def for_rank(self, info: RankInfo | None) -> str:
        """The absolute file to write: ``{rank}`` filled in, or ``.rankN`` in a multi-rank job.

        The rank part is decided on the name as typed (the starting folder's own path may hold
        digits of its own: /home/frank2/...), then the path is made absolute against the folder
        the run started in.
        """
        return os.path.normpath(os.path.join(self.start_dir, expand(self.typed, info)))

    def plain(self) -> str:
        """The absolute file, taken as typed (a path that names no rank: the job report's)."""
        return os.path.normpath(os.path.join(self.start_dir, self.typed))


def resolve(option: str, typed: str | None, start_dir: str | None = None) -> OutputPath | None:
    """``typed`` pinned to ``start_dir`` (default: the current folder, now); None if not given."""
    if not typed:
        return None
    return OutputPath(option, os.path.expanduser(typed), start_dir or os.getcwd())


def unwritable(path: str) -> str | None:
    """Why ``path`` could not be written now (None: it can): checked before the script runs.

    A missing folder is fine when the nearest existing one above it can be written (it is
    created at the end).
    """
    target = Path(path)
    if target.is_dir():
        return "it is a folder"
    if target.exists():
        return None if os.access(target, os.W_OK) else "permission denied"
    parent = target.parent
    while not parent.exists():
        if parent == parent.parent:
            return "no folder above it exists"
        parent = parent.parent
    if not parent.is_dir():
        return f"{parent} is not a folder"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"cannot create files in {parent} (permission denied)"
    return None


def write_file(path: str, write: Callable[[Path], object]) -> str | None:
    """Create the missing folders of ``path`` (0700), then ``write(Path(path))``.

    Returns None when written, else why not: a failure here is said in one line, never raised,
    so the text report and the script's exit code stay what they are.
    """
    from gpu_notebook.traces.source import describe

    target = Path(path)
    try:
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        write(target)
    except Exception as exc:  # noqa: BLE001 - a file we could not write is one line, not a crash
        return describe(exc)
    return None
