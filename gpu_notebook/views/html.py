"""HTML rendering of a Report: the section fragments (shared with the widget) and one offline file.

:func:`render_html` returns a single self-contained page: inline CSS, bokeh ``INLINE`` (no CDN,
no external URL to load), the sections of the notebook widget with the patched code and the diff
of each fix as ``<pre>`` blocks instead of buttons. A Content-Security-Policy admits only the
exact scripts written here (by hash) and no network source, so even a string that escaped our
escaping could not run or phone home. Every string that comes from the user's cell or the trace
(cell source, operator names, errors, notes, evidence) goes through :func:`esc`.

The section functions (``verdict_section``...) return HTML fragments under the ``.gpuc`` class;
``report_widget.py`` places the same fragments in ``ipywidgets.HTML`` values.
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path

from gpu_notebook import formatting
from gpu_notebook.formatting import fmt_bytes, fmt_pct, fmt_rate, fmt_seconds
from gpu_notebook.records import (
    OPTIONAL_PHASES,
    PHASES,
    Comparison,
    Finding,
    OpStat,
    PhaseBreakdown,
    Report,
    Run,
    Verdict,
    WhatIf,
)
from gpu_notebook.views.charts import PHASE_COLORS

__all__ = [
    "comparison_section",
    "esc",
    "finding_card",
    "gpu_estimate_section",
    "more_gpus_answer",
    "notes_section",
    "ops_section",
    "phase_stack",
    "phases_section",
    "render_html",
    "report_css",
    "resources_section",
    "source_section",
    "verdict_section",
    "whatif_section",
    "write_html",
]

_TEMPLATES = Path(__file__).parent / "templates"
# Tone of the answer by verdict category when its text does not start with a plain yes / no.
_CATEGORY_TONE = {
    "gpu-bound": "yes",
    "input-bound": "no",
    "host-bound": "no",
    "sync-bound": "no",
    "memory-bound": "maybe",
    "comm-bound": "maybe",
    "cpu-only": "maybe",
    "unknown": "unknown",
}


def esc(value: object) -> str:
    """HTML-escape any value for text and for quoted attribute values (quotes included)."""
    return html.escape(str(value), quote=True)


@lru_cache(maxsize=1)
def report_css() -> str:
    """The report's stylesheet (templates/report.css), scoped under ``.gpuc``."""
    return (_TEMPLATES / "report.css").read_text(encoding="utf-8")


# ---------------------------------------------------------------------------------------------
# Small formatters
# ---------------------------------------------------------------------------------------------


def fmt_gain(bound: float | None) -> str:
    """The gain-bound wording of the page ('' when nothing bounds it: the page then says nothing)."""
    return "" if bound is None else formatting.fmt_gain(bound)


def fmt_share(share: float | None) -> str:
    return formatting.fmt_share(share, decimals=1, missing="not measured")


def more_gpus_answer(verdict: Verdict) -> tuple[str, str, str]:
    """(short answer, rest of the explanation, tone) for "will more GPUs help?".

    The short answer is the first clause of ``verdict.more_gpus`` ("No", "Yes", "Not more of the
    same"...), so the analysis stays the only author of the answer; a bare yes/no gets the action
    it implies. Tone (yes / no / maybe / unknown) picks the colour.
    """
    text = verdict.more_gpus.strip()
    match = re.match(r"([^:;.]{1,60})[:;.]\s*(.*)", text, re.S)
    short, rest = (match.group(1).strip(), match.group(2).strip()) if match else (text, "")
    rest = rest[:1].upper() + rest[1:]
    low = short.lower()
    if low == "yes":
        return "Yes: the GPU is the limit", rest, "yes"
    if low == "no":
        return "No: optimize the code first", rest, "no"
    if low.startswith("unknown"):
        return "Unknown", rest, "unknown"
    return short, rest, _CATEGORY_TONE.get(verdict.category, "unknown")


# ---------------------------------------------------------------------------------------------
# Sections
# ---------------------------------------------------------------------------------------------


