"""The live view and the report widget: what a notebook user sees while and after a cell runs.

Real reports come from real CPU runs (the ``ip`` shell and ``tests/cells.py``, or a
CaptureSession around a small loop); GPU sections come from records built here
(:func:`synthetic_gpu_report`), also used by ``test_html_report.py``.
"""

from __future__ import annotations

import dataclasses
import re
import threading
import time
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import ipywidgets
import pytest
import traitlets

from gpu_notebook.capture.sampler import THREAD_NAME
from gpu_notebook.capture.session import CaptureOptions, CaptureSession
from gpu_notebook.capture.threads import live_hidden_threads
from gpu_notebook.records import (
    OPTIONAL_PHASES,
    PHASES,
    Analysis,
    Comparison,
    CopyStats,
    Environment,
    Finding,
    FixProposal,
    GpuInfo,
    GpuSample,
    GpuTimeline,
    Interconnect,
    LiveStatus,
    OpStat,
    PhaseBreakdown,
    ProfileWindow,
    Report,
    Run,
    Sample,
    SampleSeries,
    ScalingPoint,
    StepClockRecord,
    StepPhases,
    StepStats,
    StepTiming,
    UtilizationStats,
    Verdict,
    WhatIf,
)
from gpu_notebook.rules import rank_key
from gpu_notebook.views.live import LiveView, sparkline_svg
from gpu_notebook.views.report_widget import ReportWidget, report_widget
from gpu_notebook.views.text import render_text
from gpu_notebook.views.wording import whatif_missing
from tests import cells

# ---------------------------------------------------------------------------------------------
# Hostile strings: what a cell, a trace or an error message may hold.
# ---------------------------------------------------------------------------------------------

SCRIPT_PAYLOAD = "<script>alert(1)</script>"
IMG_PAYLOAD = "<img src=x onerror=alert(1)>"
CLOSE_SCRIPT = "</script>"
ATTR_PAYLOAD = '"><svg onload=alert(1)>'
PAYLOADS = (SCRIPT_PAYLOAD, IMG_PAYLOAD, CLOSE_SCRIPT, ATTR_PAYLOAD)

# Tags our fragments use; anything else in a rendered value was injected.
REPORT_TAGS = {
    "a",
    "b",
    "code",
    "details",
    "div",
    "h2",
    "h3",
    "iframe",
    "li",
    "p",
    "pre",
    "span",
    "style",
    "summary",
    "table",
    "td",
    "th",
    "tr",
    "ul",
}


