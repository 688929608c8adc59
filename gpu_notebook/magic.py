"""The ``%%gpucheck`` cell magic: parse the options, run the cell under a capture, show the report."""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path
from types import FrameType
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments

from gpu_notebook.capture.session import CaptureOptions, copy_trace, unique_stem
from gpu_notebook.hygiene import our_imports_leave_no_filters, sweep
from gpu_notebook.options import capture_options, magic_measure_arguments, target_gpu
from gpu_notebook.records import Report

MAX_KEPT_REPORTS = 50


@magics_class
class GpuCheckMagics(Magics):
    """Holds the reports of this session so a later run can be compared with an earlier one."""

    def __init__(self, shell: Any) -> None:
        super().__init__(shell)
        self.reports: list[Report] = []
        self.last_cost: Any = None  # magic_run.CellCost of the latest cell (read by benchmarks)

    @magic_arguments()
    @argument(
        "-o",
        "--output",
        metavar="NAME",
        default=None,
        help="Store the report object in the variable NAME (like %%timeit -o).",
    )
    @argument(
        "--export",
        metavar="DIR",
        default=None,
        help="Write into DIR the profiler trace (Perfetto / chrome://tracing), the report JSON, "
        "and the sampled stacks (speedscope JSON, collapsed stacks for flamegraph.pl).",
    )
    @argument(
        "--price",
        metavar="PER_GPU_HOUR",
        type=float,
        default=None,
        help="Price of one GPU-hour: the what-if and the before/after also speak in money.",
    )
    @argument(
        "--html",
        metavar="PATH",
        default=None,
        help="Also write the report as one self-contained HTML file (opens offline).",
    )
    @argument("-q", "--quiet", action="store_true", help="Do not display the report (use with -o).")
    @magic_measure_arguments
    @cell_magic
    def gpucheck(self, line: str, cell: str) -> Any:
        """Measure a training cell and say what limits it: the GPU, the input, the host, syncs...

        The cell runs exactly as it would without the magic (same namespace, output, exceptions)
        while the GPUs (NVML) and CPUs (psutil) are sampled in the background, training steps are
        found through global torch hooks (no change to your code, no ``prof.step()``), and
        torch.profiler records a few steps after a warm-up. The report then gives the phase
        breakdown of a step (data wait, copies, forward, backward, optimizer, syncs), a verdict,
        and the answer to "will more GPUs help?".

        Usage::

            %load_ext gpu_notebook

            %%gpucheck [-s STEPS] [-w WARMUP] [-i SECONDS] [--no-profile]
                       [--lines {window,all,off}] [--gpu NAME] [-o NAME]
                       [--export DIR] [--html PATH] [--price PER_GPU_HOUR] [-q]
            for x, y in loader:
                loss = loss_fn(model(x), y)
                opt.zero_grad(); loss.backward(); opt.step()

        ``%%gpucheck -h`` prints this help. Quote a path with spaces (``--html "run 1.html"``);
        ``#`` starts a comment.

        Example: ``%%gpucheck -s 10 -o rep`` records 10 steps and keeps the report in ``rep``
        (``rep.to_json()``, ``rep.verdict``, ``rep.analysis.phases``).

        Without a GPU the report still splits each step on the CPU; without torch only the
        sampling runs.
        """
        from gpu_notebook import wait_for_warm_imports

        # First, before any of our modules is imported on this thread: the background imports
        # and this thread's share modules, and a cycle between two threads' imports ends in
        # Python's _DeadlockError (one first cell in four, typed at once after %load_ext).
        # Nor does the measured code share the GIL with them.
        wait_for_warm_imports()
        from gpu_notebook.cellrun import run_sync

        return run_sync(self.measure(line, cell))

    async def measure(self, line: str, cell: str) -> Any:
        """The magic's work, as a coroutine: ``%%gpucheck`` runs it at once (``run_sync``); a
        cell with top-level ``await`` is rewritten to await it in the kernel's loop
        (``magic_async``).

        Returns the value of the cell's last expression (None: none): IPython shows it as the
        cell's Out[N] after the report, and a magic stacked around this one (``%%time``,
        ``%%prun -q``) does with it what it does for the cell without this magic.
        """
        from gpu_notebook import wait_for_warm_imports

        wait_for_warm_imports()  # a cell with top-level await comes here first (see gpucheck)
        # What a race with the warm-up imports put back in the warning filters (hygiene: a
        # catch_warnings the user's first cell was in restores bokeh's) goes now, on every path:
        # a cell that does not compile, or bad options, returns before the measured cell's sweep.
        sweep()
        words = _split_options(line)
        if "-h" in words or "--help" in words:
            # As `gpucheck run --help` does: the options, and nothing runs. (The parser has no
            # help option: IPython's magics answer `%%gpucheck?`, which nobody guesses.)
            print(self.gpucheck.__doc__)
            return None
        args = self.gpucheck.parser.parse_args(words)
        # IPython numbers a cell from its first non-blank line; so do our line-level views.
        lines = cell.splitlines(keepends=True)
        while lines and not lines[0].strip():
            lines.pop(0)
        cell = "".join(lines)
        options = _validate(args, cell)
        export_dir = _export_dir(args.export)
        from gpu_notebook.cellrun import compiles, run_cell_body

        header = f"%%gpucheck {line}".rstrip()
        if not compiles(self.shell, cell):
            # Nothing runs: IPython shows the SyntaxError as for the cell without the magic,
            # and nothing of ours appears (no live view, no report).
            await run_cell_body(self.shell, cell, header)
            return None
        from gpu_notebook.magic_run import CellCost, measured_cell

        cost = self.last_cost = CellCost()
        outcomes: list[Any] = []  # the CellOutcome, once the body ran
        html_path = _html_path(args.html)
        with our_imports_leave_no_filters():
            live = _live_view() if not args.quiet else None
        try:
            async with measured_cell(
                self.shell,
                cell,
                header,
                options,
                live_listener=live.update if live is not None else None,
                history=self.reports,
                price_per_gpu_hour=args.price,
                cost=cost,
                target_gpu=target_gpu(args),
                on_outcome=outcomes.append,
            ) as measured:
                if measured is None:  # the cell did not compile: IPython said so, no report
                    if live is not None:
                        live.discard()
                    return None
                report = _with_stacked_magics(measured, _stacked_magic_lines(header))
                if export_dir is not None:
                    _write_or_say("--export", export_dir, lambda: _export(report, export_dir))
                if html_path is not None:
                    from gpu_notebook.views.html_report import write_html

                    _write_or_say("--html", html_path, lambda: write_html(report, html_path))
        except KeyboardInterrupt as exc:
            if live is not None:
                live.abandon("no report: interrupted")
            if not outcomes:
                raise  # the cell's own run was stopped before it ended: as without us
            # Stop pressed while the report was built: the cell had run to its end. One line,
            # no traceback through our analysis (it showed run_trend.py's frames); the run
            # still ends interrupted, so "Run All" stops here as the user asked.
            from gpu_notebook.cellrun import fail_enclosing

            print(
                "gpucheck: report interrupted: no report for this cell; the cell itself ran to "
                "its end",
                file=sys.stderr,
            )
            fail_enclosing(self.shell, exc)
            return outcomes[0].value
        except Exception as exc:
            if live is not None:
                live.abandon(f"no report: {type(exc).__name__}: {exc}")
            if not outcomes:
                raise  # the cell never ran: our failure before it, said as it is
            # The cell ran and IPython showed its outcome; building the report failed (a bug of
            # ours): one line says so, and the cell keeps its own status and value.
            _say_no_report(exc)
            return outcomes[0].value
        except BaseException as exc:
            if live is not None:
                live.abandon(f"no report: {type(exc).__name__}: {exc}")
            raise
        finally:
            if live is not None:
                live.detach()
        # The trace's private folder is gone now: the kept report says so instead of naming it.
        report = _without_trace_file(report)
        self.reports.append(report)
        del self.reports[:-MAX_KEPT_REPORTS]
        if args.output:
            self.shell.user_ns[args.output] = report
        with our_imports_leave_no_filters():
            if live is not None:
                live.finish(report)
            elif not args.quiet:
                from IPython.display import display

                display(report, metadata={"gpu_notebook": {"view": "report"}})
        cost.mark("shown")
        return outcomes[0].value if outcomes else None

    @line_magic
    def gpustatus(self, line: str) -> None:
        """Show every GPU's utilization, memory, temperature, power and the processes holding it.

        Usage: ``%gpustatus`` — what a team sharing GPUs needs before starting a run. On a
        machine without an NVIDIA GPU it says so in one line.
        """
        if line.strip():
            raise UsageError("%gpustatus takes no arguments.")
        from IPython.display import display

        from gpu_notebook import wait_for_warm_imports

        wait_for_warm_imports()  # their imports and ours share modules (see gpucheck)
        from gpu_notebook.status import machine_status
        from gpu_notebook.views.gpustatus import render_status_html, render_status_text

        status = machine_status()
        display(
            {"text/plain": render_status_text(status), "text/html": render_status_html(status)},
            raw=True,
        )


