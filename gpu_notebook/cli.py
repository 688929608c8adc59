"""The ``gpucheck`` command line: run a script under the capture, analyse traces, gate CI."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import traceback
import typing
from collections.abc import Sequence
from pathlib import Path
from types import CodeType, ModuleType
from typing import Any, NoReturn

from gpu_notebook.cli_console import say, show
from gpu_notebook.exception_text import exception_line
from gpu_notebook.records import VerdictCategory
from gpu_notebook.views.terminal import LiveLine
from gpu_notebook.views.text import render_text

VERDICTS: tuple[str, ...] = typing.get_args(VerdictCategory)
EXIT_GATE = 3  # a CI gate failed (the script itself succeeded)
EXIT_USAGE = 2


# ------------------------------------------------------------------------------ run


def _options(args: argparse.Namespace) -> Any:
    from gpu_notebook.options import capture_options, target_gpu

    try:
        target_gpu(args)
        return capture_options(args)
    except ValueError as exc:
        say(f"gpucheck: {exc}")
        raise SystemExit(EXIT_USAGE) from None


def _print_script_traceback(script: Path, exc: BaseException) -> None:
    """What Python does with an uncaught exception: ``sys.excepthook`` (the script's own, if
    it set one), with the traceback starting at the script's frames (not ours)."""
    tb = exc.__traceback__
    while tb is not None and Path(tb.tb_frame.f_code.co_filename).resolve() != script.resolve():
        tb = tb.tb_next
    tb = tb if tb is not None else exc.__traceback__
    exc.with_traceback(tb)  # Python's own hook prints the exception's traceback, not the argument
    try:
        sys.excepthook(type(exc), exc, tb)
    except Exception:  # noqa: BLE001 - a failing hook: Python then prints the traceback itself
        traceback.print_exception(type(exc), exc, tb)


def _exit_forked_child(code: int) -> NoReturn:
    """Leave a forked child as Python would (its atexit functions, flushed streams), then by
    ``os._exit``: once torch's profiler has run in a process (our window did, in the parent), a
    forked child hangs in torch's C++ destructors at exit (plain torch 2.13 does the same after a
    user's own profiler). ``os._exit`` skips those destructors, as multiprocessing's fork does."""
    import atexit
    import contextlib

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stream.flush()
    os._exit(code)


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # sys.exit("message") prints it and exits 1, as Python does
    return 1


def _script_root_codes() -> tuple[CodeType, ...]:
    """Where the stack sampler's walk stops for a script: our frame that ``exec``s it.

    The frame below it is the script's module code, so the script's lines are the "cell's" as
    IPython's ``run_code`` makes a cell's.
    """
    return (_exec_script.__code__,)


def _exec_script(script: Path, module: ModuleType) -> None:
    """Run ``script`` as ``python script.py`` runs it: in ``module``, a fresh ``__main__``
    (``script_module.fresh_main``), its code named by its absolute path (``__file__`` and
    tracebacks), ``sys.argv[0]`` left as typed (runpy.run_path would set it to the path it was
    given). The caller keeps ``module``: its globals, as the script left them, are the
    report's namespace."""
    from gpu_notebook.script_module import compile_file

    code = compile_file(os.path.abspath(script))
    saved = sys.modules.get("__main__")
    sys.modules["__main__"] = module
    try:
        exec(code, module.__dict__)
    finally:
        if saved is not None:
            sys.modules["__main__"] = saved


