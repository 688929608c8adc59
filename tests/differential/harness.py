"""Runs one corpus program plain and measured in fresh processes and lists what differs.

A program is a file in ``programs/``: ``nb_*.py`` declares notebook cells (run in a real kernel
through jupyter_client), ``script_*.py`` is a script (``python script.py`` vs
``python -m gpu_notebook run script.py``). Its settings are top-level literals read with ``ast``
(a script is never imported here):

- notebook: ``CELLS`` (list of str), ``MEASURED`` (index of the cell that gets ``%%gpucheck``),
  ``OPTIONS`` (extra ``%%gpucheck`` options), ``REPORT`` ("kept": the measured cell's saved
  outputs must still hold our report; "none": the cell must show no report of ours),
  ``OUTER`` (cell magic lines put above ``%%gpucheck`` in the measured cell, and atop the same
  cell in the plain run: ``"%%time"``), ``SAME`` ("saved": the measured cell is compared by
  what a saved notebook keeps of the user's outputs, text included, instead of message by
  message: a cell ending with ``clear_output(wait=True)`` gets its last outputs sent again
  before our report, which the pending clear would take otherwise).
- both: ``REPORT_HAS`` (list of regexes our measured report must match: the measured cell's
  outputs of ours, or the CLI report on stderr; html-escaped text is unescaped first).
- script: ``ARGS`` (list of str), ``OPTIONS`` (list of ``gpucheck run`` options; the paths they
  name are ours and left out of the files compared), ``REPORTS`` (how many reports stderr holds,
  default 1).
- cli (``cli_*.py``): a bad input to ``gpucheck`` itself (no plain twin: the tool must step
  aside in one line). The file is run first (``python cli_x.py`` in the work folder) to make its
  inputs; then each entry of ``RUNS`` (dicts: ``args``, the gpucheck arguments; ``exit``, the
  status expected; ``stderr``, a regex each stderr line must match; ``memory_mb``, an
  address-space limit set with setrlimit; ``env``, extra variables) runs
  ``python -m gpu_notebook ARGS``; no run may print a traceback or a control character.
- both: ``NORMALISE`` (list of ``(regex, replacement)`` applied to stdout/stderr/traceback text of
  BOTH runs: only for output that the framework makes nondeterministic by itself, documented in
  the program), ``TIMEOUT_S`` (hard limit per run, default 120).

Every program seeds torch, random and numpy itself (their states are compared). Global names
starting with ``_`` are not compared: a program keeps per-run values (times, pids) in them.

Contracts with gpu_notebook that the comparison relies on: every display_data /
update_display_data it emits carries ``metadata["gpu_notebook"]`` (dropped here, with comm
messages); the CLI's report goes to stderr, starting at the first line matching ``^gpucheck: ``
and running to its end (cut here). Everything else must be identical.

Harness-level normalisation (identity of the process, not behaviour): the kernel's pid in
``ipykernel_<pid>`` paths, and execution counts (the measured run has one more cell before the
program: ``%load_ext gpu_notebook``).
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.differential.probe import PROBE_MARK

PROGRAMS_DIR = Path(__file__).parent / "programs"
REPO_ROOT = Path(__file__).resolve().parents[2]
# One private folder per test session (two CI runs at once must not share program folders).
SCRATCH_ROOT = Path(os.environ.get("DIFF_SCRATCH") or tempfile.mkdtemp(prefix="gn-diff-"))
DEFAULT_TIMEOUT_S = 120
# A hang guard, not a time budget: a program's TIMEOUT_S is what it takes on an idle machine with
# room to spare; on a shared machine (CI with every core busy ran a torch.compile program past
# its 240 s) runs take several times longer, so each run may take HANG_FACTOR times it.
HANG_FACTOR = 3
SEED = "1234"

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_CELL_IN = re.compile(r"Cell In\[(\d+)\]")
_REPORT_START = re.compile(r"^gpucheck: ", re.M)
# The first line of a CLI report (its verdict): counted to catch a second report (forked child).
_REPORT_VERDICT = re.compile(r"^gpucheck: [A-Z][A-Z-]+ ", re.M)
PROBE_CELL = (
    "from tests.differential.probe import report as __diff_report\n__diff_report(globals())"
)


@dataclass
class Program:
    name: str
    path: Path
    kind: str  # "notebook" | "script"
    settings: dict[str, Any]

    @property
    def timeout_s(self) -> float:
        return HANG_FACTOR * float(self.settings.get("TIMEOUT_S", DEFAULT_TIMEOUT_S))

    @property
    def test_timeout_s(self) -> float:
        """The pytest-timeout of its test: both runs (plain, measured) plus set-up, so the
        harness's own per-run guard, which names the hung run, fires first."""
        return 2 * self.timeout_s + 120

    @property
    def normalise(self) -> list[tuple[str, str]]:
        return list(self.settings.get("NORMALISE", []))


