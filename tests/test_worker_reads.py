"""DataLoader workers' CPU as the sampler reads it: a sample that read no worker says so (None),
never 0% ("the workers are idle"), and every reader of the figure keeps the two apart.

psutil's first ``cpu_percent`` of a process is its baseline and reads nothing, and the child list
is refreshed about once a second: the samples before the workers are listed, and the one that
lists them, read none of their CPU. A 0.0 there was read as idle workers (notebook 24: 2
workers "at 0% of a core: they wait", told num_workers=4 on 2 cores).
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

from gpu_notebook.analysis.interference import others_cores
from gpu_notebook.analysis.utilization import utilization_stats
from gpu_notebook.records import Report, Sample, SampleSeries
from tests.scenarios import synthetic as syn

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# In a process of its own: the suite's process may hold other tests' workers (children too).
WORKERS = """
import json, time
import torch
from torch.utils.data import DataLoader, Dataset
from gpu_notebook.capture import nvml
from gpu_notebook.capture.sampler import Sampler
from tests import fake_nvml

class Busy(Dataset):
    def __len__(self):
        return 10**6
    def __getitem__(self, i):
        x = torch.ones(64, 64)
        for _ in range(20):
            x = x @ x / 64
        return x

def wait_until(ok, what, timeout_s=60.0):
    deadline = time.perf_counter() + timeout_s
    while not ok():
        assert time.perf_counter() < deadline, what
        time.sleep(0.01)

with nvml.use_library(fake_nvml.library_missing()):
    sampler = Sampler(interval_s=0.05).start()
    wait_until(lambda: len(sampler.snapshot().samples) >= 3, "3 samples")
    loader = DataLoader(Busy(), batch_size=8, num_workers=2, persistent_workers=True)
    batches = iter(loader)
    def read_workers():
        next(batches)
        return any(s.children and s.children_cpu_pct for s in sampler.snapshot().samples)
    wait_until(read_workers, "a sample that read the workers")
    series = sampler.stop()
    del batches
print(json.dumps([[s.children_cpu_pct, s.children] for s in series.samples]))
"""


def _worker_samples() -> list[tuple[float | None, int]]:
    done = subprocess.run(
        [sys.executable, "-c", WORKERS],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": ROOT},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return [(cpu, n) for cpu, n in json.loads(done.stdout.strip().splitlines()[-1])]


def test_samples_that_read_no_worker_say_not_read_and_the_rest_read_them() -> None:
    samples = _worker_samples()
    listed = [i for i, (_, n) in enumerate(samples) if n]
    assert listed, samples
    first = listed[0]
    before = samples[:first]
    assert len(before) >= 3  # the samples before the loader started its workers
    assert all(cpu is None for cpu, _ in before), before  # no worker: not read, not "0%"
    assert samples[first][0] is None, samples  # the look that lists them sets their baseline
    assert any(cpu for cpu, n in samples[first + 1 :] if n), samples  # and later ones read them

    # Every reader of the figure, on what the sampler gave up to the listing sample: the
    # workers' CPU was never read, so no mean of it exists and no share of the machine is
    # handed to "other processes" for it.
    unread = [
        Sample(
            t_s=0.05 * i,
            process_cpu_pct=100.0,
            children_cpu_pct=cpu,
            system_cpu_pct=90.0,
            children=n,
        )
        for i, (cpu, n) in enumerate(samples[: first + 1])
    ]
    assert utilization_stats(SampleSeries(0.05, 0.05, tuple(unread))).children_cpu_mean_pct is None
    assert others_cores(unread[-1], cores=2) is None  # a worker listed, not read
    assert others_cores(unread[0], cores=2) is not None  # no worker: ours is the process alone


def test_a_report_written_with_unread_workers_at_zero_reads_them_as_not_read() -> None:
    # Reports written before the sampler said "not read" hold 0.0 there (same schema version).
    ticks = [(0.0, 0), (0.0, 0), (0.0, 2), (35.0, 2), (40.0, 2), (0.0, 3), (20.0, 3), (0.0, 1)]
    series = SampleSeries(
        0.25,
        0.25,
        tuple(
            Sample(
                t_s=0.25 * i,
                process_cpu_pct=100.0,
                children_cpu_pct=cpu,
                system_cpu_pct=50.0,
                children=n,
            )
            for i, (cpu, n) in enumerate(ticks)
        ),
    )
    report = syn.make_report("for x in loader:\n    step(x)\n", step_median_s=0.1)
    old = dataclasses.replace(report, run=dataclasses.replace(report.run, samples=series))
    read = Report.from_json(old.to_json())
    got = [s.children_cpu_pct for s in read.run.samples.samples]
    # No worker listed, the look that lists 2 and the one that lists a third: not read; a worker
    # that exits leaves what was read of the others (its last interval is lost, not invented).
    assert got == [None, None, None, 35.0, 40.0, None, 20.0, 0.0]
    assert Report.from_json(read.to_json()).run.samples.samples == read.run.samples.samples


def test_the_text_report_says_workers_not_read_or_none_never_zero():
    from gpu_notebook.views.text import render_text

    report = syn.make_report("for x in loader:\n    step(x)\n", step_median_s=0.1)

    def cpu_line(ticks: list[tuple[float | None, int]]) -> str:
        series = SampleSeries(
            0.25,
            0.25,
            tuple(
                Sample(0.25 * i, 100.0, cpu, 50.0, children=n) for i, (cpu, n) in enumerate(ticks)
            ),
        )
        run = dataclasses.replace(report.run, samples=series)
        analysis = dataclasses.replace(report.analysis, utilization=utilization_stats(series))
        text = render_text(dataclasses.replace(report, run=run, analysis=analysis))
        return next(line for line in text.splitlines() if "its children (workers)" in line)

    assert "its children (workers) none," in cpu_line([(None, 0), (None, 0)])
    assert "its children (workers) not read," in cpu_line([(None, 0), (None, 2)])
    assert "its children (workers) 35%," in cpu_line([(None, 2), (35.0, 2)])
