"""Run -> Report: analysis, verdict, what-if and findings in one call."""

from __future__ import annotations

from gpu_notebook.analysis.analyze import analyze
from gpu_notebook.analysis.verdict import decide
from gpu_notebook.analysis.whatif import what_if
from gpu_notebook.records import Report, Run


def build_report(run: Run, price_per_gpu_hour: float | None = None) -> Report:
    analysis = analyze(run)
    return Report(
        run=run,
        analysis=analysis,
        verdict=decide(run, analysis),
        findings=(),
        whatif=what_if(run, analysis, price_per_gpu_hour),
    )