def load_programs() -> list[Program]:
    out = []
    for path in sorted(PROGRAMS_DIR.glob("*.py")):
        if path.name.startswith("nb_"):
            kind = "notebook"
        elif path.name.startswith("script_"):
            kind = "script"
        elif path.name.startswith("cli_"):
            kind = "cli"
        else:
            continue
        settings: dict[str, Any] = {}
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target = node.targets[0]
                if isinstance(target, ast.Name) and target.id.isupper():
                    with contextlib.suppress(ValueError):
                        settings[target.id] = ast.literal_eval(node.value)
            elif (
                isinstance(node, ast.AugAssign)
                and isinstance(node.target, ast.Name)
                and node.target.id.isupper()
            ):
                # ``NORMALISE += [...]``: read as written, never skipped in silence (a skipped
                # normalisation once left a stream-order race in the corpus).
                if not isinstance(node.op, ast.Add) or node.target.id not in settings:
                    raise ValueError(f"{path.name}: unsupported setting line {node.lineno}")
                settings[node.target.id] = settings[node.target.id] + ast.literal_eval(node.value)
        name = path.stem.split("_", 1)[1]
        out.append(Program(name, path, kind, settings))
    return out


def _run_dirs(program: Program) -> tuple[Path, Path, Path]:
    """The same paths for both runs (they show in tracebacks and file listings), made empty."""
    base = SCRATCH_ROOT / program.name
    if base.exists():
        shutil.rmtree(base)
    work, tmp, meta = base / "work", base / "tmp", base / "meta"
    for d in (work, tmp, meta):
        d.mkdir(parents=True)
    return work, tmp, meta


def _env(tmp: Path, cache: Path) -> dict[str, str]:
    env = dict(os.environ)
    for key in list(env):
        # pytest's own variables and anything steering our tool from outside stay out.
        if key.startswith(("PYTEST_", "GPU_NOTEBOOK", "GPUCHECK")):
            del env[key]
    env["PYTHONPATH"] = str(REPO_ROOT)
    env["TMPDIR"] = str(tmp)
    env["PYTHONHASHSEED"] = SEED
    env["DIFF_SEED"] = SEED
    # Emptied before each run: with a cache the first run warmed, the second compiles another
    # way (cache hits, no pattern matching, other threads), so both start cold, at one path.
    shutil.rmtree(cache, ignore_errors=True)
    env["TORCHINDUCTOR_CACHE_DIR"] = str(cache)
    env.setdefault("OMP_NUM_THREADS", "2")
    env["TERM"] = "dumb"
    env.pop("COLUMNS", None)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _text(program: Program, s: str, pid: int | None = None) -> str:
    s = _ANSI.sub("", s)
    if pid is not None:
        s = s.replace(f"ipykernel_{pid}", "ipykernel_PID")
    for pattern, repl in program.normalise:
        s = re.sub(pattern, repl, s, flags=re.M)
    return s


# ---------------------------------------------------------------- notebook programs


@dataclass
class CellResult:
    status: str = "no reply"
    execution_count: Any = None
    stdout: str = ""
    stderr: str = ""
    outputs: list[Any] = field(default_factory=list)  # the user's, in order
    ours: list[Any] = field(default_factory=list)  # outputs carrying metadata["gpu_notebook"]
    saved: list[Any] = field(default_factory=list)  # what a saved notebook keeps (clear_output)
    ename: str | None = None
    stdout_before_value: str = ""  # stdout printed before the cell's Out[N] (where it stands)


