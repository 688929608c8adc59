"""The CLI's output side under what users and hostile files do: output folders that are missing
or moved under it, a script that redirects or closes stderr, Ctrl-C and SIGTERM, damaged or
hostile traces and reports, launchers given as the script, control characters in names."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from gpu_notebook.capture.ranks import expand
from gpu_notebook.cli_outputs import resolve, unwritable
from gpu_notebook.escapes import printable, printable_record
from gpu_notebook.launchers import launcher_hint, launcher_of
from gpu_notebook.records import RankInfo
from gpu_notebook.traces.source import InputError, read_input
from tests.trace_fixtures import gpu_scenario, phase_scenario

TRAIN = (
    "import torch\n"
    "torch.manual_seed(0)\n"
    "model = torch.nn.Linear(4, 1)\n"
    "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
    "for _ in range(8):\n"
    "    loss = model(torch.randn(8, 4)).pow(2).mean()\n"
    "    opt.zero_grad(); loss.backward(); opt.step()\n"
)


def run(args: list[str], cwd: Path, env: dict[str, str] | None = None, **kw):
    full = {k: v for k, v in os.environ.items() if not k.startswith("GPUCHECK")}
    full.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "gpu_notebook", *args],
        cwd=cwd,
        env=full,
        capture_output=True,
        text=True,
        timeout=300,
        **kw,
    )


def script(tmp_path: Path, body: str, name: str = "train.py") -> Path:
    path = tmp_path / name
    path.write_text(TRAIN + body)
    return path


# ----------------------------------------------------------------- output paths (items 2, 3, 15)


def test_output_folders_that_do_not_exist_are_created_and_the_report_printed(tmp_path):
    script(tmp_path, "print('trained')\n")
    res = run(["run", "--json", "out/r.json", "--html", "deep/er/r.html", "train.py"], tmp_path)
    assert res.returncode == 0, res.stderr
    assert "gpucheck: " in res.stderr and "Steps:" in res.stderr
    assert json.loads((tmp_path / "out" / "r.json").read_text())["run"]
    assert (tmp_path / "deep" / "er" / "r.html").read_text().startswith("<!DOCTYPE html")


@pytest.mark.parametrize("where", ["file_as_folder", "folder_as_file"])
def test_a_path_that_cannot_be_written_is_said_before_the_script_runs(tmp_path, where):
    script(tmp_path, "print('the script ran')\n")
    (tmp_path / "afile").write_text("x")
    (tmp_path / "adir.json").mkdir()
    path = "afile/r.json" if where == "file_as_folder" else "adir.json"
    res = run(["run", "--json", path, "train.py"], tmp_path)
    assert res.returncode == 2
    assert "the script ran" not in res.stdout
    assert f"gpucheck: cannot write --json {path}: " in res.stderr


def test_a_file_that_fails_at_the_end_costs_neither_the_report_nor_the_exit_code(tmp_path):
    # The script makes the output path a folder: the write fails after the training.
    script(tmp_path, "import os, sys\nos.makedirs('r.json')\nsys.exit(4)\n")
    res = run(["run", "--json", "r.json", "--html", "r.html", "train.py"], tmp_path)
    assert res.returncode == 4
    assert "gpucheck: cannot write --json" in res.stderr and "it is a folder" in res.stderr
    assert "Steps:" in res.stderr  # the text report is there
    assert (tmp_path / "r.html").exists()  # and the other file


def test_relative_paths_mean_the_folder_the_run_started_in(tmp_path):
    (tmp_path / "data").mkdir()
    script(
        tmp_path,
        "import os\nos.chdir('data')\nopen('report.html', 'w').write('mine')\n"
        "open('r.json', 'w').write('mine')\n",
    )
    res = run(["run", "--json", "r.json", "--html", "report.html", "train.py"], tmp_path)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "data" / "report.html").read_text() == "mine"
    assert (tmp_path / "data" / "r.json").read_text() == "mine"
    assert json.loads((tmp_path / "r.json").read_text())["run"]
    assert (tmp_path / "report.html").read_text().startswith("<!DOCTYPE html")


def test_a_script_that_deletes_the_folder_it_runs_in_keeps_its_exit_code(tmp_path):
    script(
        tmp_path,
        "import os, tempfile\nwith tempfile.TemporaryDirectory(dir='.') as d:\n    os.chdir(d)\n"
        "    raise SystemExit(0)\n",
    )
    res = run(["run", "--json", "r.json", "--trace", "t.json.gz", "train.py"], tmp_path)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "r.json").exists() and (tmp_path / "t.json.gz").exists()


def test_paths_are_pinned_to_the_start_folder_with_rank_filled_in_later(tmp_path):
    out = resolve("--json", "out/r{rank}.json", str(tmp_path))
    assert out is not None
    assert out.for_rank(RankInfo(rank=3, world_size=4)) == str(tmp_path / "out" / "r3.json")
    plain = resolve("--json", "r.json", str(tmp_path))
    assert plain is not None
    assert plain.for_rank(RankInfo(rank=1, world_size=2)) == str(tmp_path / "r.rank1.json")
    assert unwritable(str(tmp_path / "missing" / "deeper" / "r.json")) is None


@pytest.mark.parametrize(
    "path, rank, expected",
    [
        ("rank0.json.gz", 0, "rank0.json.gz"),  # already this rank's: no second rank
        ("t.rank1.json.gz", 1, "t.rank1.json.gz"),
        ("out/rank_2/t.json", 2, "out/rank_2/t.json"),
        ("r1.json", 1, "r1.json"),
        ("rank0.json.gz", 1, "rank0.rank1.json.gz"),  # another rank's number: its own added
        ("rank0_rank1.json", 1, "rank0_rank1.rank1.json"),  # two numbers: no rank owns it
        ("hr1.json", 1, "hr1.rank1.json"),
        ("t.json", 1, "t.rank1.json"),
    ],
)
def test_a_path_that_already_holds_the_rank_gets_no_second_one(path, rank, expected):
    assert expand(path, RankInfo(rank=rank, world_size=4)) == expected


def test_names_stay_unique_across_ranks_whatever_the_path_holds():
    for path in ("rank0.json", "r1.json", "rank0_rank1.json", "t.json", "out/rank3/x.json"):
        names = {expand(path, RankInfo(rank=r, world_size=4)) for r in range(4)}
        assert len(names) == 4, (path, names)


def test_the_html_report_of_a_rank_says_which_rank_it_is():
    import dataclasses

    from gpu_notebook.views.html_report import render_html
    from tests.test_views import synthetic_gpu_report

    report = synthetic_gpu_report()
    info = RankInfo(rank=1, world_size=2, local_rank=1, host="node7")
    page = render_html(dataclasses.replace(report, run=dataclasses.replace(report.run, rank=info)))
    assert "rank 1 of 2 (local rank 1) on node7" in page
    assert "rank 1/2" in page.split("</title>")[0]


# ----------------------------------------------------------------- stderr (item 10)


def test_a_script_that_points_stderr_at_its_log_keeps_its_log_to_itself(tmp_path):
    script(
        tmp_path,
        "import os, sys\nfd = os.open('log.txt', os.O_WRONLY | os.O_CREAT, 0o644)\n"
        "os.dup2(fd, 2)\nprint('to my log', file=sys.stderr, flush=True)\n",
    )
    res = run(["run", "train.py"], tmp_path)
    assert res.returncode == 0
    assert (tmp_path / "log.txt").read_text() == "to my log\n"
    assert "Steps:" in res.stderr  # our report went to the terminal's stderr


def test_a_script_that_replaces_sys_stderr_does_not_get_our_report(tmp_path):
    script(tmp_path, "import io, sys\nsys.stderr = open('log.txt', 'w')\n")
    res = run(["run", "train.py"], tmp_path)
    assert res.returncode == 0
    assert (tmp_path / "log.txt").read_text() == ""
    assert "Steps:" in res.stderr


def test_a_script_that_closes_stderr_keeps_its_exit_code(tmp_path):
    script(tmp_path, "import os\nos.close(2)\nprint('still here')\n")
    res = run(["run", "train.py"], tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout == "still here\n"
    assert "Steps:" in res.stderr


# ----------------------------------------------------------------- signals (items 4, 12)


def test_an_uncaught_keyboard_interrupt_ends_the_run_by_sigint_as_python_does(tmp_path):
    script(
        tmp_path, "import atexit\natexit.register(print, 'atexit ran')\nraise KeyboardInterrupt\n"
    )
    plain = subprocess.run(
        [sys.executable, "train.py"], cwd=tmp_path, capture_output=True, text=True
    )
    res = run(["run", "train.py"], tmp_path)
    assert plain.returncode == -signal.SIGINT
    assert res.returncode == -signal.SIGINT
    assert res.stdout == plain.stdout == "atexit ran\n"
    assert "The script was interrupted" in res.stderr  # the report of the steps that ran


# The script asks for SIGTERM when gpucheck opens its window's trace in the private folder
# (an audit hook: synchronous, in the main thread, while the folder exists), as torchrun's
# SIGTERM reaches a rank that is still building its report.
SIGTERM_WHILE_REPORTING = (
    "import os, signal, sys\n"
    "{handler}\n"
    "def hook(event, args):\n"
    "    if event == 'open' and str(args[0]).endswith('window.trace.json') and not args[1] in ('w', 'wb'):\n"
    "        os.kill(os.getpid(), signal.{sent})\n"
    "sys.addaudithook(hook)\n"
)


def ours_left(tmp: Path) -> list[str]:
    return [p.name for p in tmp.iterdir() if p.name.startswith("gpucheck")]


@pytest.mark.parametrize(
    "handler, sent, expected_code",
    [
        ("", "SIGTERM", -signal.SIGTERM),  # the default action: the process ends by SIGTERM
        ("", "SIGHUP", -signal.SIGHUP),  # the terminal closed
        ("", "SIGINT", -signal.SIGINT),  # Ctrl-C: KeyboardInterrupt unwinds, then SIGINT
        # The user's handler decides:
        ("signal.signal(signal.SIGTERM, lambda *a: sys.exit(5))", "SIGTERM", 5),
    ],
)
def test_a_signal_while_the_report_is_built_leaves_no_file_and_keeps_the_status(
    tmp_path, handler, sent, expected_code, default_hangup
):
    script(tmp_path, SIGTERM_WHILE_REPORTING.format(handler=handler, sent=sent))
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    res = run(["run", "train.py"], tmp_path, env={"TMPDIR": str(tmp)})
    assert res.returncode == expected_code, res.stderr
    assert ours_left(tmp) == []


def test_an_ignored_sigterm_stays_ignored_and_the_report_comes(tmp_path):
    script(
        tmp_path,
        SIGTERM_WHILE_REPORTING.format(
            handler="signal.signal(signal.SIGTERM, signal.SIG_IGN)", sent="SIGTERM"
        ),
    )
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    res = run(["run", "train.py"], tmp_path, env={"TMPDIR": str(tmp)})
    assert res.returncode == 0, res.stderr
    assert "Steps:" in res.stderr and ours_left(tmp) == []


# ----------------------------------------------------------------- control characters (item 13)

# Every kind of character that can drive a terminal or forge a line.
HOSTILE = [
    "\x1b[2J\x1b[H",  # CSI: clear the screen, cursor home
    "\x1b]0;pwned\x07",  # OSC: set the window title
    "\x9b2J",  # C1 CSI
    "\x85",  # C1 next line
    "\ngpucheck: GPU-BOUND  (forged)",  # a forged report line
    "\r",
    "\x7f\x08",
    "\u202e",  # bidi override
    "\u2028",  # line separator
]


@pytest.mark.parametrize("text", HOSTILE)
def test_printable_escapes_every_control_character(text):
    out = printable("op" + text)
    assert out.isprintable(), repr(out)
    assert out.startswith("op\\")


def test_printable_keeps_newlines_only_when_asked():
    assert printable("a\nb\x1b", newlines=True) == "a\nb\\x1b"
    assert printable("a\nb") == "a\\nb"


def test_a_record_is_escaped_field_by_field_and_shared_when_clean():
    info = RankInfo(rank=0, world_size=2, host="node\x1b[2J")
    assert printable_record(info).host == "node\\x1b[2J"
    clean = RankInfo(rank=0, world_size=2, host="node")
    assert printable_record(clean) is clean


def test_the_text_report_escapes_every_string_from_the_user_or_a_trace():
    import dataclasses

    from gpu_notebook.views.text import render_text
    from tests.test_views import synthetic_gpu_report

    bad = "".join(HOSTILE)
    report = synthetic_gpu_report(status="error", error="RuntimeError: " + bad)
    ops = tuple(dataclasses.replace(op, name=op.name + bad) for op in report.analysis.top_ops)
    report = dataclasses.replace(
        report,
        analysis=dataclasses.replace(report.analysis, top_ops=ops),
        verdict=dataclasses.replace(report.verdict, headline=report.verdict.headline + bad),
    )
    text = render_text(report)
    assert all(line.isprintable() for line in text.split("\n")), repr(text)
    assert not any(line.startswith("gpucheck: GPU-BOUND  (forged)") for line in text.split("\n"))


def hostile_trace() -> dict:
    doc = phase_scenario()
    names = iter(HOSTILE * 20)
    for ev in doc["traceEvents"]:
        if ev.get("cat") == "cpu_op" and not str(ev.get("name", "")).startswith("ProfilerStep"):
            ev["name"] = "aten::mm" + next(names)
    return doc


def test_a_hostile_trace_cannot_write_to_the_terminal(tmp_path):
    (tmp_path / "evil\x1b]0;t\x07.json").write_text(json.dumps(hostile_trace()))
    res = run(["analyze", "."], tmp_path)
    assert res.returncode == 0, res.stderr
    for stream in (res.stdout, res.stderr):
        assert all(line.isprintable() for line in stream.split("\n")), repr(stream)
        assert "\ngpucheck: GPU-BOUND  (forged)" not in stream
    assert "aten::mm\\x1b[2J" in res.stdout


# ----------------------------------------------------------------- damaged input (item 14)


def _damaged(tmp_path: Path) -> dict[str, Path]:
    raw = json.dumps(gpu_scenario()).encode()
    packed = gzip.compress(raw)
    corrupt = bytearray(packed)
    corrupt[len(corrupt) // 2] ^= 0xFF
    huge = gpu_scenario()
    for ev in huge["traceEvents"]:
        for key in ("ts", "dur"):
            if key in ev:
                ev[key] = 1e308
    files = {
        "truncated.json.gz": packed[: len(packed) // 2],
        "corrupt.json.gz": bytes(corrupt),
        "nested.json": b'{"traceEvents": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        "nested_list.json": b"[" * 100_000 + b"]" * 100_000,
        "overflow.json": json.dumps(huge).encode(),
        "not_json.json": b"\x00\x01 not json",
        "empty.json.gz": b"",
        "gzip_of_garbage.json.gz": gzip.compress(b"\xff\xfe garbage"),
        "top_level_number.json": b"1e999",
    }
    out = {}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
        out[name] = tmp_path / name
    return out


def _one_cannot_read_line(res: subprocess.CompletedProcess[str], name: str) -> None:
    assert res.returncode == 2, (name, res.returncode, res.stderr[-2000:])
    assert "Traceback" not in res.stderr, res.stderr[-2000:]
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"gpucheck: cannot read {name}: "), lines


@pytest.mark.parametrize(
    "name",
    [
        "truncated.json.gz",
        "corrupt.json.gz",
        "nested.json",
        "nested_list.json",
        "overflow.json",
        "not_json.json",
        "empty.json.gz",
        "gzip_of_garbage.json.gz",
        "top_level_number.json",
    ],
)
def test_analyze_answers_a_damaged_trace_with_one_line_and_exit_2(tmp_path, name):
    _damaged(tmp_path)
    _one_cannot_read_line(run(["analyze", name], tmp_path), name)


def test_a_damaged_trace_in_a_folder_of_ranks_does_not_stop_the_others(tmp_path):
    (tmp_path / "rank0.json").write_text(json.dumps(phase_scenario()))
    (tmp_path / "rank1.json.gz").write_bytes(gzip.compress(b'{"traceEvents": [')[:-6])
    res = run(["analyze", "."], tmp_path)
    assert res.returncode == 2
    assert "gpucheck: cannot read rank1.json.gz: truncated gzip" in res.stderr
    assert "=== " in res.stdout and "Steps:" in res.stdout


def gzip_bomb(path: Path, inflated_mb: int) -> None:
    """A valid gzip of one JSON document padded with ``inflated_mb`` MB of spaces."""
    co = zlib.compressobj(9, zlib.DEFLATED, 31)
    with open(path, "wb") as out:
        out.write(co.compress(b'{"traceEvents": ['))
        block = b" " * (1 << 20)
        for _ in range(inflated_mb):
            out.write(co.compress(block))
        out.write(co.compress(b"]}") + co.flush())


def test_a_gzip_bomb_is_stopped_at_the_cap_which_says_how_to_raise_it(tmp_path):
    gzip_bomb(tmp_path / "bomb.json.gz", 64)
    res = run(["analyze", "bomb.json.gz"], tmp_path, env={"GPUCHECK_MAX_INPUT_MB": "16"})
    _one_cannot_read_line(res, "bomb.json.gz")
    assert "more than 16 MB" in res.stderr and "GPUCHECK_MAX_INPUT_MB=32" in res.stderr


def test_read_input_never_holds_more_than_the_cap(tmp_path):
    gzip_bomb(tmp_path / "bomb.json.gz", 8)
    with pytest.raises(InputError, match="inflates to more than 1 MB"):
        read_input(tmp_path / "bomb.json.gz", limit_bytes=1 << 20)
    (tmp_path / "big.json").write_bytes(b" " * (2 << 20))
    with pytest.raises(InputError, match="holds more than 1 MB"):
        read_input(tmp_path / "big.json", limit_bytes=1 << 20)
    assert read_input(tmp_path / "bomb.json.gz", limit_bytes=16 << 20).startswith(b'{"trace')


def _limited(limit_bytes: int):
    def apply() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))

    return apply


def test_a_gzip_bomb_under_a_memory_limit_gets_its_line_not_a_crash(tmp_path):
    """3 MB of gzip that would inflate to 3 GB, read under a 2.5 GB address-space limit with the
    default cap (1024 MB): stopped at the cap, in bounded memory."""
    gzip_bomb(tmp_path / "bomb.json.gz", 3072)
    assert (tmp_path / "bomb.json.gz").stat().st_size < 4 << 20
    res = run(
        ["analyze", "bomb.json.gz"],
        tmp_path,
        env={"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"},
        preexec_fn=_limited(int(2.5 * (1 << 30))),
    )
    _one_cannot_read_line(res, "bomb.json.gz")
    assert "more than 1024 MB" in res.stderr


HOSTILE_REPORTS = {
    "nested.report.json": b'{"schema_version": 1, "run": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    "truncated.report.json": b'{"schema_version": 1, "run": {"env": ',
    "not_a_report.json": b"{}",
    "list.json": b"[1, 2, 3]",
    "binary.json": b"\xff\xfe\x00",
}


@pytest.mark.parametrize("name", sorted(HOSTILE_REPORTS))
def test_compare_answers_a_hostile_report_with_one_line_and_exit_2(tmp_path, name):
    (tmp_path / name).write_bytes(HOSTILE_REPORTS[name])
    _one_cannot_read_line(run(["compare", name, name], tmp_path), name)


def test_a_write_that_fails_in_analyze_is_one_line_and_exit_2(tmp_path):
    (tmp_path / "t.json").write_text(json.dumps(phase_scenario()))
    (tmp_path / "afile").write_text("x")
    res = run(["analyze", "t.json", "--json", "afile/out.json"], tmp_path)
    assert res.returncode == 2
    assert "gpucheck: cannot write --json" in res.stderr and "Traceback" not in res.stderr


# ----------------------------------------------------------------- launchers (item 15)


def _console_script(path: Path, module: str) -> Path:
    path.write_text(
        f"#!{sys.executable}\nimport re, sys\nfrom {module} import main\n"
        "if __name__ == '__main__':\n    sys.exit(main())\n"
    )
    path.chmod(0o755)
    return path


@pytest.mark.parametrize(
    "name, module",
    [
        ("torchrun", "torch.distributed.run"),
        ("my-launcher", "torch.distributed.run"),  # a wrapper under another name
        ("accelerate", "accelerate.commands.accelerate_cli"),
        ("ds", "deepspeed.launcher.runner"),
    ],
)
def test_any_path_to_a_launcher_is_said_to_go_inside_it(tmp_path, name, module):
    launcher = _console_script(tmp_path / name, module)
    res = run(["run", str(launcher), "--nproc_per_node", "2", "train.py", "--lr", "3"], tmp_path)
    assert res.returncode == 2
    assert "is a launcher" in res.stderr
    assert "gpu_notebook run train.py --lr 3" in res.stderr


def test_an_interpreter_running_a_launcher_module_is_a_launcher():
    hint = launcher_hint(
        sys.executable, ["-m", "torch.distributed.run", "--nproc_per_node", "2", "t.py"]
    )
    assert launcher_of(sys.executable) == "python"
    assert hint.endswith(
        f"`{sys.executable} -m torch.distributed.run --nproc_per_node 2 -m gpu_notebook run t.py`"
    )


def test_a_program_that_is_not_python_source_is_not_measured(tmp_path):
    assert launcher_of("/bin/sh") is not None
    res = run(["run", "/bin/sh", "-c", "true"], tmp_path)
    assert res.returncode == 2 and "is a launcher" in res.stderr


def test_a_training_script_is_not_a_launcher(tmp_path):
    path = tmp_path / "train.py"
    path.write_text("from torch.distributed.elastic.multiprocessing.errors import record\n")
    assert launcher_of(str(path)) is None


def test_the_magic_writes_its_files_where_the_cell_started(ip, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    cell = TRAIN + "import os, shutil\nos.chdir('data')\nshutil.rmtree('../out')\n"
    ip.run_cell_magic("gpucheck", "-q -o _moved --export out --html r.html", cell)
    assert ip.user_ns["_moved"].run.status == "ok"
    assert (tmp_path / "r.html").exists() and not (tmp_path / "data" / "r.html").exists()
    assert any(p.name.endswith(".report.json") for p in (tmp_path / "out").iterdir())


def test_a_script_that_removes_its_cwd_then_fails_shows_only_its_own_traceback(tmp_path):
    script(
        tmp_path,
        "import os, shutil\nos.makedirs('sc')\nos.chdir('sc')\nshutil.rmtree(os.path.abspath('.'))\n"
        "raise RuntimeError('after removing my cwd')\n",
    )
    res = run(["run", "--json", "r.json", "train.py"], tmp_path)
    assert res.returncode == 1
    assert (
        res.stderr.count("Traceback") == 1 and "RuntimeError: after removing my cwd" in res.stderr
    )
    assert (tmp_path / "r.json").exists()


def test_a_torchrun_job_creates_its_rank_output_folders(tmp_path):
    """README's own command with no out/ folder: every rank's files and the job report land."""
    from tests.test_distributed import torchrun

    res = torchrun(
        tmp_path,
        2,
        "--json",
        "out/r{rank}.json",
        "--html",
        "pages/p{rank}.html",
        env={"STEPS": "8"},
    )
    assert res.returncode == 0, res.stderr[-3000:]
    for rank in (0, 1):
        assert json.loads((tmp_path / "out" / f"r{rank}.json").read_text())["run"]["rank"]
        page = (tmp_path / "pages" / f"p{rank}.html").read_text()
        assert f"rank {rank} of 2" in page
    assert (tmp_path / "out" / "rjob.json").exists()
    assert "gpucheck job report: 2 rank(s)" in res.stderr


def _on_a_terminal(args: list[str], cwd: Path) -> tuple[int, str]:
    """Run gpucheck with its stderr on a pseudo-terminal (the live line draws): (status, text)."""
    import pty
    import threading

    master, slave = pty.openpty()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUCHECK")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpu_notebook", *args],
        cwd=cwd,
        env={**env, "TERM": "xterm"},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=slave,
    )
    os.close(slave)
    chunks: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every writer of the terminal has closed it
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=drain)
    reader.start()
    code = proc.wait(timeout=300)
    reader.join(timeout=60)
    os.close(master)
    return code, b"".join(chunks).decode(errors="replace")


def test_on_a_terminal_a_hostile_name_is_printed_escaped(tmp_path):
    evil = "".join(HOSTILE)
    script(
        tmp_path,
        # The script's own traceback is its business (Python prints it raw): its hook is quiet,
        # so what reaches the terminal is ours, the report naming the error.
        f"import sys\nsys.excepthook = lambda *a: None\nraise RuntimeError({evil!r})\n",
    )
    code, text = _on_a_terminal(["run", "train.py"], tmp_path)
    assert code == 1
    assert "RuntimeError: \\x1b[2J" in text
    controls = {c for c in text if (ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0) and c not in "\r\n"}
    assert controls == set(), sorted(map(repr, controls))
    assert "\ngpucheck: GPU-BOUND  (forged)" not in text.replace("\r", "")
