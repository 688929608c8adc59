"""The gpucheck command as a user runs it: subprocesses, exit codes, files written."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_notebook.records import Report
from gpu_notebook.examples import INPUT_BOUND

REFERENCE = Path(os.environ.get("GPU_NOTEBOOK_REFERENCE_TRACES", Path(__file__).parents[1].parent / "shared" / "reference_traces"))


def gpucheck(*args: str, cwd: Path | None = None, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpu_notebook", *args],
        capture_output=True, text=True, timeout=timeout, cwd=cwd,
    )


@pytest.fixture
def input_bound_script(tmp_path: Path) -> Path:
    script = tmp_path / "train.py"
    script.write_text(
        "import sys\nprint('args:', sys.argv[1:])\n" + INPUT_BOUND + "\nprint('trained', flush=True)\n"
    )
    return script


def test_run_reports_on_the_script_and_writes_json_and_trace(input_bound_script, tmp_path):
    out_json, out_trace = tmp_path / "r.json", tmp_path / "t.json.gz"
    res = gpucheck("run", "--json", str(out_json), "--trace", str(out_trace), str(input_bound_script), "--lr", "3")
    assert res.returncode == 0, res.stderr
    assert "args: ['--lr', '3']" in res.stdout  # the script's own arguments and output
    assert res.stdout.index("trained") < res.stdout.index("gpucheck: INPUT-BOUND")
    report = Report.from_json(out_json.read_text())
    assert report.verdict.category == "input-bound"
    assert report.run.steps.step_count == 192 // 8
    assert json.loads(gzip.open(out_trace).read())["traceEvents"]


def test_run_exits_with_the_scripts_own_exit_code(tmp_path):
    script = tmp_path / "exits.py"
    script.write_text("import sys\nprint('bye')\nsys.exit(7)\n")
    res = gpucheck("run", "-q", str(script))
    assert res.returncode == 7
    assert "bye" in res.stdout


def test_run_shows_the_scripts_traceback_and_exits_1(tmp_path):
    script = tmp_path / "fails.py"
    script.write_text("x = 1\n\ndef f():\n    raise RuntimeError('broken input')\n\nf()\n")
    res = gpucheck("run", str(script))
    assert res.returncode == 1
    assert "RuntimeError: broken input" in res.stderr
    assert f'File "{script}", line 4' in res.stderr
    assert "runpy" not in res.stderr  # the traceback starts at the script, as python's would
    assert "gpucheck:" in res.stdout and "failed" in res.stdout  # a partial report still comes


# A training loop whose steps spend most of their time in a pure-Python function called from
# line 15; its sum line (7) runs inside it. Steps end at opt.step(), so the default sampling
# (the steps right after the profiler window) covers 3 of them.
SLOW_PYTHON_SCRIPT = """\
import torch


def slow_python(n):
    total = 0
    for i in range(n):
        total += i * i
    return total


model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(16, 8)
for step in range(24):
    slow_python(200_000)
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""
SLOW_SCRIPT_LINE = 15


@pytest.mark.parametrize("lines", ["window", "all"])
def test_run_reports_the_scripts_hot_lines_as_a_cells(tmp_path, lines):
    script = tmp_path / "train.py"
    script.write_text(SLOW_PYTHON_SCRIPT)
    out_json, out_html = tmp_path / "r.json", tmp_path / "r.html"
    res = gpucheck("run", "--lines", lines, "--json", str(out_json), "--html", str(out_html), str(script))
    assert res.returncode == 0, res.stderr
    stacks = Report.from_json(out_json.read_text()).analysis.stacks
    assert stacks is not None and stacks.samples > 0
    # Lines are the script's (rooted at runpy's frame, as a cell's at IPython's run_code). The
    # whole script ("all") also has its set-up, where the first optimizer imports torch._dynamo.
    loop = [s for s in stacks.lines if 14 <= s.line <= 19]
    top = max(loop, key=lambda s: s.share)
    assert (top.line, top.text) == (SLOW_SCRIPT_LINE, "    slow_python(200_000)")
    assert top.share > 0.8 * sum(s.share for s in loop)
    assert all(key.startswith("cell:<module>:") for key in stacks.collapsed), list(stacks.collapsed)[:3]
    hot = res.stdout.split("Hot lines", 1)[1].split("\n\n", 1)[0]
    assert f"line {SLOW_SCRIPT_LINE} `slow_python(200_000)`" in hot
    assert "slow_python(200_000)" in out_html.read_text()


def test_fail_on_verdict_gates_ci_with_the_reason(input_bound_script):
    res = gpucheck("run", "-q", "--fail-on", "input-bound,host-bound", str(input_bound_script))
    assert res.returncode == 3
    assert "verdict is input-bound" in res.stderr