@dataclass
class NotebookRun:
    cells: list[CellResult]
    probe: dict[str, Any] | None
    hang: str | None = None
    kernel_died: bool = False
    probe_error: str = ""


def _execute(kc: Any, code: str, deadline: float) -> tuple[CellResult, str | None]:
    msg_id = kc.execute(code, store_history=True, allow_stdin=False)
    cell = CellResult()
    idle = False
    while not idle:
        left_s = deadline - time.monotonic()
        if left_s <= 0:
            return cell, f"cell did not finish before the program's timeout: {code[:60]!r}"
        try:
            msg = kc.get_iopub_msg(timeout=min(left_s, 5))
        except queue.Empty:  # keep waiting until the deadline
            continue
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        kind, content = msg["msg_type"], msg["content"]
        if kind == "status":
            idle = content["execution_state"] == "idle"
        elif kind == "stream":
            setattr(cell, content["name"], getattr(cell, content["name"]) + content["text"])
            cell.saved.append(("stream", content["name"], content["text"]))
        elif kind in ("display_data", "update_display_data", "execute_result"):
            ours = isinstance(content.get("metadata", {}).get("gpu_notebook"), dict)
            entry = {"type": kind, "data": content.get("data", {})}
            if kind == "execute_result":
                entry["execution_count"] = content["execution_count"]
                cell.stdout_before_value = cell.stdout
            (cell.ours if ours else cell.outputs).append(entry)
            if kind != "update_display_data":
                cell.saved.append(("ours" if ours else "user", kind, entry["data"]))
        elif kind == "clear_output":
            cell.outputs.append({"type": "clear_output", "wait": content.get("wait", False)})
            cell.saved.append(("clear", content.get("wait", False)))
        elif kind == "error":
            cell.ename = content["ename"]
            cell.outputs.append(
                {
                    "type": "error",
                    "ename": content["ename"],
                    "evalue": content["evalue"],
                    "traceback": content["traceback"],
                }
            )
        # execute_input, comm_* and anything else: not the user's output.
    while True:
        left_s = deadline - time.monotonic()
        if left_s <= 0:
            return cell, "no execute_reply before the program's timeout"
        try:
            reply = kc.get_shell_msg(timeout=min(left_s, 5))
        except queue.Empty:
            continue
        if reply["parent_header"].get("msg_id") == msg_id:
            cell.status = reply["content"]["status"]
            cell.execution_count = reply["content"].get("execution_count")
            return cell, None


def _saved_outputs(events: list[Any]) -> list[Any]:
    """The outputs a saved notebook keeps, applying clear_output (wait=True: at the next output)."""
    kept: list[Any] = []
    pending = False
    for ev in events:
        if ev[0] == "clear":
            if ev[1]:
                pending = True
            else:
                kept = []
            continue
        if pending:
            kept, pending = [], False
        kept.append(ev)
    return kept


def _saved_user(cell: CellResult) -> list[Any]:
    """The user's outputs a saved notebook keeps (ours left out), each stream's text joined as
    a notebook joins consecutive stream outputs."""
    out: list[Any] = []
    for ev in _saved_outputs(cell.saved):
        if ev[0] == "ours":
            continue
        if ev[0] == "stream" and out and out[-1][0] == "stream" and out[-1][1] == ev[1]:
            out[-1] = ("stream", ev[1], out[-1][2] + ev[2])
        else:
            out.append(ev)
    return out


