"""Render ``%gpustatus``: text for terminals, escaped HTML for notebooks."""

from __future__ import annotations

import html

from gpu_notebook.escapes import printable_record
from gpu_notebook.formatting import fmt_bytes
from gpu_notebook.records import GpuStatus, MachineStatus


def _val(x: float | None, unit: str) -> str:
    return "n/a" if x is None else f"{x:.0f}{unit}"


def _gpu_line(g: GpuStatus) -> str:
    r = g.reading
    if r is None:
        return f"GPU {g.info.index} {g.info.name}: LOST ({g.note})"
    return (
        f"GPU {g.info.index} {g.info.name}: util {_val(r.utilization_pct, '%')}, memory "
        f"{fmt_bytes(r.memory_used_bytes)} / {fmt_bytes(r.memory_total_bytes or g.info.memory_total_bytes)}, "
        f"{_val(r.temperature_c, ' C')}, {_val(r.power_w, ' W')}"
    )


def _procs_lines(g: GpuStatus) -> list[str]:
    if g.processes is None:
        return (
            ["    processes: not available (NVML refuses to list them here)"] if g.reading else []
        )
    if not g.processes:
        return ["    no process holds memory on this GPU"]
    return [
        f"    pid {p.pid:<8} {p.user or '?':<12} {fmt_bytes(p.used_memory_bytes):>10}  {(p.command or '?')[:80]}"
        for p in g.processes
    ]


def render_status_text(s: MachineStatus) -> str:
    s = printable_record(s)  # process names come from other users' programs
    if not s.available:
        return f"gpustatus: {s.message}"
    lines = [f"gpustatus: {len(s.gpus)} GPU(s), driver {s.driver_version or 'n/a'}"]
    for g in s.gpus:
        lines.append(_gpu_line(g))
        lines.extend(_procs_lines(g))
    return "\n".join(lines)


def render_status_html(s: MachineStatus) -> str:
    esc = html.escape
    if not s.available:
        return f"<div class='gpucheck-status'><b>gpustatus</b>: {esc(s.message or '')}</div>"
    rows = []
    for g in s.gpus:
        r = g.reading
        used = r.memory_used_bytes if r else None
        total = (r.memory_total_bytes if r else None) or g.info.memory_total_bytes
        share = (used / total) if used is not None and total else 0.0
        bar = (
            f"<div style='background:#eee;width:160px;height:10px;display:inline-block'>"
            f"<div style='background:#4c78a8;width:{160 * share:.0f}px;height:10px'></div></div>"
        )
        rows.append(
            f"<tr><td>{g.info.index}</td><td>{esc(g.info.name)}</td>"
            f"<td>{esc(_val(r.utilization_pct, '%') if r else 'LOST')}</td>"
            f"<td>{bar} {esc(fmt_bytes(used))} / {esc(fmt_bytes(total))}</td>"
            f"<td>{esc(_val(r.temperature_c, ' C') if r else '')}</td>"
            f"<td>{esc(_val(r.power_w, ' W') if r else '')}</td></tr>"
        )
        if g.processes:
            for p in g.processes:
                rows.append(
                    f"<tr style='color:#555'><td></td><td colspan='2'>pid {p.pid} · {esc(p.user or '?')}</td>"
                    f"<td>{esc(fmt_bytes(p.used_memory_bytes))}</td><td colspan='2'><code>{esc((p.command or '?')[:120])}</code></td></tr>"
                )
        elif g.processes is None and r is not None:
            rows.append(
                "<tr style='color:#555'><td></td><td colspan='5'>processes: not available here</td></tr>"
            )
    return (
        "<div class='gpucheck-status'><b>gpustatus</b> "
        f"(driver {esc(s.driver_version or 'n/a')})<table><tr><th>#</th><th>GPU</th><th>util</th>"
        "<th>memory</th><th>temp</th><th>power</th></tr>" + "".join(rows) + "</table></div>"
    )
