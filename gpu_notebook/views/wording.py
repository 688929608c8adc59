"""The sentences of the views: what-if, the GPU estimate, hot lines, before/after.

Analysis and report hand figures up as typed records (``WhatIf``, ``GpuEstimate``, ``LineStat``,
``Comparison``); the text, HTML and widget views word them here, so each sentence is written
once, in one place, and no stage below the views builds one (pyproject's import-linter
contracts and tests/test_layers.py check it).
"""

from __future__ import annotations

from collections.abc import Mapping

from gpu_notebook.analysis import gpu_estimate as model
from gpu_notebook.analysis.compare_samples import RUN_TO_RUN, fix_outcome, measurable
from gpu_notebook.analysis.lines import file_label
from gpu_notebook.analysis.whatif import DDP_BUCKET_BYTES, NCCL_EFFICIENCY
from gpu_notebook.formatting import (
    fmt_cost,
    fmt_factor,
    fmt_gain,
    fmt_megabytes,
    fmt_pct,
    fmt_share,
)
from gpu_notebook.records import (
    Comparison,
    Finding,
    GpuEstimate,
    InSteps,
    Interconnect,
    LineStat,
    SampleComparison,
    UtilizationStats,
    WhatIf,
    WhatIfMissing,
)
from gpu_notebook.report.compare import SLOWER_THAN
from gpu_notebook.report.one_job import (
    Doubt,
    MoreTracesThanRanks,
    NoneDistributed,
    RankTwice,
    WorldSizesDiffer,
)

__all__ = [
    "baseline_sentence",
    "cpu_scope",
    "describe_comparison",
    "describe_estimate",
    "describe_line",
    "doubt_sentence",
    "estimate_assumptions",
    "headline_gain",
    "host_cpu_sentence",
    "level_label",
    "nvml_utilization",
    "outcome_line",
    "outcome_said",
    "predicted_gain",
    "render_whatif",
    "sample_notes",
    "speedup_label",
    "step_counting",
    "too_busy_note",
    "whatif_assumptions",
    "whatif_interconnect",
    "whatif_missing",
]

# A hot line's source is cut to this many characters.
_MAX_TEXT_CHARS = 60


# ------------------------------------------------------------------- the sampler's figures


def _outside_steps(steps: InSteps | None) -> str:
    """Why the whole run's figure stands: no step clocked, or too few ticks inside them."""
    if steps is None:
        return "no step was clocked"
    return (
        f"{steps.ticks} sample{'s' if steps.ticks != 1 else ''} fell inside the steps,"
        f" {steps.min_ticks} needed"
    )


def cpu_scope(u: UtilizationStats) -> str:
    """The CPU line's lead: the cores this process and its workers kept busy inside the steps
    (the figure the what-if's host column starts from), then the whole run's means follow;
    or why only the whole run's (start-up included) is shown."""
    steps = u.in_steps
    if steps is not None and steps.read and steps.ours_cores is not None:
        return (
            f"CPU inside the steps: this process and its workers {fmt_pct(100 * steps.ours_cores)}"
            f" (median of {steps.ticks} samples, 100% = one core); over the whole run, start-up"
            " included:"
        )
    return f"CPU over the whole run, start-up included ({_outside_steps(steps)}):"


def nvml_utilization(u: UtilizationStats) -> str | None:
    """NVML's utilization inside the steps, the whole run's mean beside it; or the whole run's
    and why only it (None: no NVML utilization read)."""
    if u.gpu_util_mean_pct is None:
        return None
    run = (
        f"mean {fmt_pct(u.gpu_util_mean_pct)}, p5 {fmt_pct(u.gpu_util_p5_pct)},"
        f" p95 {fmt_pct(u.gpu_util_p95_pct)}"
    )
    steps = u.in_steps
    if steps is not None and steps.read and steps.gpu_util_mean_pct is not None:
        return (
            f"utilization inside the steps {fmt_pct(steps.gpu_util_mean_pct)} (mean of"
            f" {steps.ticks} samples; over the whole run, start-up included: {run})"
        )
    return (
        f"utilization {run.replace(', p5', ' (p5', 1)}) over the whole run, start-up included"
        f" ({_outside_steps(steps)})"
    )


# ------------------------------------------------------------------------------ a finding