def run_notebook(program: Program, measured: bool) -> tuple[NotebookRun, int]:

    work, tmp, _meta = _run_dirs(program)
    cells = list(program.settings["CELLS"])
    marked = int(program.settings.get("MEASURED", 0))
    outer = program.settings.get("OUTER", "")  # cell magics stacked above ours (both runs)
    if measured:
        options = program.settings.get("OPTIONS", "")
        cells[marked] = f"%%gpucheck {options}".rstrip() + "\n" + cells[marked]
        cells.insert(0, "%load_ext gpu_notebook")
    if outer:
        at = marked + 1 if measured else marked
        cells[at] = outer.rstrip("\n") + "\n" + cells[at]
    env = _env(tmp, SCRATCH_ROOT / "inductor-cache")
    km, kc = _started_kernel(work, env)
    pid = km.provisioner.pid if km.provisioner is not None else None
    results: list[CellResult] = []
    hang = None
    probe = None
    deadline = time.monotonic() + program.timeout_s
    try:
        for code in [*cells, PROBE_CELL]:
            cell, hang = _execute(kc, code, deadline)
            results.append(cell)
            if hang is not None or not km.is_alive():
                break
        if hang is None and results and PROBE_MARK in results[-1].stdout:
            line = next(ln for ln in results[-1].stdout.splitlines() if ln.startswith(PROBE_MARK))
            probe = json.loads(line[len(PROBE_MARK) :])
        probe_error = (
            ""
            if probe is not None or not results
            else _short(
                [
                    _ANSI.sub("", o["traceback"][-1])
                    for o in results[-1].outputs
                    if o["type"] == "error"
                ]
                or results[-1].stderr,
                600,
            )
        )
        died = not km.is_alive()
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    if measured:
        results = results[1:]  # the %load_ext cell
    run = NotebookRun(results[: len(program.settings["CELLS"])], probe, hang, died, probe_error)
    return run, pid or 0


# Line numbers in the measured cell count its `%%gpucheck` line (line 1), as the notebook shows
# the cell: one more than the same cell without the magic. Taken back before comparing.
_TB_LINE = re.compile(r"(Cell In\[[^\]]*\], line )(\d+)")
_TB_CONTEXT = re.compile(
    r"^((?:\x1b\[[0-9;]*m)*(?:----> |      )?(?:\x1b\[[0-9;]*m)*)(\d+)(?= )", re.M
)
_CELL_FILE = re.compile(r"\b\d{6,}\.py\b")
_SYNTAX_LINE = re.compile(r"(, line )(\d+)(\))")


def _minus_magic_line(text: str) -> str:
    def dec(m: re.Match[str]) -> str:
        return (
            m.group(1)
            + str(int(m.group(2)) - 1)
            + (m.group(3) if m.lastindex and m.lastindex >= 3 else "")
        )

    return _SYNTAX_LINE.sub(dec, _TB_CONTEXT.sub(dec, _TB_LINE.sub(dec, text)))


# The measured cell's line 1 (its magic's line) in a traceback's context: compiled as a blank line.
_MAGIC_CONTEXT = re.compile(r"^(?:\x1b\[[0-9;]*m)*      1 (?:\x1b\[[0-9;]*m)*\n", re.M)


def _of_the_measured_cell(entry: str, own: str) -> str:
    """A traceback entry of the measured run, its line numbers as the plain run's: only the
    measured cell's own frames count the magic line (a frame in a function an earlier cell
    defined keeps its numbers), and the blank line 1 its context may show is dropped."""
    if entry.startswith("Cell In[") and not entry.startswith(own):
        return entry
    return _minus_magic_line(_MAGIC_CONTEXT.sub("", entry))


def _norm_cell(
    program: Program, c: CellResult, base: int, pid: int, magic_line: bool = False
) -> dict[str, Any]:
    def shift(m: re.Match[str]) -> str:
        return f"Cell In[+{int(m.group(1)) - base}]"

    outs = []
    for o in c.outputs:
        o = dict(o)
        if "execution_count" in o and o["execution_count"] is not None:
            o["execution_count"] -= base
        if o["type"] == "error":
            o["traceback"] = [
                "\n".join(
                    ln
                    for ln in _CELL_IN.sub(shift, _text(program, t, pid)).split("\n")
                    if "%%gpucheck" not in ln
                )
                for t in o["traceback"]
            ]
            o["evalue"] = _text(program, o["evalue"], pid)
            # IPython names a cell's code after a hash of it ("2709480926.py" in a SyntaxError):
            # the measured body is other code (its leading newline), so another name.
            o["evalue"] = _CELL_FILE.sub("<cell>.py", o["evalue"])
            o["traceback"] = [_CELL_FILE.sub("<cell>.py", t) for t in o["traceback"]]
            if magic_line:
                own = f"Cell In[+{(c.execution_count or 0) - base}]"
                o["traceback"] = [_of_the_measured_cell(t, own) for t in o["traceback"]]
                if o.get("ename") == "SyntaxError":
                    o["evalue"] = _minus_magic_line(o["evalue"])
        if "data" in o:
            o["data"] = {
                k: _text(program, v, pid) if isinstance(v, str) else v for k, v in o["data"].items()
            }
        outs.append(o)
    return {
        "status": c.status,
        "execution_count": None if c.execution_count is None else c.execution_count - base,
        "stdout": _CELL_IN.sub(shift, _text(program, c.stdout, pid)),
        "stdout before Out[N]": _CELL_IN.sub(shift, _text(program, c.stdout_before_value, pid)),
        "stderr": _CELL_IN.sub(shift, _text(program, c.stderr, pid)),
        "outputs": outs,
    }


