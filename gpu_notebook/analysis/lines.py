"""Turn the stack sampler's counts into time per cell line, per function, and flame-graph stacks.

Pure functions over :class:`~gpu_notebook.capture.stacks.RawStacks`; nothing here samples or
draws. Every integer "samples" figure in the :class:`~gpu_notebook.records.StackProfile` is
*time-weighted*: the wall time a line (function, stack) took divided by the nominal interval,
so ``samples * interval_s`` is seconds and shares add up as time does, even though the sampler's
real spacing stretches while the cell holds the GIL (see ``capture/stacks.py``). Shares are
computed from the exact microseconds, not from the rounded sample counts.

Exports: :func:`to_speedscope` (speedscope's "sampled" JSON profile) and :func:`to_collapsed`
(Brendan Gregg's folded stacks, for flamegraph.pl, speedscope, inferno...). The views word
:func:`hot_lines`'s records (``views/wording.describe_line``).
"""

from __future__ import annotations

import linecache
import os
import sys
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

from gpu_notebook.records import OTHER, CodeRef, FunctionStat, LineStat, RawStacks, StackProfile

__all__ = [
    "CELL_FILE_LABEL",
    "SPEEDSCOPE_SCHEMA",
    "file_label",
    "frame_label",
    "hot_functions",
    "hot_lines",
    "parse_frame_label",
    "stack_profile",
    "to_collapsed",
    "to_speedscope",
]

SPEEDSCOPE_SCHEMA = "https://www.speedscope.app/file-format-schema.json"
CELL_FILE_LABEL = "cell"  # the file label of the measured cell's own frames

# Import machinery, elided from stacks as Python's own tracebacks do (``_call_with_frames_removed``
# says so): six frames per nested import bury the modules being imported. Kept when innermost,
# so time spent there still shows as such.
_HIDDEN_FILES = frozenset(
    {"<frozen importlib._bootstrap>", "<frozen importlib._bootstrap_external>"}
)


def stack_profile(
    raw: RawStacks,
    cell_filename: str | None = None,
    cell_source: str = "",
    interval_s: float | None = None,
    *,
    first_line: int = 1,
    max_functions: int = 50,
) -> StackProfile:
    """Lines, functions and collapsed stacks of one sampling run.

    ``cell_filename`` is the name the cell was compiled under (``shell.compile.cache``); None
    takes the file of the sampler's rooted stacks (the frame IPython's ``run_code`` called),
    which is the cell's. ``cell_source`` gives each line its text; its first line is cell line
    ``first_line`` (2 for a ``%%gpucheck`` body, whose line 1 is the magic line).
    ``interval_s`` is the nominal interval samples are counted in (default: the sampler's).
    """
    cell = cell_filename or raw.cell_filename or raw.root_filename
    interval_us = (interval_s if interval_s is not None else raw.interval_s) * 1e6
    total_us = raw.time_us

    def samples(time_us: int) -> int:
        # A line the sampler caught at all keeps at least one sample: a 0 would read "never ran".
        return max(1, round(time_us / interval_us)) if time_us > 0 else 0

    source_lines = cell_source.splitlines()
    lines: list[LineStat] = []
    if cell is not None:
        for count in raw.lines:
            if count.filename != cell or count.time_us <= 0:
                continue
            index = count.line - first_line
            text = source_lines[index] if 0 <= index < len(source_lines) else ""
            phases = {p: samples(us) for p, us in sorted(count.phase_time_us.items()) if us > 0}
            lines.append(
                LineStat(
                    line=count.line,
                    text=text,
                    samples=samples(count.time_us),
                    share=count.time_us / total_us if total_us else 0.0,
                    phase_samples=phases,
                )
            )
    lines.sort(key=lambda stat: stat.line)

    ranked = sorted(
        raw.function_counts,
        key=lambda c: (-c.self_us, -c.total_us, raw.functions[c.function].function),
    )
    functions = tuple(
        FunctionStat(
            function=raw.functions[c.function].function,
            filename=file_label(raw.functions[c.function].filename, cell),
            first_line=raw.functions[c.function].first_line,
            self_samples=samples(c.self_us),
            total_samples=samples(c.total_us),
        )
        for c in ranked[:max_functions]
    )

    collapsed_us: dict[str, int] = {}
    for stack in raw.stacks:
        last = len(stack.frames) - 1
        key = ";".join(
            frame_label(raw.functions[f], line, cell)
            for i, (f, line) in enumerate(stack.frames)
            if i == last or raw.functions[f].filename not in _HIDDEN_FILES
        )
        key = key or OTHER  # a sample with no Python frame below the root
        collapsed_us[key] = collapsed_us.get(key, 0) + stack.time_us
    if raw.other_us > 0:
        collapsed_us[OTHER] = collapsed_us.get(OTHER, 0) + raw.other_us
    collapsed = {k: samples(us) for k, us in sorted(collapsed_us.items()) if us > 0}

    script_lines, callers = _script_lines(raw, cell, total_us, samples)
    return StackProfile(
        interval_s=interval_us / 1e6,
        samples=samples(total_us),
        duration_s=raw.duration_s,
        lines=tuple(lines),
        functions=functions,
        collapsed=collapsed,
        script_lines=script_lines,
        script_callers=callers,
    )