def cmd_run(args: argparse.Namespace) -> int:
    from gpu_notebook.capture.session import CaptureSession
    from gpu_notebook.cli_console import take_stderr
    from gpu_notebook.launchers import launcher_hint, launcher_of
    from gpu_notebook.script_module import fresh_main

    take_stderr()  # our words go to the terminal's stderr, whatever the script does with fd 2
    script = Path(args.script)
    if launcher_of(args.script) is not None:
        say(
            f"gpucheck: {args.script} is a launcher, not a training script (gpucheck would "
            f"measure the launcher): {launcher_hint(args.script, args.script_args)}"
        )
        return EXIT_USAGE
    if not script.is_file():
        say(f"gpucheck: no such script: {args.script}")
        return EXIT_USAGE
    # Absolute now: the script may chdir, or remove the folder it started in.
    script_abs = Path(os.path.abspath(script))
    options = _options(args)
    outputs = _pinned_outputs(args)
    if outputs is None:
        return EXIT_USAGE
    live = _live_line(args)
    session = CaptureSession(
        options,
        script.read_text(),
        live_listener=live.update if live else None,
        first_line=1,
        stack_root_codes=_script_root_codes(),
        program="script",
    )
    old_argv, old_path = sys.argv[:], sys.path[:]
    sys.argv = [str(script), *args.script_args]
    # As `python script.py`: sys.path[0] is the script's folder (here it was the cwd, from -m).
    if sys.path:
        sys.path[0] = str(script.resolve().parent)
    else:
        sys.path.insert(0, str(script.resolve().parent))
    status, error, code = "ok", None, 0
    pid = os.getpid()
    # The script's globals, as a notebook's namespace is to a cell: the report reads the live
    # objects behind the names the script uses (a loader's workers, a compiled model, Dynamo's
    # counters) and the user's functions it calls. Whatever was bound when the script ended,
    # stopped or failed; held only until the report is built (``_report_and_files``).
    module = fresh_main(str(script_abs))
    try:
        with session:
            try:
                _exec_script(script, module)
            except SystemExit as exc:
                code = _exit_code(exc.code)
                if code:
                    status, error = "error", f"SystemExit: {exc.code}"
            except KeyboardInterrupt as exc:
                _print_script_traceback(script_abs, exc)
                status, error, code = "interrupted", "KeyboardInterrupt", 130
                _die_by_sigint_at_exit()
            except Exception as exc:  # noqa: BLE001 - the script's failure: shown as Python shows it
                _print_script_traceback(script_abs, exc)
                status, error, code = "error", exception_line(exc), 1
    finally:
        sys.argv, sys.path[:] = old_argv, old_path
        if live is not None and os.getpid() == pid:
            live.clear()
    if os.getpid() != pid:
        # A child the script forked (os.fork) ended through sys.exit or an exception: the
        # report is the parent's alone, and the child exits as it would without us.
        _exit_forked_child(code)
    namespace = [module.__dict__]
    del module  # the list is the one reference: the report's build lets it go
    try:
        report, files = _report_and_files(
            session, status, error, args, outputs, script_abs, namespace
        )
    except KeyboardInterrupt:
        # Ctrl-C while we build the report: none, and the process ends by SIGINT as Python's.
        say("gpucheck: interrupted: no report")
        _die_by_sigint_at_exit()
        return 130
    info = report.run.rank
    if not args.quiet:
        if info is not None and info.rank != 0 and info.world_size > 1:
            say(_rank_line(report, files))
        else:
            say(render_text(report))
    if info is not None:
        _job_report_step(report, files, args, outputs.get("--job-json"))
    gate = _gate_failure(report, args)
    if gate is not None:
        say(f"gpucheck: {gate}")
        return code or EXIT_GATE
    return code


def _report_and_files(
    session: Any,
    status: str,
    error: str | None,
    args: argparse.Namespace,
    outputs: Any,
    script: Path,
    namespace: list[dict[str, Any]],
) -> tuple[Any, list[str]]:
    """The report, built in a private folder that a SIGTERM then does not leave behind.

    ``namespace`` holds the script's globals (at most one dict): the rules read them as a
    notebook's, and the list is emptied as the report is built, so nothing of ours holds them
    after it. Python may: ``import multiprocessing`` (torch imports it) while the script is
    ``__main__`` aliases its module as ``sys.modules["__mp_main__"]``, so its globals live to
    the process's end, as under plain ``python script.py``."""

    from gpu_notebook.capture.session import private_scratch
    from gpu_notebook.exit_signals import cleanup_before_signal_death
    from gpu_notebook.report.build import build_report

    # The script's stdout stays the script's own: the report goes to stderr, after it.
    with (
        private_scratch() as scratch,
        cleanup_before_signal_death(lambda: shutil.rmtree(scratch, ignore_errors=True)),
    ):
        # The patched script is in the JSON and HTML and is what --try-fixes runs; the text
        # never prints it, and building it costs libcst's import (~0.3 s) and the codemods.
        with_fixes = args.try_fixes is not None or "--json" in outputs or "--html" in outputs
        report = build_report(
            session.finish(status, error, scratch=scratch),
            target_gpu=args.gpu,
            with_fixes=with_fixes,
            namespace=namespace.pop() if namespace else None,
            namespace_is_source=True,
        )
        if args.try_fixes is not None:  # measure the offered fixes (gpu_notebook.tryfix)
            from gpu_notebook.tryfix.cli_hook import with_trials
            from gpu_notebook.views.tryfix_text import word_said, word_trials

            report = word_trials(with_trials(report, script, args.script_args, args, word_said))
        files = _write_outputs(report, outputs)
    return report, files


