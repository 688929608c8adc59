"""The Kineto reader accepts real traces from A100/V100/MI250/CPU runs and odd synthetic ones."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import cast

import numpy as np
import pytest

from gpu_notebook import markers
from gpu_notebook.traces import DistributedInfo, Trace, load_trace, load_trace_dict
from tests import trace_fixtures as tf

REFERENCE_FILES = (
    "a100_alexnet_cuda_sync.json.gz",
    "a100_world16_rank0.json.gz",
    "a100_world2_rank0_nccl.json.gz",
    "a100_world8_rank3.json.gz",
    "cpu_only_rank34.json.gz",
    "mi250_rocm_toy.json.gz",
    "v100_world1_rank0.json.gz",
    "world128_sampled/rank-0.json.gz",
    "world128_sampled/rank-1.json.gz",
)


def _assert_consistent(trace: Trace) -> None:
    n = len(trace)
    for column in (
        trace.name_id, trace.cat_id, trace.ts_us, trace.dur_us, trace.pid, trace.tid,
        trace.correlation, trace.external_id, trace.stream, trace.device, trace.bytes,
    ):  # fmt: skip
        assert column.shape == (n,)
    assert n == 0 or int(trace.name_id.max()) < len(trace.names)
    assert n == 0 or int(trace.cat_id.max()) < len(trace.categories)
    assert np.isfinite(trace.ts_us).all()
    assert (trace.dur_us >= 0).all()


@pytest.mark.parametrize("name", REFERENCE_FILES)
def test_every_reference_trace_loads(reference_traces: Path, name: str) -> None:
    trace = load_trace(reference_traces / name)
    assert len(trace) > 0
    _assert_consistent(trace)
    # Flows are counted in the census but never become rows.
    assert "ac2g" not in {trace.categories[i] for i in np.unique(trace.cat_id)}


def test_category_census_matches_the_reference_readme(reference_traces: Path) -> None:
    alexnet = load_trace(reference_traces / "a100_alexnet_cuda_sync.json.gz")
    expected = {"ac2g": 500, "cuda_runtime": 361, "cpu_op": 359, "kernel": 79, "cuda_sync": 41}
    assert {k: alexnet.category_counts[k] for k in expected} == expected

    world16 = load_trace(reference_traces / "a100_world16_rank0.json.gz")
    expected = {
        "ac2g": 41671, "cuda_runtime": 33924, "cpu_op": 25185, "kernel": 6080,
        "gpu_memcpy": 1390, "user_annotation": 360,
    }  # fmt: skip
    assert {k: world16.category_counts[k] for k in expected} == expected
    # Complete events only become rows: the row count per category agrees with the census.
    assert int(world16.category_mask("kernel").sum()) == 6080
    assert int(world16.category_mask("cpu_op", "cuda_runtime").sum()) == 25185 + 33924

    cpu = load_trace(reference_traces / "cpu_only_rank34.json.gz")
    assert cpu.category_counts["user_annotation"] == 11
    assert cpu.category_counts["cpu_op"] == 4
    assert not cpu.has_gpu_activity


def test_metadata_is_read_and_missing_blocks_are_none(reference_traces: Path) -> None:
    world16 = load_trace(reference_traces / "a100_world16_rank0.json.gz")
    assert world16.distributed_info == DistributedInfo(rank=0, world_size=16, backend="nccl")
    assert world16.device_properties[0]["name"] == "NVIDIA A100-SXM4-80GB"

    rocm = load_trace(reference_traces / "mi250_rocm_toy.json.gz")
    assert rocm.distributed_info is None
    assert rocm.base_time_ns == 1735632360000000000
    assert rocm.has_gpu_activity  # AMD kernels use the same categories

    sampled = load_trace(reference_traces / "world128_sampled/rank-1.json.gz")
    assert sampled.device_properties == ()
    assert sampled.distributed_info == DistributedInfo(rank=1, world_size=128, backend="nccl")


def test_gpu_events_carry_stream_device_correlation_and_bytes(reference_traces: Path) -> None:
    trace = load_trace(reference_traces / "v100_world1_rank0.json.gz")
    gpu = trace.gpu_mask
    assert set(trace.stream[gpu].tolist()) == {7}
    assert set(trace.device[gpu].tolist()) == {0}
    assert (trace.correlation[gpu] >= 0).all()
    memcpy = trace.category_mask("gpu_memcpy")
    assert (trace.bytes[memcpy] > 0).all()
    # Every kernel's correlation id is found among the host launches.
    launches = set(trace.correlation[trace.category_mask("cuda_runtime")].tolist())
    kernels = trace.correlation[trace.category_mask("kernel")].tolist()
    assert all(c in launches for c in kernels)


def test_unknown_categories_flows_metadata_and_odd_values_do_not_crash() -> None:
    doc = tf.trace_dict(
        [
            tf.op("aten::mm", 10.0, 5.0),
            tf.x("my_new_thing", "some_future_category", 12.0, 1.0, weird={"nested": [1, 2]}),
            {"ph": "X", "cat": "cpu_op", "name": "no_dur", "pid": 100, "tid": 100, "ts": 20.5},
            {"ph": "X", "name": "no_cat", "pid": "Spans", "tid": "PyTorch Profiler", "ts": 1,
             "dur": 3},
            {"ph": "X", "cat": "kernel", "name": "old_style", "pid": "0", "tid": "stream 7",
             "ts": 30, "dur": 2, "args": {"stream": "0x7", "correlation": 5}},
            {"ph": "X", "cat": "cpu_op", "pid": 1, "tid": 1, "dur": 1},  # no ts: dropped
            {"ph": "B", "cat": "cpu_op", "name": "begin", "pid": 1, "tid": 1, "ts": 0},
            {"ph": "C", "name": "counter", "pid": 1, "ts": 0, "args": {"v": 1}},
            tf.flow(5, 29.0, start=True),
            tf.flow(5, 30.0, start=False),
            cast(tf.Event, "not an event"),
        ]
    )  # fmt: skip
    trace = load_trace_dict(doc)
    _assert_consistent(trace)
    assert len(trace) == 5
    assert "some_future_category" in trace.categories
    assert trace.category_counts["ac2g"] == 2
    row = int(np.flatnonzero(trace.name_mask(names=("no_dur",)))[0])
    assert trace.dur_us[row] == 0.0
    old = int(np.flatnonzero(trace.name_mask(names=("old_style",)))[0])
    assert (trace.pid[old], trace.tid[old], trace.stream[old]) == (0, 7, 7)
    spans = int(np.flatnonzero(trace.name_mask(names=("no_cat",)))[0])
    assert trace.pid[spans] == -1 and trace.categories[trace.cat_id[spans]] == ""
    assert trace.distributed_info is None and trace.base_time_ns is None


def test_bare_event_list_and_empty_trace_are_accepted() -> None:
    trace = load_trace_dict([tf.op("aten::add", 1.0, 2.0)])
    assert trace.name_of(0) == "aten::add"
    empty = load_trace_dict({"traceEvents": []})
    assert len(empty) == 0 and not empty.has_gpu_activity


def test_plain_and_gzipped_files_read_the_same(tmp_path: Path) -> None:
    doc = tf.gpu_scenario()
    plain = tmp_path / "trace.json"
    plain.write_text(json.dumps(doc))
    packed = tmp_path / "trace.json.gz"
    packed.write_bytes(gzip.compress(json.dumps(doc).encode()))
    a, b = load_trace(plain), load_trace(str(packed))
    assert a.names == b.names
    np.testing.assert_array_equal(a.ts_us, b.ts_us)
    np.testing.assert_array_equal(a.correlation, b.correlation)
    assert a.distributed_info == DistributedInfo(rank=0, world_size=1, backend="nccl")


def test_a_file_that_is_not_json_raises_value_error(tmp_path: Path) -> None:
    bad = tmp_path / "trace.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="not a JSON trace"):
        load_trace(bad)
    with pytest.raises(ValueError, match="not a Kineto trace"):
        load_trace_dict(42)  # type: ignore[arg-type]


def test_name_and_category_helpers() -> None:
    trace = load_trace_dict(tf.phase_scenario())
    marks = trace.names_matching(markers.STEP_MARK_PREFIX)
    assert sorted(trace.names[i] for i in marks) == [
        f"{markers.STEP_MARK_PREFIX}{i}" for i in (3, 4, 5)
    ]
    sync = trace.name_mask(names=markers.SYNC_OPS)
    assert sorted(trace.names[i] for i in trace.name_id[sync]) == [
        "aten::_local_scalar_dense", "aten::item", "cudaStreamSynchronize",
    ]  # fmt: skip
    assert int(trace.category_mask("kernel").sum()) == 1
    assert not trace.category_mask("no_such_category").any()
    np.testing.assert_allclose(trace.end_us, trace.ts_us + trace.dur_us)


def test_a_file_and_its_parsed_dict_read_the_same(reference_traces: Path, tmp_path: Path) -> None:
    # One decoding path: a file and the same document handed over as a dict give one Trace.
    from gpu_notebook.traces import kineto

    for name in REFERENCE_FILES:
        raw = gzip.decompress((reference_traces / name).read_bytes())
        typed = load_trace(reference_traces / name)
        generic = load_trace_dict(json.loads(raw))
        assert (typed.names, typed.categories) == (generic.names, generic.categories)
        columns = ("name_id", "cat_id", "ts_us", "dur_us", "pid", "tid",
                   *(attr for attr, _ in kineto.ARG_COLUMNS))  # fmt: skip
        for column in columns:
            np.testing.assert_array_equal(getattr(typed, column), getattr(generic, column))
        assert dict(typed.category_counts) == dict(generic.category_counts)
        assert typed.distributed_info == generic.distributed_info
        assert typed.device_properties == generic.device_properties
    # Odd documents still load: a name that is a number, args that are not an object, a bare list.
    numeric_name = tf.x("x", "cpu_op", 1.0, 2.0) | {"name": 7}
    odd_args = tf.x("y", "cpu_op", 3.0, 1.0) | {"args": [1, 2]}
    path = tmp_path / "odd.json"
    path.write_text(json.dumps([numeric_name, odd_args]))
    assert load_trace(path).names == ("7", "y")
    assert load_trace_dict(json.loads(path.read_text())).names == ("7", "y")


def test_the_sequence_number_marks_ops_recorded_in_grad_mode() -> None:
    events = [
        tf.x("aten::addmm", "cpu_op", 0.0, 5.0)
        | {"args": {"Sequence number": 4, "Fwd thread id": 0}},
        tf.x("aten::add_", "cpu_op", 6.0, 1.0),
    ]
    trace = load_trace_dict(tf.trace_dict(events))
    assert trace.sequence.tolist() == [4, -1]