def _script_lines(
    raw: RawStacks, cell: str | None, total_us: int, samples: Callable[[int], int]
) -> tuple[tuple[LineStat, ...], tuple[int, ...]]:
    """The lines of the user's code the cell called, and the cell lines that ran a file whole.

    Below the deepest cell frame, from the first frame of the user's own code on: a file outside
    the installed packages and the standard library, or another cell (:func:`other_cell`). A
    module body there (``<module>``: ``%run script.py``, ``runpy.run_path``, ``exec(compile(...,
    path, ...))``) is a file run whole, and its cell line gives way to its lines; a function
    (``train_epoch`` of an earlier cell or of ``utils.py``) keeps its calling cell line, which
    holds the callee's time. The user's frames' lines are counted once a sample, inclusive,
    from the kept stacks (samples past ``max_stacks`` fold into "[other]" and are not placed:
    a lower reading).

    A ``%run train.py`` cell read "line 2 `%run train.py`: 100%" as its only hot line (issue
    26, unseen); a cell calling ``train_epoch(model, loader)`` defined in a cell above, or
    imported from the user's module, named only that call line: where the time went, never."""
    if cell is None:
        return (), ()
    times: dict[tuple[str, int], int] = {}
    phases: dict[tuple[str, int], dict[str, int]] = {}
    callers: set[int] = set()
    for stack in raw.stacks:
        frames = [(raw.functions[f], line) for f, line in stack.frames]
        calls = [i for i, (ref, _line) in enumerate(frames) if ref.filename == cell]
        if not calls:
            continue
        users = [i for i in range(calls[-1] + 1, len(frames)) if users_code(frames[i][0], cell)]
        if not users:
            continue
        first = frames[users[0]][0]
        if first.function == "<module>" and _users_file(first.filename):
            callers.add(frames[calls[-1]][1])
        for where in {(frames[i][0].filename, frames[i][1]) for i in users}:
            times[where] = times.get(where, 0) + stack.time_us
            if stack.phase is not None:
                tally = phases.setdefault(where, {})
                tally[stack.phase] = tally.get(stack.phase, 0) + stack.time_us
    out = tuple(
        LineStat(
            line=line,
            text=linecache.getline(path, line).rstrip("\n"),
            samples=samples(us),
            share=us / total_us if total_us else 0.0,
            phase_samples={p: samples(t) for p, t in sorted(phases.get((path, line), {}).items())},
            filename=path,
            other_cell=other_cell(path, cell),
            cell_number=cell_number_of(path, raw) if other_cell(path, cell) else None,
        )
        for (path, line), us in sorted(times.items())
        if us > 0
    )
    return out, tuple(sorted(callers)) if out else ()