def phase_stack(phases: PhaseBreakdown | None) -> str:
    """One horizontal bar of the step split into its measured phases, with a legend."""
    if phases is None or phases.total_us <= 0:
        return ""
    spans: list[str] = []
    legend: list[str] = []
    for phase in PHASES:
        share = phases.share(phase)
        if share is None or share <= 0:
            continue
        color = PHASE_COLORS[phase]
        spans.append(
            f'<span style="width:{100 * share:.2f}%;background:{color}" '
            f'title="{esc(phase)} {100 * share:.1f}%"></span>'
        )
        if share >= 0.005:
            legend.append(
                f'<span class="swatch" style="background:{color}"></span>{esc(phase)} {100 * share:.0f}%'
            )
    unmeasured = [p for p in PHASES if p not in phases.measured and p not in OPTIONAL_PHASES]
    if unmeasured:
        legend.append(f' <span class="notmeasured">&nbsp; not measured: {esc(", ".join(unmeasured))}</span>')
    return (
        f'<div class="stack" role="img" aria-label="share of step time by phase">{"".join(spans)}</div>'
        f'<div class="legend">{"".join(legend)}</div>'
    )


def _key_facts(report: Report) -> str:
    a, run = report.analysis, report.run
    st = a.step_stats
    facts = [f"<span>median step <b>{esc(fmt_seconds(st.median_s))}</b></span>"]
    if st.samples_per_s is not None:
        facts.append(f"<span><b>{st.samples_per_s:,.0f}</b> samples/s</span>")
    facts.append(f"<span><b>{st.count}</b> steps</span>")
    if a.gpu is not None and a.gpu.window_us > 0:
        facts.append(f"<span>GPU busy <b>{100 * a.gpu.busy_share:.0f}%</b></span>")
    elif a.utilization.gpu_util_mean_pct is not None:
        facts.append(f"<span>GPU utilization <b>{esc(fmt_pct(a.utilization.gpu_util_mean_pct))}</b></span>")
    facts.append(f"<span>cell <b>{esc(fmt_seconds(run.wall_s))}</b></span>")
    return f'<div class="keyfacts">{"".join(facts)}</div>'


def failure_banner(run: Run) -> str:
    if run.status == "ok":
        return ""
    what = "was interrupted" if run.status == "interrupted" else "failed"
    error = run.error or run.status
    return (
        f'<div class="failed">The cell {what}: <code>{esc(error)}</code>; '
        f"this report covers the steps that ran.</div>"
    )


def verdict_section(report: Report) -> str:
    """The answer to "will more GPUs help?" first and big, the headline, the key numbers."""
    v = report.verdict
    short, rest, tone = more_gpus_answer(v)
    evidence = "".join(f"<li>{esc(item)}</li>" for item in v.evidence)
    return (
        f'<div class="verdict tone-{tone}">'
        f'<p class="question">Will more GPUs help?</p>'
        f'<div class="answer">{esc(short)}</div>'
        f'<p class="headline">{esc(v.headline)}'
        f'<span class="category">{esc(v.category)}</span></p>'
        f"<p>{esc(rest)}</p>"
        f"{failure_banner(report.run)}"
        f"{phase_stack(report.analysis.phases)}"
        f"{_key_facts(report)}"
        + (f'<ul class="evidence">{evidence}</ul>' if evidence else "")
        + f'<p class="muted" style="margin-top:6px">confidence: {esc(v.confidence)}</p>'
        "</div>"
    )


