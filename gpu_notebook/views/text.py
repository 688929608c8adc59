"""Plain-text rendering of a Report (terminal IPython, the CLI, and the ``-o`` object's repr)."""

from __future__ import annotations

from gpu_notebook.escapes import printable_record
from gpu_notebook.formatting import fmt_bytes, fmt_pct, fmt_rate, fmt_seconds, fmt_share
from gpu_notebook.records import (
    OPTIONAL_PHASES,
    PHASES,
    CellTime,
    Comparison,
    GpuTimeline,
    PhaseBreakdown,
    Report,
    RunShape,
)
from gpu_notebook.words.program import said_of_lines
from gpu_notebook.words.run_shape import window_cut_short
from gpu_notebook.words.verdict_lines import PARTIAL_COMM

BAR_WIDTH = 24


def phase_rows(phases: PhaseBreakdown) -> list[str]:
    n = max(1, len(phases.steps))
    rows = []
    for phase in PHASES:
        share = phases.share(phase)
        if share is None and phase in OPTIONAL_PHASES:
            continue
        if share is None:
            rows.append(f"  {phase:<13} {'not measured':>7}")
            continue
        per_step_s = phases.phase_total_us.get(phase, 0.0) / n / 1e6
        bar = "#" * round(share * BAR_WIDTH)
        rows.append(
            f"  {phase:<13} {100 * share:5.1f}%  {bar:<{BAR_WIDTH}}  {fmt_seconds(per_step_s)}/step"
        )
    return rows


_WINDOW_NAMES = {
    "steps": "the profiled steps",
    "gpu_span": "first to last kernel",
    "caller": "the given window",
}


def gpu_rows(g: GpuTimeline, n_steps: int) -> list[str]:
    """The GPU side of a trace: its window, busy and idle by cause, communication, graphs,
    and GPU time by the phase of the op that launched it."""

    def s(us: float) -> str:
        return fmt_seconds(us / 1e6)

    unclocked = (
        f"  {g.unclocked_events} GPU event(s) of the trace carry no timestamps (CUPTI wrote 0): "
        "left out"
    )
    if g.window_us <= 0:
        return [f"GPU timeline: none{' (' + unclocked.strip() + ')' if g.unclocked_events else ''}"]
    causes = [
        ("host wait", g.idle_host_wait_us),
        ("data/copy", g.idle_data_wait_us),
        ("sync", g.idle_sync_wait_us),
        ("kernel wait", g.idle_kernel_wait_us),
        ("queued behind another stream", g.idle_other_us),
    ]
    rows = [
        f"GPU timeline (window: {_WINDOW_NAMES.get(g.window_source, g.window_source)}, {s(g.window_us)}): "
        f"busy {'at least ' if g.partial else ''}{100 * g.busy_share:.0f}%; "
        f"idle {'at most ' if g.partial else ''}{s(g.idle_us)} ("
        + ", ".join(f"{name} {s(us)}" for name, us in causes if us > 0 or name == "host wait")
        + ")"
    ]
    if g.window_source != "gpu_span" and g.span_us and g.span_busy_us is not None:
        rows.append(
            f"  first to last kernel launched in the trace (HTA's and TraceLens's window): "
            f"{s(g.span_us)}, busy {100 * g.span_busy_us / g.span_us:.0f}%"
        )
    if g.before_trace_us > 0:
        rows.append(f"  launched before the trace began: {s(g.before_trace_us)} of GPU work")
    if g.unclocked_events:
        rows.append(unclocked)
    if g.host_ahead_us > 0:
        rows.append(
            f"  the host ran ahead: the GPU finished the steps' work "
            f"{'at least ' if g.unclocked_tail else ''}{s(g.host_ahead_us)} after "
            "the host had issued it (the window runs on to there)"
            + (
                f"; it opens after {s(g.queued_before_trace_us)} the GPU spent on work launched "
                "before the trace"
                if g.queued_before_trace_us > 0
                else ""
            )
        )
    if g.comm_busy_us > 0:
        rows.append(
            f"  collectives: {g.collectives}x, {s(g.comm_busy_us)}, "
            f"{fmt_share(g.comm_overlap_share)} overlapped by computation; exposed "
            f"{s(g.comm_exposed_us)} ({fmt_share(g.comm_exposed_us / g.window_us if g.window_us else None)} of the window)"
            + (PARTIAL_COMM if g.partial else "")
        )
    if g.graph_launches:
        rows.append(
            f"  CUDA graphs: {g.graph_launches} replay launch(es), {s(g.graph_us)} of GPU work"
        )
    if g.capture:
        rows.append(
            f"  graph capture: {g.launches_without_work} of {g.kernel_launches} launches recorded, not run"
        )
    for c in g.copies:
        rows.append(f"  copy {c.kind}: {c.count}x, {s(c.duration_us)}, {fmt_bytes(c.bytes)}")
    total = sum(g.gpu_phase_us.values())
    if total > 0:
        rows.append(
            "GPU time by phase (kernels, copies, memsets; the phase of the op that launched them"
            + (
                "; the clocked events only, the timeline is partial: each phase's time at least"
                if g.partial
                else ""
            )
            + "):"
        )
        for phase in PHASES:
            us = g.gpu_phase_us.get(phase, 0.0)
            if us <= 0:
                continue
            share = us / total
            bar = "#" * round(share * BAR_WIDTH)
            rows.append(
                f"  {phase:<13} {100 * share:5.1f}%  {bar:<{BAR_WIDTH}}  "
                f"{'>=' if g.partial else ''}{s(us / n_steps)}/step"
            )
    return rows