# Set when the script ended by an uncaught KeyboardInterrupt: main() then ends the process by
# SIGINT as Python does (a shell loop stops), after our report and cleanup.
_sigint_at_exit = False


def _die_by_sigint_at_exit() -> None:
    global _sigint_at_exit
    _sigint_at_exit = True


def _pinned_outputs(args: argparse.Namespace) -> dict[str, Any] | None:
    """Every output path fixed against the folder the run starts in, and checked now: a path
    that cannot be written is said before the script runs (None), not after a long training."""
    from gpu_notebook.capture.ranks import from_env
    from gpu_notebook.cli_outputs import resolve, unwritable

    info = from_env()
    job = job_json_path(args)
    typed = {"--json": args.json, "--html": args.html, "--trace": args.trace, "--job-json": job}
    pinned: dict[str, Any] = {}
    for option, value in typed.items():
        out = resolve(option, value)
        if out is None:
            continue
        if option == "--job-json" and (info is not None and info.rank != 0):
            pinned[option] = out  # only rank 0 writes the job report
            continue
        path = out.plain() if option == "--job-json" else out.for_rank(info)
        why = unwritable(path)
        if why is not None:
            say(f"gpucheck: cannot write {option} {value}: {why}")
            return None
        pinned[option] = out
    return pinned


def _write_outputs(report: Any, outputs: dict[str, Any]) -> list[str]:
    """Write the files asked for (``{rank}`` filled in; per-rank names in a multi-rank job).

    A file that cannot be written is one line; the others, the report and the exit code stay.
    """
    from gpu_notebook.cli_outputs import write_file

    info = report.run.rank
    written = []

    def attempt(option: str, write: Any) -> None:
        path = outputs[option].for_rank(info)
        why = write_file(path, write)
        if why is None:
            written.append(path)
        else:
            say(f"gpucheck: cannot write {option} {path}: {why}")

    if "--json" in outputs:
        attempt("--json", lambda p: p.write_text(report.to_json(indent=1)))
    if "--trace" in outputs:
        src = report.run.window.trace_path
        if src is None:
            say("gpucheck: no trace to write (the profiler window did not record)")
        else:
            from gpu_notebook.capture.session import copy_trace

            attempt("--trace", lambda p: copy_trace(Path(src), p))
    if "--html" in outputs:
        from gpu_notebook.views.html_report import write_html

        attempt("--html", lambda p: write_html(report, p))
    return written


# ------------------------------------------------------------------------------ jobs (torchrun)


def _live_line(args: argparse.Namespace) -> LiveLine | None:
    """The live line, on a terminal: in a multi-process job only local rank 0 draws it (ranks
    sharing one terminal would overwrite each other's), and it says which rank it is."""
    from gpu_notebook.capture.ranks import from_env
    from gpu_notebook.cli_console import stream

    err = stream()  # the terminal's stderr as it was when we started
    try:
        tty = err is not None and err.isatty()
    except (OSError, ValueError):
        tty = False
    if args.quiet or not tty or err is None:
        return None
    info = from_env()
    if info is None or info.world_size <= 1:
        return LiveLine(err)
    if info.local_rank not in (None, 0):
        return None
    return LiveLine(err, prefix=f"gpucheck rank {info.rank}/{info.world_size}")