def comparison_section(comparison: Comparison | None) -> str:
    """Before / after: measured speedup beside the predicted bound, throughput, shares, GPU."""
    if comparison is None:
        return ""
    c = comparison
    if c.speedup is None:
        big = "Speedup: not measured"
        klass = ""
    elif c.speedup >= 1:
        big, klass = f"Measured: {c.speedup:.2f}x faster", "better"
    else:
        big, klass = f"Measured: {1 / c.speedup:.2f}x slower", "worse"
    predicted = ""
    if c.predicted_bound is not None:
        fix = f" for fix <code>{esc(c.fix_id)}</code>" if c.fix_id else ""
        predicted = f'<p>Predicted{fix}: <b>{esc(fmt_gain(c.predicted_bound))}</b> (Amdahl bound)</p>'
    extra: list[str] = []
    if c.fix_id is None:
        extra.append('<p class="muted">No gpucheck fix is known between the two runs; '
                     "the difference may be noise or your own change.</p>")
    if c.gpu_equivalent is not None and c.gpu_equivalent > 0:
        extra.append(
            f"<p>This gain is the throughput of <b>{c.gpu_equivalent:.1f} more GPU(s)</b> of this kind.</p>"
        )
    if c.cost_saved_per_1000_steps is not None:
        extra.append(f"<p>Saves <b>{c.cost_saved_per_1000_steps:,.2f}</b> per 1000 steps.</p>")

    def row(label: str, before: str, after: str) -> str:
        return f"<tr><td>{esc(label)}</td><td class='num'>{esc(before)}</td><td class='num'>{esc(after)}</td></tr>"

    rows = [
        row("median step time", fmt_seconds(c.baseline_step_median_s), fmt_seconds(c.step_median_s)),
        row("throughput (samples/s)", fmt_rate(c.baseline_samples_per_s), fmt_rate(c.samples_per_s)),
        row("GPU utilization", fmt_pct(c.baseline_gpu_util_pct), fmt_pct(c.gpu_util_pct)),
    ]
    for phase in PHASES:
        if phase in c.baseline_phase_share or phase in c.phase_share:
            rows.append(
                row(
                    f"{phase} share",
                    fmt_share(c.baseline_phase_share.get(phase)),
                    fmt_share(c.phase_share.get(phase)),
                )
            )
    return (
        '<div class="compare"><h3>Before / after: this cell against its previous run</h3>'
        f'<div class="big {klass}">{esc(big)}</div>{predicted}{"".join(extra)}'
        f'<table><tr><th></th><th class="num">before ({esc(c.baseline_started_at)})</th>'
        f'<th class="num">this run</th></tr>{"".join(rows)}</table></div>'
    )


def gpu_estimate_section(report: Report) -> str:
    """A CPU run: what one GPU would make of the step (analysis/gpu_estimate.py), assumptions."""
    estimate = report.gpu_estimate
    if estimate is None:
        return ""
    from gpu_notebook.analysis.gpu_estimate import describe

    head, parts, *assumptions = describe(estimate)
    items = "".join(f"<li>{esc(a.removeprefix('assumes: '))}</li>" for a in assumptions)
    return (
        '<div class="whatif"><h3>Would a GPU help?</h3>'
        f"<p><b>{esc(head)}</b></p><p>{esc(parts)}</p>"
        + (f"<details><summary>Assumptions</summary><ul>{items}</ul></details>" if items else "")
        + "</div>"
    )