def level_label(f: Finding) -> str:
    """A finding's level as its headline says it: "medium", or "medium-high" where another run
    of this code may read it a level higher (``Finding.level_range``: its share's interval,
    widened by what two runs differ by here, crosses the line). Two runs whose shares differ
    within that margin say levels that overlap, never "low" in one and "medium" in the next."""
    least, most = f.level_range
    return least if most == least else f"{least}-{most}"


def headline_gain(f: Finding) -> str | None:
    """A finding's gain as its headline says it (None: nothing bounds it, no figure shown).

    Never above the model's bound (``gain_bound``): the stated high end (``stated_high``) is
    that bound widened by what two runs of this code differ by, what a measurement of the fix
    may read, not a gain the fix can give (issue 26: "up to 1.39x" on a read whose model bound
    was 1.00x, the 39% the run's margin). The low end is the stated one, widened: a caution
    (under 1x the step may get slower), not a promise. A bound within the margin (``measurable``:
    the 5% two runs differ by; or the run's own margin, wider) says first that no gain is
    expected, or that a run may show none."""
    if f.gain_bound is None:
        return None
    said = fmt_gain(f.gain_bound, f.stated_low)
    if not measurable(f):
        return f"no measurable gain expected: {said}"
    if f.gain_low is None and f.gain_bound <= 1.0 + max(RUN_TO_RUN, f.gain_margin):
        return f"may show no measurable gain: {said}"
    return said


def predicted_gain(c: Comparison) -> str:
    """What a before/after says its fix was predicted to gain: the model's bound (never the
    baseline run's margin widening it, ``headline_gain``) from the stated low end."""
    high = c.predicted_model_bound if c.predicted_model_bound is not None else c.predicted_bound
    return fmt_gain(high, c.predicted_low)


# ------------------------------------------------------------------------------ what-if


def baseline_sentence(w: WhatIf) -> str | None:
    """What the speedups are relative to, said plainly when it is not one GPU; None for one GPU."""
    if w.world_size is None:
        return (
            "this trace is one rank of a distributed job of unknown size: its step already includes"
            " the job's communication, so it is no one-GPU baseline"
        )
    if w.world_size <= 1:
        return None
    n = w.world_size
    if w.points:
        return (
            f"this trace is one rank of a data-parallel job on {n} GPUs: its step already includes the"
            f" all-reduce; predictions below are for scaling that job to N GPUs, relative to the job on {n}"
            " GPUs as it runs now (time per sample of the whole job)"
        )
    return (
        f"this trace is one of {n} ranks of a distributed job: its step already includes the job's"
        " communication, so it is no one-GPU baseline"
    )


def speedup_label(w: WhatIf) -> str:
    """Column heading of the speedups: against one GPU, or against today's job."""
    if w.world_size is not None and w.world_size > 1:
        return f"speedup vs {w.world_size} GPUs"
    return "speedup"