def _split_options(line: str) -> list[str]:
    """The option line as a shell splits it: quotes group words and go (IPython's own
    ``parse_argstring`` keeps them, so ``--html "run 1.html"`` wrote a file named with its
    quotes), ``#`` starts a comment, and an unclosed quote is a usage error, not a traceback
    from shlex."""
    import shlex

    try:
        return shlex.split(line, comments=True, posix=os.name != "nt")
    except ValueError as exc:  # shlex says only "No closing quotation"
        raise UsageError(
            f"%%gpucheck options: {str(exc).lower()} in {line.strip()!r}; "
            'quote a path with spaces as "a b.html".'
        ) from None


def _validate(args: Any, cell: str) -> CaptureOptions:
    """Turn parsed arguments into options, or raise UsageError before the cell runs."""
    if not cell.strip():
        raise UsageError(
            "%%gpucheck needs a cell body to measure: put it on the first line of a training cell."
        )
    if args.price is not None and not (math.isfinite(args.price) and args.price > 0):
        raise UsageError(f"--price must be a positive price per GPU-hour (got {args.price}).")
    if args.output is not None and not str(args.output).isidentifier():
        raise UsageError(f"-o needs a Python variable name (got {args.output!r}).")
    try:
        target_gpu(args)
        return capture_options(args)
    except ValueError as exc:
        raise UsageError(f"{exc}.") from None