def whatif_section(whatif: WhatIf | None) -> str:
    """Fix the code or add GPUs: the fixes' bound on one GPU beside predicted DDP scaling."""
    if whatif is None:
        return ""
    from gpu_notebook.analysis.whatif import baseline_sentence, speedup_label

    w = whatif
    if w.fixes_speedup is not None:
        fixes = (
            f"Fixing {esc(', '.join(w.fixed_phases))}: <b>{esc(fmt_gain(w.fixes_speedup))}</b> "
            "on this machine, with no new hardware."
        )
    else:
        fixes = "No waiting phase to fix was measured (data, sync and copy are under 1%)."
    out = ['<div class="whatif"><h3>What if: fix the code, or add GPUs?</h3>']
    baseline = baseline_sentence(w)
    if baseline is not None:
        out.append(f"<p><b>{esc(baseline[0].upper() + baseline[1:])}.</b></p>")
    out.append(f"<p>{fixes}</p>")
    if w.points:
        grads = f"{w.grad_bytes / 1e6:.1f} MB" if w.grad_bytes is not None else "n/a"
        out.append(
            f'<p class="muted">Data parallel (DDP) prediction; interconnect {esc(w.interconnect or "n/a")}; '
            f"gradients {esc(grads)} a step.</p>"
        )
        priced = any(p.cost_per_1000_steps is not None for p in w.points)
        head = (
            f"<tr><th class='num'>GPUs</th><th class='num'>{esc(speedup_label(w))}</th><th class='num'>efficiency</th>"
            "<th class='num'>with the fixes</th><th class='num'>exposed comm / step</th>"
            + ("<th class='num'>cost / 1,000 steps</th>" if priced else "")
            + "</tr>"
        )
        rows = []
        for p in w.points:
            fx = f"{p.speedup_with_fixes:.2f}x" if p.speedup_with_fixes is not None else "n/a"
            cost = ""
            if priced:
                cost = "<td class='num'>" + (
                    f"{p.cost_per_1000_steps:,.2f}" if p.cost_per_1000_steps is not None else "n/a"
                ) + "</td>"
            rows.append(
                f"<tr><td class='num'>{p.gpus}</td><td class='num'>{p.speedup:.2f}x</td>"
                f"<td class='num'>{100 * p.efficiency:.0f}%</td><td class='num'>{esc(fx)}</td>"
                f"<td class='num'>{esc(fmt_seconds(p.exposed_comm_s))}</td>{cost}</tr>"
            )
        out.append(f"<table>{head}{''.join(rows)}</table>")
    for m in w.missing:
        out.append(f"<p>Cannot predict more GPUs: {esc(m)}</p>")
    if w.assumptions:
        out.append(
            "<details><summary>Assumptions</summary><ul>"
            + "".join(f"<li>{esc(a)}</li>" for a in w.assumptions)
            + "</ul></details>"
        )
    out.append("</div>")
    return "".join(out)


def _diff_pre(diff: str) -> str:
    lines: list[str] = []
    for line in diff.splitlines():
        klass = ""
        if line.startswith("+") and not line.startswith("+++"):
            klass = "add"
        elif line.startswith("-") and not line.startswith("---"):
            klass = "del"
        elif line.startswith("@@"):
            klass = "hunk"
        lines.append(f'<span class="{klass}">{esc(line)}</span>' if klass else esc(line))
    return '<pre class="diff">' + "\n".join(lines) + "</pre>"


def _safe_url(url: str) -> str | None:
    """Only https documentation links become links; anything else is shown as text."""
    return url if re.match(r"^https://[^\s\"'<>]+$", url) else None


def finding_card(
    finding: Finding, number: int, *, with_code: bool, insert_below: bool = False
) -> str:
    """One finding of the checklist: severity, title, gain bound, evidence, the fix.

    ``with_code``: show the patched cell and its diff as ``<pre>`` (the HTML file).
    ``insert_below``: the widget places an InsertFixWidget right under the card; the card then
    says so and joins it visually.
    """
    f = finding
    gain = fmt_gain(f.gain_bound)
    share = (
        f" (removes {100 * f.phase_share:.0f}% of the step)" if f.phase_share is not None else ""
    )
    joined = " with-action" if insert_below else ""
    parts = [
        f'<div class="finding sev-{esc(f.severity)}{joined}">',
        f'<span class="gain">{esc(gain)}</span>' if gain else "",
        f'<h3>{number}. <span class="sev">{esc(f.severity)}</span>{esc(f.title)}</h3>',
    ]
    if gain:
        parts.append(f'<p class="muted">Gain bound: {esc(gain)}{esc(share)}</p>')
    if f.evidence:
        parts.append("<ul>" + "".join(f"<li>{esc(e)}</li>" for e in f.evidence) + "</ul>")
    line = f" (cell line {f.line})" if f.line is not None else ""
    parts.append(f'<p class="fixline"><b>Fix{esc(line)}:</b> {esc(f.fix)}</p>')
    p = f.proposal
    if p is not None:
        if p.why:
            parts.append('<p class="muted">' + " ".join(esc(w) for w in p.why) + "</p>")
        url = _safe_url(p.doc_url)
        if url is not None:
            parts.append(
                f'<p><a href="{esc(url)}" target="_blank" rel="noopener noreferrer">'
                f"Read more: {esc(p.title)}</a></p>"
            )
        elif p.doc_url:
            parts.append(f"<p class='muted'>Read more: {esc(p.doc_url)}</p>")
        if p.refusal:
            parts.append(f'<p class="refusal">No patch for this cell: {esc(p.refusal)}</p>')
        elif insert_below and p.source_after is not None:
            parts.append(
                '<p class="patchready">Patch ready below: preview the change, then '
                "<b>Insert fix</b> adds it as a new cell under this one (it is not run).</p>"
            )
        elif with_code and p.source_after is not None:
            parts.append(
                f"<details open><summary>Patched cell: {esc(p.title)}</summary>"
                f"<pre>{esc(p.source_after)}</pre></details>"
            )
            if p.diff:
                parts.append(f"<details><summary>Diff</summary>{_diff_pre(p.diff)}</details>")
    if f.source:
        parts.append(f'<p class="muted">Threshold source: {esc(f.source)}</p>')
    parts.append("</div>")
    return "".join(parts)