def render_text(report: Report) -> str:
    report = printable_record(report)  # a trace's names and the user's strings: one safe line each
    run, a, v = report.run, report.analysis, report.verdict
    lines = [f"gpucheck: {v.category.upper()}  (confidence: {v.confidence})", f"  {v.headline}"]
    lines.append(f"  Will more GPUs help? {v.more_gpus}")
    if v.data_as_host is not None:
        lines.append(
            f"  Data wait {fmt_share(v.data_as_host)} of the step is counted as host work: the "
            "batches are built from memory, not waited for."
        )
    if run.status != "ok":
        lines.append(
            f"  The cell {'was interrupted' if run.status == 'interrupted' else 'failed'}"
            f" ({run.error}); this report covers the steps that ran."
        )
    for item in v.evidence:
        lines.append(f"  - {item}")

    st = a.step_stats
    step_line = (
        f"Steps: {st.count} (step ends at: {run.steps.anchor}), median {fmt_seconds(st.median_s)}, "
        f"p90 {fmt_seconds(st.p90_s)}"
    )
    if st.samples_per_s is not None:
        step_line += f", {st.samples_per_s:,.0f} samples/s (batch {st.batch_size})"
    lines += ["", step_line]
    lines += (
        cell_time_rows(a.cell_time)
        if a.cell_time is not None
        else [f"Wall time: {fmt_seconds(run.wall_s)}"]
    )
    if a.shape is not None:
        lines += run_shape_rows(a.shape)

    if a.phases is not None:
        src = (
            f"{len(a.phases.steps)} profiled step(s), torch.profiler trace"
            if a.phases.source == "trace"
            else f"{len(a.phases.steps)} step(s), hook timings"
        )
        if a.window_phases is not None:
            src = "whole run, weighted by the time each part stands for; " + src
        host = "Host time by phase" if a.gpu is not None else "Phases"
        lines += ["", f"{host} ({src}):", *phase_rows(a.phases)]
        if a.window_phases is not None:
            lines += [
                "",
                f"Phases of the first profiled window ({len(a.window_phases.steps)} step(s)):",
                *phase_rows(a.window_phases),
            ]
    if a.stacks is not None and a.stacks.samples:
        from gpu_notebook.analysis.lines import hot_lines
        from gpu_notebook.views.wording import describe_line

        hot = hot_lines(a.stacks, 3, min_share=0.05)
        if hot:
            few = " (few: `--lines all` samples the whole cell)" if a.stacks.samples < 50 else ""
            lines += [
                "",
                f"Hot lines: {a.stacks.samples} stack samples over "
                f"{fmt_seconds(a.stacks.duration_s)} of the thread that ran the cell{few}",
            ]
            lines += [f"  {describe_line(s, of='sampled time')}" for s in hot]
    if run.window.message and run.window.status not in ("recorded",):
        lines.append(f"Profiler window: {run.window.status}: {run.window.message}")
    cut = window_cut_short(run.window)
    if cut is not None:
        lines.append(cut)

    lines.append("")
    if a.gpu is not None:
        g = a.gpu
        lines += gpu_rows(g, max(1, len(a.phases.steps)) if a.phases is not None else 1)
    u = a.utilization
    if u.gpu_util_mean_pct is not None or u.gpu_memory_peak_bytes is not None:
        from gpu_notebook.views.wording import nvml_utilization

        util = nvml_utilization(u)
        util = f"{util}, " if util is not None else ""
        lines.append(
            f"GPU (NVML): {util}memory peak {fmt_bytes(u.gpu_memory_peak_bytes)} "
            f"of {fmt_bytes(u.gpu_memory_total_bytes)}"
        )
    elif a.gpu is None:
        lines.append("GPU: not measured (no GPU visible)")
    if run.samples.samples:
        workers = fmt_pct(u.children_cpu_mean_pct)
        if u.children_cpu_mean_pct is None:  # never a 0%: none there, or none read
            listed = any(s.children for s in run.samples.samples)
            workers = "not read" if listed else "none"
        from gpu_notebook.views.wording import cpu_scope

        lines.append(
            f"{cpu_scope(u)} this process {fmt_pct(u.process_cpu_mean_pct)}, its children (workers) "
            f"{workers}, machine {fmt_pct(u.system_cpu_mean_pct)} "
            f"of {run.env.cpu_count} cores; peak RSS {fmt_bytes(u.rss_peak_bytes)}"
        )
    elif run.env.cpu_count:
        lines.append("CPU: not sampled (the cell was shorter than one sampling interval)")
    if a.top_ops:
        lines += ["", "Top operators (self time in the window):"]
        for op in a.top_ops[:8]:
            lines.append(
                f"  {op.device:<3} {fmt_seconds(op.self_us / 1e6):>9}  {op.calls:>6}x  {op.name[:70]}"
            )
    if report.findings:
        from gpu_notebook.views.wording import headline_gain, level_label

        lines += ["", "Findings:"]
        for f in report.findings:
            gain = headline_gain(f)
            bound = f" ({gain})" if gain is not None else ""
            lines.append(f"  [{level_label(f)}] {f.title}{bound}: {f.fix}")
    if report.try_fixes is not None:
        from gpu_notebook.views.tryfix_text import render_try_fixes

        lines += ["", render_try_fixes(report.try_fixes)]
    if report.comparison is not None:
        lines += ["", render_comparison(report.comparison)]
    if report.whatif is not None:
        from gpu_notebook.views.wording import render_whatif

        lines += ["", render_whatif(report.whatif)]
    if report.gpu_estimate is not None:
        from gpu_notebook.views.wording import describe_estimate

        lines += [
            "",
            "Would a GPU help?",
            *(f"  {line}" for line in describe_estimate(report.gpu_estimate)),
        ]
    if run.notes:
        lines += ["", "Notes:", *(f"  - {n}" for n in run.notes)]
    # This view's own sentences, worded for a cell, said of the program (a script's "line 7").
    return said_of_lines(run.program, "\n".join(lines))


