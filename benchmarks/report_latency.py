"""Report latency: from the end of the cell to the report being ready must take <= 0.5 s.

The capture runs exactly as ``%%gpucheck`` runs it (``CaptureSession`` with default options
around ``cellrun.run_cell_body`` in a real IPython shell) on the MLP and the CNN 300-step cells
of ``overhead.py``. Timed after the cell's last statement:

* ``close``: the capture session closes (profiler stopped if still on, hooks removed, samplers
  joined): the last thing in the cell, shown apart (``overhead.py`` counts it in the cell);
* ``session.finish()`` (the window's trace file written, step records built) and
  ``build_report(run, namespace=..., history=...)`` as ``magic_run`` calls it (trace read,
  phases, GPU timeline, verdict, rules and fixes, what-if, comparison with the previous report);
* the views: ``render_text(report)``, ``views.report_widget.report_widget(report)`` (what ``%%gpucheck``
  shows in Jupyter) and ``views.html_report.render_html(report)`` (the ``--html`` page), when they exist.

Budgeted figures: the notebook path (build_report + text + widget) warm and cold, and the page
path (build_report + render_html) warm; ``close`` is printed as context.

Each child process measures its first report (*cold*: the analysis and view modules, bokeh,
are imported then, as in a fresh kernel) and then repeats (*warm*). The budget is judged on
thread CPU time (the work is single-threaded, no I/O wait but reading a small trace from the
page cache: on an idle core its wall time equals its CPU time; this shared machine's wall
clock is printed beside it).
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    REPO_ROOT,
    Result,
    emit,
    interleave,
    median,
    parse_args,
    write_results,
)

BUDGET_S = 0.5


def _clock() -> tuple[float, float]:
    return time.perf_counter(), time.thread_time()


def _since(t: tuple[float, float]) -> tuple[float, float]:
    return time.perf_counter() - t[0], time.thread_time() - t[1]


def child(workload: str, steps: int, repeats: int) -> dict[str, Any]:
    """Cold then warm measurements of one workload in this fresh process."""
    from overhead import Shell, _silenced, cell_source

    from gpu_notebook.capture.session import CaptureOptions, CaptureSession, private_scratch
    from gpu_notebook.cellrun import run_cell_body, run_sync

    os.environ.setdefault("KINETO_LOG_LEVEL", "6")
    # The --html page's module, by the name the measured version gives it (views/html.py before
    # it was named for its job).
    html_module = next(
        (
            m
            for m in ("gpu_notebook.views.html_report", "gpu_notebook.views.html")
            if importlib.util.find_spec(m) is not None
        ),
        None,
    )
    has_widget = importlib.util.find_spec("gpu_notebook.views.report_widget") is not None
    shell = Shell()
    body = cell_source("plain", workload, steps)
    shell.time_cell(body)  # torch and DataLoader warm-up; the tool itself is not warmed
    from gpu_notebook.report.build import build_report
    from gpu_notebook.views.text import render_text

    # Called as magic_run.run_measured_cell calls it (the arguments this version accepts).
    accepted = inspect.signature(build_report).parameters
    history: list[Any] = []
    out: list[dict[str, float]] = []
    for _ in range(repeats + 1):
        session = CaptureSession(CaptureOptions(), body)
        with _silenced():
            with session:
                outcome = run_sync(run_cell_body(shell.ip, body, "%%gpucheck"))
                t_end = _clock()
            close = _since(t_end)
            t = _clock()
            scratch = private_scratch()
            run = session.finish(outcome.status, outcome.error, scratch=scratch.name)
            kwargs: dict[str, Any] = {
                k: v
                for k, v in (("namespace", shell.ip.user_ns), ("history", tuple(history)))
                if k in accepted
            }
            report = build_report(run, **kwargs)
            build = _since(t)
            scratch.cleanup()
            history.append(report)
            t = _clock()
            render_text(report)
            text = _since(t)
            # The widget first: in a fresh kernel it is what imports bokeh (cold figure).
            widget = (0.0, 0.0)
            if has_widget:
                t = _clock()  # the import counts: %%gpucheck imports the view after the cell
                from gpu_notebook.views.report_widget import report_widget

                report_widget(report)
                widget = _since(t)
            html = (0.0, 0.0)
            if html_module is not None:
                t = _clock()
                importlib.import_module(html_module).render_html(report)
                html = _since(t)
        out.append(
            {
                "close_wall": close[0],
                "close_cpu": close[1],
                "build_wall": build[0],
                "build_cpu": build[1],
                "text_wall": text[0],
                "text_cpu": text[1],
                "html_wall": html[0],
                "html_cpu": html[1],
                "widget_wall": widget[0],
                "widget_cpu": widget[1],
                # What %%gpucheck shows in Jupyter (the widget; the text where no widget exists),
                # and the --html page.
                "notebook_wall": build[0] + text[0] + (widget[0] if has_widget else html[0]),
                "notebook_cpu": build[1] + text[1] + (widget[1] if has_widget else html[1]),
                "page_wall": build[0] + html[0],
                "page_cpu": build[1] + html[1],
                "recorded_steps": float(run.window.recorded_steps),
            }
        )
    return {
        "cold": out[0],
        "warm": out[1:],
        "has_html": html_module is not None,
        "has_widget": has_widget,
    }


def _measure(workload: str, steps: int, repeats: int) -> dict[str, Any]:
    proc = subprocess.run(
        [
            sys.executable,
            str(Path(__file__).resolve()),
            "--child",
            workload,
            str(steps),
            str(repeats),
        ],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=900,
        check=False,
        env={**os.environ, "KINETO_LOG_LEVEL": "6"},
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(
            f"child {workload} failed (exit {proc.returncode}): {proc.stderr[-600:]}"
        )
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def main(argv: Sequence[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if len(argv) == 4 and argv[0] == "--child":
        print(json.dumps(child(argv[1], int(argv[2]), int(argv[3]))), flush=True)
        return 0
    args = parse_args(__doc__ or "", argv)
    steps = 30 if args.quick else 300
    repeats = 1 if args.quick else 5
    rounds = args.rounds or (1 if args.quick else 2)
    rows: list[Result] = []
    t_start = time.perf_counter()
    calls: dict[str, Callable[[], dict[str, Any]]] = {
        w: functools.partial(_measure, w, steps, repeats) for w in ("mlp", "cnn")
    }
    runs = interleave(calls, rounds)
    for workload, results in runs.items():
        cold = [r["cold"] for r in results]
        warm = [w for r in results for w in r["warm"]]
        has_html = results[0]["has_html"]

        def fmt(rows_: list[dict[str, float]], key: str) -> str:
            return f"{median([r[key + '_cpu'] for r in rows_]) * 1e3:.0f} ms CPU / {median([r[key + '_wall'] for r in rows_]) * 1e3:.0f} ms wall"

        print(
            f"# {workload}: {int(warm[0]['recorded_steps'])} profiled steps; warm medians: close {fmt(warm, 'close')}, "
            f"build_report {fmt(warm, 'build')}, text {fmt(warm, 'text')}, html {fmt(warm, 'html')}, "
            f"widget {fmt(warm, 'widget')}",
            flush=True,
        )
        print(
            f"# {workload}: cold: close {fmt(cold, 'close')}, build_report {fmt(cold, 'build')}, "
            f"text {fmt(cold, 'text')}, html {fmt(cold, 'html')}, widget {fmt(cold, 'widget')}",
            flush=True,
        )
        view = (
            "report_widget()" if results[0]["has_widget"] else ("render_html()" if has_html else "")
        )
        figures = [
            ("warm", "notebook", warm, f"build_report + text() + {view}"),
            ("cold", "notebook", cold, f"build_report + text() + {view}"),
        ]
        if has_html:
            figures.append(("html", "page", warm, "build_report + render_html() (the --html page)"))
        for kind, key, sample, what in figures:
            cpu = median([r[key + "_cpu"] for r in sample])
            wall = median([r[key + "_wall"] for r in sample])
            state = "cold" if kind == "cold" else "warm"
            emit(
                Result(
                    f"report.{workload}.{kind}_s",
                    f"{workload} {steps} steps: cell end -> report ready ({what}), {state}",
                    cpu,
                    f"{cpu:.3f} s CPU ({wall:.3f} s wall)",
                    f"<= {BUDGET_S}",
                    cpu <= BUDGET_S,
                    f"thread CPU, median of {len(sample)} "
                    f"({'first report in a fresh process' if kind == 'cold' else 'later reports'}); "
                    f"{rounds} child process(es), default window",
                ),
                rows,
            )
        close_cpu = median([r["close_cpu"] for r in warm])
        close_wall = median([r["close_wall"] for r in warm])
        emit(
            Result(
                f"report.{workload}.close_s",
                f"{workload}: capture close at the end of the cell, warm",
                close_cpu,
                f"{close_cpu:.3f} s CPU ({close_wall:.3f} s wall)",
                "",
                None,
                "thread CPU, CaptureSession.stop(): profiler stopped if still on, hooks off, samplers joined; "
                "the trace export runs in finish(), counted in the report's build",
            ),
            rows,
        )
    print(f"# report latency benchmark took {time.perf_counter() - t_start:.0f} s", flush=True)
    write_results(args.json_path, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