# A warning's location in a cell: "<folder>/ipykernel_<pid>/<hash>.py:<line>: ".
_WARNING_AT = re.compile(r"\b(\d{6,})\.py:(\d+): ")


def _warnings_of_the_measured_cell(plain: CellResult, meas: CellResult) -> tuple[Any, Any]:
    """The measured cell's stderr with the warnings its own code raised placed as the plain
    run's: the cell's file is named after a hash of its code (the measured body is other code)
    and its lines count the magic line. Its own file is the one only that run's warnings name;
    a file both name is an earlier cell's (the same code in both runs), left as it is."""
    import dataclasses

    names_p = {m.group(1) for m in _WARNING_AT.finditer(plain.stderr)}
    names_m = {m.group(1) for m in _WARNING_AT.finditer(meas.stderr)}

    def place(text: str, own: set[str], minus: int) -> str:
        def sub(m: re.Match[str]) -> str:
            if m.group(1) not in own:
                return m.group(0)
            return f"<cell>.py:{int(m.group(2)) - minus}: "

        return _WARNING_AT.sub(sub, text)

    return (
        dataclasses.replace(plain, stderr=place(plain.stderr, names_p - names_m, 0)),
        dataclasses.replace(meas, stderr=place(meas.stderr, names_m - names_p, 1)),
    )


def compare_notebook(
    program: Program, plain: NotebookRun, plain_pid: int, meas: NotebookRun, meas_pid: int
) -> list[str]:
    diffs: list[str] = []
    for label, run in (("plain", plain), ("measured", meas)):
        if run.hang:
            diffs.append(f"{label} run hung: {run.hang}")
        if run.kernel_died:
            diffs.append(f"{label} run: the kernel died")
    if plain.hang:
        return diffs  # the program itself is broken: nothing to compare
    base_p = plain.cells[0].execution_count if plain.cells else 0
    base_m = meas.cells[0].execution_count if meas.cells else 0
    base_p = base_p or 0
    base_m = base_m or 0
    for i in range(max(len(plain.cells), len(meas.cells))):
        if i >= len(plain.cells) or i >= len(meas.cells):
            diffs.append(f"cell {i}: ran in one run only")
            continue
        pc, mc = plain.cells[i], meas.cells[i]
        if i == program.settings["MEASURED"]:
            pc, mc = _warnings_of_the_measured_cell(pc, mc)
        a = _norm_cell(program, pc, base_p, plain_pid)
        b = _norm_cell(program, mc, base_m, meas_pid, magic_line=i == program.settings["MEASURED"])
        if program.settings.get("SAME") == "saved" and i == program.settings["MEASURED"]:
            for norm, run in ((a, plain), (b, meas)):
                del norm["stdout"], norm["stdout before Out[N]"], norm["outputs"]
                norm["saved"] = _saved_user(run.cells[i])
        for key in a:
            if a[key] == b[key]:
                continue
            if isinstance(a[key], str) and isinstance(b[key], str):
                diffs.append(f"cell {i} {key}: {_first_difference(a[key], b[key])}")
            else:
                diffs.append(f"cell {i} {key}: plain={_short(a[key])} measured={_short(b[key])}")
    marked = int(program.settings.get("MEASURED", 0))
    expect = program.settings.get("REPORT") if os.environ.get("DIFF_CONTROL") != "1" else None
    if marked < len(meas.cells):
        cell = meas.cells[marked]
        if expect == "kept" and not any(ev[0] == "ours" for ev in _saved_outputs(cell.saved)):
            diffs.append("measured cell: no report of ours left in the saved outputs")
        if expect == "none" and cell.ours:
            diffs.append(f"measured cell: shows a report of ours: {_short(cell.ours)}")
        if os.environ.get("DIFF_CONTROL") != "1":
            shown = [v for e in cell.ours for v in e["data"].values() if isinstance(v, str)]
            diffs += _report_has(program, "\n".join(shown))
    for label, run in (("plain", plain), ("measured", meas)):
        if run.probe is None and not run.hang:
            diffs.append(f"{label} run: the probe cell printed nothing: {run.probe_error}")
    if plain.probe is not None and meas.probe is not None:
        diffs += compare_probes(plain.probe, meas.probe)
    return diffs


