"""benchmarks/stability.py runs end to end in its reduced form and prints its table.

Not a timing or a match-rate assertion (those are the benchmark's, recorded in
benchmarks/README.md): one quiet run of one scenario must complete and print its row.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.timeout(660)  # its own 600 s bound, not the suite's 300 s, decides on a busy machine
def test_the_reduced_benchmark_runs_and_prints_its_table(tmp_path):
    out = tmp_path / "s.json"
    res = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "stability.py"), "--runs", "1",
         "--scenarios", "input", "--conditions", "quiet", "--json", str(out),
         "--keep", str(tmp_path / "kept")],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    assert "scenario" in res.stdout and "quiet match" in res.stdout
    row = next(line for line in res.stdout.splitlines() if line.startswith("input "))
    assert row.split()[-1].isdigit()  # the contradictions column
    assert out.exists() and '"scenario": "input"' in out.read_text()
    # --keep: each run's report JSON, to read a miss after the run's folder is gone.
    kept = tmp_path / "kept" / "input-quiet-1.json"
    assert kept.exists() and '"verdict"' in kept.read_text()


def test_unknown_scenarios_are_refused_with_the_known_names():
    res = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "stability.py"), "--scenarios", "nope"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert res.returncode == 2 and "cached_then_slow" in res.stderr