def _rank_line(report: Any, files: Sequence[str]) -> str:
    """What a rank other than 0 prints: one line (rank 0 prints the job report)."""
    from gpu_notebook.escapes import printable

    info = report.run.rank
    where = f"; its report: {', '.join(printable(f) for f in files)}" if files else ""
    return (
        f"gpucheck rank {info.rank}/{info.world_size}: {report.verdict.category.upper()}: "
        f"{printable(report.verdict.headline)}{where} (rank 0 prints the job report)"
    )


def job_json_path(args: argparse.Namespace) -> str | None:
    """Where rank 0 writes the job report JSON: --job-json, else beside --json."""
    if getattr(args, "job_json", None):
        return str(args.job_json)
    if not getattr(args, "json", None):
        return None
    path = str(args.json)
    if "{rank}" in path:
        return path.replace("{rank}", "job")
    stem, dot, suffixes = path.rpartition("/")[2].partition(".")
    head = path[: len(path) - len(path.rpartition("/")[2])]
    return f"{head}{stem}.job{dot}{suffixes}" if dot else f"{path}.job"


def _job_report_step(
    report: Any, files: Sequence[str], args: argparse.Namespace, job_path: Any = None
) -> None:
    """Every rank sends its summary; rank 0 prints and writes the job report."""
    import msgspec

    from gpu_notebook.gather import exchange
    from gpu_notebook.records import RankFacts, to_jsonable
    from gpu_notebook.report.job import job_report, rank_facts
    from gpu_notebook.views.job_text import render_job

    info = report.run.rank
    mine = rank_facts(report, info, files)
    gathered = exchange(info, msgspec.json.encode(to_jsonable(mine)))
    if gathered is None:
        return
    facts = []
    for payload in gathered.payloads.values():
        try:
            facts.append(msgspec.json.decode(payload, type=RankFacts, strict=False))
        except msgspec.ValidationError:  # another gpucheck version on that rank
            continue
    job = job_report(
        facts,
        info.world_size,
        source="run",
        whatif=report.whatif,
        notes=[n for n in (gathered.note,) if n],
    )
    if not args.quiet:
        say("\n" + render_job(job))
    if job_path is not None:
        from gpu_notebook.cli_outputs import write_file

        path = job_path.plain()
        why = write_file(path, lambda p: p.write_text(json.dumps(to_jsonable(job), indent=1)))
        if why is not None:
            say(f"gpucheck: cannot write --job-json {path}: {why}")


def _gate_failure(report: Any, args: argparse.Namespace) -> str | None:
    """The reason a CI gate fails, or None. A gate that cannot be checked fails: it says why."""
    if args.fail_on:
        banned = {v.strip() for v in args.fail_on.split(",") if v.strip()}
        if report.verdict.category in banned:
            return f"verdict is {report.verdict.category} (--fail-on {args.fail_on}): {report.verdict.headline}"
    if args.min_gpu_util is not None:
        # NVML inside the steps where enough ticks fell there: the start-up is not the loop's.
        busy = report.analysis.utilization.nvml_busy
        util = None if busy is None else 100.0 * busy
        gpu = report.analysis.gpu
        if util is None and gpu is not None:
            util = 100.0 * gpu.busy_share
            if gpu.partial and util < args.min_gpu_util:
                # A partial GPU timeline's busy share is a lower bound: under the gate, unknown.
                return (
                    f"GPU utilization at least {util:.0f}%, not measured: the trace's GPU "
                    f"timeline is partial ({gpu.unclocked_events} GPU event(s) carry no "
                    f"timestamps) and NVML read nothing; --min-gpu-util {args.min_gpu_util:g} "
                    "cannot pass"
                )
        if util is None:
            return f"GPU utilization was not measured (no GPU visible); --min-gpu-util {args.min_gpu_util:g} cannot pass"
        if util < args.min_gpu_util:
            return f"GPU utilization {util:.0f}% is below --min-gpu-util {args.min_gpu_util:g}%"
    return None


# ------------------------------------------------------------------------------ analyze


def _trace_files(path: Path) -> list[Path]:
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.name.endswith((".json", ".json.gz")))
        return files
    return [path]