def test_min_gpu_util_fails_when_it_cannot_be_measured(input_bound_script):
    res = gpucheck("run", "-q", "--min-gpu-util", "50", str(input_bound_script))
    assert res.returncode == 3
    assert "not measured" in res.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (["run", "--fail-on", "slow", "x.py"], "unknown verdict slow"),
        (["run", "-s", "0", "x.py"], "--steps must be at least 1"),
        (["run", "missing.py"], "no such script"),
        (["analyze", "nowhere/"], "no such file or folder"),
    ],
)
def test_bad_usage_exits_2_with_a_message(tmp_path, args, message):
    (tmp_path / "x.py").write_text("pass\n")
    res = gpucheck(*args, cwd=tmp_path)
    assert res.returncode == 2
    assert message in res.stderr


def _need_reference() -> None:
    if not REFERENCE.is_dir():
        pytest.skip(f"reference traces not found at {REFERENCE} (set GPU_NOTEBOOK_REFERENCE_TRACES)")


def test_analyze_a_folder_of_ranks_gives_the_cross_rank_summary(tmp_path):
    _need_reference()
    out = tmp_path / "ranks.json"
    res = gpucheck("analyze", str(REFERENCE / "world128_sampled"), "--json", str(out))
    assert res.returncode == 0, res.stderr
    assert "=== rank 0" in res.stdout and "=== rank 1" in res.stdout
    assert "Across 2 ranks" in res.stdout and "spread" in res.stdout
    payload = json.loads(out.read_text())
    assert [p["rank"] for p in payload] == [0, 1] and all(p["world_size"] == 128 for p in payload)
    comm = [p["report"]["analysis"]["gpu"]["comm_us"] for p in payload]
    assert all(c > 0 for c in comm)


def test_analyze_one_gpu_trace(tmp_path):
    _need_reference()
    res = gpucheck("analyze", str(REFERENCE / "v100_world1_rank0.json.gz"))
    assert res.returncode == 0, res.stderr
    assert "GPU timeline: busy" in res.stdout
    assert "Across" not in res.stdout


def test_analyze_gate_fails_on_a_comm_bound_job():
    _need_reference()
    res = gpucheck("analyze", "-q", "--fail-on", "comm-bound", str(REFERENCE / "world128_sampled"))
    assert res.returncode == 3
    assert "comm-bound" in res.stderr


def test_the_gpucheck_entry_point_is_installed():
    exe = Path(sys.executable).parent / "gpucheck"
    assert exe.exists()
    res = subprocess.run([str(exe), "--version"], capture_output=True, text=True)
    assert res.returncode == 0 and "gpucheck" in res.stdout


def test_compare_prints_the_before_after_of_two_runs(input_bound_script, tmp_path):
    faster = tmp_path / "train_fast.py"
    faster.write_text(input_bound_script.read_text().replace("time.sleep(0.020)", "time.sleep(0.002)"))
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert gpucheck("run", "-q", "--json", str(a), str(input_bound_script)).returncode == 0
    assert gpucheck("run", "-q", "--json", str(b), str(faster)).returncode == 0
    res = gpucheck("compare", str(a), str(b), "--price-per-gpu-hour", "2.5")
    assert res.returncode == 0, res.stderr
    assert "Before / after:" in res.stdout and "step time" in res.stdout
    speedup = float(res.stdout.split("measured ")[1].split("x")[0])
    assert speedup > 1.5  # a tenth of the loading time per batch


def test_compare_with_a_file_that_is_not_a_report_exits_2(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    res = gpucheck("compare", str(bad), str(bad))
    assert res.returncode == 2 and "cannot read report" in res.stderr


def test_demo_reports_the_example_with_its_hot_lines_and_writes_html(tmp_path):
    """README's first command: the built-in input-bound example, its verdict and its hot lines."""
    res = gpucheck("demo", "input-bound", "--html", str(tmp_path))
    assert res.returncode == 0, res.stderr
    assert "gpucheck: INPUT-BOUND" in res.stdout
    hot = res.stdout.split("Hot lines:", 1)[1].split("\n\n", 1)[0]
    # The example's own lines (rooted at the demo, not at gpu_notebook's frames): the loader
    # loop or the sleep standing for decoding comes first.
    first = hot.splitlines()[1]
    assert "for x, y in loader:" in first or "time.sleep(0.020)" in first, hot
    assert "gpu_notebook" not in hot
    page = (tmp_path / "gpucheck-demo-input-bound.html").read_text()
    assert "for x, y in loader:" in page
