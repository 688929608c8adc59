"""The NVML door: what callers get from each kind of machine and each kind of failure."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator

import pynvml  # type: ignore[import-untyped]
import pytest

from gpu_notebook.capture import nvml
from gpu_notebook.records import GpuInfo, GpuSample
from tests import fake_nvml
from tests.fake_nvml import FakeGpu, FakeNvml, GiB


@pytest.fixture
def door() -> Iterator[None]:
    """Leave the door as found: no fake and no initialised library after the test."""
    nvml.reset()
    yield
    nvml.reset()


def test_importing_the_package_does_not_load_pynvml() -> None:
    code = (
        "import sys, gpu_notebook, gpu_notebook.capture.nvml, gpu_notebook.capture.sampler;"
        "assert 'pynvml' not in sys.modules, 'pynvml imported at import time'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_real_pynvml_on_this_machine_answers_without_raising(door: None) -> None:
    state = nvml.status()
    if not state.available:  # this CI machine: no NVIDIA driver
        assert state.message is not None
        assert "\n" not in state.message
        assert state.message.startswith("no NVIDIA GPU visible (")
        assert state.message.endswith("): CPU-side analysis only")
        assert nvml.gpu_infos() == ()
        with pytest.raises(IndexError, match="GPU 0 is not visible"):
            nvml.read_gpu(0)
    else:  # a machine with a GPU: the same calls read it
        assert state.message is None
        infos = nvml.gpu_infos()
        assert len(infos) == state.gpu_count > 0
        assert nvml.read_gpu(0).memory_total_bytes == infos[0].memory_total_bytes


def test_real_library_missing_is_reported_as_library_not_found_here(door: None) -> None:
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError_LibraryNotFound:
        pass
    else:
        pynvml.nvmlShutdown()
        pytest.skip("this machine has an NVIDIA driver")
    assert nvml.status() == nvml.NvmlStatus(
        False, "no NVIDIA GPU visible (NVML library not found): CPU-side analysis only"
    )
    assert nvml.driver_version() is None


# --- the fake behaves like the real binding ---------------------------------------------------


def test_fake_reexports_the_real_error_classes_and_constants() -> None:
    fake = fake_nvml.healthy()
    assert fake.NVMLError is pynvml.NVMLError
    assert fake.NVMLError_NotSupported is pynvml.NVMLError_NotSupported
    assert fake.NVMLError_GpuIsLost is pynvml.NVMLError_GpuIsLost
    assert fake.NVML_PCIE_UTIL_RX_BYTES == pynvml.NVML_PCIE_UTIL_RX_BYTES


def test_fake_refuses_calls_before_init_like_the_real_library() -> None:
    fake = fake_nvml.healthy()
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        fake.nvmlDeviceGetCount()
    fake.nvmlInit()
    handle = fake.nvmlDeviceGetHandleByIndex(0)
    fake.nvmlShutdown()
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        fake.nvmlDeviceGetMemoryInfo(handle)


def test_fake_has_no_silent_fallback_to_real_functions() -> None:
    with pytest.raises(AttributeError, match="nvmlDeviceGetFanSpeed"):
        fake_nvml.healthy().nvmlDeviceGetFanSpeed  # noqa: B018


# --- a machine that works ---------------------------------------------------------------------


def test_healthy_gpus_are_available_with_no_message(door: None) -> None:
    with nvml.use_library(fake_nvml.healthy(2)):
        assert nvml.status() == nvml.NvmlStatus(True, None, 2)
        assert nvml.driver_version() == "550.54.15"


def test_gpu_infos_carry_every_static_fact_in_our_units(door: None) -> None:
    with nvml.use_library(fake_nvml.healthy(2)):
        infos = nvml.gpu_infos()
    assert infos[1] == GpuInfo(
        index=1,
        name="NVIDIA A100-SXM4-80GB",
        uuid="GPU-4a1f3c2e-0000-0000-0000-000000000001",
        memory_total_bytes=80 * GiB,
        compute_capability="8.0",
        pcie_generation=4,
        pcie_width=16,
        nvlink_links=12,
        power_limit_w=400.0,
    )
    assert [info.index for info in infos] == [0, 1]


def test_read_gpu_converts_milliwatts_and_pcie_kilobytes(door: None) -> None:
    with nvml.use_library(fake_nvml.healthy(2)):
        sample = nvml.read_gpu(0)
    assert sample == GpuSample(
        index=0,
        utilization_pct=80.0,
        memory_used_bytes=12 * GiB,
        memory_total_bytes=80 * GiB,
        power_w=312.5,
        pcie_rx_bytes_per_s=1_500_000 * 1024.0,
        pcie_tx_bytes_per_s=250_000 * 1024.0,
        temperature_c=54.0,
    )


def test_read_gpu_without_pcie_skips_the_slow_counters(door: None) -> None:
    fake = fake_nvml.healthy(1)
    with nvml.use_library(fake):
        sample = nvml.read_gpu(0, pcie=False)
    assert sample.pcie_rx_bytes_per_s is None and sample.pcie_tx_bytes_per_s is None
    assert sample.utilization_pct == 80.0
    assert fake.calls["nvmlDeviceGetPcieThroughput"] == 0


def test_names_from_old_bindings_that_return_bytes_are_decoded(door: None) -> None:
    with nvml.use_library(fake_nvml.healthy(1, bytes_strings=True)):
        info = nvml.gpu_infos()[0]
        assert nvml.driver_version() == "550.54.15"
    assert info.name == "NVIDIA A100-SXM4-80GB"
    assert info.uuid == "GPU-4a1f3c2e-0000-0000-0000-000000000000"


def test_gpu_processes_lists_pid_and_memory(door: None) -> None:
    fake = fake_nvml.healthy(1)
    fake.gpus[0].processes = ((4242, 11 * GiB), (4243, None))
    with nvml.use_library(fake):
        processes = nvml.gpu_processes(0)
    assert processes == (
        nvml.GpuProcess(pid=4242, used_memory_bytes=11 * GiB),
        nvml.GpuProcess(pid=4243, used_memory_bytes=None),
    )


def test_idle_gpu_lists_no_process_which_differs_from_a_refused_list(door: None) -> None:
    fake = fake_nvml.healthy(1)
    fake.gpus[0].processes = ()
    with nvml.use_library(fake):
        assert nvml.gpu_processes(0) == ()
    with nvml.use_library(fake_nvml.mig_or_permission_denied()):
        assert nvml.gpu_processes(0) is None


def test_nvml_starts_once_even_when_asked_from_many_threads(door: None) -> None:
    fake = fake_nvml.healthy(2)
    fake.init_delay_s = 0.05  # slow like the real one, so that unlocked starts would overlap
    with nvml.use_library(fake):
        barrier = threading.Barrier(8)

        def ask() -> None:
            barrier.wait()
            for _ in range(50):
                nvml.status()
                nvml.read_gpu(1)

        threads = [threading.Thread(target=ask) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert fake.calls["nvmlInit"] == 1
        # Handles are cached too: asking for one per reading would double the cost of a tick.
        assert fake.calls["nvmlDeviceGetHandleByIndex"] <= 8


def test_reset_and_leaving_the_fake_shut_nvml_down(door: None) -> None:
    fake = fake_nvml.healthy(1)
    with nvml.use_library(fake):
        nvml.status()
        assert fake.refcount == 1
        nvml.reset()
        assert fake.refcount == 0
        nvml.read_gpu(0)  # asking again starts it again
        assert fake.calls["nvmlInit"] == 2
    assert fake.refcount == 0


def test_index_outside_the_visible_gpus_is_an_index_error(door: None) -> None:
    with (
        nvml.use_library(fake_nvml.healthy(2)),
        pytest.raises(IndexError, match="NVML lists 2 GPU"),
    ):
        nvml.read_gpu(2)


# --- machines where NVML cannot start ---------------------------------------------------------


@pytest.mark.parametrize(
    ("scenario", "reason"),
    [
        (fake_nvml.library_missing, "NVML library not found"),
        (fake_nvml.driver_not_loaded, "NVIDIA driver not loaded"),
        (
            fake_nvml.permission_denied,
            "no permission to use NVML; in a container, start it with --gpus",
        ),
        (fake_nvml.no_device, "NVML lists no device"),
    ],
)
def test_missing_nvml_is_one_line_and_every_question_answers_nothing(
    door: None, scenario: object, reason: str
) -> None:
    assert callable(scenario)
    fake = scenario()
    with nvml.use_library(fake):
        state = nvml.status()
        assert state == nvml.NvmlStatus(
            False, f"no NVIDIA GPU visible ({reason}): CPU-side analysis only"
        )
        assert nvml.gpu_infos() == ()
        with pytest.raises(IndexError, match=r"GPU 0 is not visible: no NVIDIA GPU visible"):
            nvml.read_gpu(0)
        with pytest.raises(IndexError):
            nvml.gpu_processes(0)
        nvml.status()
    assert fake.calls["nvmlInit"] == 1  # said once, not retried every tick


def test_unexpected_init_failure_still_says_why(door: None) -> None:
    with nvml.use_library(FakeNvml(init_error=pynvml.NVMLError_Unknown)):
        assert nvml.status().message == (
            "no NVIDIA GPU visible (NVML failed to start: Unknown Error): CPU-side analysis only"
        )


def test_driver_version_is_still_known_when_nvml_lists_no_device(door: None) -> None:
    with nvml.use_library(fake_nvml.no_device()):
        assert nvml.driver_version() == "550.54.15"


# --- one reading fails ------------------------------------------------------------------------


def test_one_unsupported_metric_is_none_and_the_rest_of_the_reading_arrives(door: None) -> None:
    with nvml.use_library(fake_nvml.one_metric_unsupported()):
        geforce = nvml.read_gpu(1)
        a100 = nvml.read_gpu(0)
        infos = nvml.gpu_infos()
    assert geforce.power_w is None
    assert geforce.pcie_rx_bytes_per_s is None and geforce.pcie_tx_bytes_per_s is None
    assert geforce.utilization_pct == 87.0
    assert geforce.memory_used_bytes == 12 * GiB
    assert geforce.temperature_c == 54.0
    assert None not in (a100.power_w, a100.pcie_rx_bytes_per_s, a100.pcie_tx_bytes_per_s)
    assert infos[1].power_limit_w is None
    assert infos[1].name == "NVIDIA GeForce RTX 3090"
    assert infos[1].compute_capability == "8.6"
    assert infos[0].power_limit_w == 400.0


def test_mig_slice_reports_unknown_utilization_not_zero(door: None) -> None:
    with nvml.use_library(fake_nvml.mig_or_permission_denied()):
        sample = nvml.read_gpu(0)
        info = nvml.gpu_infos()[0]
    assert sample.utilization_pct is None
    assert sample.memory_total_bytes == 40 * GiB
    assert info.nvlink_links is None  # refused: unknown, not "no NVLink"


def test_nvlink_counts_only_active_links_and_a_board_without_nvlink_has_zero(door: None) -> None:
    fake = FakeNvml([FakeGpu(nvlink_states=(1, 0, 1, 1)), FakeGpu(nvlink_states=())])
    with nvml.use_library(fake):
        infos = nvml.gpu_infos()
    assert [info.nvlink_links for info in infos] == [3, 0]


def test_no_data_yet_is_none_not_an_error(door: None) -> None:
    fake = fake_nvml.healthy(1)
    fake.gpus[0].failures["nvmlDeviceGetUtilizationRates"] = pynvml.NVMLError_NoData
    with nvml.use_library(fake):
        assert nvml.read_gpu(0).utilization_pct is None
        del fake.gpus[0].failures["nvmlDeviceGetUtilizationRates"]
        assert nvml.read_gpu(0).utilization_pct == 80.0


# --- a GPU is lost ----------------------------------------------------------------------------


def test_lost_gpu_raises_gpu_lost_error_and_is_not_asked_again(door: None) -> None:
    fake = fake_nvml.gpu_lost_after(reads=2, index=0)
    with nvml.use_library(fake):
        nvml.read_gpu(0)
        nvml.read_gpu(0)
        with pytest.raises(nvml.GpuLostError) as lost:
            nvml.read_gpu(0)
        assert lost.value.index == 0
        assert isinstance(lost.value.__cause__, pynvml.NVMLError_GpuIsLost)
        calls_after_loss = sum(fake.calls.values())
        with pytest.raises(nvml.GpuLostError, match="GPU 0 is lost"):
            nvml.read_gpu(0)
        with pytest.raises(nvml.GpuLostError):
            nvml.gpu_processes(0)
        assert sum(fake.calls.values()) == calls_after_loss  # no call reached the dead GPU
        assert nvml.read_gpu(1).utilization_pct == 81.0  # the other GPU is unaffected
        assert nvml.gpu_infos()[0] == GpuInfo(index=0, name="GPU 0 (lost)")
        nvml.reset()  # a reset (after the user's GPU reset) asks again
        with pytest.raises(nvml.GpuLostError):
            nvml.read_gpu(0)  # still lost in the fake


def test_unknown_error_from_a_gpu_that_worked_means_lost(door: None) -> None:
    with nvml.use_library(fake_nvml.gpu_lost_after(reads=1, error=pynvml.NVMLError_Unknown)):
        nvml.read_gpu(0)
        with pytest.raises(nvml.GpuLostError):
            nvml.read_gpu(0)


def test_unknown_error_from_a_gpu_that_never_answered_is_only_a_missing_value(door: None) -> None:
    fake = fake_nvml.healthy(1)
    fake.gpus[0].failures["nvmlDeviceGetPowerUsage"] = pynvml.NVMLError_Unknown
    with nvml.use_library(fake):
        assert nvml.read_gpu(0).power_w is None
        # ...but once the GPU has answered, the same error means it fell off the bus.
        with pytest.raises(nvml.GpuLostError):
            nvml.read_gpu(0)


def test_gpu_infos_list_a_lost_gpu_without_hiding_the_others(door: None) -> None:
    with nvml.use_library(fake_nvml.gpu_lost_after(reads=0, index=1)):
        with pytest.raises(nvml.GpuLostError):
            nvml.read_gpu(1)
        infos = nvml.gpu_infos()
    assert infos[1].name == "GPU 1 (lost)"
    assert infos[0].name == "NVIDIA A100-SXM4-80GB"