def _live_view() -> Any:
    """The live widget inside a Jupyter kernel; None in terminal IPython (text report there)."""
    from gpu_notebook.views.live import LiveView

    if not LiveView.available():
        return None
    view = LiveView()
    view.show()
    return view


def _say_no_report(exc: Exception) -> None:
    """One line on stderr where the report could not be built after the cell ran."""
    from gpu_notebook.escapes import printable
    from gpu_notebook.traces.source import describe

    print(
        "gpucheck: no report for this cell (a bug of ours, not of your code: "
        f"{printable(describe(exc))}); the cell ran as it does without %%gpucheck",
        file=sys.stderr,
    )


def _write_or_say(option: str, path: Path, write: Any) -> None:
    """A file the cell asked for that cannot be written is one line on stderr: the cell, its
    report and its outcome stay what they are (a good cell never fails for our file)."""
    import sys

    from gpu_notebook.escapes import printable
    from gpu_notebook.traces.source import describe

    try:
        write()
    except Exception as exc:  # noqa: BLE001 - our file, not the user's code: one line
        print(
            f"gpucheck: cannot write {option} {printable(str(path))}: {describe(exc)}",
            file=sys.stderr,
        )


def _html_path(value: str | None) -> Path | None:
    """The path, absolute now: the cell may ``chdir`` before the report is written."""
    if value is None:
        return None
    path = Path(os.path.abspath(Path(value).expanduser()))
    if path.is_dir():
        raise UsageError(f"--html needs a file name; {value!r} is a folder.")
    if not path.parent.exists():
        raise UsageError(f"--html: folder {str(path.parent)!r} does not exist.")
    return path


