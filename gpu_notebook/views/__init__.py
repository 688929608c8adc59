"""Views: render a Report (text, widgets, HTML); they never compute figures, and they alone
write sentences (``wording``: the stages below hand figures up as records).

``text.render_text`` (terminal, CLI, ``repr``), ``html_report.render_html`` / ``write_html``
(one offline page), ``report_widget.report_widget`` (the notebook's report) and
``live.LiveView`` (during the cell) are the entry points; ``job_text.render_job`` words a
torchrun job's report, ``tryfix_text`` the trials of ``--try-fixes``, ``gpustatus`` the machine
(``%gpustatus``), and ``terminal.LiveLine`` is ``gpucheck run``'s live line on a terminal.
Records know nothing of them, so importing this package installs the text view as
``repr(report)``.

``insert_widget.InsertFixWidget`` offers one fix as a new code cell below the profiled cell
("Insert fix"), with a copy / ``%load`` fallback where no gpu-notebook labextension answers.
"""

from gpu_notebook.records import install_text_view
from gpu_notebook.views.text import render_text

install_text_view(render_text)