def _file_kind(path: Path) -> str:
    """ "trace", "report" (a gpucheck report JSON) or "job" (a job report), from the file's
    first bytes: a trace is never parsed twice, a report never read as a trace. InputError
    (trace.source) when even those cannot be read."""
    from gpu_notebook.traces.source import read_head

    head = read_head(path, 4096)
    if b'"kind": "gpucheck-job"' in head or b'"kind":"gpucheck-job"' in head:
        return "job"
    if any(
        k in head
        for k in (b'"traceEvents"', b'"schemaVersion"', b'"deviceProperties"', b'"distributedInfo"')
    ):
        return "trace"
    if b'"run"' in head and b'"env"' in head:
        return "report"
    return "trace"  # let the trace reader say what is wrong with it


def _cannot_read(path: Path | str, exc: BaseException) -> str:
    """``gpucheck: cannot read FILE: <why>``: the one line every bad input gets."""
    from gpu_notebook.escapes import printable
    from gpu_notebook.traces.source import describe

    why = describe(exc)
    prefix = f"{path}: "
    while why.startswith(prefix):  # the reader's own message may name the file again
        why = why[len(prefix) :]
    return f"gpucheck: cannot read {printable(str(path))}: {printable(why)}"


def _read_report(path: Path | str) -> Any:
    """A report JSON, read under the input cap (trace.source); raises what its line says."""
    from gpu_notebook.records import Report
    from gpu_notebook.traces.source import read_input

    return Report.from_json(read_input(path))


def _companions(reports: Sequence[Path], problems: list[str]) -> dict[int | None, Any]:
    """The report JSONs lying beside traces, by rank (None: a report that names no rank)."""
    out: dict[int | None, Any] = {}
    for f in reports:
        try:
            report = _read_report(f)
        except Exception as exc:  # noqa: BLE001 - a hostile or damaged file is one line, never a traceback
            problems.append(_cannot_read(f, exc))
            say(problems[-1])
            continue
        out[report.run.rank.rank if report.run.rank is not None else None] = report
    return out


def _analysed(f: Path, companions: dict[int | None, Any], alone: bool, gpu: str | None) -> Any:
    """(report, rank, world) of one trace, its file decoded once: the rank it records picks its
    companion. numpy's warnings on absurd values (a ts of 1e308) are ours, not the user's: the
    error they lead to is said in one line instead."""
    import warnings

    from gpu_notebook.report.from_trace import report_from_trace
    from gpu_notebook.traces.windows import WindowTraces

    traces = WindowTraces()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        info = traces.load(str(f)).distributed_info
        rank = info.rank if info is not None else None
        companion = companions.get(rank) if rank is not None else companions.get(None)
        if companion is None and alone:
            companion = companions.get(None)
        return report_from_trace(f, companion=companion, target_gpu=gpu, traces=traces)