def users_code(ref: CodeRef, cell: str) -> bool:
    """A frame of the user's code other than the measured cell's: another cell or a user's file,
    not this package's own (its hooks run under the cell too, and it may sit outside
    site-packages: a checkout on ``PYTHONPATH``, an editable install)."""
    if ref.filename == cell:
        return False
    if other_cell(ref.filename, cell):
        return True
    return _users_file(ref.filename) and not ref.filename.startswith(_own_package())


# Terminal IPython names a cell "<ipython-input-3-1f2e3d4c5b6a>": its execution number, then a
# hash of its source.
_INPUT_PREFIX = "<ipython-input-"


def other_cell(filename: str, cell: str) -> bool:
    """Another cell of the same session as the measured one: terminal IPython's
    "<ipython-input-N-hash>" names, or ipykernel's "/tmp/ipykernel_PID/HASH.py" files, which
    share one folder per kernel."""
    if filename == cell:
        return False
    if cell.startswith(_INPUT_PREFIX):
        return filename.startswith(_INPUT_PREFIX)
    folder = os.path.dirname(cell)
    return (
        os.path.basename(folder).startswith("ipykernel_")
        and os.path.dirname(filename) == folder
        and filename.endswith(".py")
    )


def cell_number_of(filename: str, raw: RawStacks) -> int | None:
    """The execution number in a "<ipython-input-N-hash>" name, else the one the shell's
    compiler recorded for ipykernel's hashed file name (None where neither says)."""
    if not filename.startswith(_INPUT_PREFIX):
        return raw.cell_numbers.get(filename)
    number = filename[len(_INPUT_PREFIX) :].split("-", 1)[0]
    return int(number) if number.isdigit() else None


@lru_cache(maxsize=1)
def _own_package() -> tuple[str, ...]:
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # .../gpu_notebook
    return (os.path.join(here, ""), os.path.join(os.path.realpath(here), ""))


def _users_file(filename: str) -> bool:
    """A source file of the user's own: on disk, outside the standard library and the
    installed packages (IPython's ``%run`` machinery, runpy, torch)."""
    if filename.startswith("<") or not os.path.isabs(filename):
        return False
    return not filename.startswith(_installed_prefixes())


@lru_cache(maxsize=1)
def _installed_prefixes() -> tuple[str, ...]:
    import sysconfig

    paths = sysconfig.get_paths()
    found = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    found |= {p for p in sys.path if p.rstrip(os.sep).endswith(("site-packages", "dist-packages"))}
    return tuple(os.path.join(os.path.realpath(p), "") for p in found) + tuple(
        os.path.join(p, "") for p in found
    )


# --------------------------------------------------------------------------------------------
# Labels: "file:function:line", safe for the collapsed format (no ';', no newline).
# --------------------------------------------------------------------------------------------


@lru_cache(maxsize=4096)
def _module_path(filename: str) -> str:
    """A path short enough to read: relative to the longest ``sys.path`` entry holding it."""
    if filename.startswith("<"):
        return filename  # "<ipython-input-3-...>", "<string>": already a name
    norm = os.path.normpath(filename)
    best = ""
    for entry in sys.path:
        base = os.path.normpath(os.path.abspath(entry or os.curdir))
        if norm.startswith(base + os.sep) and len(base) > len(best):
            best = base
    rel = norm[len(best) + 1 :] if best else os.path.basename(norm)
    return rel.replace(os.sep, "/")


def file_label(filename: str, cell_filename: str | None = None) -> str:
    """``cell`` for the measured cell, else a module path (``torch/nn/modules/module.py``)."""
    if cell_filename is not None and filename == cell_filename:
        return CELL_FILE_LABEL
    return _clean(_module_path(filename))


def frame_label(ref: CodeRef, line: int, cell_filename: str | None = None) -> str:
    """One frame of a collapsed stack: ``file:function:line``."""
    return f"{file_label(ref.filename, cell_filename)}:{_clean(ref.function)}:{line}"


def parse_frame_label(label: str) -> tuple[str, str, int | None]:
    """``(file, function, line)`` of a :func:`frame_label`; ``("", label, None)`` for "[other]"."""
    parts = label.rsplit(":", 2)  # a file may hold ':' (C:\\...), a qualname never does
    if len(parts) == 3 and parts[2].isdigit():
        return parts[0], parts[1], int(parts[2])
    return "", label, None