def findings_header(findings: Sequence[Finding]) -> str:
    if not findings:
        return (
            "<h2>Findings</h2><p>No specific finding for this cell: the verdict above says "
            "what limits it.</p>"
        )
    return f"<h2>Findings: {len(findings)} thing(s) to fix, most important first</h2>"


def phases_section(report: Report) -> str:
    """The phase table: one row per phase, its share, time per step; 'not measured' in words."""
    phases = report.analysis.phases
    window = report.run.window
    out = ["<h2>Where a step's time goes</h2>"]
    if phases is None or phases.total_us <= 0:
        out.append("<p>No step was split into phases: no training step was detected.</p>")
    else:
        n = max(1, len(phases.steps))
        src = (
            f"{len(phases.steps)} profiled step(s), torch.profiler trace"
            if phases.source == "trace"
            else f"{len(phases.steps)} step(s), step-clock hook timings (no trace)"
        )
        out.append(f'<p class="muted">{esc(src)}; median step {esc(fmt_seconds(report.analysis.step_stats.median_s))}, '
                   f"p90 {esc(fmt_seconds(report.analysis.step_stats.p90_s))}</p>")
        rows = []
        for phase in PHASES:
            share = phases.share(phase)
            if share is None and phase in OPTIONAL_PHASES:
                continue
            if share is None:
                rows.append(
                    f'<tr data-phase="{esc(phase)}"><td>{esc(phase)}</td>'
                    f'<td class="num notmeasured">not measured</td><td></td><td></td></tr>'
                )
                continue
            per_step = phases.phase_total_us.get(phase, 0.0) / n / 1e6
            width = max(0.0, min(100.0, 100 * share))
            rows.append(
                f'<tr data-phase="{esc(phase)}"><td>{esc(phase)}</td>'
                f'<td class="num">{100 * share:.1f}%</td>'
                f'<td><div class="bartrack"><span class="bar" style="width:{width:.2f}%;'
                f'background:{PHASE_COLORS[phase]}"></span></div></td>'
                f'<td class="num">{esc(fmt_seconds(per_step))}/step</td></tr>'
            )
        out.append(
            '<table class="phases"><tr><th>phase</th><th class="num">share</th><th></th>'
            f'<th class="num">time</th></tr>{"".join(rows)}</table>'
        )
    if window.message and window.status != "recorded":
        out.append(f'<p class="muted">Profiler window: {esc(window.status)}: {esc(window.message)}</p>')
    return "".join(out)