# A span outside the steps this share of the cell's wall time gets its lines named.
SPAN_LINES_SHARE = 0.10


def cell_time_rows(ct: CellTime) -> list[str]:
    """The cell's wall time split at its first step and its last, with the lines of each span
    outside them that holds a notable share (the edge sampler's)."""
    rows = [
        f"Wall time: {fmt_seconds(ct.wall_s)}: before the first step {fmt_seconds(ct.before_s)} "
        f"({fmt_share(ct.share(ct.before_s))}), the {ct.steps} step(s) "
        f"{fmt_seconds(ct.steps_s)} ({fmt_share(ct.share(ct.steps_s))}), after the last "
        f"{fmt_seconds(ct.after_s)} ({fmt_share(ct.share(ct.after_s))})"
        + (
            f"; of it about {fmt_seconds(ct.after_error_s)} IPython showing the exception"
            if ct.share(ct.after_error_s) >= SPAN_LINES_SHARE
            else ""
        )
    ]
    for where, span_s, spans in (
        ("before the first step", ct.before_s, ct.before_lines),
        ("after the last step", ct.after_s, ct.after_lines),
    ):
        if ct.share(span_s) < SPAN_LINES_SHARE or not spans:
            continue
        named = "; ".join(f"line {s.line} `{_short(s.text)}` {fmt_share(s.share)}" for s in spans)
        rows.append(f"  {where} (its samples): {named}")
    return rows


