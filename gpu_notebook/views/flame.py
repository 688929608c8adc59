"""Draw a StackProfile: an icicle flame graph as inline SVG, and the cell with a time bar per line.

Render only: every figure comes from the :class:`~gpu_notebook.records.StackProfile`. Both
outputs are self-contained (no script, no external CSS or font) so they survive notebook
sanitizers, nbconvert and static HTML; hovering shows a native ``<title>`` tooltip. Everything
that comes from the user or the stacks (function names, file names, source text) is escaped:
a function may be called ``<script>`` and a line may hold any text.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from html import escape

from gpu_notebook.analysis.lines import CELL_FILE_LABEL, parse_frame_label
from gpu_notebook.records import OTHER, LineStat, StackProfile
from gpu_notebook.views.charts import PHASE_COLORS

__all__ = ["flame_svg", "line_bars_html"]

# Phases keep the colours of the phase charts (views/charts.py); grey: no phase known.
_NO_PHASE_COLOR = "#cfd3d8"
_CHAR_PX = 6.6  # advance of one 11 px monospace character, to truncate labels that won't fit
_FONT = "font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:11px"


def _x(text: object) -> str:
    """Escape for XML/HTML text and attribute values (quotes included)."""
    return escape(str(text), quote=True)


# --------------------------------------------------------------------------------------------
# Flame graph (icicle: callers on top, callees below; width = time)
# --------------------------------------------------------------------------------------------


@dataclass
class _Node:
    label: str
    count: int = 0
    children: dict[str, _Node] = field(default_factory=dict)


def _tree(collapsed: dict[str, int]) -> _Node:
    root = _Node("all")
    for stack, count in collapsed.items():
        root.count += count
        node = root
        for label in stack.split(";"):
            child = node.children.get(label)
            if child is None:
                child = node.children[label] = _Node(label)
            child.count += count
            node = child
    return root


def _frame_color(label: str) -> str:
    file, function, _line = parse_frame_label(label)
    if label == OTHER:
        return "#c8c8c8"
    if file == CELL_FILE_LABEL:
        hue, sat = 28, 85  # the user's own cell: orange, the eye goes there first
    elif file.startswith("torch/utils/data/"):
        hue, sat = 120, 40
    elif file.startswith("torch/"):
        hue, sat = 2, 60
    elif file.startswith("gpu_notebook/"):
        hue, sat = 210, 15  # our own hooks: visible, muted
    else:
        hue, sat = 48, 75
    # crc32, not hash(): the same function keeps its shade from one run (and process) to the next.
    lightness = 60 + zlib.crc32(function.encode()) % 18
    return f"hsl({hue},{sat}%,{lightness}%)"


def _frame_text(label: str, width_px: float, own_file: str) -> str:
    file, function, line = parse_frame_label(label)
    file = own_file if file == CELL_FILE_LABEL else file
    fits = int((width_px - 6) / _CHAR_PX)
    if fits < 3:
        return ""
    candidates: list[str] = [function]
    if line is not None:
        candidates[:0] = [f"{function} ({file}:{line})", f"{function}:{line}"]
    for text in candidates:
        if len(text) <= fits:
            return text
    return function[: fits - 1] + "…"


def _frame_title(label: str, count: int, total: int, interval_s: float, own_file: str) -> str:
    file, function, line = parse_frame_label(label)
    file = own_file if file == CELL_FILE_LABEL else file
    where = f"\n{file}:{line}" if file else ""
    share = count / total if total else 0.0
    return f"{function}{where}\n{share:.1%} of sampled time, {count * interval_s:.3f} s ({count} samples)"


def flame_svg(
    profile: StackProfile,
    *,
    width_px: int = 960,
    row_px: int = 17,
    max_depth: int = 80,
    min_width_px: float = 0.5,
    own_file: str = CELL_FILE_LABEL,
) -> str:
    """An icicle flame graph of ``profile.collapsed`` as one inline ``<svg>`` element.
    ``own_file``: the measured source's frames are said to be in it ("cell:7", "script:7").

    Frames narrower than ``min_width_px`` and rows deeper than ``max_depth`` are left out (their
    time stays in their parents' width). Hover a frame for its file, line, share and seconds.
    """
    root = _tree(dict(profile.collapsed))
    total = root.count
    header_px = 20
    if total <= 0:
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width_px}" height="{header_px + 4}" '
            f'role="img" style="{_FONT}"><text x="4" y="14">no stack samples</text></svg>'
        )
    scale = width_px / total
    parts: list[str] = []
    depth_seen = 0
    # Iterative walk (a recursive one would hit Python's recursion limit on deep stacks).
    todo: list[tuple[_Node, float, int]] = [(root, 0.0, 0)]
    while todo:
        node, x, depth = todo.pop()
        w = node.count * scale
        y = header_px + depth * row_px
        depth_seen = max(depth_seen, depth)
        label = node.label
        if depth == 0:
            title = f"all: {total} samples, {total * profile.interval_s:.3f} s"
            fill = "#e0e0e0"
            text = title if len(title) * _CHAR_PX < w else "all"
        else:
            title = _frame_title(label, node.count, total, profile.interval_s, own_file)
            fill = _frame_color(label)
            text = _frame_text(label, w, own_file)
        parts.append(
            f"<g><title>{_x(title)}</title>"
            f'<rect x="{x:.2f}" y="{y}" width="{max(w - 0.5, 0.1):.2f}" height="{row_px - 1}" '
            f'fill="{fill}" rx="1"/>'
            + (f'<text x="{x + 3:.2f}" y="{y + row_px - 5}">{_x(text)}</text>' if text else "")
            + "</g>"
        )
        if depth + 1 >= max_depth:
            continue
        child_x = x
        # Heaviest first, left to right: the widest frames line up under each other.
        for child in sorted(node.children.values(), key=lambda c: (-c.count, c.label)):
            if child.count * scale >= min_width_px:
                todo.append((child, child_x, depth + 1))
            child_x += child.count * scale
    height = header_px + (depth_seen + 1) * row_px + 2
    heading = (
        f"Host time by Python stack: {profile.samples} samples at "
        f"{profile.interval_s * 1e3:.0f} ms over {profile.duration_s:.2f} s (width = time)"
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width_px}" height="{height}" '
        f'viewBox="0 0 {width_px} {height}" role="img" style="max-width:100%;{_FONT}">'
        f"<title>{_x(heading)}</title>"
        f'<text x="2" y="13" style="font-weight:bold">{_x(heading)}</text>'
        + "".join(parts)
        + "</svg>"
    )


# --------------------------------------------------------------------------------------------
# The cell, one time bar per line
# --------------------------------------------------------------------------------------------


def _bar(stat: LineStat | None, track_px: int) -> str:
    if stat is None or stat.samples <= 0:
        return ""
    width = max(1.0, stat.share * track_px)
    segments: list[str] = []
    # Phase counts are rounded one by one: scale by whichever is larger so the bar never overflows.
    denominator = max(stat.samples, sum(stat.phase_samples.values()))
    used = 0
    for phase in sorted(stat.phase_samples, key=lambda p: (-stat.phase_samples[p], p)):
        part = stat.phase_samples[phase] / denominator
        color = PHASE_COLORS.get(phase, _NO_PHASE_COLOR)
        segments.append(
            f'<span style="display:inline-block;height:10px;width:{part * width:.1f}px;'
            f'background:{color}"></span>'
        )
        used += stat.phase_samples[phase]
    rest = 1.0 - used / denominator
    if rest > 0:
        segments.append(
            f'<span style="display:inline-block;height:10px;width:{rest * width:.1f}px;'
            f'background:{_NO_PHASE_COLOR}"></span>'
        )
    return "".join(segments)


def _row_title(stat: LineStat) -> str:
    title = f"line {stat.line}: {stat.share:.1%} of sampled time ({stat.samples} samples)"
    if stat.phase_samples and stat.samples:
        phases = ", ".join(
            f"{phase} {n / stat.samples:.0%}"
            for phase, n in sorted(stat.phase_samples.items(), key=lambda kv: -kv[1])
        )
        title += f"; {phases}"
    return title


def line_bars_html(
    profile: StackProfile,
    cell_source: str | None = None,
    *,
    first_line: int = 1,
    track_px: int = 160,
) -> str:
    """The cell's source with a bar per line: width = share of sampled time, colors = phases.

    With ``cell_source`` (whose first line is cell line ``first_line``) every line is shown;
    without it only the sampled lines, with their text as the profile kept it.
    """
    stats = {stat.line: stat for stat in profile.lines}
    if cell_source is not None:
        rows = [
            (first_line + i, text, stats.get(first_line + i))
            for i, text in enumerate(cell_source.splitlines())
        ]
    else:
        rows = [
            (stat.line, stat.text, stat) for stat in sorted(profile.lines, key=lambda s: s.line)
        ]
    cells: list[str] = []
    for line, text, stat in rows:
        share = f"{stat.share:.1%}" if stat is not None and stat.samples > 0 else ""
        title = f' title="{_x(_row_title(stat))}"' if stat is not None else ""
        cells.append(
            f"<tr{title}>"
            f'<td style="text-align:right;color:#888;padding:0 6px">{line}</td>'
            f'<td style="width:{track_px}px;padding:0 4px;white-space:nowrap">'
            f"{_bar(stat, track_px)}</td>"
            f'<td style="text-align:right;padding:0 6px;font-variant-numeric:tabular-nums">'
            f"{share}</td>"
            f'<td style="white-space:pre;text-align:left;padding:0 4px">{_x(text)}</td>'
            "</tr>"
        )
    phases_seen = sorted({p for stat in profile.lines for p in stat.phase_samples})
    legend = " ".join(
        f'<span style="white-space:nowrap"><span style="display:inline-block;width:10px;'
        f'height:10px;background:{PHASE_COLORS.get(p, _NO_PHASE_COLOR)}"></span> {_x(p)}</span>'
        for p in phases_seen
    )
    caption = (
        f"Time per line (inclusive: a call line holds its callee's time), "
        f"{profile.samples} samples over {profile.duration_s:.2f} s"
    )
    return (
        f'<div class="gpucheck-lines" style="{_FONT}">'
        f'<div style="margin:2px 0 4px 0">{_x(caption)}</div>'
        + (f'<div style="margin:0 0 4px 0">{legend}</div>' if legend else "")
        + '<table style="border-collapse:collapse;line-height:14px">'
        + "".join(cells)
        + "</table></div>"
    )
