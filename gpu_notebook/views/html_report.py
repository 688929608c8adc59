"""HTML rendering of a Report: the section fragments (shared with the widget) and one offline file.

The markup lives in Jinja2 templates (``templates/*.html``) rendered with autoescape on: every
value a template prints is escaped (cell source, operator names, errors, notes, evidence, GPU
names) unless it is a :class:`markupsafe.Markup` built here from escaped parts (a section inside
the page, the flame graph) or one of our own files (the CSS, bokeh's INLINE scripts).

:func:`render_html` returns a single self-contained page: inline CSS, bokeh ``INLINE`` (no CDN,
no external URL to load), the sections of the notebook widget with the patched code and the diff
of each fix as ``<pre>`` blocks instead of buttons. A Content-Security-Policy admits only the
exact scripts written here (by hash) and no network source, so even a string that escaped our
escaping could not run or phone home.

The section functions (``verdict_section``...) return HTML fragments under the ``.gpuc`` class;
``report_widget.py`` places the same fragments in ``ipywidgets.HTML`` values.
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
from collections.abc import Iterable, Sequence
from contextvars import ContextVar
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2
import jinja2.ext
from markupsafe import Markup

from gpu_notebook import formatting
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
from gpu_notebook.words.program import Program, said_of, said_of_lines
from gpu_notebook.words.run_shape import window_cut_short

__all__ = [
    "comparison_section",
    "esc",
    "finding_card",
    "findings_header",
    "footer",
    "gpu_estimate_section",
    "lines_section",
    "more_gpus_answer",
    "notes_section",
    "ops_section",
    "phase_stack",
    "phases_section",
    "render_html",
    "report_css",
    "resources_section",
    "run_shape_section",
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
    """HTML-escape a value for text and quoted attributes (for the views still built from strings:
    the live view, the widget's iframe ``srcdoc``); the templates here escape by themselves."""
    return html.escape(str(value), quote=True)


@lru_cache(maxsize=1)
def report_css() -> str:
    """The report's stylesheet (templates/report.css), scoped under ``.gpuc``."""
    return (_TEMPLATES / "report.css").read_text(encoding="utf-8")


# ---------------------------------------------------------------------------------------------
# Templates
# ---------------------------------------------------------------------------------------------

# A line break in a template and the indentation around it.
_LINE_BREAK = re.compile(r"[ \t]*\n[ \t]*")


class _JoinLines(jinja2.ext.Extension):
    """Templates are written a tag a line; the fragments come out on one line.

    A line break next to a tag (``>`` before it or ``<`` after it) or to a Jinja block tag or
    comment vanishes; any other break (inside running text, or between two ``{{ }}`` lines:
    write ``{{-`` there) reads as one space. So break lines only at tags and blocks, never
    between a word and an inline tag (``then <b>``): the space would go. This acts on the
    template's own text, never on a value: the newlines of a cell's source in ``<pre>`` stay.
    """

    def preprocess(self, source: str, name: str | None, filename: str | None = None) -> str:
        def join(match: re.Match[str]) -> str:
            before = source[max(0, match.start() - 2) : match.start()]
            after = source[match.end() : match.end() + 2]
            if before.endswith(">") or before in ("%}", "#}") or not before:
                return ""
            if after.startswith("<") or after in ("{%", "{#") or not after:
                return ""
            return " "

        return _LINE_BREAK.sub(join, source)


def _css_width(share: float) -> str:
    """A share as a CSS width, kept inside 0-100% (a share can exceed 1 by rounding)."""
    return f"{max(0.0, min(100.0, 100 * share)):.2f}%"


class _SaidOfScript(jinja2.ext.Extension):
    """The templates' own text, written of a cell, said of a script (words/program.py); the
    values they print are the report's, said of its program when it was built."""

    def preprocess(self, source: str, name: str | None, filename: str | None = None) -> str:
        return said_of_lines("script", source)


# The program the page being rendered is of (Run.program): its templates' own words name it.
_PROGRAM: ContextVar[Program] = ContextVar("gpucheck_html_program", default="cell")


@lru_cache(maxsize=2)
def _environment(program: Program = "cell") -> jinja2.Environment:
    extensions: list[type[jinja2.ext.Extension]] = [_JoinLines]
    if program == "script":
        extensions.insert(0, _SaidOfScript)
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(_TEMPLATES),
        autoescape=True,  # every template, whatever its name: all of them write HTML
        undefined=jinja2.StrictUndefined,  # a misspelt name fails the render, not prints ""
        extensions=extensions,
        auto_reload=False,
    )
    env.filters.update(
        {name: getattr(formatting, name) for name in formatting.__all__ if name.startswith("fmt_")}
    )
    env.filters["css_width"] = _css_width
    env.globals.update(colors=PHASE_COLORS, phases=PHASES)
    return env