def _clean(text: str) -> str:
    # ';' separates frames and a newline separates stacks in the collapsed format; ':' would
    # make a function name ambiguous in a frame label.
    return text.replace(";", ",").replace("\n", " ").replace("\r", " ").replace(":", ".")


# --------------------------------------------------------------------------------------------
# Exports
# --------------------------------------------------------------------------------------------


def to_collapsed(profile: StackProfile) -> str:
    """Brendan Gregg's collapsed stacks: one ``frame;frame;frame N`` line per stack."""
    return "".join(f"{stack} {count}\n" for stack, count in sorted(profile.collapsed.items()))


def to_speedscope(profile: StackProfile, name: str = "gpucheck: cell stacks") -> dict[str, Any]:
    """A speedscope file (``"sampled"`` profile, weights in seconds) of the collapsed stacks."""
    frames: list[dict[str, Any]] = []
    index: dict[str, int] = {}
    samples: list[list[int]] = []
    weights: list[float] = []
    for stack, count in sorted(profile.collapsed.items()):
        ids: list[int] = []
        for label in stack.split(";"):
            i = index.get(label)
            if i is None:
                i = index[label] = len(frames)
                file, function, line = parse_frame_label(label)
                frame: dict[str, Any] = {"name": function}
                if file:
                    frame["file"] = file
                if line is not None:
                    frame["line"] = line
                frames.append(frame)
            ids.append(i)
        samples.append(ids)
        weights.append(count * profile.interval_s)
    return {
        "$schema": SPEEDSCOPE_SCHEMA,
        "shared": {"frames": frames},
        "profiles": [
            {
                "type": "sampled",
                "name": name,
                "unit": "seconds",
                "startValue": 0,
                "endValue": sum(weights),
                "samples": samples,
                "weights": weights,
            }
        ],
        "name": name,
        "activeProfileIndex": 0,
        "exporter": "gpu_notebook",
    }


# --------------------------------------------------------------------------------------------
# For findings and views
# --------------------------------------------------------------------------------------------


def hot_lines(profile: StackProfile, n: int = 3, min_share: float = 0.0) -> tuple[LineStat, ...]:
    """The ``n`` cell lines with the most time (inclusive: a call line holds its callee's time).

    A call line and the callee line that holds all of its time tie; the call line comes first:
    it is the statement of the cell the user wrote the loop with (``s = slow_sum(n)``), and the
    callee's line follows it.
    """
    depth = _cell_line_depths(profile.collapsed)
    # A cell line that ran a script whole (``%run train.py``) gives way to the script's lines:
    # its time is theirs, and they say where it went. A cell line that called a function of
    # another cell or of a user's file stays, ahead of the function's lines at a tie.
    callers = set(profile.script_callers)
    cell = [s for s in profile.lines if s.share >= min_share and s.line not in callers]
    script = [s for s in profile.script_lines if s.share >= min_share]
    ranked = sorted(
        (*cell, *script),
        key=lambda stat: (
            -stat.share,
            stat.filename is not None,
            depth.get(stat.line, 1 << 30) if stat.filename is None else 0,
            stat.line,
        ),
    )
    return tuple(ranked[:n])


def _cell_line_depths(collapsed: Mapping[str, int]) -> dict[int, int]:
    """For each cell line, how deep its outermost appearance in a stack is (0: the cell's body)."""
    depth: dict[int, int] = {}
    for stack in collapsed:
        for i, label in enumerate(stack.split(";")):
            file, _function, line = parse_frame_label(label)
            if file == CELL_FILE_LABEL and line is not None and i < depth.get(line, 1 << 30):
                depth[line] = i
    return depth


def hot_functions(profile: StackProfile, n: int = 3) -> tuple[FunctionStat, ...]:
    """The ``n`` functions with the most self time (the order ``profile.functions`` keeps)."""
    return tuple(profile.functions[:n])