def host_cpu_sentence(w: WhatIf) -> str | None:
    """How much of this host one rank uses, and from how many GPUs the ranks would not fit."""
    if w.rank_cores is None or not w.host_cores:
        return None
    fits = int(w.host_cores // w.rank_cores) if w.rank_cores > 0 else None
    tail = (
        f"the host's CPUs hold {fits} such rank{'s' if fits != 1 else ''}"
        if fits is not None and fits < max((p.gpus for p in w.points), default=0)
        else "every count below fits in its CPUs"
    )
    busy = w.rank_busy_cores if w.rank_busy_cores is not None else w.rank_cores
    quiet = (
        f"; on a quiet host it would keep {w.rank_cores:.1f} busy (its loop thread waited"
        f" {fmt_share(w.rank_wait_share)} of the steps for a core: the same CPU work over steps"
        " that much shorter)"
        if w.rank_wait_share and f"{w.rank_cores:.1f}" != f"{busy:.1f}"
        else ""
    )
    return (
        f"host CPU: this run kept {busy:.1f} of this host's {w.host_cores} cores busy while its"
        f" steps ran (the process and its workers){quiet}; {tail}"
    )


def whatif_interconnect(link: Interconnect | None) -> str | None:
    """ "NVLink x12 (300 GB/s per direction)", "PCIe gen4 x16 (31.5 GB/s)", a measured bus."""
    if link is None:
        return None
    if link.kind == "measured":
        return f"measured all-reduce bus bandwidth {link.bytes_per_s / 1e9:.1f} GB/s"
    if link.kind == "nvlink":
        return f"NVLink x{link.nvlink_links} ({link.bytes_per_s / 1e9:.0f} GB/s per direction)"
    return f"PCIe gen{link.pcie_generation} x{link.pcie_width} ({link.bytes_per_s / 1e9:.1f} GB/s)"


def whatif_assumptions(w: WhatIf) -> tuple[str, ...]:
    """Every assumption of the model, written down (the facts they depend on are in ``w``)."""
    if w.replicas:
        return (
            *_host_assumption(w),
            "inference (no backward, no optimizer): each added GPU is a replica serving its own "
            "requests, with no gradients to exchange; throughput grows with the replicas, the "
            "latency of one request does not",
            "a ceiling: the load balancer, the host's CPUs and a shared input pipeline are not "
            "modelled",
            "tensor parallel (one request split over GPUs) would cut latency at the cost of "
            "collectives in every layer: not modelled",
            "the fixes remove their whole phase (an upper bound: Amdahl)",
        )
    measured = w.interconnect is not None and w.interconnect.kind == "measured"
    out = [
        "each GPU keeps today's per-GPU batch and pays its own data wait",
        (
            "ring all-reduce runs at the best bus bandwidth measured in the trace"
            + (
                " (at least: some all-reduce kernels have no clock reading, so each speedup "
                "ranges up to the link's ceiling)"
                if w.bus_low
                else ""
            )
        )
        if measured
        else f"ring all-reduce reaches {NCCL_EFFICIENCY:.0%} of the link's bandwidth",
        (
            f"DDP overlaps all-reduce with backward in {DDP_BUCKET_BYTES / 1e6:.1f} MB buckets"
            f" (bucket_cap_mb={DDP_BUCKET_BYTES // 2**20}, which PyTorch counts in MiB)"
        ),
        "the fixes remove their whole phase (an upper bound: Amdahl)",
    ]
    if w.world_size is None or w.world_size > 1:
        out += [
            (
                "the measured step already holds this job's exposed all-reduce and DDP's per-rank host work"
                " (buffer broadcast, gradient copies); N GPUs replace the model's exposed all-reduce at today's"
                " world size by the model's at N and keep the rest of the step"
            ),
            (
                "the GPU speedups are a ceiling: DDP's per-rank host work is assumed not to grow with N, and"
                " waiting for the slowest of more ranks or loaders sharing the host's CPUs are not modelled"
            ),
        ]
    else:
        shared = (
            "" if w.rank_cores is not None else " loaders sharing the host's CPUs,"
        )  # else the 'this host' column models them
        out.append(
            "the GPU speedups are a ceiling: host work DDP adds per rank (buffer broadcast, gradient copies),"
            f"{shared} waiting for the slowest rank are not modelled (NVIDIA's"
            " published ResNet-50 8-GPU scaling came 3-4% below this model in FP32/TF32, 15-19% in mixed precision)"
        )
    if w.grads_measured:
        out.append("gradient bytes: the all-reduce message sizes of one step in the trace")
    out += _host_assumption(w)
    return tuple(out)


def _host_assumption(w: WhatIf) -> list[str]:
    if w.rank_cores is None or not w.host_cores:
        return []
    need = (
        "would keep busy on a quiet host (the cores it kept busy over 1 - its steps' wait for"
        " a core, its loop thread's wait taken for every thread's)"
        if w.rank_wait_share
        else "kept busy"
    )
    return [
        f"'this host': the N ranks share this host's {w.host_cores} cores, each needing the"
        f" {w.rank_cores:.1f} this run {need}, so each runs at most {w.host_cores} / (N x"
        f" {w.rank_cores:.1f}) of its speed (CPU time counted as work, a thread pool's spinning"
        " too: an estimate); a host with more cores per GPU lifts it"
    ]


def whatif_missing(w: WhatIf) -> tuple[str, ...]:
    """What the model could not know, one sentence each (no guess is made for it)."""
    return tuple(
        _MISSING[m]
        if m != "step-shorter-than-allreduce"
        else (
            f"the measured step ({(w.step_s or 0.0) * 1e3:.1f} ms) is shorter than the all-reduce the model expects"
            f" to be exposed at {w.world_size} GPUs ({(w.exposed_now_s or 0.0) * 1e3:.1f} ms): the model does not fit this job"
        )
        for m in w.missing
    )


_MISSING: dict[WhatIfMissing, str] = {
    "no-step": "no step was measured",
    "world-size-unknown": (
        "the trace shows NCCL communication but records no world size (no distributedInfo, no group"
        " size on the kernels): the job already runs on several GPUs, how many is unknown"
    ),
    "link-not-recorded": (
        "this trace does not record how its GPUs are linked (NVLink or PCIe): no interconnect "
        "to model (run gpucheck on that machine)"
    ),
    "no-gpu": "no GPU visible: no interconnect to model (run on the GPU you would add more of)",
    "no-link-from-nvml": "NVML reports neither NVLink links nor the PCIe link of this GPU",
    "grad-size-unknown-trace": "gradient size unknown: this trace has no all-reduce to size it",
    "grad-size-unknown-run": "gradient size unknown: no optimizer or model parameters were seen",
}


def render_whatif(w: WhatIf) -> str:
    lines = ["What if: fix the code, or add GPUs?"]
    baseline = baseline_sentence(w)
    if baseline is not None:
        lines.append(f"  {baseline}")
    if w.fixes_speedup is not None:
        lines.append(
            f"  fixing {', '.join(w.fixed_phases)}: {fmt_gain(w.fixes_speedup)} on this machine, with no new hardware"
        )
    else:
        lines.append("  no waiting phase to fix was measured (data, sync and copy are under 1%)")
    if w.points:
        if w.grad_bytes is not None:
            lines.append(
                f"  interconnect: {whatif_interconnect(w.interconnect)}; gradients"
                f" {fmt_megabytes(w.grad_bytes)} a step"
            )
        else:
            lines.append("  as replicas (inference: nothing to exchange between GPUs)")
        host = host_cpu_sentence(w)
        if host is not None:
            lines.append(f"  {host}")
        label = speedup_label(w)
        width = max(8, len(label))
        on_host = any(p.speedup_this_host is not None for p in w.points)
        lines.append(
            f"  {'GPUs':>5} {label:>{width}} {'efficiency':>10} {'with fixes':>11} {'exposed comm':>13}"
            + (f" {'this host':>10}" if on_host else "")
        )
        for p in w.points:
            fx = fmt_factor(p.speedup_with_fixes) if p.speedup_with_fixes is not None else "-"
            lines.append(
                f"  {p.gpus:>5} {p.speedup:>{width - 1}.2f}x {p.efficiency:>9.0%} {fx:>11} {p.exposed_comm_s * 1e3:>10.2f} ms"
            )
            if p.speedup_high is not None:
                # A partial timeline: the speedup above is its low end.
                lines[-1] += f"  (up to {fmt_factor(p.speedup_high)}: partial GPU timeline)"
            if on_host:
                here = p.speedup_this_host
                lines[-1] += f" {(f'{here:.2f}x' if here is not None else '-'):>10}"
            if p.cost_per_1000_steps is not None:
                lines[-1] += f"  {p.cost_per_1000_steps:.2f} per 1,000 steps"
    for m in whatif_missing(w):
        lines.append(f"  cannot predict more GPUs: {m}")
    lines.append("  assumptions: " + "; ".join(whatif_assumptions(w)))
    return "\n".join(lines)


# ------------------------------------------------------------------------------ GPU estimate


def describe_estimate(estimate: GpuEstimate) -> tuple[str, ...]:
    """The estimate in a few lines: the answer, the parts of the step, the assumptions."""
    e = estimate
    if e.speedup >= 1.0:
        head = f"About {e.speedup:.1f}x faster on one {e.gpu}; then the step is limited by {e.limited_by}."
    else:
        head = f"Not faster on one {e.gpu} (about {e.speedup:.2f}x); the step is limited by {e.limited_by}."
    return (
        head,
        f"step {e.measured_step_s * 1e3:.2f} ms here -> about {e.step_s * 1e3:.2f} ms: data wait "
        f"{e.data_s * 1e3:.2f} ms, host {e.host_s * 1e3:.2f} ms ({e.kernels_per_step:.0f} kernels a step), "
        f"GPU compute {e.device_s * 1e3:.2f} ms"
        + (" (overlapping the host)" if e.overlapped else " (after the host: reads every step)"),
        *(f"assumes: {a}" for a in estimate_assumptions(e)),
    )


def _unseen_reads(e: GpuEstimate) -> str:
    """Which of the estimate's reads the CPU trace lacks, counted from the cell's source."""
    parts = []
    if e.skipped_reads_per_step:
        parts.append(
            f"{e.skipped_reads_per_step:.0f} of them under the cell's test for CUDA, "
            "which this CPU run skipped"
        )
    if e.untraced_reads_per_step:
        parts.append(
            f"{e.untraced_reads_per_step:.0f} by .cpu()/.numpy()/.tolist(), which copy nothing "
            "on the CPU: no operator records them"
        )
    return f" ({'; '.join(parts)})" if parts else ""


def estimate_assumptions(e: GpuEstimate) -> tuple[str, ...]:
    """What the estimate assumes, written out from its facts and the model's constants."""
    spec = model.GPUS[e.key]
    out = [
        f"{spec.name}: {e.peak_tflops:g} TFLOP/s {e.precision} peak, {spec.memory_gbps:g} GB/s ({spec.source}); "
        f"kernels reach {model.GEMM_EFFICIENCY:.0%} of the FLOP peak and {model.BANDWIDTH_EFFICIENCY:.0%} of the bandwidth",
        f"each kernel costs the host {model.HOST_PER_KERNEL_US:g} us (dispatch + launch) and runs at least {model.MIN_KERNEL_US:g} us",
        "the Python between operators and the data wait stay as measured here (a GPU shortens neither)",
        (
            "the host runs ahead of the GPU (no per-step read of device values)"
            if e.overlapped
            else f"{e.reads_per_step:.1f} read(s) of device values per step: host and GPU take turns"
            + _unseen_reads(e)
        ),
        "the batch is copied to the GPU in the background (pinned memory, non_blocking)",
    ]
    if e.off_core_s is not None:
        out.append(
            f"the loop thread's {e.off_core_s * 1e3:.2f} ms a step off a core (sleeping or blocked, "
            "not waiting for a core) stays: the step is never shorter"
        )
    if e.flops_per_step is not None:
        out.append(
            "matmul FLOPs from the recorded shapes; other operators sized from their CPU time"
        )
    else:
        out.append(
            f"no shapes recorded: each operator's work is at most what its CPU time could do here "
            f"({model.CPU_GFLOPS_PER_CORE:g} GFLOP/s or {model.CPU_GBPS_PER_CORE:g} GB/s per core, {e.cores} core(s))"
        )
    if e.precision == "bf16":
        out.append("the cell's torch.autocast runs the matmuls in bf16/fp16 on the GPU too")
    if e.precision == "fp32" and spec.tf32_tflops:
        out.append(
            "float32 matmuls without TF32 (PyTorch's default); with TF32 or bf16 autocast the GPU compute shrinks"
        )
    if e.cores_assumed:
        out.append("the recording machine's cores are not in the file: 1 assumed")
    return tuple(out)


# ------------------------------------------------------------------------------ hot lines


def describe_line(stat: LineStat, of: str = "step time") -> str:
    """``line 7 `print(f'{loss}')`: 31% of step time``, with the line's main phase when known."""
    text = " ".join(stat.text.split())
    if len(text) > _MAX_TEXT_CHARS:
        text = text[: _MAX_TEXT_CHARS - 1] + "…"
    code = f" `{text}`" if text else ""
    phase = _main_phase(stat.phase_samples, stat.samples)
    return f"{_line_place(stat)}{code}: {stat.share:.0%} of {of}{phase}"


def _line_place(stat: LineStat) -> str:
    """Where a hot line is: the measured cell's "line 7", another cell's "In[3] line 4" (as
    IPython's own tracebacks name a cell), a user's file's "utils.py:14".

    ipykernel names a cell by a hash of its source ("/tmp/ipykernel_PID/HASH.py"): its In[N]
    is the one the shell's compiler recorded (``RawStacks.cell_numbers``), as ipykernel's own
    tracebacks say "Cell In[3]". Where nothing recorded it (the cell ran in an earlier kernel's
    session record, a shell without the record), it reads "another cell, line 4", the line's
    text then says which."""
    if stat.filename is None:
        return f"line {stat.line}"
    if stat.other_cell:
        if stat.cell_number is not None:
            return f"In[{stat.cell_number}] line {stat.line}"
        return f"another cell, line {stat.line}"
    return f"{file_label(stat.filename)}:{stat.line}"


def _main_phase(phase_samples: Mapping[str, int], samples: int) -> str:
    if not phase_samples or samples <= 0:
        return ""
    phase, count = max(phase_samples.items(), key=lambda kv: (kv[1], kv[0]))
    return f" (mostly {phase})" if count >= 0.5 * samples else ""


# ------------------------------------------------------------------------------ before/after


def outcome_line(comparison: Comparison) -> str | None:
    """ "measured 1.42x (1.31-1.55x): faster" and, for a fix, what it earned: "verified"."""
    s = comparison.samples
    said = outcome_said(comparison)
    if s is None or said is None:
        return None
    return f"measured {s.speedup:.2f}x ({s.low:.2f}-{s.high:.2f}x over {s.before_steps} and " + (
        f"{s.after_steps} steps): {said}"
    )


def outcome_said(comparison: Comparison) -> str | None:
    """What the before/after earned: for a fix, what ``--try-fixes`` would say of the same
    interval (``fix_outcome``: verified, no measurable effect, slower, undecided), else the
    comparison's own outcome."""
    s = comparison.samples
    if s is None:
        return None
    if comparison.fix_id is None:
        return s.outcome
    # The model's low end; an older report has only the stated one (lower: it rules out less).
    low = comparison.predicted_model_low
    return fix_outcome(s, low if low is not None else comparison.predicted_low)


def partial_runs(c: Comparison) -> tuple[str, ...]:
    """A run of the two that stopped partway (an exception, an interrupt): said, with the
    steps it took, since the before/after reads those steps only and never a whole run."""
    said = []
    for who, status, error, steps in (
        (f"the earlier run (at {c.baseline_started_at})", c.baseline_status, c.baseline_error,
         c.baseline_steps),
        ("this run", c.status, c.error, c.steps),
    ):  # fmt: skip
        if status == "ok":
            continue
        how = "was interrupted" if status == "interrupted" else "failed"
        why = f" ({error})" if error and status != "interrupted" else ""
        took = f" after {steps} step(s)" if steps is not None else ""
        said.append(
            f"{who} {how} partway{why}{took}: compared over the steps it took, not a whole run"
        )
    return tuple(said)


def describe_comparison(comparison: Comparison) -> tuple[str, ...]:
    """The comparison in a few sentences (for text views and the benchmark table)."""
    c = comparison
    lines: list[str] = [f"Note: {n[0].upper()}{n[1:]}." for n in partial_runs(c)]
    slower = c.speedup is not None and c.speedup < SLOWER_THAN
    if c.samples is not None:
        slower = c.samples.outcome == "slower"
    if c.speedup is None:
        lines.append("Speedup: not measured (no step time in one of the runs).")
    else:
        lines.append(
            f"Measured: {fmt_factor(c.speedup)} the throughput of the run at {c.baseline_started_at}."
        )
    said = outcome_line(c)
    if said is not None and c.samples is not None:
        lines.append(said[0].upper() + said[1:] + ".")
        lines.extend(f"Note: {n}." for n in sample_notes(c.samples))
    if c.fix_id is not None:
        lines.append(f"Predicted for fix {c.fix_id}: {predicted_gain(c)} (Amdahl).")
        if slower:
            lines.append(
                f"Slower: fix {c.fix_id} costs more than it saves on this machine; go back to "
                "the earlier cell."
            )
        if outcome_said(c) == "undecided" and (c.samples is None or c.samples.too_busy is None):
            lines.append(
                f"Undecided: the measured range holds both no change and fix {c.fix_id}'s "
                "predicted gain; run both cells again, or measure it with more runs "
                "(`gpucheck run --try-fixes`)."
            )
        if (
            c.speedup is not None
            and c.predicted_bound is not None
            and c.speedup > c.predicted_bound
        ):
            lines.append(
                "Above the bound: the fix also sped up work outside the phase it removes (the bound "
                "comes from profiled steps; caches, garbage collection and the allocator share the step)."
            )
    if c.gpu_equivalent is not None and c.gpu_equivalent > 0:
        lines.append(
            f"This gave the throughput of {c.gpu_equivalent:.2f} more GPU(s) of this kind "
            "(assuming linear scaling, which real clusters do not quite reach)."
        )
    if c.cost_saved_per_1000_steps is not None:
        lines.append(
            f"Saves {fmt_cost(c.cost_saved_per_1000_steps)} per 1,000 steps at the given price."
        )
    return tuple(lines)


# ------------------------------------------------------------------------------ one job?


def doubt_sentence(d: Doubt) -> str:
    """Why a folder of traces looks like more than one job, in a few words."""
    if isinstance(d, WorldSizesDiffer):
        return f"world sizes differ: {', '.join(map(str, d.sizes))}"
    if isinstance(d, RankTwice):
        more = f" (and {d.more_ranks} more rank(s))" if d.more_ranks else ""
        return f"rank {d.rank} appears in {len(d.traces)} traces: {', '.join(d.traces[:3])}{more}"
    if isinstance(d, MoreTracesThanRanks):
        return f"{d.traces} traces for a world size of {d.world_size}"
    if isinstance(d, NoneDistributed):
        where = f" on {d.hosts} hosts" if d.hosts > 1 else ""
        return (
            f"none of the {d.traces} traces is a rank of a distributed job "
            f"(no distributedInfo with a world size above 1){where}"
        )
    return f"they started {_span(d.seconds)} apart"


def _span(seconds: float) -> str:
    if seconds >= 2 * 86400:
        return f"{seconds / 86400:.0f} days"
    if seconds >= 2 * 3600:
        return f"{seconds / 3600:.0f} hours"
    return f"{seconds / 60:.0f} minutes"


def step_counting(own_time: bool) -> tuple[str, ...]:
    """How the compared steps were counted, where it is not their wall time (a before/after's
    ``SampleComparison.own_time``, a fix trial's ``FixTrial.own_time``)."""
    return ("each step counted without the time its thread waited for a core",) if own_time else ()


def sample_notes(s: SampleComparison) -> tuple[str, ...]:
    """How the steps were counted, and what was made of a change in the machine's load between
    the two runs, if it changed."""
    own = too_busy_note(s) + step_counting(s.own_time)
    if s.load_note is None or s.load_before_cores is None or s.load_after_cores is None:
        return own
    return own + _load_notes(s, s.load_before_cores, s.load_after_cores)


def too_busy_note(s: SampleComparison) -> tuple[str, ...]:
    """Why a before/after is undecided where its runs were too busy to judge (its figures are
    the machine's more than the code's): "both runs waited 91% and 88% of their steps' time for
    a core: too busy to judge ...; rerun both on a quieter machine"."""
    if s.too_busy is None:
        return ()
    from gpu_notebook.analysis.too_busy import TOO_BUSY_WAIT

    before, after = s.too_busy
    busy = [x is not None and x >= TOO_BUSY_WAIT for x in (before, after)]
    if all(busy):
        which = f"both runs waited {fmt_share(before)} and {fmt_share(after)} of their steps' time"
    else:
        run, share = ("the earlier run", before) if busy[0] else ("this run", after)
        which = f"{run} waited {fmt_share(share)} of its steps' time"
    return (
        f"{which} for a core: too busy to judge, so neither faster nor slower is claimed; "
        "rerun both on a quieter machine",
    )


def _load_notes(s: SampleComparison, before_cores: float, after_cores: float) -> tuple[str, ...]:
    load = (
        f"the machine's load changed (other processes: {before_cores:.2f} -> "
        f"{after_cores:.2f} cores)"
    )
    if s.load_note == "matched" and s.similar_steps is not None:
        before, after = s.similar_steps
        return (f"{load}: compared the {before} and {after} steps taken under similar load",)
    if s.load_note == "same-direction":
        return (
            f"{load} in the direction of the change: it cannot be told from the machine's, so no "
            "measurable change is claimed (run both again on a quieter machine, or interleaved)",
        )
    return (f"{load} against the change: the change is at least this large",)
