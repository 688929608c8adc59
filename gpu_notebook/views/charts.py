"""Bokeh figures of a report: utilization timeline with step boundaries, phase bars per step.

The figures hold numbers and our own labels only, never a string from the user's cell or the
trace, so their embedded JSON needs no escaping beyond bokeh's own. Resources are always
``bokeh.resources.INLINE``: a report must open offline (the CDN default fails without network:
seen in JupyterLab 4.6). bokeh is imported lazily by the callers (``html.py``, ``report_widget.py``), so
``import gpu_notebook`` stays cheap; bokeh is a required dependency.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpu_notebook.formatting import fmt_pct
from gpu_notebook.records import (
    OPTIONAL_PHASES,
    PHASES,
    PhaseBreakdown,
    Report,
    RunShape,
    StepTiming,
)
from gpu_notebook.words.program import said_of

if TYPE_CHECKING:
    from bokeh.models import ColumnDataSource, LayoutDOM, Plot
    from bokeh.models.annotations import LegendItem
    from bokeh.models.glyph import Glyph
    from bokeh.models.renderers import GlyphRenderer
    from numpy import float64
    from numpy.typing import NDArray

__all__ = [
    "PHASE_COLORS",
    "ChartDocument",
    "chart_document",
    "charts_file_html",
    "cpu_axis_max",
    "phase_figure",
    "step_time_figure",
    "utilization_figure",
]

# One colour per phase, shared with the HTML phase table (html.py) so bars and rows match.
PHASE_COLORS: dict[str, str] = {
    "data": "#e4572e",
    "copy": "#f3a712",
    "forward": "#4c78a8",
    "backward": "#72b7b2",
    "optimizer": "#54a24b",
    "comm": "#ff9da6",
    "sync": "#b279a2",
    "other": "#9d755d",
    "unattributed": "#bab0ac",
}
GPU_COLORS = (
    "#1f77b4",
    "#d62728",
    "#2ca02c",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#17becf",
    "#bcbd22",
)
CPU_COLOR = "#555555"

CHART_WIDTH_PX = 900
UTIL_HEIGHT_PX = 260
PHASE_HEIGHT_PX = 280
STEP_HEIGHT_PX = 240
WINDOW_COLOR = "#f3a712"
STALL_COLOR = "#e03131"
MEMORY_COLOR = "#7048e8"
# Beyond this many steps the phase chart shows an even selection (a bar under ~4 px is noise).
MAX_PHASE_BARS = 120
# Below this many samples the timeline marks each one (a line of one point is invisible).
FEW_SAMPLES = 30
# Beyond this many step boundaries the timeline draws every k-th one.
MAX_BOUNDARIES = 400


@dataclass(frozen=True)
class ChartDocument:
    """The charts of one report, ready to embed: a bokeh layout and the pixel height it needs."""

    layout: LayoutDOM
    height_px: int


def utilization_figure(report: Report) -> LayoutDOM | None:
    """GPU utilization and memory per GPU, the process CPU, step boundaries, profiled window.

    x: seconds since the capture started (the sampler's and the step clock's shared origin).
    CPU is this process plus its workers with 100% = one core (a Python loop that pegs one core
    reads 100% on any machine); with GPUs it has its own axis on the right. None when there are
    no samples.
    """
    from bokeh.models import ColumnDataSource, LinearAxis, Range1d
    from bokeh.models.glyphs import Line, Scatter, Segment
    from bokeh.plotting import figure

    run = report.run
    samples = run.samples.samples
    if not samples:
        return None
    t = [s.t_s for s in samples]
    cpu = [s.ours_cpu_pct() for s in samples]  # a gap where a worker was listed, not read
    cpu_top = cpu_axis_max([v for v in cpu if v is not None])
    gpu_indices = sorted({g.index for s in samples for g in s.gpus})
    has_gpu = bool(gpu_indices)
    few = len(samples) < FEW_SAMPLES  # a short cell: a line of one or two points is invisible
    title = said_of(
        run.program,
        "GPU utilization over the cell (step boundaries in grey, stalls in red)"
        if has_gpu
        else "CPU use over the cell (no GPU visible; step boundaries in grey, stalls in red)",
    )
    fig = figure(
        width=CHART_WIDTH_PX,
        height=UTIL_HEIGHT_PX,
        title=title,
        x_axis_label=said_of(run.program, "seconds since the cell started"),
        y_axis_label="GPU %" if has_gpu else "CPU % (100 = one core)",
        toolbar_location="right",
        tools="xpan,xwheel_zoom,box_zoom,reset,save",
        sizing_mode="stretch_width",
        y_range=Range1d(start=0.0, end=100.0 if has_gpu else cpu_top),
    )
    fig.toolbar.logo = None
    # One source for every series of the timeline: they share the sample clock.
    data: dict[str, Any] = {"t": _floats(t), "cpu": _floats(cpu)}
    for index in gpu_indices:
        util: list[float | None] = []
        mem: list[float | None] = []
        for s in samples:
            g = next((g for g in s.gpus if g.index == index), None)
            util.append(None if g is None else g.utilization_pct)
            if g is None or g.memory_used_bytes is None or not g.memory_total_bytes:
                mem.append(None)
            else:
                mem.append(100.0 * g.memory_used_bytes / g.memory_total_bytes)
        data[f"util{index}"] = _floats(util)
        data[f"mem{index}"] = _floats(mem)
    src = ColumnDataSource(data)
    items: list[LegendItem] = []
    for pos, index in enumerate(gpu_indices):
        color = GPU_COLORS[pos % len(GPU_COLORS)]
        r_util = _add(fig, src, Line(x="t", y=f"util{index}", line_width=2, line_color=color))
        if few:
            _add(
                fig,
                src,
                Scatter(x="t", y=f"util{index}", size=5, line_color=color, fill_color=color),
            )
        r_mem = _add(
            fig,
            src,
            Line(x="t", y=f"mem{index}", line_width=1.5, line_color=color, line_dash="dashed"),
        )
        items.append(_legend_item(f"GPU {index} utilization", r_util))
        items.append(_legend_item(f"GPU {index} memory used", r_mem))
    if has_gpu:
        fig.extra_y_ranges = {"cpu": Range1d(start=0.0, end=cpu_top)}
        fig.add_layout(LinearAxis(y_range_name="cpu", axis_label="CPU % (100 = one core)"), "right")
        r_cpu = _add(
            fig,
            src,
            Line(x="t", y="cpu", line_width=1.5, line_color=CPU_COLOR, line_dash="dotted"),
            y_range_name="cpu",
        )
    else:
        r_cpu = _add(fig, src, Line(x="t", y="cpu", line_width=2, line_color=CPU_COLOR))
        if few:
            _add(
                fig,
                src,
                Scatter(x="t", y="cpu", size=5, line_color=CPU_COLOR, fill_color=CPU_COLOR),
            )
    items.append(
        _legend_item(
            f"CPU: this process + workers (100% = one core, {run.env.cpu_count} cores)", r_cpu
        )
    )
    top = 100.0 if has_gpu else cpu_top

    steps = run.steps.steps
    if steps:
        stride = max(1, -(-len(steps) // MAX_BOUNDARIES))
        bounds = ColumnDataSource({"x": _floats([s.start_s for s in steps[::stride]])})
        _add(
            fig,
            bounds,
            Segment(
                x0="x", x1="x", y0=0.0, y1=top, line_color="#999999", line_alpha=0.45, line_width=1
            ),
        )
        spans = [
            span
            for first, last in _window_steps(report)
            if (span := _profiled_span(steps, first, last - first + 1)) is not None
        ]
        if spans:
            items.append(_shade(fig, bounds, spans, "profiled steps", alpha=0.12))
        items.extend(_in_steps_levels(fig, report, has_gpu))
        starts = {s.index: s.start_s for s in steps}
        stalled = [starts[i] for i in _stall_steps(report.analysis.shape) if i in starts]
        if stalled:
            r_stall = _add(
                fig,
                ColumnDataSource({"x": _floats(stalled)}),
                Segment(x0="x", x1="x", y0=0.0, y1=top, line_color=STALL_COLOR, line_width=1.5),
            )
            items.append(_legend_item("stalled steps", r_stall))
    return _with_hover_and_legend(fig, r_cpu, [("t", "@t{0.00} s"), ("CPU", "@cpu{0} %")], items)


def _in_steps_levels(fig: Any, report: Report, has_gpu: bool) -> list[LegendItem]:
    """The figures the report reads off the samples inside the steps (``InSteps``: its NVML
    mean, its CPU median), drawn across the steps at their level, labelled as the report's:
    the lines over the whole cell hold the start-up too, which the report's figures leave out.
    Nothing where too few samples fell inside the steps (the report says the whole run's)."""
    from bokeh.models import ColumnDataSource
    from bokeh.models.glyphs import Segment

    steps = report.run.steps.steps
    read = report.analysis.utilization.in_steps
    if not steps or read is None or not read.read:
        return []
    x0, x1 = steps[0].start_s, steps[-1].start_s + steps[-1].duration_s
    items: list[LegendItem] = []
    levels: list[tuple[float | None, str, str, str | None]] = [
        (
            read.gpu_util_mean_pct if has_gpu else None,
            f"GPU utilization inside the steps: mean {fmt_pct(read.gpu_util_mean_pct)} "
            "(the report's figure)",
            GPU_COLORS[0],
            None,
        ),
        (
            None if read.ours_cores is None else 100.0 * read.ours_cores,
            "CPU inside the steps: median "
            f"{fmt_pct(None if read.ours_cores is None else 100.0 * read.ours_cores)} "
            "(the report's figure)",
            CPU_COLOR,
            "cpu" if has_gpu else None,
        ),
    ]
    for level, label, color, axis in levels:
        if level is None:
            continue
        src = ColumnDataSource({"x0": [x0], "x1": [x1], "y": [level]})
        glyph = Segment(x0="x0", y0="y", x1="x1", y1="y", line_color=color, line_width=3,
                        line_alpha=0.55)  # fmt: skip
        renderer = _add(fig, src, glyph, **({"y_range_name": axis} if axis else {}))
        items.append(_legend_item(label, renderer))
    return items


def _shade(
    fig: Any,
    source: ColumnDataSource,
    spans: Sequence[tuple[float, float]],
    label: str,
    *,
    alpha: float,
) -> LegendItem:
    """Shade each (left, right) span of the x axis (the profiled windows); its legend entry."""
    from bokeh.models.annotations import BoxAnnotation
    from bokeh.models.glyphs import Quad

    for left, right in spans:
        fig.add_layout(
            BoxAnnotation(
                left=left, right=right, fill_color=WINDOW_COLOR, fill_alpha=alpha, line_alpha=0
            )
        )
    # A quad of no area, only there to give the shaded spans their legend entry.
    x = spans[0][0]
    marker = _add(
        fig,
        source,
        Quad(
            left=x,
            right=x,
            bottom=0.0,
            top=0.0,
            fill_color=WINDOW_COLOR,
            fill_alpha=min(1.0, 2 * alpha),
            line_alpha=0,
        ),
    )
    return _legend_item(label, marker)


def _with_hover_and_legend(
    fig: Plot, hovered: GlyphRenderer[Any], tooltips: list[tuple[str, str]], items: list[LegendItem]
) -> Plot:
    """A timeline's hover (on one line, by x) and its legend below, three entries a row (one
    long row overflows a narrow notebook column)."""
    from bokeh.models import HoverTool
    from bokeh.models.annotations import Legend

    fig.add_tools(HoverTool(renderers=[hovered], tooltips=tooltips, mode="vline"))
    legend = Legend(
        items=items,
        location="top_left",
        orientation="horizontal",
        ncols=3,
        click_policy="hide",
        label_text_font_size="9pt",
    )
    fig.add_layout(legend, "below")
    return fig


def cpu_axis_max(values: Sequence[float]) -> float:
    """Top of a CPU axis where 100 = one core: 100, or the peak rounded up to whole cores."""
    peak = max(values, default=0.0)
    return 100.0 if peak <= 100.0 else 100.0 * math.ceil(peak / 100.0)


def _add(fig: Any, source: ColumnDataSource, glyph: Glyph, **renderer: Any) -> GlyphRenderer[Any]:
    """``glyph`` drawn from ``source`` on ``fig``; its selected and muted looks left to BokehJS.

    ``figure.line()`` and friends also build a nonselection and a muted copy of every glyph:
    two more models each to build, serialise and validate, never seen here (no selection tool;
    legends hide, they do not mute).
    """
    return fig.add_glyph(source, glyph, **renderer)  # type: ignore[no-any-return]


def _legend_item(label: str, renderer: GlyphRenderer[Any], index: int | None = None) -> LegendItem:
    from bokeh.models.annotations import LegendItem

    return LegendItem(label=label, renderers=[renderer], index=index)


def _floats(values: Sequence[float | None]) -> NDArray[float64]:
    # A NaN is a gap in a line. An array is serialised as one base64 buffer; a list of floats
    # would be encoded number by number.
    import numpy as np

    return np.array([math.nan if v is None else v for v in values], dtype=np.float64)


def _profiled_span(
    steps: Sequence[StepTiming], first: int | None, count: int
) -> tuple[float, float] | None:
    """Start and end (capture seconds) of the steps the profiler recorded, when known."""
    if first is None or count <= 0:
        return None
    inside = [s for s in steps if first <= s.index < first + count]
    if not inside:
        return None
    return min(s.start_s for s in inside), max(s.start_s + s.duration_s for s in inside)


def _window_steps(report: Report) -> list[tuple[int, int]]:
    """(first, last) step of every profiled window: the run's shape has them all; a run too short
    for a shape has at most the first."""
    shape = report.analysis.shape
    if shape is not None and shape.windows:
        return [(w.first_step, w.last_step) for w in shape.windows]
    return [(first, first + n - 1) for first, n in report.run.window_ranges[:1]]


def _stall_steps(shape: RunShape | None) -> tuple[int, ...]:
    return () if shape is None or shape.stalls is None else shape.stalls.steps


def step_time_figure(report: Report) -> LayoutDOM | None:
    """Every step's time over the run (ms) against its index: the profiled windows shaded, the
    stalls in red, the tenths' medians as a step line, and memory per step on a right axis.

    This is the run the step clock saw (decimated in long cells: every kept step is drawn), so
    a drift, a periodic stall or a window that saw only the fast start shows at a glance. None
    when fewer than two steps were timed.
    """
    from bokeh.models import ColumnDataSource, LinearAxis, Range1d
    from bokeh.models.glyphs import Line, Scatter, Step
    from bokeh.plotting import figure

    run, shape = report.run, report.analysis.shape
    steps = run.steps.steps
    if len(steps) < 2:
        return None
    ms = [s.duration_s * 1e3 for s in steps]
    top = max(ms) * 1.08 or 1.0
    every = f", every {run.steps.decimation}th step drawn" if run.steps.decimation > 1 else ""
    fig = figure(
        width=CHART_WIDTH_PX,
        height=STEP_HEIGHT_PX,
        title=f"Step time over the run (ms), {run.steps.step_count} steps{every}",
        x_axis_label="step",
        y_axis_label="ms",
        toolbar_location="right",
        tools="xpan,xwheel_zoom,box_zoom,reset,save",
        sizing_mode="stretch_width",
        y_range=Range1d(start=0.0, end=top),
    )
    fig.toolbar.logo = None
    src = ColumnDataSource({"step": _floats([s.index for s in steps]), "ms": _floats(ms)})
    items: list[LegendItem] = []
    r_steps = _add(
        fig, src, Line(x="step", y="ms", line_width=1, line_color=PHASE_COLORS["forward"])
    )
    items.append(_legend_item("step time", r_steps))
    if shape is not None and shape.segments:
        edges = [seg.first_step for seg in shape.segments] + [shape.segments[-1].last_step]
        medians = [seg.median_s * 1e3 for seg in shape.segments]
        tenths = ColumnDataSource({"step": _floats(edges), "ms": _floats([*medians, medians[-1]])})
        r_tenths = _add(
            fig,
            tenths,
            Step(
                x="step",
                y="ms",
                mode="after",
                line_width=2,
                line_color="#1d1d1f",
                line_dash="dashed",
            ),
        )
        items.append(_legend_item("median of each tenth", r_tenths))
    windows = _window_steps(report)
    if windows:
        spans = [(first - 0.5, last + 0.5) for first, last in windows]
        items.append(_shade(fig, src, spans, f"profiled window(s): {len(windows)}", alpha=0.25))
    by_index = {s.index: s.duration_s * 1e3 for s in steps}
    stalled = [i for i in _stall_steps(shape) if i in by_index]
    if stalled:
        stall_src = ColumnDataSource(
            {"step": _floats(stalled), "ms": _floats([by_index[i] for i in stalled])}
        )
        r_stall = _add(
            fig,
            stall_src,
            Scatter(
                x="step",
                y="ms",
                size=7,
                marker="triangle",
                fill_color=STALL_COLOR,
                line_color=STALL_COLOR,
            ),
        )
        items.append(_legend_item("stalls", r_stall))
    memory = [
        m for m in run.steps.memory if m.rss_bytes is not None or m.gpu_memory_bytes is not None
    ]
    if len(memory) >= 2:
        gpu = any(m.gpu_memory_bytes is not None for m in memory)
        mib = [(m.gpu_memory_bytes if gpu else m.rss_bytes) for m in memory]
        values = [None if v is None else v / 2**20 for v in mib]
        high = max(v for v in values if v is not None) * 1.08 or 1.0
        fig.extra_y_ranges = {"mem": Range1d(start=0.0, end=high)}
        label = "GPU memory in use (MiB)" if gpu else "process RSS (MiB)"
        fig.add_layout(LinearAxis(y_range_name="mem", axis_label=label), "right")
        mem_src = ColumnDataSource(
            {"step": _floats([m.index for m in memory]), "mib": _floats(values)}
        )
        r_mem = _add(
            fig,
            mem_src,
            Line(x="step", y="mib", line_width=1.5, line_color=MEMORY_COLOR, line_dash="dotted"),
            y_range_name="mem",
        )
        items.append(_legend_item(label, r_mem))
    return _with_hover_and_legend(fig, r_steps, [("step", "@step{0}"), ("ms", "@ms{0.000}")], items)


def phase_figure(phases: PhaseBreakdown) -> LayoutDOM | None:
    """Stacked bars of phase time (ms) per recorded step, and one bar of the totals (share %).

    Only measured phases are stacked; the others are named "not measured" in the title, never
    drawn as zero. None when no step was recorded. Each chart is one ``vbar`` over a long
    table (a row per step and phase, its bottom the sum of the phases below), not
    ``vbar_stack``'s renderer per phase: same bars, a fraction of the models to serialise.
    """
    from bokeh.layouts import row
    from bokeh.models import FactorRange, HoverTool
    from bokeh.models.annotations import Legend
    from bokeh.plotting import figure

    if not phases.steps or phases.total_us <= 0:
        return None
    measured = [p for p in PHASES if p in phases.measured]
    not_measured = [p for p in PHASES if p not in phases.measured and p not in OPTIONAL_PHASES]
    steps = list(phases.steps)
    if len(steps) > MAX_PHASE_BARS:
        stride = -(-len(steps) // MAX_PHASE_BARS)
        steps = steps[::stride]
    labels = [str(s.index) for s in steps]
    source = "torch.profiler trace" if phases.source == "trace" else "step-clock hooks (no trace)"
    title = f"Time per step by phase (ms), {len(phases.steps)} step(s) from the {source}"
    if not_measured:
        title += f"; not measured: {', '.join(not_measured)}"
    per_step = figure(
        x_range=FactorRange(factors=labels),
        width=CHART_WIDTH_PX - 260,
        height=PHASE_HEIGHT_PX,
        title=title,
        x_axis_label="step",
        y_axis_label="ms",
        toolbar_location=None,
        tools="",
        sizing_mode="stretch_width",
    )
    bars = _stacked_bars(
        per_step,
        labels,
        measured,
        [[s.phase_us.get(p, 0.0) / 1e3 for p in measured] for s in steps],
        width=0.8,
        value="ms",
    )
    per_step.y_range.start = 0  # type: ignore[attr-defined]
    per_step.xgrid.grid_line_color = None
    per_step.xaxis.major_label_orientation = 0.0 if len(labels) <= 30 else 1.2
    per_step.add_tools(
        HoverTool(tooltips=[("step", "@x"), ("phase", "@phase"), ("ms", "@ms{0.000}")])
    )
    # Rows of the first step are the phases in order: item i draws its swatch from row i.
    legend = Legend(
        items=[_legend_item(p, bars, index=i) for i, p in enumerate(measured)],
        orientation="horizontal",
        label_text_font_size="9pt",
    )
    per_step.add_layout(legend, "below")

    totals = figure(
        x_range=FactorRange(factors=["all steps"]),
        width=220,
        height=PHASE_HEIGHT_PX,
        title="Share of step time (%)",
        y_axis_label="%",
        toolbar_location=None,
        tools="",
    )
    shares = [100.0 * phases.phase_total_us.get(p, 0.0) / phases.total_us for p in measured]
    _stacked_bars(totals, ["all steps"], measured, [shares], width=0.6, value="share")
    totals.add_tools(HoverTool(tooltips=[("phase", "@phase"), ("share", "@share{0.0} %")]))
    totals.y_range.start = 0  # type: ignore[attr-defined]
    totals.y_range.end = 100  # type: ignore[attr-defined]
    totals.xgrid.grid_line_color = None
    return row(per_step, totals, sizing_mode="stretch_width")


def _stacked_bars(
    fig: Any,
    xs: Sequence[str],
    phases: Sequence[str],
    values: Sequence[Sequence[float]],
    *,
    width: float,
    value: str,
) -> GlyphRenderer[Any]:
    """One bar per x of ``phases`` stacked in order, ``values[i][j]`` the height of phase j at x i."""
    import numpy as np
    from bokeh.core.properties import field
    from bokeh.models import ColumnDataSource
    from bokeh.models.glyphs import VBar

    heights = np.asarray(values, dtype=np.float64).reshape(len(xs), len(phases))
    tops = np.cumsum(heights, axis=1)
    source = ColumnDataSource(
        {
            "x": [x for x in xs for _ in phases],
            "phase": list(phases) * len(xs),
            "color": [PHASE_COLORS[p] for p in phases] * len(xs),
            value: heights.ravel(),
            "bottom": (tops - heights).ravel(),
            "top": tops.ravel(),
        }
    )
    return _add(
        fig,
        source,
        VBar(
            x="x",
            width=width,
            bottom="bottom",
            top="top",
            fill_color=field("color"),
            line_color="white",
            line_width=0.5,
        ),
    )


def chart_document(report: Report) -> ChartDocument | None:
    """All charts of the report in one column, or None when there is nothing to draw."""
    from bokeh.layouts import column

    parts: list[LayoutDOM] = []
    height = 0
    util = utilization_figure(report)
    if util is not None:
        parts.append(util)
        height += UTIL_HEIGHT_PX  # legends are drawn inside a figure's height
    steps = step_time_figure(report)
    if steps is not None:
        parts.append(steps)
        height += STEP_HEIGHT_PX
    if report.analysis.phases is not None:
        ph = phase_figure(report.analysis.phases)
        if ph is not None:
            parts.append(ph)
            height += PHASE_HEIGHT_PX
    if not parts:
        return None
    # + 24 px: the margins of the iframe page's body.
    return ChartDocument(layout=column(*parts, sizing_mode="stretch_width"), height_px=height + 24)


def charts_file_html(doc: ChartDocument) -> str:
    """A whole HTML document with the charts and bokeh INLINE (for an iframe ``srcdoc``)."""
    from bokeh.embed import file_html
    from bokeh.resources import INLINE

    return file_html(doc.layout, INLINE, "gpucheck charts")