def resources_section(report: Report) -> str:
    """GPU timeline (trace), GPU samples (NVML) and CPU use, in sentences with units."""
    a, run = report.analysis, report.run
    u = a.utilization
    out = ["<h2>GPU and CPU</h2>"]
    if a.gpu is not None and a.gpu.window_us > 0:
        g = a.gpu
        out.append(
            f"<p>GPU timeline (trace): busy <b>{100 * g.busy_share:.0f}%</b> of "
            f"{esc(fmt_seconds(g.window_us / 1e6))}; idle {esc(fmt_seconds(g.idle_us / 1e6))} "
            f"(waiting for the host {esc(fmt_seconds(g.idle_host_wait_us / 1e6))}, between kernels "
            f"{esc(fmt_seconds(g.idle_kernel_wait_us / 1e6))}, other {esc(fmt_seconds(g.idle_other_us / 1e6))}); "
            f"communication {esc(fmt_seconds(g.comm_us / 1e6))}.</p>"
        )
        if g.copies:
            rows = "".join(
                f"<tr><td>{esc(c.kind)}</td><td class='num'>{c.count}</td>"
                f"<td class='num'>{esc(fmt_seconds(c.duration_us / 1e6))}</td>"
                f"<td class='num'>{esc(fmt_bytes(c.bytes))}</td></tr>"
                for c in g.copies
            )
            out.append(
                "<table><tr><th>copy</th><th class='num'>count</th><th class='num'>time</th>"
                f"<th class='num'>bytes</th></tr>{rows}</table>"
            )
    if u.gpu_util_mean_pct is not None or u.gpu_memory_peak_bytes is not None:
        gpus = ", ".join(f"GPU {g.index}: {g.name}" for g in run.env.gpus)
        out.append(
            f"<p>GPU samples (NVML{': ' + esc(gpus) if gpus else ''}): utilization mean "
            f"<b>{esc(fmt_pct(u.gpu_util_mean_pct))}</b> (p5 {esc(fmt_pct(u.gpu_util_p5_pct))}, "
            f"p95 {esc(fmt_pct(u.gpu_util_p95_pct))}); memory peak {esc(fmt_bytes(u.gpu_memory_peak_bytes))} "
            f"of {esc(fmt_bytes(u.gpu_memory_total_bytes))}.</p>"
        )
    elif a.gpu is None:
        out.append("<p>GPU: not measured (no GPU visible).</p>")
    out.append(
        f"<p>CPU: this process {esc(fmt_pct(u.process_cpu_mean_pct))} (100% = one core), its workers "
        f"{esc(fmt_pct(u.children_cpu_mean_pct))}, the machine {esc(fmt_pct(u.system_cpu_mean_pct))} "
        f"of {run.env.cpu_count} cores; peak memory (RSS) {esc(fmt_bytes(u.rss_peak_bytes))}.</p>"
    )
    return "".join(out)


def ops_section(ops: Sequence[OpStat], limit: int = 10) -> str:
    """Top operators by self time in the profiled window (names from the trace: escaped)."""
    if not ops:
        return ""
    rows = "".join(
        f"<tr><td>{esc(op.device)}</td><td class='num'>{esc(fmt_seconds(op.self_us / 1e6))}</td>"
        f"<td class='num'>{esc(fmt_seconds(op.total_us / 1e6))}</td><td class='num'>{op.calls}</td>"
        f"<td><code>{esc(op.name)}</code></td></tr>"
        for op in ops[:limit]
    )
    return (
        "<h2>Top operators (self time in the profiled steps)</h2>"
        "<table class='ops'><tr><th>device</th><th class='num'>self</th><th class='num'>total</th>"
        f"<th class='num'>calls</th><th>operator</th></tr>{rows}</table>"
    )


def lines_section(report: Report) -> str:
    """Where the host time goes, line by line (bars beside the cell) and as a flame graph."""
    stacks = report.analysis.stacks
    if stacks is None or stacks.samples == 0:
        return ""
    from gpu_notebook.views.flame import flame_svg, line_bars_html

    return (
        "<h2>Where the host time goes, line by line</h2>"
        f"<p class='muted'>{stacks.samples} stack samples over {stacks.duration_s:.2f} s "
        f"(every {stacks.interval_s * 1e3:.0f} ms) of the thread that ran the cell</p>"
        + line_bars_html(stacks, report.run.cell_source, first_line=report.run.first_line)
        + "<details><summary>Flame graph (icicle)</summary>"
        + flame_svg(stacks)
        + "</details>"
    )


def notes_section(run: Run) -> str:
    if not run.notes:
        return ""
    return "<h2>Notes</h2><ul>" + "".join(f"<li>{esc(n)}</li>" for n in run.notes) + "</ul>"