def cmd_analyze(args: argparse.Namespace) -> int:
    """Traces only: a report JSON beside a trace is its companion (gradient bytes, host), a job
    report JSON is skipped; a folder of ranks gets the job report from the traces.

    A file that cannot be read (damaged, hostile, too large) is one line, ``gpucheck: cannot
    read FILE: <why>``; the others are still analysed, and the exit status is 2.
    """
    from gpu_notebook.cli_outputs import resolve
    from gpu_notebook.escapes import printable

    path = Path(args.path)
    if not path.exists():
        say(f"gpucheck: no such file or folder: {args.path}")
        return EXIT_USAGE
    if args.gpu is not None:
        from gpu_notebook.analysis.gpu_estimate import gpu_spec

        try:
            gpu_spec(args.gpu)
        except ValueError as exc:
            say(f"gpucheck: {exc}")
            return EXIT_USAGE
    outputs = [resolve(o, v) for o, v in (("--json", args.json), ("--job-json", args.job_json))]
    problems: list[str] = []
    kinds: dict[Path, str] = {}
    try:
        candidates = _trace_files(path)
    except OSError as exc:
        say(_cannot_read(path, exc))
        return EXIT_USAGE
    for f in candidates:
        try:
            kinds[f] = _file_kind(f)
        except ValueError as exc:
            problems.append(_cannot_read(f, exc))
            say(problems[-1])
    files = [f for f, k in kinds.items() if k == "trace"]
    if not files and not problems:
        say(f"gpucheck: no .json or .json.gz trace in {args.path}")
        return EXIT_USAGE
    companions = _companions([f for f, k in kinds.items() if k == "report"], problems)
    if len(files) == 1 and len(companions) == 1:
        only = next(iter(companions.values()))
        companions = {None: only}
    ranked = []
    for f in files:
        try:
            report, rank, world = _analysed(f, companions, len(files) == 1, args.gpu)
        except Exception as exc:  # noqa: BLE001 - a damaged or hostile trace is one line, never a traceback
            problems.append(_cannot_read(f, exc))
            say(problems[-1])
            continue
        ranked.append((f, report, rank, world))
        if not args.quiet:
            name = printable(f.name)
            label = f"rank {rank}" if rank is not None else name
            show(f"\n=== {label} ({name}) " + "=" * max(0, 60 - len(label) - len(name)))
            show(render_text(report))  # the text report holds 'Would a GPU help?'
    json_out, job_out = outputs
    if len(ranked) > 1 or any(w is not None and w > 1 for _, _, _, w in ranked):
        doubts = _not_one_job(ranked)
        if doubts:
            say(
                f"gpucheck: warning: these {len(ranked)} traces do not look like one job: "
                + "; ".join(doubts)
                + ". The summary below reads them as one anyway."
            )
        job = _job_from_traces(ranked, doubts)
        show()
        show(_render_job(job))
        if job_out is not None:
            from gpu_notebook.records import to_jsonable

            payload = json.dumps(to_jsonable(job), indent=1)
            problems += _written(job_out.plain(), "--job-json", payload)
    if json_out is not None and ranked:
        payload = json.dumps(
            [
                {"file": str(f), "rank": rank, "world_size": world, "report": r.to_dict()}
                for f, r, rank, world in ranked
            ],
            indent=1,
        )
        problems += _written(json_out.plain(), "--json", payload)
    if problems:
        return EXIT_USAGE
    gates = [g for g in (_gate_failure(r, args) for _, r, _, _ in ranked) if g]
    if gates:
        say(f"gpucheck: {gates[0]}")
        return EXIT_GATE
    return 0


def _written(path: str, option: str, text: str) -> list[str]:
    """Write ``text`` to ``path``: [] when done, else the one line said about it."""
    from gpu_notebook.cli_outputs import write_file

    why = write_file(path, lambda p: p.write_text(text))
    if why is None:
        return []
    say(f"gpucheck: cannot write {option} {path}: {why}")
    return [why]


def _not_one_job(ranked: Sequence[tuple[Path, Any, int | None, int | None]]) -> list[str]:
    from datetime import datetime

    from gpu_notebook.report.one_job import TraceFacts, not_one_job
    from gpu_notebook.views.wording import doubt_sentence

    def start_s(report: Any) -> float | None:
        try:
            return datetime.fromisoformat(report.run.started_at).timestamp()
        except ValueError:  # "": the trace does not say when it started
            return None

    doubts = not_one_job(
        [
            TraceFacts(
                f.name,
                rank,
                world,
                report.run.rank.host if report.run.rank is not None else "",
                start_s(report),
            )
            for f, report, rank, world in ranked
        ]
    )
    return [doubt_sentence(d) for d in doubts]


def _job_from_traces(
    ranked: Sequence[tuple[Path, Any, int | None, int | None]], doubts: Sequence[str] = ()
) -> Any:
    from gpu_notebook.records import RankInfo
    from gpu_notebook.report.job import job_report, rank_facts

    facts = []
    for i, (f, report, rank, world) in enumerate(ranked):
        info = report.run.rank or RankInfo(
            rank=rank if rank is not None else i, world_size=world or len(ranked), source="trace"
        )
        facts.append(rank_facts(report, info, (str(f),)))
    worlds = [w for _, _, _, w in ranked if w]
    world = max([*worlds, len(ranked)])
    # The what-if of the job: the lowest rank's (one rank stands for all in data parallel).
    first = min(ranked, key=lambda x: (x[2] is None, x[2] or 0))[1]
    notes = [f"maybe not one job: {d}" for d in doubts]
    if len(ranked) < world:
        notes.append(
            f"{len(ranked)} of the job's {world} ranks' traces are here: the rest are named missing"
        )
    return job_report(facts, world, source="traces", whatif=first.whatif, notes=notes)


