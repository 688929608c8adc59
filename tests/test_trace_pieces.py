"""A trace read a piece of its events at a time is the trace read whole, record for record.

``load_trace`` decodes a file's events in pieces of a few hundred KB (``trace.pieces``) so that their
records are reused piece after piece; the whole-document decode is the reference it is checked
against here, on traces recorded on real GPUs and on documents built to trip the cutter.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest

from gpu_notebook.traces import Trace, kineto, load_trace
from gpu_notebook.traces.pieces import array_pieces
from gpu_notebook.traces.source import read_input
from tests import trace_fixtures as tf

RECORDED = sorted((Path(__file__).parent / "data" / "gpu").rglob("*.trace.json.gz"))
# Every event a piece of its own, a few events a piece, and the size load_trace uses.
PIECE_SIZES = (1, 700, kineto.PIECE_BYTES)
# On the large reference traces: ~20 events a piece, and the size load_trace uses.
REFERENCE_PIECE_SIZES = (4096, kineto.PIECE_BYTES)


def whole(raw: bytes) -> Trace:
    """The reference: the whole document decoded at once, its events in one list."""
    decoder, _ = kineto._schema(raw=True)
    return kineto._trace_of(decoder.decode(raw))


def assert_same_trace(got: Trace, want: Trace) -> None:
    assert (got.names, got.categories) == (want.names, want.categories)
    columns = ("name_id", "cat_id", "ts_us", "dur_us", "pid", "tid",
               *(attr for attr, _ in kineto.ARG_COLUMNS))  # fmt: skip
    for column in columns:
        g, w = getattr(got, column), getattr(want, column)
        assert g.dtype == w.dtype, column
        np.testing.assert_array_equal(g, w, err_msg=column)
    assert dict(got.category_counts) == dict(want.category_counts)
    assert [row for row, _ in got.kept_rows] == [row for row, _ in want.kept_rows]
    assert got.kept_args == want.kept_args
    assert (got.device_properties, got.distributed_info, got.base_time_ns) == (
        want.device_properties,
        want.distributed_info,
        want.base_time_ns,
    )


def _recorded_and_reference(reference: Path | None) -> Iterator[tuple[Path, tuple[int, ...]]]:
    for path in RECORDED:
        yield path, PIECE_SIZES
    if reference is not None:
        for path in sorted(reference.rglob("*.json.gz")):
            yield path, REFERENCE_PIECE_SIZES


@pytest.fixture
def reference_or_none(request: pytest.FixtureRequest) -> Path | None:
    try:
        folder: Path = request.getfixturevalue("reference_traces")
    except pytest.skip.Exception:
        return None
    return folder


def test_recorded_traces_read_in_pieces_are_the_traces_read_whole(
    reference_or_none: Path | None,
) -> None:
    assert RECORDED, "the recorded H200 traces are part of the repository"
    for path, sizes in _recorded_and_reference(reference_or_none):
        raw = read_input(path)
        want = whole(raw)
        for piece_bytes in sizes:
            got = kineto._trace_in_pieces(raw, piece_bytes)
            assert got is not None, (path, piece_bytes)
            assert_same_trace(got, want)
        assert_same_trace(load_trace(path), want)


def _odd_values() -> list[dict[str, Any]]:
    """Events with values of every odd kind some writer has written."""
    return [
        tf.op("aten::mm", 10.0, 5.0),
        {"ph": "X", "cat": "kernel", "name": "old_style", "pid": "0", "tid": "stream 7",
         "ts": 30, "dur": 2, "args": {"stream": "0x7", "correlation": 5}},
        {"ph": "X", "name": "no_cat", "pid": "Spans", "tid": "PyTorch Profiler", "ts": 1,
         "dur": 3},
        {"ph": "X", "cat": "cpu_op", "pid": 1, "tid": 1, "dur": 1},  # no ts: dropped
        {"ph": "X", "cat": "cpu_op", "name": 7, "pid": 1.0, "tid": True, "ts": "41.5"},
        tf.x("aten::bmm", "cpu_op", 40, 1.5, **{"Input Dims": [[2, 3], []], "External id": 9}),
        tf.x("nccl:all_reduce", "kernel", 50.0, 4.0, **{"In msg nelems": 1024, "dtype": "Float"}),
        {"ph": "B", "cat": "cpu_op", "name": "begin", "pid": 1, "tid": 1, "ts": 0},
        {"ph": "C", "name": "counter", "pid": 1, "ts": 0, "args": {"v": 1}},
        tf.flow(5, 29.0, start=True),
        tf.flow(5, 30.0, start=False),
    ]  # fmt: skip


def test_odd_values_read_in_pieces_are_the_values_read_whole() -> None:
    # Each value is converted on its own: a piece of plain ints reads as the same ints
    # whether or not another piece holds strings.
    raw = json.dumps(tf.trace_dict([*_odd_values(), tf.op("aten::relu", 60.0, 1.0)])).encode()
    want = whole(raw)
    assert len(want) == 7 and "7" in want.names
    for piece_bytes in PIECE_SIZES:
        got = kineto._trace_in_pieces(raw, piece_bytes)
        assert got is not None
        assert_same_trace(got, want)


def test_a_cut_inside_a_string_or_a_nested_value_is_never_read_as_one(tmp_path: Path) -> None:
    events = [
        tf.op("aten::mm", 10.0, 5.0),
        tf.op('weird},{"name":"x"}, {name', 11.0, 1.0),  # the cutter's text inside a string
        tf.x("nested", "cpu_op", 12.0, 1.0, shapes=[{"a": 1}, {"b": [2]}], correlation=3),
        tf.op("aten::add", 13.0, 1.0),
    ]
    raw = json.dumps(tf.trace_dict(events)).encode()
    want = whole(raw)
    assert 'weird},{"name":"x"}, {name' in want.names and "nested" in want.names
    # Cut after every event: the cutter tries the text inside the name; that piece does not
    # decode, and load_trace then reads the file whole.
    assert kineto._trace_in_pieces(raw, 1) is None
    path = tmp_path / "odd.json"
    path.write_bytes(raw)
    assert_same_trace(load_trace(path), want)
    # Whatever the size, a read in pieces is the whole read or no read.
    for piece_bytes in range(1, len(raw), 7):
        got = kineto._trace_in_pieces(raw, piece_bytes)
        if got is not None:
            assert_same_trace(got, want)


def test_each_piece_is_a_json_array_of_whole_events() -> None:
    events = [tf.op(f"op{i}", float(i), 1.0) for i in range(50)]
    text = json.dumps(events, indent=1).encode()  # newlines and spaces between events
    pieces = list(array_pieces(memoryview(text), 100))
    assert len(pieces) > 10
    decoded = [msgspec.json.decode(p) for p in pieces]
    assert all(isinstance(d, list) and d for d in decoded)
    assert [ev for d in decoded for ev in d] == events
    # A short array is one piece, the array itself; an empty one decodes to no events.
    assert list(array_pieces(memoryview(text), len(text))) == [memoryview(text)]
    assert [msgspec.json.decode(p) for p in array_pieces(memoryview(b"[ ]"), 1)] == [[]]


def test_flows_are_found_again_when_launches_lack_their_correlation(tmp_path: Path) -> None:
    """Pieces do not keep the flow events; a trace whose writer dropped the args needs them."""
    events: list[dict[str, Any]] = []
    for i in range(40):
        t = 100.0 * i
        events += [
            tf.x("cudaLaunchKernel", "cuda_runtime", t + 10.0, 2.0),
            tf.x(f"k{i}", "kernel", t + 20.0, 5.0, pid=tf.GPU_PID, tid=7),
            tf.flow(1000 + i, t + 10.0, start=True),
            tf.flow(1000 + i, t + 20.0, start=False),
        ]
    raw = json.dumps(tf.trace_dict(events)).encode()
    want = whole(raw)
    assert sorted(set(want.correlation.tolist())) == list(range(1000, 1040))
    got = kineto._trace_in_pieces(raw, 300)
    assert got is not None
    assert_same_trace(got, want)
    path = tmp_path / "flows.json.gz"
    path.write_bytes(gzip.compress(raw))
    assert_same_trace(load_trace(path), want)


def test_column_values_are_converted_one_by_one_whatever_else_the_piece_holds() -> None:
    # The fast conversion takes ints, bools and floats; the rest as the slow path reads them.
    assert kineto._int_column([1, True, 7]).tolist() == [1, 1, 7]
    assert kineto._int_column(["stream 7", 3, "0x1a"]).tolist() == [7, 3, 26]
    assert kineto._int_column([2.0, 3]).tolist() == [2, 3]
    assert kineto._float_column([1, 2.5, True]).tolist() == [1.0, 2.5, 1.0]
    assert kineto._float_column(["1.5", 2]).tolist() == [1.5, 2.0]
    assert np.isnan(kineto._float_column(["x", 1.0])[0])
    assert kineto._int_column([]).dtype == np.int64 and kineto._float_column([]).size == 0


def test_every_args_column_is_read(tmp_path: Path) -> None:
    """Each arg of ``ARG_COLUMNS`` lands in its column (the reader spells them out one by one:
    a column added to the table and not to the reader would read -1 everywhere)."""
    written = {key: 11 + i for i, (_, key) in enumerate(kineto.ARG_COLUMNS)}
    events = [tf.op("aten::mm", 1.0, 2.0), tf.x("k", "kernel", 5.0, 1.0, **written)]
    path = tmp_path / "args.json"
    path.write_text(json.dumps(tf.trace_dict(events)))
    for trace in (load_trace(path), kineto.load_trace_dict(tf.trace_dict(events))):
        read = {attr: getattr(trace, attr).tolist() for attr, _ in kineto.ARG_COLUMNS}
        assert read == {attr: [-1, written[key]] for attr, key in kineto.ARG_COLUMNS}


def test_the_events_found_by_a_search_are_the_documents_own(tmp_path: Path) -> None:
    """The events array is found by searching for its key, without decoding the document;
    a key that is not the top object's own, or an array that ends elsewhere, is never read
    as the events."""
    real = [tf.op("aten::mm", 1.0, 2.0), tf.op("aten::add", 4.0, 1.0)]
    fake = [tf.op("not_the_events", 9.0, 1.0)]
    plain = json.dumps(tf.trace_dict(real)).encode()
    head, found = next(kineto._events_array(plain))
    assert msgspec.json.decode(found) == tf.trace_dict(real)["traceEvents"]
    assert head.distributedInfo == tf.trace_dict(real).get("distributedInfo")

    events = tf.trace_dict(real)["traceEvents"]
    documents = {
        # A nested "traceEvents" first; text after the events with "]" in strings and lists.
        "nested": {"deviceProperties": [{"traceEvents": fake}], "traceEvents": events,
                   "traceName": "a]b", "x": [1, [2]]},
        # A key that ends in "traceEvents" (its quote escaped) before the real one.
        "escaped": {'a"traceEvents': fake, "traceEvents": events},
        # No events of the top object's own.
        "none": {"meta": {"traceEvents": fake}},
        # The key twice: the decoder's choice, whichever way the file is read.
        "twice": None,
    }  # fmt: skip
    for name, doc in documents.items():
        if doc is None:
            raw = b'{"traceEvents": %s, "traceEvents": %s}' % (
                json.dumps(fake).encode(),
                json.dumps(events).encode(),
            )
        else:
            raw = json.dumps(doc).encode()
        want = whole(raw)
        assert "not_the_events" not in want.names, name
        path = tmp_path / f"{name}.json"
        path.write_bytes(raw)
        assert_same_trace(load_trace(path), want)
        for piece_bytes in (1, kineto.PIECE_BYTES):
            got = kineto._trace_in_pieces(raw, piece_bytes)
            assert got is not None, name
            assert_same_trace(got, want)