def _render(template: str, **context: Any) -> Markup:
    """A template's HTML; Markup, so that a section placed in another template is not escaped again."""
    return Markup(_environment(_PROGRAM.get()).get_template(template).render(**context))


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
# Sections: what each template needs, worked out here; the markup is in the template
# ---------------------------------------------------------------------------------------------


def phase_stack(phases: PhaseBreakdown | None) -> str:
    """One horizontal bar of the step split into its measured phases, with a legend."""
    if phases is None or phases.total_us <= 0:
        return ""
    shares = [(p, s) for p in PHASES if (s := phases.share(p)) is not None and s > 0]
    unmeasured = [p for p in PHASES if p not in phases.measured and p not in OPTIONAL_PHASES]
    return _render("phase_stack.html", shares=shares, unmeasured=unmeasured)


def verdict_section(report: Report) -> str:
    """The answer to "will more GPUs help?" first and big, the headline, the key numbers."""
    short, rest, tone = more_gpus_answer(report.verdict)
    a = report.analysis
    return _render(
        "verdict.html",
        v=report.verdict,
        short=short,
        rest=rest,
        tone=tone,
        run=report.run,
        st=a.step_stats,
        gpu=a.gpu,
        util=a.utilization,
        stack=phase_stack(a.phases),
    )


def comparison_section(comparison: Comparison | None) -> str:
    """Before / after: measured speedup beside the predicted bound, throughput, shares, GPU."""
    if comparison is None:
        return ""
    from gpu_notebook.views.wording import (
        outcome_said,
        partial_runs,
        predicted_gain,
        sample_notes,
    )

    notes = sample_notes(comparison.samples) if comparison.samples is not None else ()
    return _render(
        "comparison.html",
        c=comparison,
        sample_notes=notes,
        partial=partial_runs(comparison),
        said=outcome_said(comparison),
        predicted=predicted_gain(comparison),
    )


def gpu_estimate_section(report: Report) -> str:
    """A CPU run: what one GPU would make of the step (analysis/gpu_estimate.py), assumptions."""
    if report.gpu_estimate is None:
        return ""
    from gpu_notebook.views.wording import describe_estimate

    head, parts, *assumptions = (
        said_of(report.run.program, line) for line in describe_estimate(report.gpu_estimate)
    )
    return _render(
        "gpu_estimate.html",
        head=head,
        parts=parts,
        assumptions=[a.removeprefix("assumes: ") for a in assumptions],
    )


def whatif_section(whatif: WhatIf | None) -> str:
    """Fix the code or add GPUs: the fixes' bound on one GPU beside predicted DDP scaling."""
    if whatif is None:
        return ""
    from gpu_notebook.views.wording import (
        baseline_sentence,
        host_cpu_sentence,
        speedup_label,
        whatif_assumptions,
        whatif_interconnect,
        whatif_missing,
    )

    baseline = baseline_sentence(whatif)
    host = host_cpu_sentence(whatif)
    return _render(
        "whatif.html",
        w=whatif,
        baseline=None if baseline is None else baseline[0].upper() + baseline[1:],
        speedup_label=speedup_label(whatif),
        interconnect=whatif_interconnect(whatif.interconnect),
        assumptions=whatif_assumptions(whatif),
        missing=whatif_missing(whatif),
        priced=any(p.cost_per_1000_steps is not None for p in whatif.points),
        host_cpu=None if host is None else host[0].upper() + host[1:],
        on_host=any(p.speedup_this_host is not None for p in whatif.points),
    )