# ---------------------------------------------------------------- script programs


@dataclass
class ScriptRun:
    exit_code: int | None
    stdout: str
    stderr: str
    files: dict[str, str]
    tmp_left: list[str]
    probe: dict[str, Any] | None
    hang: bool


def _our_paths(options: list[str]) -> set[str]:
    """Paths named by --json/--html/--trace: the tool's own output, not files the script wrote."""
    out = set()
    for i, opt in enumerate(options[:-1]):
        if opt in ("--json", "--html", "--trace", "--export"):
            out.add(os.path.normpath(options[i + 1]))
    return out


def _started_kernel(work: Path, env: dict[str, str]) -> tuple[Any, Any]:
    """A ready kernel; one more try when it dies while starting (seen once with two CI runs
    side by side on 2 cores: "Kernel died before replying to kernel_info")."""
    from jupyter_client import KernelManager

    for attempt in (1, 2):
        km = KernelManager(kernel_name="python3")
        km.start_kernel(cwd=str(work), env=env)
        kc = km.client()
        kc.start_channels()
        try:
            kc.wait_for_ready(timeout=120)
        except RuntimeError:
            kc.stop_channels()
            km.shutdown_kernel(now=True)
            if attempt == 2:
                raise
            continue
        return km, kc
    raise AssertionError("unreachable")