def source_section(run: Run) -> str:
    return (
        f"<details><summary>Measured cell ({len(run.cell_source.splitlines())} lines, started "
        f"{esc(run.started_at)})</summary><pre>{esc(run.cell_source)}</pre></details>"
    )


def footer(report: Report) -> str:
    env = report.run.env
    torch = env.torch_version or "not installed"
    return (
        f'<p class="footer">gpucheck report, schema {report.schema_version}; Python '
        f"{esc(env.python_version)}, torch {esc(torch)}, {esc(env.platform)}, "
        f"{env.cpu_count} CPU cores, {len(env.gpus)} GPU(s).</p>"
    )


# ---------------------------------------------------------------------------------------------
# The standalone page
# ---------------------------------------------------------------------------------------------


def _script_hash(body: str) -> str:
    digest = hashlib.sha256(body.encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode("ascii") + "'"


def _csp(script_bodies: Iterable[str]) -> str:
    # No network source at all; scripts only by the hash of the ones written below.
    hashes = " ".join(_script_hash(b) for b in script_bodies)
    return (
        "default-src 'none'; "
        f"script-src {hashes or chr(39) + 'none' + chr(39)}; "
        "style-src 'unsafe-inline'; img-src data:; font-src data:; "
        "base-uri 'none'; form-action 'none'"
    )


def _chart_parts(report: Report) -> tuple[list[str], list[str], str]:
    """(script bodies, css bodies, div) for the charts; empty when there is nothing to chart."""
    from gpu_notebook.views.charts import chart_document

    doc = chart_document(report)
    if doc is None:
        return [], [], '<p class="muted">No samples or steps to chart.</p>'
    from bokeh.embed import components
    from bokeh.embed.bundle import bundle_for_objs_and_resources
    from bokeh.resources import INLINE

    bundle = bundle_for_objs_and_resources([doc.layout], INLINE)
    if bundle.js_files or bundle.css_files:  # INLINE never links; guard the offline promise
        raise RuntimeError("bokeh INLINE bundle unexpectedly references files")
    script, div = components(doc.layout, wrap_script=False)
    return [*bundle.js_raw, script], list(bundle.css_raw), div


def _page_title(report: Report) -> str:
    return f"gpucheck: {report.verdict.category} ({report.run.started_at})"


def render_html(report: Report) -> str:
    """One self-contained HTML page for ``report`` (opens offline, runs only our scripts)."""
    scripts, css, chart_div = _chart_parts(report)
    for body in scripts:
        if "</script" in body.lower():  # would end the element early; bokeh never emits it
            raise RuntimeError("a chart script contains '</script'")
    findings = report.findings  # ranked once, by the rules (rules.rank_key)
    sections = [
        verdict_section(report),
        comparison_section(report.comparison),
        whatif_section(report.whatif),
        gpu_estimate_section(report),
        findings_header(findings),
        *(finding_card(f, i, with_code=True) for i, f in enumerate(findings, 1)),
        phases_section(report),
        '<h2>Timeline and phases per step</h2><div class="charts">',
        chart_div,
        "</div>",
        resources_section(report),
        ops_section(report.analysis.top_ops),
        lines_section(report),
        notes_section(report.run),
        "<h2>Cell</h2>",
        source_section(report.run),
        footer(report),
    ]
    head_scripts = "".join(f"<script>{s}</script>" for s in scripts[:-1])
    tail_script = f"<script>{scripts[-1]}</script>" if scripts else ""
    styles = "".join(f"<style>{c}</style>" for c in css)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{esc(_csp(scripts))}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(_page_title(report))}</title>"
        f"<style>{report_css()}</style>{styles}{head_scripts}</head>"
        f'<body style="margin:0;background:#f3f4f6"><div class="gpuc gpuc-page">'
        f'{"".join(sections)}</div>{tail_script}</body></html>\n'
    )


def write_html(report: Report, path: str | Path) -> Path:
    """Write :func:`render_html` to ``path`` (UTF-8; folders created) and return the path."""
    target = Path(path).expanduser()
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(render_html(report), encoding="utf-8")
    return target