def _diff_lines(diff: str) -> list[tuple[str, str]]:
    """(class, line) of a unified diff: "add", "del", "hunk" or "" (context and file headers)."""
    lines: list[tuple[str, str]] = []
    for line in diff.splitlines():
        klass = ""
        if line.startswith("+") and not line.startswith("+++"):
            klass = "add"
        elif line.startswith("-") and not line.startswith("---"):
            klass = "del"
        elif line.startswith("@@"):
            klass = "hunk"
        lines.append((klass, line))
    return lines


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
    from gpu_notebook.views.wording import headline_gain, level_label

    p = finding.proposal
    return _render(
        "finding.html",
        f=finding,
        gain=headline_gain(finding),
        level=level_label(finding),
        number=number,
        with_code=with_code,
        insert_below=insert_below,
        doc_url=None if p is None else _safe_url(p.doc_url),
        diff_lines=_diff_lines(p.diff) if p is not None and p.diff else [],
    )


def findings_header(findings: Sequence[Finding]) -> str:
    return _render("findings_header.html", count=len(findings))


def phases_section(report: Report) -> str:
    """The phase table: one row per phase, its share, time per step; 'not measured' in words."""
    phases = report.analysis.phases
    rows: list[tuple[str, float | None, float]] | None = None
    source = ""
    if phases is not None and phases.total_us > 0:
        n = max(1, len(phases.steps))
        source = (
            f"{len(phases.steps)} profiled step(s), torch.profiler trace"
            if phases.source == "trace"
            else f"{len(phases.steps)} step(s), step-clock hook timings (no trace)"
        )
        rows = [
            (p, share, phases.phase_total_us.get(p, 0.0) / n / 1e6)
            for p in PHASES
            if (share := phases.share(p)) is not None or p not in OPTIONAL_PHASES
        ]
    # On a GPU the step is paced by kernels: their time by the phase that launched them.
    gpu = report.analysis.gpu
    gpu_total = sum(gpu.gpu_phase_us.values()) if gpu is not None else 0.0
    gpu_cols: dict[str, tuple[float, float]] | None = None
    if gpu is not None and gpu_total > 0 and phases is not None:
        n = max(1, len(phases.steps))
        gpu_cols = {p: (us / gpu_total, us / n / 1e6) for p, us in gpu.gpu_phase_us.items()}
    return _render(
        "phases.html",
        rows=rows,
        gpu_cols=gpu_cols,
        gpu_partial=gpu is not None and gpu.partial,
        source=source,
        st=report.analysis.step_stats,
        window=report.run.window,
        window_cut=window_cut_short(report.run.window),
    )


# The tallest of the ten bars of "Over the run", in CSS pixels (report.css: .tenths).
_TENTH_PX = 36


def _signed_bytes(n: float) -> str:
    return ("+" if n >= 0 else "-") + formatting.fmt_bytes(round(abs(n)))


def run_shape_section(report: Report) -> str:
    """The run over time: drift, the tenths' median steps, the windows' place, stalls, memory.

    Every figure is ``Analysis.shape`` (analysis/run_trend.py); nothing here is computed beyond
    bar heights and signs. Empty when the run was too short to have a shape.
    """
    shape = report.analysis.shape
    if shape is None:
        return ""
    top = max((seg.median_s for seg in shape.segments), default=0.0)
    tenths = [
        (seg, f"{max(1, round(_TENTH_PX * seg.median_s / top)) if top > 0 else 1}px")
        for seg in shape.segments
    ]
    drift = None
    if shape.first_median_s > 0:
        drift = f"{shape.last_median_s / shape.first_median_s:.2f}x the first fifth"
    memory = [(m, _signed_bytes(100 * m.bytes_per_step)) for m in shape.memory]
    return _render("run_shape.html", s=shape, tenths=tenths, drift=drift, memory=memory)


def resources_section(report: Report) -> str:
    """GPU timeline (trace), GPU samples (NVML) and CPU use, in sentences with units."""
    from gpu_notebook.views.wording import cpu_scope, nvml_utilization

    a = report.analysis
    u = a.utilization
    return _render(
        "resources.html",
        gpu=a.gpu,
        u=u,
        env=report.run.env,
        cpu_scope=cpu_scope(u),
        nvml_scope=nvml_utilization(u),
    )