def run_script(program: Program, measured: bool) -> ScriptRun:
    from tests.differential.probe import _files

    work, tmp, meta = _run_dirs(program)
    shutil.copy(program.path, work / "script.py")
    env = _env(tmp, SCRATCH_ROOT / "inductor-cache")
    env["DIFF_PROBE_PATH"] = str(meta / "probe.json")
    args = list(program.settings.get("ARGS", []))
    if measured:
        cmd = [
            sys.executable,
            "-m",
            "gpu_notebook",
            "run",
            *program.settings.get("OPTIONS", []),
            "script.py",
            *args,
        ]
    else:
        cmd = [sys.executable, "script.py", *args]
    proc = subprocess.Popen(
        cmd,
        cwd=work,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    hang = False
    try:
        out, err = proc.communicate(timeout=program.timeout_s)
    except subprocess.TimeoutExpired:
        hang = True
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
    # A forked child may outlive the parent: give it a moment, then end the whole group.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    files = _files(str(work))
    files.pop("script.py", None)
    for p in _our_paths(program.settings.get("OPTIONS", [])):
        files.pop(p, None)
    files = {k: v for k, v in files.items() if not k.startswith("__pycache__")}
    tmp_left = sorted(_norm_tmp_name(n) for n in os.listdir(tmp))
    probe_path = meta / "probe.json"
    probe = json.loads(probe_path.read_text()) if probe_path.exists() else None
    return ScriptRun(
        proc.returncode,
        out.decode(errors="replace"),
        err.decode(errors="replace"),
        files,
        tmp_left,
        probe,
        hang,
    )


def _norm_tmp_name(name: str) -> str:
    # tempfile/multiprocessing names end in random characters; the kind of entry is what counts.
    return re.sub(r"[a-z0-9_]{8}$", "*", name)


def compare_script(program: Program, plain: ScriptRun, meas: ScriptRun) -> list[str]:
    diffs: list[str] = []
    for label, run in (("plain", plain), ("measured", meas)):
        if run.hang:
            diffs.append(f"{label} run hung (killed after {program.timeout_s:.0f} s)")
    if plain.hang:
        return diffs
    if plain.exit_code != meas.exit_code:
        diffs.append(f"exit code: plain={plain.exit_code} measured={meas.exit_code}")
    a_out, b_out = _text(program, plain.stdout), _text(program, meas.stdout)
    if a_out != b_out:
        diffs.append(f"stdout: {_first_difference(a_out, b_out)}")
    m = _REPORT_START.search(meas.stderr)
    ours = meas.stderr[m.start() :] if m else ""
    user_err = meas.stderr[: m.start()] if m else meas.stderr
    a_err, b_err = _text(program, plain.stderr), _text(program, user_err)
    if a_err != b_err:
        diffs.append(f"stderr (less our report): {_first_difference(a_err, b_err)}")
    diffs += [f"our report: {d}" for d in _terminal_controls(ours)]
    if os.environ.get("DIFF_CONTROL") != "1":
        diffs += _report_has(program, ours)
    want = int(program.settings.get("REPORTS", 1))
    got = len(_REPORT_VERDICT.findall(ours))
    if got != want:
        diffs.append(f"measured stderr holds {got} report(s) of ours, expected {want}")
    for opt_path in _our_paths(program.settings.get("OPTIONS", [])):
        if opt_path.endswith(".json") and want:
            diffs += _check_json(program, opt_path)
    if plain.files != meas.files:
        diffs.append(f"files in cwd: plain={_short(plain.files)} measured={_short(meas.files)}")
    if plain.tmp_left != meas.tmp_left:
        diffs.append(
            f"left in the temp folder: plain={_short(plain.tmp_left)} "
            f"measured={_short(meas.tmp_left)}"
        )
    if (plain.probe is None) != (meas.probe is None):
        diffs.append(
            f"probe written: plain={plain.probe is not None} measured={meas.probe is not None}"
        )
    elif plain.probe is not None and meas.probe is not None:
        diffs += compare_probes(_settled(plain.probe), _settled(meas.probe))
    return diffs


# What our text may hold of the C0/C1 controls: the newline. Anything else (ESC, CSI, a bare CR,
# a bidi override) would let a trace's names or the user's strings drive the terminal.
_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def _terminal_controls(text: str) -> list[str]:
    found = sorted({repr(m.group(0)) for m in _CONTROL.finditer(text)})
    return [f"holds control character(s) {', '.join(found)}"] if found else []


def run_cli(program: Program) -> list[str]:
    """A ``cli_*`` program: its inputs made, then each of its RUNS checked (see the docstring)."""
    work, tmp, _meta = _run_dirs(program)
    shutil.copy(program.path, work / "make_inputs.py")
    env = _env(tmp, SCRATCH_ROOT / "inductor-cache")
    env.update({"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"})
    subprocess.run(
        [sys.executable, "make_inputs.py"], cwd=work, env=env, check=True, timeout=program.timeout_s
    )
    diffs = []
    for run in program.settings["RUNS"]:
        limit = int(run.get("memory_mb", 0)) << 20

        def limited(limit: int = limit) -> None:
            if limit:
                import resource

                resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

        proc = subprocess.run(
            [sys.executable, "-m", "gpu_notebook", *run["args"]],
            cwd=work,
            env={**env, **run.get("env", {})},
            capture_output=True,
            text=True,
            errors="replace",
            timeout=program.timeout_s,
            preexec_fn=limited,
        )
        label = " ".join(run["args"])
        if proc.returncode != run["exit"]:
            diffs.append(f"{label}: exit {proc.returncode}, expected {run['exit']}")
        if "Traceback" in proc.stderr:
            diffs.append(f"{label}: a traceback: {_short(proc.stderr[-600:])}")
        pattern = re.compile(run["stderr"])
        for line in proc.stderr.splitlines():
            if line.strip() and not pattern.fullmatch(line):
                diffs.append(
                    f"{label}: stderr line {_short(line, 200)} does not match {run['stderr']!r}"
                )
                break
        for name, text in (("stdout", proc.stdout), ("stderr", proc.stderr)):
            diffs += [f"{label}: {name} {d}" for d in _terminal_controls(text)]
    return diffs


# A script's probe runs at its end, while `gpucheck run` is still measuring it: the machinery the
# measurement needs (its sampler thread, the global step hooks, the stack sampler's timer and
# handler, the temp folder of traces in flight) is there by design then. What it leaves behind
# is checked after the process exits (files, temp folder, exit code, output) instead.
# (Also the step clock's patches, torch.autograd.backward and grad and the DataLoader iterator's
# __next__: in place while the script is measured, gone after it; a script's own wrapper
# installed over them is kept, as the notebook program user_hooks_and_wrappers checks.)
_IN_FLIGHT = re.compile(
    r"^(threads|tmp\.ours|torch\.(module|optim)\._global_\w+|"
    r"torch\.autograd\.(backward|grad)|torch\._BaseDataLoaderIter\.__next__|"
    r"signal\.(SIGALRM|SIGPROF|SIGVTALRM)|itimer\.\w+|sys\.(trace|profile)|"
    r"threading\.(trace|profile))$"
)


def _settled(probe: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in probe.items() if not _IN_FLIGHT.match(k)}


def _check_json(program: Program, rel: str) -> list[str]:
    path = SCRATCH_ROOT / program.name / "work" / rel
    if not path.exists():
        return [f"--json {rel}: not written"]
    try:
        json.loads(path.read_text())
    except ValueError as exc:
        return [f"--json {rel}: not valid JSON ({exc})"]
    return []


# ---------------------------------------------------------------- shared


def compare_probes(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    diffs = []
    for key in sorted(set(a) | set(b)):
        va, vb = a.get(key, "<absent>"), b.get(key, "<absent>")
        if va == vb:
            continue
        if isinstance(va, dict) and isinstance(vb, dict):
            sub = [
                f"{k}: plain={_short(va.get(k, '<absent>'))} measured={_short(vb.get(k, '<absent>'))}"
                for k in sorted(set(va) | set(vb))
                if va.get(k, "<absent>") != vb.get(k, "<absent>")
            ]
            diffs.append(f"probe {key}: " + "; ".join(sub[:6]) + (" ..." if len(sub) > 6 else ""))
        else:
            diffs.append(f"probe {key}: plain={_short(va)} measured={_short(vb)}")
    return diffs


def _short(v: Any, limit: int = 300) -> str:
    s = v if isinstance(v, str) else json.dumps(v, default=repr, sort_keys=True)
    s = s.replace("\n", "\\n")
    return s if len(s) <= limit else s[: limit - 3] + "..."


def _first_difference(a: str, b: str) -> str:
    la, lb = a.splitlines(), b.splitlines()
    for i in range(max(len(la), len(lb))):
        x = la[i] if i < len(la) else "<end>"
        y = lb[i] if i < len(lb) else "<end>"
        if x != y:
            return f"line {i + 1}: plain={_short(x, 160)} measured={_short(y, 160)}"
    return "trailing newline"


def _report_has(program: Program, text: str) -> list[str]:
    """What ``REPORT_HAS`` asks of our report and it lacks."""
    import html

    plain = html.unescape(text)
    if os.environ.get("DIFF_DUMP_REPORT"):  # debugging a REPORT_HAS miss: the report as read
        Path(os.environ["DIFF_DUMP_REPORT"]).write_text(plain)
    return [
        f"our report does not match {pattern!r}"
        for pattern in program.settings.get("REPORT_HAS", [])
        if not re.search(pattern, plain)
    ]


def differences(program: Program) -> list[str]:
    """Run ``program`` plain, then measured, and list what differs (empty: indistinguishable).

    DIFF_CONTROL=1 runs the program plain twice: the harness's own noise floor (must be empty).
    """
    measured = os.environ.get("DIFF_CONTROL") != "1"
    if program.kind == "cli":
        return run_cli(program) if measured else []
    if program.kind == "notebook":
        plain, ppid = run_notebook(program, measured=False)
        meas, mpid = run_notebook(program, measured=measured)
        return compare_notebook(program, plain, ppid, meas, mpid)
    p = run_script(program, measured=False)
    m = run_script(program, measured=measured)
    if not measured:
        program.settings.setdefault("REPORTS", 0)
    return compare_script(program, p, m)