def _export_dir(value: str | None) -> Path | None:
    """The folder, absolute now (the cell may ``chdir``) and created (again at the end if the
    cell removed it)."""
    if value is None:
        return None
    path = Path(os.path.abspath(Path(value).expanduser()))
    if path.exists() and not path.is_dir():
        raise UsageError(f"--export needs a folder; {value!r} is a file.")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--export: cannot create folder {value!r}: {exc.strerror}.") from None
    return path


def _stacked_magic_lines(header: str) -> str:
    """The ``%%`` lines stacked above ours in the cell the user ran (``%%time``,
    ``%%capture cap``), outermost first, each ending in a newline; "" when none.

    IPython runs a ``%%time`` cell whose next line is ``%%gpucheck`` as the time magic's call
    of ``run_cell_magic`` on a body whose first line is ours, so each enclosing ``run_cell_magic`` frame whose cell
    starts with the line below it is one of the cell's own lines. (A magic called from a body
    does not start its cell with our line: it is not taken.)
    """
    import sys

    here = os.path.join("IPython", "core", "interactiveshell.py")
    inner = header.rstrip()
    lines: list[str] = []
    ours_seen = False
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_name == "run_cell_magic" and code.co_filename.endswith(here):
            if not ours_seen:  # the innermost is the call of this magic
                ours_seen = True
            else:
                name, line, cell = (frame.f_locals.get(k) for k in ("magic_name", "line", "cell"))
                if (
                    not isinstance(cell, str)
                    or cell.lstrip("\n").split("\n", 1)[0].rstrip() != inner
                ):
                    break
                inner = f"%%{name} {line}".rstrip()
                lines.append(inner)
        frame = frame.f_back
    return "".join(f"{line}\n" for line in reversed(lines))


def _with_stacked_magics(report: Report, stacked: str) -> Report:
    """Each patched cell as the cell the user ran: the magics stacked above ours kept (the
    inserted cell of a ``%%time``'d cell lost its ``%%time``, of a ``%%capture cap`` one the
    capture, which a later cell reading ``cap`` then read from the unpatched run)."""
    import dataclasses

    if not stacked:
        return report
    findings = tuple(
        dataclasses.replace(
            f,
            proposal=dataclasses.replace(
                f.proposal, source_after=stacked + f.proposal.source_after
            ),
        )
        if f.proposal is not None and f.proposal.source_after is not None
        else f
        for f in report.findings
    )
    return dataclasses.replace(report, findings=findings)


def _without_trace_file(report: Report) -> Report:
    import dataclasses

    window = report.run.window
    if window.trace_path is None:
        return report
    run = dataclasses.replace(report.run, window=dataclasses.replace(window, trace_path=None))
    return dataclasses.replace(report, run=run)


def _export(report: Report, folder: Path) -> None:
    """Trace, report JSON (naming the trace beside it) and stacks, under one unique stem."""
    import dataclasses

    stem = unique_stem(report.run.started_at)
    folder.mkdir(parents=True, exist_ok=True)  # the cell may have removed it
    trace = report.run.window.trace_path
    exported = report
    if trace is not None and Path(trace).exists():
        name = f"{stem}.trace.json.gz"
        copy_trace(Path(trace), folder / name)
        window = dataclasses.replace(report.run.window, trace_path=name)
        exported = dataclasses.replace(report, run=dataclasses.replace(report.run, window=window))
    (folder / f"{stem}.report.json").write_text(exported.to_json(indent=1))
    stacks = report.analysis.stacks
    if stacks is not None and stacks.samples:
        import json

        from gpu_notebook.analysis.lines import to_collapsed, to_speedscope

        (folder / f"{stem}.speedscope.json").write_text(json.dumps(to_speedscope(stacks)))
        (folder / f"{stem}.collapsed.txt").write_text(to_collapsed(stacks))