def ops_section(ops: Sequence[OpStat], limit: int = 10) -> str:
    """Top operators by self time in the profiled window (names from the trace: escaped)."""
    return _render("ops.html", ops=ops[:limit]) if ops else ""


def lines_section(report: Report) -> str:
    """Where the host time goes, line by line (bars beside the cell) and as a flame graph."""
    stacks = report.analysis.stacks
    if stacks is None or stacks.samples == 0:
        return ""
    from gpu_notebook.views.flame import flame_svg, line_bars_html

    run = report.run
    return _render(
        "lines.html",
        stacks=stacks,
        # flame.py escapes every name and line it writes
        line_bars=Markup(line_bars_html(stacks, run.cell_source, first_line=run.first_line)),
        flame=Markup(flame_svg(stacks, own_file=run.program)),
    )


def notes_section(run: Run) -> str:
    return _render("notes.html", notes=run.notes) if run.notes else ""


def source_section(run: Run) -> str:
    return _render("source.html", run=run)


def footer(report: Report) -> str:
    return _render("footer.html", report=report, env=report.run.env)


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


def _chart_parts(report: Report) -> tuple[list[str], list[str], str | None]:
    """(script bodies, css bodies, div) of the charts; no div when there is nothing to chart."""
    from gpu_notebook.views.charts import chart_document

    doc = chart_document(report)
    if doc is None:
        return [], [], None
    from bokeh.embed import components
    from bokeh.embed.bundle import bundle_for_objs_and_resources
    from bokeh.resources import INLINE

    bundle = bundle_for_objs_and_resources([doc.layout], INLINE)
    if bundle.js_files or bundle.css_files:  # INLINE never links; guard the offline promise
        raise RuntimeError("bokeh INLINE bundle unexpectedly references files")
    script, div = components(doc.layout, wrap_script=False)
    return [*bundle.js_raw, script], list(bundle.css_raw), div


def render_html(report: Report) -> str:
    """One self-contained HTML page for ``report`` (opens offline, runs only our scripts)."""
    token = _PROGRAM.set(report.run.program)
    try:
        return _page(report)
    finally:
        _PROGRAM.reset(token)


def _page(report: Report) -> str:
    scripts, css, chart_div = _chart_parts(report)
    for body in scripts:
        if "</script" in body.lower():  # would end the element early; bokeh never emits it
            raise RuntimeError("a chart script contains '</script'")
    findings = report.findings  # ranked once, by the rules (rules.rank_key)
    # Bokeh's bundle and embed call, and our stylesheet, go in as they are (Markup): they are
    # ours, checked above, and admitted by hash in the CSP; everything else the page prints is
    # escaped by the template.
    trusted = [Markup(body) for body in scripts]
    return _render(
        "page.html",
        csp=_csp(scripts),
        title=f"gpucheck: {report.verdict.category}{_rank_of(report)} ({report.run.started_at})",
        css=Markup(report_css()),
        chart_css=[Markup(body) for body in css],
        head_scripts=trusted[:-1],
        tail_script=trusted[-1] if trusted else None,
        chart_div=None if chart_div is None else Markup(chart_div),
        before_charts=[
            verdict_section(report),
            comparison_section(report.comparison),
            whatif_section(report.whatif),
            gpu_estimate_section(report),
            findings_header(findings),
            *(finding_card(f, i, with_code=True) for i, f in enumerate(findings, 1)),
            phases_section(report),
            run_shape_section(report),
        ],
        after_charts=[
            resources_section(report),
            ops_section(report.analysis.top_ops),
            lines_section(report),
            notes_section(report.run),
        ],
        source=source_section(report.run),
        footer=footer(report),
    )


def _rank_of(report: Report) -> str:
    """The ", rank 1/2" of a multi-rank job's page title (each rank writes its own page)."""
    info = report.run.rank
    return "" if info is None or info.world_size <= 1 else f", rank {info.rank}/{info.world_size}"


def write_html(report: Report, path: str | Path) -> Path:
    """Write :func:`render_html` to ``path`` (UTF-8; folders created) and return the path."""
    target = Path(path).expanduser()
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(render_html(report), encoding="utf-8")
    return target
