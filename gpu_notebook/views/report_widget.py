"""The final report as an ipywidgets tree: the verdict first, then fixes with Insert buttons, charts.

:func:`report_widget` builds a :class:`ReportWidget` (an ``ipywidgets.VBox``) from the section
fragments of :mod:`gpu_notebook.views.html_report` (every user or trace string escaped there), one
:class:`~gpu_notebook.views.insert_widget.InsertFixWidget` per finding whose proposal has a
patched cell, and the bokeh charts in a sandboxed iframe ``srcdoc`` (scripts inside
``ipywidgets.HTML`` do not run; an iframe's do: seen in JupyterLab 4.6 and Notebook 7.6). Its text/plain representation is
the full text report, so a frontend without widgets still shows the report.
"""

from __future__ import annotations

from typing import Any

import ipywidgets

from gpu_notebook.records import Finding, Report
from gpu_notebook.views import html_report as sections
from gpu_notebook.views.text import render_text

__all__ = ["ReportWidget", "charts_iframe", "report_widget"]


def _block(*fragments: str, style: bool = False) -> ipywidgets.HTML:
    css = f"<style>{sections.report_css()}</style>" if style else ""
    return ipywidgets.HTML(value=f'{css}<div class="gpuc">{"".join(fragments)}</div>')


def charts_iframe(report: Report) -> str:
    """The charts as an ``<iframe sandbox="allow-scripts" srcdoc=...>`` (bokeh INLINE).

    The sandbox (no ``allow-same-origin``) lets bokeh's scripts run but keeps them away from
    the notebook page. Returns a short sentence instead when bokeh is missing or nothing can be
    charted.
    """
    from gpu_notebook.views.charts import chart_document, charts_file_html

    doc = chart_document(report)
    if doc is None:
        return '<p class="muted">No samples or steps to chart.</p>'
    page = charts_file_html(doc)
    return (
        f'<iframe sandbox="allow-scripts" title="gpucheck charts" '
        f'style="height:{doc.height_px}px" srcdoc="{sections.esc(page)}"></iframe>'
    )


def _finding_widget(finding: Finding, number: int, cell_id: str | None) -> ipywidgets.Widget:
    """The finding's card, plus the Insert-fix widget when the fix could be made for this cell."""
    proposal = finding.proposal
    if proposal is None or proposal.source_after is None:
        return _block(sections.finding_card(finding, number, with_code=False))
    try:
        from gpu_notebook.views.insert_widget import InsertFixWidget
    except ModuleNotFoundError:  # anywidget missing: show the patched code instead of a button
        return _block(sections.finding_card(finding, number, with_code=True))
    insert = InsertFixWidget(proposal.title, proposal.source_after, proposal.diff or "", cell_id)
    card = _block(sections.finding_card(finding, number, with_code=False, insert_below=True))
    return ipywidgets.VBox(children=(card, insert), layout=ipywidgets.Layout(margin="0 0 6px 0"))


class ReportWidget(ipywidgets.VBox):  # type: ignore[misc]
    """A report as widgets. ``report``: the record shown; ``insert_widgets``: one per patch."""

    def __init__(self, report: Report, cell_id: str | None = None, **kwargs: Any) -> None:
        self.report = report
        findings = report.findings  # ranked once, by the rules (rules.rank_key)
        children: list[ipywidgets.Widget] = [
            _block(
                sections.verdict_section(report),
                sections.comparison_section(report.comparison),
                sections.whatif_section(report.whatif),
                sections.gpu_estimate_section(report),
                sections.findings_header(findings),
                style=True,
            ),
            *(_finding_widget(f, i, cell_id) for i, f in enumerate(findings, 1)),
            _block(sections.phases_section(report), sections.run_shape_section(report)),
            _block(
                "<h2>Timeline and phases per step</h2>",
                f'<div class="charts">{charts_iframe(report)}</div>',
            ),
            _block(
                sections.resources_section(report),
                sections.ops_section(report.analysis.top_ops),
                sections.lines_section(report),
                sections.notes_section(report.run),
                sections.source_section(report.run),
                sections.footer(report),
            ),
        ]
        super().__init__(children=children, **kwargs)

    @property
    def insert_widgets(self) -> list[ipywidgets.Widget]:
        from gpu_notebook.views.insert_widget import InsertFixWidget

        found: list[ipywidgets.Widget] = []
        for child in self.children:
            if isinstance(child, ipywidgets.VBox):
                found += [w for w in child.children if isinstance(w, InsertFixWidget)]
        return found

    def __repr__(self) -> str:
        return render_text(self.report)

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        # ipywidgets cuts text/plain at 110 characters; frontends without widgets (jupyter
        # console, nbconvert without widget state, GitHub) then show the whole text report.
        data = super()._repr_mimebundle_(**kwargs)
        if isinstance(data, dict):
            data["text/plain"] = repr(self)
        return data


def report_widget(report: Report, cell_id: str | None = None) -> ReportWidget:
    """The report as a widget tree. ``cell_id``: the profiled cell (fixes are inserted below it);
    None lets the Insert-fix button find the cell that holds the widget."""
    return ReportWidget(report, cell_id=cell_id)