def _render_job(job: Any) -> str:
    from gpu_notebook.views.job_text import render_job

    return render_job(job)


# ------------------------------------------------------------------------------ compare


def cmd_compare(args: argparse.Namespace) -> int:
    """Before/after of two report JSONs; a file that cannot be read is one line and exit 2."""
    import warnings

    from gpu_notebook.report.compare import compare
    from gpu_notebook.traces.source import describe
    from gpu_notebook.views.text import render_comparison

    reports = []
    for name in (args.before, args.after):
        try:
            reports.append(_read_report(name))
        except Exception as exc:  # noqa: BLE001 - a hostile or damaged file is one line, never a traceback
            say(_cannot_read(name, exc))
            return EXIT_USAGE
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            comparison = compare(reports[0], reports[1], price_per_gpu_hour=args.price_per_gpu_hour)
            text = render_comparison(comparison)
    except Exception as exc:  # noqa: BLE001 - figures no run could have written: one line
        say(f"gpucheck: cannot compare {args.before} with {args.after}: {describe(exc)}")
        return EXIT_USAGE
    show(text)
    return 0


# ------------------------------------------------------------------------------ demo


def cmd_demo(args: argparse.Namespace) -> int:
    from gpu_notebook.capture.session import CaptureOptions, CaptureSession
    from gpu_notebook.examples import EXAMPLES
    from gpu_notebook.report.build import build_report

    names = [args.example] if args.example else list(EXAMPLES)
    code = 0
    for name in names:
        # Run what is printed: the listing's line numbers are the report's (no leading newline).
        source = EXAMPLES[name].strip() + "\n"
        print(f"\n=== example: {name} " + "=" * max(0, 60 - len(name)))
        print(source, end="")
        print("-" * 72)
        # The example's frames sit right below this function's (exec adds no Python frame):
        # rooting the stack walk here makes the example's lines the "cell's" hot lines.
        session = CaptureSession(
            CaptureOptions(), source, first_line=1, stack_root_codes=(cmd_demo.__code__,)
        )
        with session:
            exec(compile(source, f"<gpucheck example {name}>", "exec"), {"__name__": "__main__"})
        report = build_report(session.finish("ok", None))
        print(render_text(report))
        if args.html:
            import functools

            from gpu_notebook.cli_outputs import write_file
            from gpu_notebook.views.html_report import write_html

            out = Path(os.path.abspath(args.html)) / f"gpucheck-demo-{name}.html"
            why = write_file(str(out), functools.partial(write_html, report))
            if why is None:
                print(f"\nHTML report: {out}")
            else:
                say(f"gpucheck: cannot write --html {out}: {why}")
                code = EXIT_USAGE
    return code


# ------------------------------------------------------------------------------ parser


def _add_capture_options(p: argparse.ArgumentParser) -> None:
    from gpu_notebook.options import add_measure_options

    add_measure_options(p.add_argument)


def _add_gates(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--fail-on",
        metavar="VERDICT[,VERDICT]",
        type=_verdict_list,
        default=None,
        help=f"exit {EXIT_GATE} when the verdict is one of these ({', '.join(VERDICTS)})",
    )
    p.add_argument(
        "--min-gpu-util",
        metavar="PCT",
        type=float,
        default=None,
        help=f"exit {EXIT_GATE} when mean GPU utilization is below PCT (or was not measured)",
    )


def _verdict_list(value: str) -> str:
    bad = [v for v in (x.strip() for x in value.split(",")) if v and v not in VERDICTS]
    if bad:
        raise argparse.ArgumentTypeError(
            f"unknown verdict {', '.join(bad)}; choose from {', '.join(VERDICTS)}"
        )
    return value


