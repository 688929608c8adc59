"""Run -> Report: analysis, verdict and findings in one call."""

from __future__ import annotations

from gpu_notebook.analysis.analyze import analyze
from gpu_notebook.analysis.verdict import decide
from gpu_notebook.records import Report, Run


def build_report(run: Run) -> Report:
    analysis = analyze(run)
    return Report(run=run, analysis=analysis, verdict=decide(run, analysis), findings=())