def _short(text: str, width: int = 60) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def run_shape_rows(shape: RunShape) -> list[str]:
    """The run over time: its tenths' median steps, the windows and the stalls on one line each."""
    tenths = " ".join(fmt_seconds(seg.median_s) for seg in shape.segments)
    rows = [
        f"Over the run: first fifth {fmt_seconds(shape.first_median_s)}, last fifth "
        f"{fmt_seconds(shape.last_median_s)} a step; p90/median {shape.jitter:.1f}"
        + (" within like work" if shape.work_kinds > 1 else ""),
        f"  step time by tenth of the run: {tenths}",
    ]
    if shape.windows:
        where = ", ".join(f"steps {w.first_step}-{w.last_step}" for w in shape.windows)
        cover = f"; steps like theirs hold {fmt_share(shape.window_covers)} of the run's time" if (
            shape.window_covers is not None) else ""  # fmt: skip
        rows.append(f"  profiled windows: {where}{cover}")
    if shape.stalls is not None:
        st = shape.stalls
        every = f" every {st.period_steps} steps" if st.period_steps else ""
        rows.append(
            f"  stalls{every}: {st.count} step(s), e.g. {', '.join(map(str, st.steps[:6]))}; "
            f"{fmt_share(st.share)} of the run's time"
        )
    for m in shape.memory:
        rows.append(
            f"  {'GPU memory' if m.kind == 'gpu' else 'RSS'}: {fmt_bytes(m.start_bytes)} at step "
            f"{m.first_step} -> {fmt_bytes(m.end_bytes)} at step {m.last_step}"
        )
    return rows


def render_comparison(c: Comparison) -> str:
    """Before/after of two runs: measured speedup beside the predicted bound."""
    from gpu_notebook.views.wording import predicted_gain

    c = printable_record(c)
    from gpu_notebook.views.wording import partial_runs

    lines = ["Before / after:", *(f"  ({note})" for note in partial_runs(c))]
    # A factor of steps counted without their wait for a core is no ratio of these wall medians:
    # said once, on the outcome line with its counting note.
    on_core = c.samples is not None and c.samples.own_time
    lines.append(
        f"  step time   {fmt_seconds(c.baseline_step_median_s):>9} -> {fmt_seconds(c.step_median_s):>9}"
        + (f"   measured {c.speedup:.2f}x" if c.speedup is not None and not on_core else "")
        + (f"   (predicted: {predicted_gain(c)})" if c.predicted_bound is not None else "")
    )
    if c.baseline_samples_per_s is not None and c.samples_per_s is not None:
        lines.append(
            f"  throughput  {fmt_rate(c.baseline_samples_per_s):>9} -> {fmt_rate(c.samples_per_s):>9} samples/s"
        )
    if c.baseline_gpu_util_pct is not None or c.gpu_util_pct is not None:
        lines.append(
            f"  GPU util    {fmt_pct(c.baseline_gpu_util_pct):>9} -> {fmt_pct(c.gpu_util_pct):>9}"
        )
    for phase in PHASES:
        before, after = c.baseline_phase_share.get(phase), c.phase_share.get(phase)
        if before is None and after is None:
            continue
        lines.append(f"  {phase:<11} {fmt_share(before):>9} -> {fmt_share(after):>9}")
    if c.samples is not None:
        from gpu_notebook.views.wording import outcome_line, sample_notes

        lines.append(f"  {outcome_line(c)}")
        lines.extend(f"  ({note})" for note in sample_notes(c.samples))
    if c.fix_id:
        lines.append(f"  fix: {c.fix_id}")
    if c.gpu_equivalent is not None and c.gpu_equivalent > 0:
        lines.append(
            f"  this gave the throughput of {c.gpu_equivalent:.1f} more GPU(s) of this kind (linear scaling assumed)"
        )
    if c.cost_saved_per_1000_steps is not None:
        lines.append(
            f"  saves {c.cost_saved_per_1000_steps:.2f} per 1,000 steps at the given GPU-hour price"
        )
    return "\n".join(lines)