class _Version(argparse._VersionAction):
    """``--version``: the version is read when asked (importlib.metadata, ~0.1 s, issue 27)."""

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        import gpu_notebook

        self.version = f"gpucheck {gpu_notebook.__version__}"
        super().__call__(parser, *args, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    from gpu_notebook.examples import EXAMPLES

    parser = argparse.ArgumentParser(
        prog="gpucheck", description="Is training slow because of the GPU, or the code around it?"
    )
    parser.add_argument("--version", action=_Version, version="gpucheck")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser(
        "run",
        help="run a Python script under the capture and report on it",
        description="Run a Python script under the capture and report on it. In a multi-process "
        "job, put gpucheck inside the launcher: `torchrun --nproc_per_node 2 -m gpu_notebook run "
        "train.py`. Each rank then measures itself; rank 0 gathers the ranks' summaries and prints "
        "the job report (straggler, communication, the job's what-if). PATHs may hold '{rank}'; "
        "with more than one rank, a PATH without it gets '.rankN' before its suffix, so ranks "
        "never overwrite each other's files.",
    )
    _add_capture_options(run)
    _add_gates(run)
    run.add_argument("--html", metavar="PATH", help="write the standalone HTML report")
    run.add_argument("--json", metavar="PATH", help="write the report as JSON")
    run.add_argument(
        "--trace", metavar="PATH", help="write the Kineto trace (.json.gz; Perfetto opens it)"
    )
    run.add_argument(
        "--job-json",
        metavar="PATH",
        help="under torchrun: where rank 0 writes the job report (default: beside --json, "
        "'{rank}' replaced by 'job' or '.job' before the suffix)",
    )
    run.add_argument("-q", "--quiet", action="store_true", help="no live line, no text report")
    from gpu_notebook.tryfix.cli_hook import add_options as add_try_fix_options

    add_try_fix_options(run)
    run.add_argument("script", help="the training script")
    run.add_argument("script_args", nargs=argparse.REMAINDER, help="its arguments")
    run.set_defaults(func=cmd_run)

    analyze = sub.add_parser(
        "analyze",
        help="analyse Kineto traces: one file, or a folder of ranks",
        description="Analyse Kineto traces: one file, or a folder of per-rank traces (then the job "
        "report: straggler, communication). Report JSONs written by `gpucheck run --json` beside "
        "the traces are read as their companions (gradient bytes, host), never as traces.",
    )
    analyze.add_argument("path", help="a .json/.json.gz trace, or a folder of per-rank traces")
    analyze.add_argument("--json", metavar="PATH", help="write every rank's report as JSON")
    analyze.add_argument(
        "--job-json", metavar="PATH", help="write the job report (several ranks) as JSON"
    )
    analyze.add_argument("-q", "--quiet", action="store_true", help="only the cross-rank summary")
    analyze.add_argument(
        "--gpu", metavar="NAME", default=None,
        help="for a trace recorded without a GPU: estimate its step on this GPU (a100, h100, h200, l4, a10, t4, v100, mi250)",
    )  # fmt: skip
    _add_gates(analyze)
    analyze.set_defaults(func=cmd_analyze)

    compare = sub.add_parser("compare", help="before/after of two report JSON files")
    compare.add_argument("before")
    compare.add_argument("after")
    compare.add_argument(
        "--price-per-gpu-hour", type=float, default=None, help="for the money view"
    )
    compare.set_defaults(func=cmd_compare)

    demo = sub.add_parser("demo", help="measure the built-in example loops and print their reports")
    demo.add_argument(
        "example", nargs="?", choices=sorted(EXAMPLES), help="one example (default: all)"
    )
    demo.add_argument(
        "--html", metavar="DIR", help="also write an HTML report per example into DIR"
    )
    demo.set_defaults(func=cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    code = int(args.func(args))
    if _sigint_at_exit:
        _end_by_sigint()
    return code


def _end_by_sigint() -> NoReturn:
    """End as ``python script.py`` ends on an uncaught KeyboardInterrupt: by SIGINT itself.

    Raised out of the interpreter's main module, a KeyboardInterrupt makes Python run its exit
    as usual (threads joined, atexit) and then kill itself with SIGINT (``Py_RunMain``): a shell
    loop stops, as it does for plain python. The script's traceback was printed already, so
    Python's own printing of this one is silenced.
    """
    sys.excepthook = lambda *_: None
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())