class TagCollector(HTMLParser):
    """Every start tag with its attributes, and all text, of an HTML fragment or page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self._in_script: dict[str, str | None] | None = None
        self._script_text: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag == "script":
            self._in_script = dict(attrs)
            self._script_text = []
        self._in_style = tag == "style"

    def handle_endtag(self, tag: str) -> None:
        self._in_style = False
        if tag == "script" and self._in_script is not None:
            self.scripts.append((self._in_script, "".join(self._script_text)))
            self._in_script = None

    def handle_data(self, data: str) -> None:
        if self._in_script is not None:
            self._script_text.append(data)
        elif not self._in_style:
            self.text.append(data)

    @property
    def all_text(self) -> str:
        return "".join(self.text)


def parse_html(fragment: str) -> TagCollector:
    collector = TagCollector()
    collector.feed(fragment)
    collector.close()
    return collector


def assert_inert(fragment: str, allowed_tags: set[str] = REPORT_TAGS) -> TagCollector:
    """No tag outside ``allowed_tags``, no event-handler attribute, no javascript: URL."""
    parsed = parse_html(fragment)
    for tag, attrs in parsed.tags:
        assert tag in allowed_tags, f"unexpected <{tag}> in rendered HTML: {attrs}"
        for name, value in attrs.items():
            assert not name.startswith("on"), f"event handler {name}={value!r} on <{tag}>"
            if name in ("href", "src", "action", "formaction"):
                assert not (value or "").strip().lower().startswith("javascript:"), (
                    tag,
                    name,
                    value,
                )
        if tag == "iframe":
            assert attrs.get("sandbox") == "allow-scripts", attrs
    return parsed


# ---------------------------------------------------------------------------------------------
# Synthetic GPU report: records built directly (no GPU here), shaped like an input-bound run.
# ---------------------------------------------------------------------------------------------

GPU_CELL = """%%gpucheck -s 5
model = Net().cuda(); opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
loader = DataLoader(ds, batch_size=64, num_workers=0)
for x, y in loader:
    x, y = x.cuda(), y.cuda()
    loss = loss_fn(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
"""

PATCHED_CELL = """%%gpucheck -s 5
# gpucheck fix: DataLoader workers and pinned memory (num_workers=4, pin_memory=True)
model = Net().cuda(); opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
loader = DataLoader(ds, batch_size=64, num_workers=4, pin_memory=True)
for x, y in loader:
    x, y = x.cuda(), y.cuda()
    loss = loss_fn(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
"""

PATCH_DIFF = """--- before
+++ after
@@ -1,3 +1,4 @@
 %%gpucheck -s 5
+# gpucheck fix: DataLoader workers and pinned memory (num_workers=4, pin_memory=True)
 model = Net().cuda(); opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
-loader = DataLoader(ds, batch_size=64, num_workers=0)
+loader = DataLoader(ds, batch_size=64, num_workers=4, pin_memory=True)
"""

SHARES = {
    "data": 0.45,
    "copy": 0.08,
    "forward": 0.15,
    "backward": 0.20,
    "optimizer": 0.05,
    "sync": 0.04,
    "other": 0.01,
    "unattributed": 0.02,
}


def default_findings(hostile: bool = False) -> tuple[Finding, ...]:
    bad = f" {SCRIPT_PAYLOAD}{IMG_PAYLOAD}" if hostile else ""
    workers = Finding(
        rule_id="input.main_process_loading",
        title="Batches are loaded in the main process" + bad,
        severity="high",
        evidence=("data wait: 45% of step time", "DataLoader(num_workers=0) on line 3" + bad),
        phase_share=0.45,
        gain_bound=1.82,
        fix="Use DataLoader worker processes and pinned memory." + bad,
        source="TraceML diagnostics/step_time/policy.py",
        line=3,
        fix_id="dataloader_workers",
        proposal=FixProposal(
            fix_id="dataloader_workers",
            title="DataLoader workers and pinned memory" + bad,
            why=(
                "The GPU waits while the main process loads every batch.",
                "Worker processes prepare batches ahead.",
            ),
            doc_url="https://pytorch.org/docs/stable/data.html#multi-process-data-loading",
            source_after=PATCHED_CELL + (f"# {CLOSE_SCRIPT}{IMG_PAYLOAD}\n" if hostile else ""),
            diff=PATCH_DIFF + (f"+# {CLOSE_SCRIPT}{IMG_PAYLOAD}\n" if hostile else ""),
        ),
    )
    copies = Finding(
        rule_id="copy.pageable",
        title="Copies from pageable memory",
        severity="medium",
        evidence=("HtoD (Pageable -> Device): 120 copies, 8% of step time",),
        phase_share=0.08,
        gain_bound=1.09,
        fix="Pin host memory and copy with non_blocking=True.",
        fix_id="non_blocking_copies",
        proposal=FixProposal(
            fix_id="non_blocking_copies",
            title="Non-blocking copies to the GPU",
            why=("Each .to(device) makes Python wait.", "non_blocking=True overlaps the copy."),
            doc_url="javascript:alert(1)"
            if hostile
            else "https://pytorch.org/tutorials/intermediate/pinmem_nonblock.html",
            source_after=None,
            diff=None,
            refusal="the copies happen inside a helper defined in another cell" + bad,
        ),
    )
    syncs = Finding(
        rule_id="sync.item",
        title="A .item() every step",
        severity="low",
        evidence=("aten::item: 1 call per step, 4% of step time",),
        phase_share=0.04,
        gain_bound=1.04,
        fix="Read the loss every 50 steps.",
    )
    # Ranked as the rules rank them (rules.rank_key): the views keep the order they are given.
    return tuple(sorted((copies, syncs, workers), key=rank_key))


def synthetic_whatif(hostile: bool = False) -> WhatIf:
    return WhatIf(
        step_s=0.3,
        fixes_speedup=1.82,
        fixed_phases=("data",),
        grad_bytes=440 * 2**20,
        interconnect=Interconnect("nvlink", 300e9, nvlink_links=12),
        bus_bandwidth_bytes_per_s=240e9,
        points=tuple(
            ScalingPoint(
                gpus=n,
                allreduce_s=0.004 * (n - 1) / n,
                exposed_comm_s=0.001 * n,
                step_s=0.3 + 0.001 * n,
                speedup=n * 0.3 / (0.3 + 0.001 * n),
                efficiency=0.3 / (0.3 + 0.001 * n),
                speedup_with_fixes=1.82 * n * 0.95,
            )
            for n in (2, 4, 8)
        ),
        # The interconnect, assumptions and what is missing are typed: no text of the run's
        # reaches them (the views word them), so a hostile run has nothing to put there.
        missing=("no-link-from-nvml",) if hostile else (),
    )


def synthetic_gpu_report(
    *,
    findings: tuple[Finding, ...] | None = None,
    comparison: Comparison | None = None,
    whatif: WhatIf | None = None,
    status: str = "ok",
    error: str | None = None,
    hostile: bool = False,
    gpu_count: int = 2,
) -> Report:
    """An input-bound two-GPU run, every section filled."""
    bad = f" {SCRIPT_PAYLOAD}{IMG_PAYLOAD}{ATTR_PAYLOAD}" if hostile else ""
    gpus = tuple(
        GpuInfo(
            index=i,
            name="NVIDIA A100-SXM4-80GB" + bad,
            memory_total_bytes=80 * 2**30,
            compute_capability="8.0",
        )
        for i in range(gpu_count)
    )
    env = Environment(
        python_version="3.11.7",
        platform="linux-x86_64",
        cpu_count=16,
        torch_version="2.4.0+cu121",
        cuda_available=True,
        nvml_available=True,
        nvml_message=None,
        driver_version="550.54",
        gpus=gpus,
    )
    samples = []
    for k in range(60):
        t = 0.25 * (k + 1)
        util = 20.0 + 40.0 * ((k * 7) % 10) / 10 if t > 1.5 else 0.0
        samples.append(
            Sample(
                t_s=t,
                process_cpu_pct=98.0 + (k % 3),
                children_cpu_pct=0.0,
                system_cpu_pct=12.0,
                rss_bytes=6 * 2**30,
                gpus=tuple(
                    GpuSample(
                        index=i,
                        utilization_pct=util if i == 0 else util * 0.9,
                        memory_used_bytes=(30 + 2 * i) * 2**30,
                        memory_total_bytes=80 * 2**30,
                    )
                    for i in range(gpu_count)
                ),
            )
        )
    steps = tuple(
        StepTiming(
            index=i,
            start_s=1.5 + 0.3 * i,
            duration_s=0.3,
            data_s=0.135,
            forward_s=0.045,
            backward_s=0.06,
            optimizer_s=0.015,
            forward_calls=2,
            backward_calls=1,
            batch_size=64,
        )
        for i in range(40)
    )
    run = Run(
        env=env,
        cell_source=GPU_CELL
        + (f"# {CLOSE_SCRIPT}{IMG_PAYLOAD}{SCRIPT_PAYLOAD}\n" if hostile else ""),
        status=status,  # type: ignore[arg-type]
        error=error,
        wall_s=15.2,
        samples=SampleSeries(requested_interval_s=0.25, interval_s=0.25, samples=tuple(samples)),
        steps=StepClockRecord(anchor="optimizer", step_count=40, steps=steps),
        window=ProfileWindow(
            status="recorded",
            warmup_steps=2,
            profile_steps=5,
            first_step=2,
            recorded_steps=5,
            trace_path=None,
        ),
        started_at="2026-11-30T10:00:00+00:00",
        notes=("GPU 1 lost at 12.3 s" + bad,) if hostile else (),
    )
    step_us = 300_000.0
    phase_steps = tuple(
        StepPhases(
            index=2 + i,
            start_us=1e6 + i * step_us,
            duration_us=step_us,
            phase_us={
                p: s * step_us * (1.1 if (p == "data" and i == 3) else 1.0)
                for p, s in SHARES.items()
            },
        )
        for i in range(5)
    )
    total = sum(s.duration_us for s in phase_steps)
    phases = PhaseBreakdown(
        source="trace",
        steps=phase_steps,
        total_us=total,
        phase_total_us={p: SHARES[p] * total for p in SHARES},
        measured=tuple(p for p in PHASES if p in SHARES),
    )
    gpu = GpuTimeline(
        window_us=1.5e6,
        busy_us=0.6e6,
        idle_us=0.9e6,
        idle_host_wait_us=0.8e6,
        idle_kernel_wait_us=0.05e6,
        idle_other_us=0.05e6,
        kernel_us=0.55e6,
        comm_us=0.0,
        memset_us=1e3,
        copies=(
            CopyStats(
                kind="HtoD (Pageable -> Device)", count=120, duration_us=0.04e6, bytes=600 * 2**20
            ),
        ),
        devices=(0,),
    )
    ops = (
        OpStat(name="aten::copy_", calls=120, total_us=41_000, self_us=40_000),
        OpStat(
            name=SCRIPT_PAYLOAD if hostile else "aten::addmm",
            calls=45,
            total_us=9_000,
            self_us=8_000,
        ),
        OpStat(
            name="ampere_sgemm_128x64_tn" + bad,
            calls=90,
            total_us=210_000,
            self_us=210_000,
            device="gpu",
        ),
    )
    analysis = Analysis(
        step_stats=StepStats(
            count=38, median_s=0.3, p90_s=0.33, batch_size=64, samples_per_s=213.0
        ),
        phases=phases,
        gpu=gpu,
        utilization=UtilizationStats(
            gpu_util_mean_pct=40.0,
            gpu_util_p5_pct=20.0,
            gpu_util_p95_pct=60.0,
            gpu_memory_peak_bytes=32 * 2**30,
            gpu_memory_total_bytes=80 * 2**30,
            process_cpu_mean_pct=99.0,
            children_cpu_mean_pct=0.0,
            system_cpu_mean_pct=12.0,
            rss_peak_bytes=6 * 2**30,
        ),
        top_ops=ops,
    )
    verdict = Verdict(
        category="input-bound",
        headline="Waiting for data takes 45% of every step.",
        more_gpus="No: every added GPU would wait for data the same way. Fix the input pipeline "
        "first (gain from this alone: up to 1.82x).",
        evidence=("GPU busy 40% of the window", "data wait: 45% of step time" + bad),
        confidence="high",
    )
    return Report(
        run=run,
        analysis=analysis,
        verdict=verdict,
        findings=default_findings(hostile) if findings is None else findings,
        comparison=comparison,
        whatif=synthetic_whatif(hostile) if whatif is None else whatif,
    )


def synthetic_comparison(speedup: float = 1.6) -> Comparison:
    return Comparison(
        baseline_started_at="2026-11-30T09:50:00+00:00",
        baseline_step_median_s=0.3,
        step_median_s=0.3 / speedup,
        speedup=speedup,
        baseline_samples_per_s=213.0,
        samples_per_s=213.0 * speedup,
        baseline_phase_share={"data": 0.45, "forward": 0.15},
        phase_share={"data": 0.12, "forward": 0.24},
        baseline_gpu_util_pct=40.0,
        gpu_util_pct=64.0,
        fix_id="dataloader_workers",
        predicted_bound=1.82,
        gpu_equivalent=0.6,
    )


# ---------------------------------------------------------------------------------------------
# Real reports from real CPU runs
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def input_bound_report(ip: Any) -> Report:
    """SLOW_INPUT measured with %%gpucheck: input-bound on the CPU, trace phases, no GPU."""
    ip.run_cell_magic("gpucheck", "-q -o _views_rep", cells.SLOW_INPUT)
    report = ip.user_ns["_views_rep"]
    assert isinstance(report, Report)
    assert report.analysis.phases is not None and report.analysis.phases.source == "trace"
    return report


@pytest.fixture(scope="module")
def hooks_report(ip: Any) -> Report:
    """COMPUTE_HEAVY with --no-profile: phases from hook timings (several not measured)."""
    ip.run_cell_magic("gpucheck", "-q --no-profile -o _views_hooks", cells.COMPUTE_HEAVY)
    report = ip.user_ns["_views_hooks"]
    assert isinstance(report, Report)
    return report


FAILING_CELL = """
model = mlp(); opt = torch.optim.SGD(model.parameters(), lr=0.01)
xs = torch.randn(64, 32); ys = torch.randn(64, 1)
for step in range(6):
    loss = ((model(xs) - ys) ** 2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
raise ValueError("bad batch </script><img src=x onerror=alert(1)>")
"""


@pytest.fixture(scope="module")
def failed_report(ip: Any) -> Report:
    """A real cell that trains six steps, then raises with a hostile message."""
    ip.run_cell_magic("gpucheck", "-q -w 1 -s 3 -o _views_failed", FAILING_CELL)
    report = ip.user_ns["_views_failed"]
    assert isinstance(report, Report) and report.run.status == "error"
    return report


def html_values(widget: ipywidgets.Widget) -> Iterator[str]:
    """The value of every ipywidgets.HTML in the tree, depth first."""
    if isinstance(widget, ipywidgets.HTML):
        yield widget.value
    for child in getattr(widget, "children", ()):
        yield from html_values(child)


def widget_html(widget: ipywidgets.Widget) -> str:
    return "\n".join(html_values(widget))


def live_status(
    t_s: float, util: tuple[float | None, ...] = (), cpu: float = 50.0, steps: int = 0
) -> LiveStatus:
    gpus = tuple(
        GpuSample(
            index=i,
            utilization_pct=u,
            memory_used_bytes=(10 + i) * 2**30,
            memory_total_bytes=80 * 2**30,
        )
        for i, u in enumerate(util)
    )
    return LiveStatus(
        sample=Sample(
            t_s=t_s,
            process_cpu_pct=cpu,
            children_cpu_pct=0.0,
            system_cpu_pct=cpu,
            rss_bytes=2**30,
            gpus=gpus,
        ),
        step_count=steps,
        median_step_s=0.021 if steps else None,
        recording=steps > 2,
    )


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


# ---------------------------------------------------------------------------------------------
# LiveView
# ---------------------------------------------------------------------------------------------


def test_live_view_is_not_available_in_terminal_ipython(ip: Any) -> None:
    from IPython import get_ipython

    assert get_ipython() is ip and type(ip).__name__ == "TerminalInteractiveShell"
    assert LiveView.available() is False


def test_live_view_is_available_in_a_kernel_and_becomes_the_report_in_the_same_output(
    tmp_path: Path,
) -> None:
    """A real ipykernel (nbclient, widget state stored): the live box is displayed above the
    cell's own prints, updated from the sampler thread, then swapped for the report."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    code = """
import time, torch
from gpu_notebook.views.live import LiveView
from gpu_notebook.capture.session import CaptureOptions, CaptureSession
from gpu_notebook.report.build import build_report
print("available", LiveView.available())
view = LiveView()
view.show()
with CaptureSession(CaptureOptions(interval_s=0.1), "loop", live_listener=view.update) as s:
    print("the cell's own output")
    m = torch.nn.Linear(64, 64); opt = torch.optim.SGD(m.parameters(), lr=0.01)
    # 1.2 s of steps, and on until the sampler thread pushed 3 times (a busy machine can leave
    # it without a turn for a while): the deadline only bounds the wait.
    t0 = time.monotonic()
    while (time.monotonic() - t0 < 1.2 or view.pushes < 3) and time.monotonic() - t0 < 60:
        loss = m(torch.randn(32, 64)).sum(); opt.zero_grad(); loss.backward(); opt.step()
run = s.finish("ok", None)
spark_before_finish = view.sparkline.value
view.finish(build_report(run))
print("pushes", view.pushes)
"""
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_code_cell(code))
    client = nbclient.NotebookClient(
        nb, timeout=120, kernel_name="python3", store_widget_state=True
    )
    client.execute()
    outputs = nb.cells[0].outputs
    texts = ["".join(o.get("text", "")) for o in outputs]
    assert "available True" in texts[0]
    display_at = next(i for i, o in enumerate(outputs) if o.output_type == "display_data")
    own_at = next(i for i, t in enumerate(texts) if "the cell's own output" in t)
    assert display_at < own_at, "the live view must sit above the cell's own output"
    shown = outputs[display_at]["data"]
    box_id = shown["application/vnd.jupyter.widget-view+json"]["model_id"]
    # update_display after finish: a frontend without widgets now shows the text report.
    assert shown["text/plain"].startswith("gpucheck: ")
    assert "Will more GPUs help?" in shown["text/plain"]
    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    box = state[box_id]["state"]
    assert len(box["children"]) == 1, "finish() leaves only the report in the live box"
    report_id = box["children"][0].removeprefix("IPY_MODEL_")
    report_values = [
        state[c.removeprefix("IPY_MODEL_")]["state"].get("value", "")
        for c in state[report_id]["state"]["children"]
    ]
    assert "Will more GPUs help?" in report_values[0]
    pushes = int(next(t for t in texts if t.startswith("pushes")).split()[1])
    assert pushes >= 3, "the sampler thread redrew the live view during the run"


def test_live_view_redraws_from_the_real_sampler_thread_during_a_real_run() -> None:
    torch = pytest.importorskip("torch")
    view = LiveView(cell_id=None)
    changes: list[tuple[str, str]] = []
    errors: list[BaseException] = []

    def on_change(change: dict[str, Any]) -> None:
        changes.append((threading.get_ident(), change["new"]))

    view.sparkline.observe(on_change, names="value")

    def listener(status: LiveStatus) -> None:
        try:
            view.update(status)
        except BaseException as exc:  # recorded, then re-raised: the assertion below reports it
            errors.append(exc)
            raise

    with CaptureSession(CaptureOptions(interval_s=0.1), "loop", live_listener=listener) as session:
        model = torch.nn.Linear(64, 64)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        # 2 s of steps, and on until 3 different drawings came (a busy machine can leave the
        # sampler thread without a turn for a while): the deadline only bounds the wait.
        t0 = time.perf_counter()
        while (
            time.perf_counter() - t0 < 2.0 or len({value for _, value in changes}) < 3
        ) and time.perf_counter() - t0 < 60.0:
            loss = model(torch.randn(32, 64)).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
    run = session.finish("ok", None)
    assert errors == []
    assert not any("live view" in note for note in run.notes), run.notes
    assert len({value for _, value in changes}) >= 3, f"only {len(changes)} redraws in 60 s"
    sampler_idents = {t.ident for t in live_hidden_threads() if t.name == THREAD_NAME}
    assert sampler_idents == set()  # stopped with the session
    assert threading.get_ident() not in {ident for ident, _ in changes}  # not the cell's thread
    assert not [t for t in threading.enumerate() if isinstance(t, threading._DummyThread)]
    assert "polyline" in view.sparkline.value and "<script" not in view.sparkline.value
    assert "steps" in view.status_line.value
    assert view.pushes <= view.updates


def test_updates_are_coalesced_to_five_per_second_and_none_is_lost() -> None:
    clock = FakeClock()
    view = LiveView(cell_id=None, clock=clock, max_points=100)
    for k in range(50):
        view.update(live_status(0.01 * k, cpu=float(k)))
    assert (view.updates, view.pushes) == (50, 1)
    first = view.sparkline.value
    clock.now += 0.1
    view.update(live_status(0.6, cpu=60.0))
    assert view.pushes == 1 and view.sparkline.value == first
    clock.now += 0.15
    view.update(live_status(0.7, cpu=70.0))
    assert view.pushes == 2
    # The coalesced points were kept in the ring and are all drawn at this push.
    points = view.sparkline.value.split('points="')[1].split('"')[0].split()
    assert len(points) == 52


def test_flush_draws_the_points_held_back_by_the_rate_limit() -> None:
    clock = FakeClock()
    view = LiveView(cell_id=None, clock=clock)
    view.update(live_status(0.0, util=(10.0,), steps=1))
    view.update(live_status(0.1, util=(90.0,), steps=2))
    assert view.pushes == 1 and "90%" not in view.sparkline.value
    view.flush()
    assert view.pushes == 2 and "90%" in view.sparkline.value


def test_coalescing_holds_under_a_real_fast_thread() -> None:
    view = LiveView(cell_id=None)
    start = time.monotonic()

    def spam() -> None:
        # 0.5 s and at least 51 updates: a starved thread may get few turns in 0.5 s, and the
        # rate limit is what is checked, against the time the updates really took.
        k = 0
        while time.monotonic() - start < 0.5 or view.updates <= 50:
            view.update(live_status(0.001 * k, util=(float(k % 100),)))
            k += 1

    worker = threading.Thread(target=spam)
    worker.start()
    worker.join()
    elapsed = time.monotonic() - start
    assert view.updates > 50
    assert 1 <= view.pushes <= int(elapsed * 5) + 1


def test_the_ring_of_points_is_bounded() -> None:
    clock = FakeClock()
    view = LiveView(cell_id=None, clock=clock, max_points=30)
    for k in range(500):
        clock.now += 1.0
        view.update(live_status(k * 0.25, util=(50.0, 20.0)))
    for part in view.sparkline.value.split('points="')[1:]:
        assert len(part.split('"')[0].split()) == 30


def test_one_sparkline_per_gpu_with_memory_and_cpu_in_the_status_line() -> None:
    view = LiveView(cell_id=None)
    view.update(live_status(1.0, util=(87.0, 12.0), cpu=150.0, steps=12))
    spark = view.sparkline.value
    assert spark.count("<svg") == 2
    assert "GPU 0" in spark and "GPU 1" in spark and "87%" in spark
    assert "memory 10.0 GiB / 80.0 GiB" in spark and "memory 11.0 GiB / 80.0 GiB" in spark
    line = view.status_line.value
    assert "<b>12</b> steps" in line and "21.0 ms" in line and "CPU" in line
    assert "profiling" in line


def test_without_a_gpu_the_sparkline_is_cpu() -> None:
    view = LiveView(cell_id=None)
    view.update(live_status(1.0, cpu=100.0, steps=0))
    spark = view.sparkline.value
    assert spark.count("<svg") == 1 and "CPU" in spark and "no GPU visible" in spark
    assert "GPU 0" not in spark


def test_cpu_counts_one_core_as_100_percent() -> None:
    from gpu_notebook.views.charts import cpu_axis_max

    assert [cpu_axis_max(v) for v in ([], [95.0], [150.0], [401.0])] == [100.0, 100.0, 200.0, 500.0]
    view = LiveView(cell_id=None)
    view.update(live_status(1.0, cpu=150.0))
    spark = view.sparkline.value
    assert "<b>150%</b> (this process + workers, 100% = one core" in spark
    # 150 on a 0..200 axis: three quarters up the 34 px box (y = 33 - 32 * 0.75 = 9).
    assert spark.split('points="')[1].split('"')[0].endswith(",9.0")


def test_a_lost_gpu_leaves_a_gap() -> None:
    values: list[float | None] = [10.0, 20.0, None, None, 40.0, 50.0]
    svg = sparkline_svg(values, capacity=10, label="GPU 0 utilization")
    assert svg.count("<polyline") == 2


def test_finish_swaps_the_live_content_for_the_report(input_bound_report: Report) -> None:
    view = LiveView(cell_id="cell-1")
    view.update(live_status(0.5, cpu=80.0, steps=3))
    box = view.box
    view.finish(input_bound_report)
    assert view.box is box, "the same displayed box holds the report"
    assert box.children == (view.report_view,)
    assert isinstance(view.report_view, ReportWidget)
    assert repr(box) == render_text(input_bound_report)
    view.update(live_status(0.75, cpu=10.0, steps=4))  # a late tick is ignored
    assert box.children == (view.report_view,)


def test_abandon_says_why_no_report_follows() -> None:
    view = LiveView(cell_id=None)
    view.abandon("the capture failed: <b>boom</b>")
    assert "&lt;b&gt;boom&lt;/b&gt;" in widget_html(view.box)
    assert repr(view.box).startswith("gpucheck: the capture failed")


# ---------------------------------------------------------------------------------------------
# Report widget
# ---------------------------------------------------------------------------------------------


def test_the_answer_comes_first(input_bound_report: Report) -> None:
    widget = report_widget(input_bound_report)
    first = widget.children[0]
    assert isinstance(first, ipywidgets.HTML)
    text = parse_html(first.value).all_text
    assert input_bound_report.verdict.category == "input-bound"
    assert text.index("Will more GPUs help?") < text.index("No: optimize the code first")
    assert text.index("No: optimize the code first") < text.index(
        input_bound_report.verdict.headline
    )
    assert 'class="verdict tone-no"' in first.value


@pytest.mark.parametrize(
    ("more_gpus", "category", "answer", "tone"),
    [
        ("Yes: this work is limited by the GPU.", "gpu-bound", "Yes: the GPU is the limit", "yes"),
        (
            "Not more of the same: each added GPU adds communication.",
            "comm-bound",
            "Not more of the same",
            "maybe",
        ),
        ("Unknown: gpucheck needs a loop.", "unknown", "Unknown", "unknown"),
    ],
)
def test_the_answer_follows_the_verdict_text(
    more_gpus: str, category: str, answer: str, tone: str
) -> None:
    base = synthetic_gpu_report()
    verdict = dataclasses.replace(base.verdict, more_gpus=more_gpus, category=category)  # type: ignore[arg-type]
    first = report_widget(dataclasses.replace(base, verdict=verdict)).children[0].value
    assert f"tone-{tone}" in first
    assert f'<div class="answer">{answer}</div>' in first


def phase_rows(fragment: str) -> dict[str, str]:
    """phase -> the text of its row in the phase table."""
    rows: dict[str, str] = {}
    for chunk in fragment.split('<tr data-phase="')[1:]:
        phase = chunk.split('"')[0]
        rows[phase] = parse_html("<tr>" + chunk.split("</tr>")[0]).all_text
    return rows


def test_one_phase_row_per_phase_and_unmeasured_ones_say_so(input_bound_report: Report) -> None:
    rows = phase_rows(widget_html(report_widget(input_bound_report)))
    phases = input_bound_report.analysis.phases
    assert phases is not None
    # An optional phase (comm: no collective in a one-process run) has no row when not measured.
    assert list(rows) == [p for p in PHASES if p not in OPTIONAL_PHASES or p in phases.measured]
    for phase, text in rows.items():
        if phase in phases.measured:
            assert "%" in text and "not measured" not in text
        else:
            assert "not measured" in text and "%" not in text and "0 us" not in text
    assert "not measured" in rows["copy"]  # no GPU to copy to


def test_hook_phases_show_what_hooks_cannot_see(hooks_report: Report) -> None:
    phases = hooks_report.analysis.phases
    assert phases is not None and phases.source == "hooks"
    rows = phase_rows(widget_html(report_widget(hooks_report)))
    unmeasured = [p for p in PHASES if p not in phases.measured and p not in OPTIONAL_PHASES]
    assert unmeasured
    for phase in unmeasured:
        assert "not measured" in rows[phase]


def insert_widgets(widget: ipywidgets.Widget) -> list[Any]:
    from gpu_notebook.views.insert_widget import InsertFixWidget

    found = [widget] if isinstance(widget, InsertFixWidget) else []
    for child in getattr(widget, "children", ()):
        found += insert_widgets(child)
    return found


def test_the_widget_statuses_are_spelled_in_one_place() -> None:
    """The extension's replies come from bridge.InsertStatus on both sides (the view's typedef
    imports the generated type, which `jlpm test` type-checks against its status texts); only
    the view's own two statuses are written in the view, and they match the Python Literal."""
    from typing import get_args

    from gpu_notebook import bridge
    from gpu_notebook.views import insert_widget

    view = (Path(insert_widget.__file__).parent / "insert_widget.js").read_text(encoding="utf-8")
    (typedef,) = re.findall(r"@typedef \{([^}]*)\} WidgetStatus\b", view)
    own = {part.strip().strip('"') for part in typedef.split("|")} - {"InsertStatus"}
    replies = set(get_args(bridge.InsertStatus))
    assert "InsertStatus" in typedef and "records').InsertStatus} InsertStatus" in view
    assert own == set(insert_widget.WIDGET_STATUSES) - replies == {"", "fallback"}
    assert set(insert_widget.WIDGET_STATUSES) == {"", "fallback", *replies}
    widget = insert_widget.InsertFixWidget("t", "x = 1\n", "", None)
    for status in insert_widget.WIDGET_STATUSES:
        widget.status = status
    with pytest.raises(traitlets.TraitError):
        widget.status = "done"


def test_one_insert_fix_widget_per_finding_with_a_patch() -> None:
    report = synthetic_gpu_report()
    widget = report_widget(report, cell_id="abc-123")
    inserts = insert_widgets(widget)
    assert (
        len(inserts)
        == 1
        == sum(1 for f in report.findings if f.proposal is not None and f.proposal.source_after)
    )
    assert inserts[0].source == PATCHED_CELL and inserts[0].cell_id == "abc-123"
    assert inserts[0].diff == PATCH_DIFF
    assert widget.insert_widgets == inserts
    html = widget_html(widget)
    text = parse_html(html).all_text
    # Severity order, gain bound, the fix line, the refusal's reason.
    assert (
        text.index("Batches are loaded")
        < text.index("Copies from pageable")
        < text.index(".item() every step")
    )
    assert "Gain: up to 1.82x (removes 45% of the step)" in text
    assert "Fix (cell line 3): Use DataLoader worker" in text
    assert "No patch for this cell: the copies happen inside a helper" in text
    assert text.count("Patch ready below") == 1


def test_real_fix_proposals_from_the_fix_catalog(input_bound_report: Report) -> None:
    from gpu_notebook.fixes import apply_fix, to_proposal

    source = "%%gpucheck\n" + cells.SLOW_INPUT
    patch = to_proposal(apply_fix("dataloader_workers", source))
    refusal = to_proposal(apply_fix("non_blocking_copies", source))
    assert patch.source_after is not None and refusal.refusal is not None
    findings = tuple(
        Finding(
            rule_id=p.fix_id,
            title=p.title,
            severity="high",
            evidence=(),
            phase_share=0.9,
            gain_bound=10.0,
            fix=p.title,
            fix_id=p.fix_id,
            proposal=p,
        )
        for p in (patch, refusal)
    )
    widget = report_widget(dataclasses.replace(input_bound_report, findings=findings))
    inserts = insert_widgets(widget)
    assert [w.source for w in inserts] == [patch.source_after]
    assert refusal.refusal in parse_html(widget_html(widget)).all_text


def test_real_findings_render_each_with_its_insert_button(input_bound_report: Report) -> None:
    widget = report_widget(input_bound_report, cell_id="cell-7")
    text = parse_html(widget_html(widget)).all_text
    for finding in input_bound_report.findings:
        assert finding.title in text
    patched = [
        f.proposal.source_after
        for f in input_bound_report.findings
        if f.proposal is not None and f.proposal.source_after
    ]
    assert sorted(w.source for w in insert_widgets(widget)) == sorted(patched)
    assert all(w.cell_id == "cell-7" for w in insert_widgets(widget))


def test_zero_findings_render_cleanly(input_bound_report: Report) -> None:
    widget = report_widget(dataclasses.replace(input_bound_report, findings=()))
    text = parse_html(widget_html(widget)).all_text
    assert "No specific finding for this cell" in text
    assert insert_widgets(widget) == []


def test_a_failed_cell_says_so_and_still_reports_its_steps(failed_report: Report) -> None:
    widget = report_widget(failed_report)
    first = widget.children[0].value
    parsed = assert_inert(first)
    assert (
        "The cell failed: ValueError: bad batch </script><img src=x onerror=alert(1)>; "
        "this report covers the steps that ran." in parsed.all_text
    )
    assert failed_report.analysis.step_stats.count > 0


def test_an_interrupted_cell_says_so() -> None:
    report = synthetic_gpu_report(status="interrupted", error="KeyboardInterrupt")
    text = parse_html(report_widget(report).children[0].value).all_text
    assert (
        "The cell was interrupted: KeyboardInterrupt; this report covers the steps that ran."
        in text
    )


def test_hostile_names_are_escaped_in_every_widget_value() -> None:
    report = synthetic_gpu_report(hostile=True, comparison=synthetic_comparison())
    widget = report_widget(report)
    values = list(html_values(widget))
    assert len(values) >= 5
    text = ""
    for value in values:
        parsed = assert_inert(value)
        text += parsed.all_text
    for payload in PAYLOADS:
        assert payload in text, f"{payload!r} should be shown as text"
    # The javascript: documentation URL is not turned into a link.
    assert "javascript:alert(1)" in text
    # The Insert-fix widget carries the source as a trait (its view sets it as text).
    assert any(IMG_PAYLOAD in w.source for w in insert_widgets(widget))


def test_charts_are_bokeh_inline_in_a_sandboxed_iframe(input_bound_report: Report) -> None:
    html = widget_html(report_widget(input_bound_report))
    iframes = [attrs for tag, attrs in parse_html(html).tags if tag == "iframe"]
    assert len(iframes) == 1
    srcdoc = iframes[0]["srcdoc"] or ""
    assert iframes[0]["sandbox"] == "allow-scripts"
    assert "Bokeh" in srcdoc and "docs_json" in srcdoc
    assert "cdn.bokeh.org" not in html and "cdn.bokeh.org" not in srcdoc
    inner = parse_html(srcdoc)
    assert all("src" not in attrs for _, attrs in inner.tags if _ == "script")
    assert all(not (attrs.get("href") or "").startswith("http") for _, attrs in inner.tags)


def test_the_comparison_panel_puts_the_measured_gain_beside_the_bound() -> None:
    report = synthetic_gpu_report(comparison=synthetic_comparison(1.6))
    text = parse_html(report_widget(report).children[0].value).all_text
    assert "Measured: 1.60x faster" in text
    assert "Predicted for fix dataloader_workers: up to 1.82x" in text
    assert "throughput of 0.6 more GPU(s)" in text
    assert "median step time300.0 ms187.5 ms" in text
    assert "data share45.0%12.0%" in text
    assert "copy share" not in text  # neither run has it: no row rather than a fake 0
    assert "No gpucheck fix is known" not in text
    slower_cmp = dataclasses.replace(
        synthetic_comparison(0.8), fix_id=None, predicted_bound=None, gpu_equivalent=-0.2
    )
    slower = parse_html(
        report_widget(synthetic_gpu_report(comparison=slower_cmp)).children[0].value
    )
    assert "1.25x slower" in slower.all_text
    assert "more GPU(s)" not in slower.all_text  # a loss is not "the throughput of -0.2 GPUs"
    assert "No gpucheck fix is known between the two runs" in slower.all_text


def test_the_what_if_panel_sets_fixes_against_more_gpus() -> None:
    report = synthetic_gpu_report()
    first = report_widget(report).children[0].value
    text = parse_html(first).all_text
    assert "What if: fix the code, or add GPUs?" in text
    assert "Fixing data: up to 1.82x on this machine, with no new hardware." in text
    assert (
        "interconnect NVLink x12 (300 GB/s per direction); gradients 461.4 MB a step" in text
    )  # 440 MiB, in decimal MB
    rows = re.findall(r'<tr><td class="num">(\d+)</td><td class="num">([\d.]+x)</td>', first)
    assert [r[0] for r in rows] == ["2", "4", "8"]
    assert rows[0][1] == "1.99x"
    assert "ring all-reduce reaches 80%" in text
    assert text.index("Will more GPUs help?") < text.index("What if:") < text.index("Findings")


def test_the_what_if_panel_says_what_it_cannot_predict(input_bound_report: Report) -> None:
    whatif = input_bound_report.whatif
    assert whatif is not None and whatif.missing, "a CPU run cannot model an interconnect"
    text = parse_html(report_widget(input_bound_report).children[0].value).all_text
    assert f"Cannot predict more GPUs: {whatif_missing(whatif)[0]}" in text


def test_gpu_sections_show_the_timeline_copies_and_nvml_numbers() -> None:
    text = parse_html(widget_html(report_widget(synthetic_gpu_report()))).all_text
    assert "busy 40% of 1.50 s" in text
    assert "HtoD (Pageable -> Device)" in text
    assert "utilization mean 40%" in text and "memory peak 32.0 GiB of 80.0 GiB" in text
    assert "ampere_sgemm_128x64_tn" in text


def test_charts_draw_gpus_on_the_left_and_cpu_on_its_own_axis() -> None:
    import numpy as np
    from bokeh.core.validation.check import check_integrity
    from bokeh.models import Range1d

    from gpu_notebook.views.charts import (
        PHASE_COLORS,
        chart_document,
        phase_figure,
        utilization_figure,
    )

    report = synthetic_gpu_report()
    busy = dataclasses.replace(report.run.samples.samples[5], process_cpu_pct=250.0)
    samples = dataclasses.replace(report.run.samples, samples=(*report.run.samples.samples, busy))
    report = dataclasses.replace(report, run=dataclasses.replace(report.run, samples=samples))
    gpu_fig: Any = utilization_figure(report)
    assert gpu_fig.y_range.end == 100.0
    assert isinstance(gpu_fig.extra_y_ranges["cpu"], Range1d)
    assert gpu_fig.extra_y_ranges["cpu"].end == 300.0  # 250% of one core, rounded up to cores
    labels = [item.label["value"] for item in gpu_fig.legend[0].items]
    assert labels[:4] == [
        "GPU 0 utilization",
        "GPU 0 memory used",
        "GPU 1 utilization",
        "GPU 1 memory used",
    ]
    assert "profiled steps" in labels
    assert report.analysis.phases is not None
    hooks = dataclasses.replace(report.analysis.phases, measured=("data", "forward", "backward"))
    row: Any = phase_figure(hooks)
    per_step = row.children[0]
    assert "not measured: copy, optimizer, sync, other, unattributed" in per_step.title.text
    # Every measured phase, in order, is a bar of its own colour in each step and has a legend
    # entry whose swatch is that bar; unmeasured phases are neither drawn nor named there.
    (bars,) = per_step.renderers
    rows = bars.data_source.data
    steps = per_step.x_range.factors
    assert len(steps) == len(hooks.steps)
    assert list(rows["x"]) == [s for s in steps for _ in range(3)]
    assert list(rows["phase"]) == ["data", "forward", "backward"] * len(steps)
    assert list(rows["color"][:3]) == [PHASE_COLORS[p] for p in ("data", "forward", "backward")]
    first = hooks.steps[0].phase_us
    assert list(rows["ms"][:3]) == pytest.approx(
        [first.get(p, 0.0) / 1e3 for p in ("data", "forward", "backward")]
    )
    assert list(rows["bottom"][:3]) == pytest.approx([0.0, *np.cumsum(rows["ms"][:2])])
    assert list(rows["top"]) == pytest.approx(list(rows["bottom"] + rows["ms"]))
    legend = [
        (item.label["value"], item.index, item.renderers) for item in per_step.legend[0].items
    ]
    assert legend == [("data", 0, [bars]), ("forward", 1, [bars]), ("backward", 2, [bars])]
    totals = row.children[1].renderers[0].data_source.data
    assert list(totals["phase"]) == ["data", "forward", "backward"]
    assert totals["top"][-1] == pytest.approx(
        sum(
            100.0 * hooks.phase_total_us.get(p, 0.0) / hooks.total_us
            for p in ("data", "forward", "backward")
        )
    )
    doc = chart_document(report)
    assert doc is not None and doc.height_px > 400
    # Renderers are built by hand (no figure.vbar_stack()): bokeh's own checks find nothing.
    issues = check_integrity(list(doc.layout.references()))
    assert issues.error == [] and issues.warning == []


def test_text_plain_of_the_widget_is_the_whole_text_report(input_bound_report: Report) -> None:
    widget = report_widget(input_bound_report)
    bundle = widget._repr_mimebundle_()
    assert bundle["text/plain"] == render_text(input_bound_report)
    assert len(bundle["text/plain"]) > 110
    assert "application/vnd.jupyter.widget-view+json" in bundle


def test_a_report_without_steps_or_samples_renders(input_bound_report: Report) -> None:
    run = dataclasses.replace(
        input_bound_report.run,
        samples=SampleSeries(requested_interval_s=0.25, interval_s=0.25),
        steps=StepClockRecord(anchor="none", step_count=0),
    )
    analysis = dataclasses.replace(input_bound_report.analysis, phases=None, top_ops=())
    report = dataclasses.replace(input_bound_report, run=run, analysis=analysis)
    html = widget_html(report_widget(report))
    assert "No samples or steps to chart." in html
    assert "no training step was detected" in html
