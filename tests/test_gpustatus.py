"""%gpustatus: GPUs and the processes holding their memory, through the NVML door."""

from __future__ import annotations

import os

import pytest
from IPython.core.error import UsageError

from gpu_notebook.capture import nvml
from gpu_notebook.status import machine_status
from gpu_notebook.views.gpustatus import render_status_html, render_status_text
from tests import fake_nvml


def test_no_gpu_machine_says_so_in_one_line():
    text = render_status_text(machine_status())
    assert text.count("\n") == 0 and "no NVIDIA GPU visible" in text


def test_gpus_and_their_processes_with_user_and_command():
    fake = fake_nvml.healthy(2)
    # this very process holds memory on GPU 1: its user and command must be resolved
    fake.gpus[0].processes = ()
    fake.gpus[1].processes = ((os.getpid(), 512 * 2**20),)
    with nvml.use_library(fake):
        status = machine_status()
    assert [g.info.index for g in status.gpus] == [0, 1]
    procs = status.gpus[1].processes
    assert procs and procs[0].pid == os.getpid() and procs[0].user and "python" in procs[0].command
    text = render_status_text(status)
    assert "GPU 1" in text and "512.0 MiB" in text and f"pid {os.getpid()}" in text
    assert "no process holds memory" in text  # GPU 0


def test_process_list_refused_is_not_available_not_empty():
    with nvml.use_library(fake_nvml.mig_or_permission_denied()):
        status = machine_status()
    assert status.gpus[0].processes is None
    assert "not available" in render_status_text(status)
    assert status.gpus[0].reading.utilization_pct is None


def test_lost_gpu_is_reported_not_raised():
    with nvml.use_library(fake_nvml.gpu_lost_after(reads=0, index=0)):
        status = machine_status()
    assert status.gpus[0].reading is None and "lost" in (status.gpus[0].note or "")
    assert "LOST" in render_status_text(status)


def test_html_escapes_process_commands():
    fake = fake_nvml.healthy(1)
    fake.gpus[0].name = "<script>alert(1)</script>"
    with nvml.use_library(fake):
        html = render_status_html(machine_status())
    assert "<script>" not in html and "&lt;script&gt;" in html


def test_line_magic_in_a_real_shell(ip, capsys):
    ip.run_line_magic("gpustatus", "")
    assert "no NVIDIA GPU visible" in capsys.readouterr().out
    with pytest.raises(UsageError):
        ip.run_line_magic("gpustatus", "--all")
