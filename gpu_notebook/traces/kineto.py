"""Read a Kineto (torch.profiler Chrome trace) JSON file into numpy arrays in one parse pass."""

from __future__ import annotations

import array
import re
import types
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt

__all__ = [
    "GPU_CATEGORIES",
    "HOST_CATEGORIES",
    "BoolArray",
    "DistributedInfo",
    "FloatArray",
    "IntArray",
    "Trace",
    "load_trace",
    "load_trace_dict",
]

# The arrays a decoded trace is made of; the analysis of it types its own with these.
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

# Device-side activity: what "the GPU is busy" means.
GPU_CATEGORIES: tuple[str, ...] = ("kernel", "gpu_memcpy", "gpu_memset")
# Host-side events recorded on CPU threads.
HOST_CATEGORIES: tuple[str, ...] = (
    "cpu_op",
    "user_annotation",
    "cuda_runtime",
    "cuda_driver",
    "python_function",
)

# Category names of the first Kineto writers (torch 1.8 / 1.9, 2021), as today's: older traces
# are read as if written now. (torch_tb_profiler's EventTypeMap lists the same pairs.)
LEGACY_CATEGORIES: Mapping[str, str] = {
    "Operator": "cpu_op",
    "operator": "cpu_op",
    "Runtime": "cuda_runtime",
    "Driver": "cuda_driver",
    "Kernel": "kernel",
    "Memcpy": "gpu_memcpy",
    "Memset": "gpu_memset",
    "User annotation": "user_annotation",
    "Python": "python_function",
}

_STREAM_IN_TID = re.compile(r"(-?\d+)")
# Flow categories that tie a launch to its GPU work: Kineto's "ac2g", and the name some torch
# versions wrote instead.
FLOW_CATEGORIES = frozenset({"ac2g", "async_cpu_to_gpu"})
_FLOW_ENDPOINTS = frozenset({*GPU_CATEGORIES, "cuda_runtime", "cuda_driver"})


@dataclass(frozen=True)
class DistributedInfo:
    """The ``distributedInfo`` block of a trace (None fields: not written by that run)."""

    rank: int | None
    world_size: int | None
    backend: str | None = None


# A trace's own clock (Kineto's: microseconds since boot or the epoch) reads far past this; a
# GPU event at exactly 0 with no duration in such a trace has no clock reading.
_CLOCK_ELSEWHERE_US = 1e6


@dataclass(frozen=True, eq=False)
class Trace:
    """Complete ('X') events of one Kineto trace as parallel numpy arrays, one row per event.

    The args columns are the ones named in ``ARG_COLUMNS``.

    Strings are interned: ``name_id``/``cat_id`` index ``names``/``categories``. Integer columns
    use -1 for "absent" (no correlation, no stream...). ``ts_us``/``dur_us`` are the trace's own
    microsecond clock (absolute, as written by Kineto). Rows keep file order; nothing is sorted.
    """

    names: tuple[str, ...]
    categories: tuple[str, ...]
    name_id: IntArray
    cat_id: IntArray
    ts_us: FloatArray
    dur_us: FloatArray
    pid: IntArray
    tid: IntArray
    correlation: IntArray  # args "correlation": joins a launch (cuda_runtime) to its GPU event
    external_id: IntArray  # args "External id": joins GPU events to the cpu_op that caused them
    stream: IntArray  # args "stream" (GPU events), else -1
    device: IntArray  # args "device" (GPU events), else -1
    bytes: IntArray  # args "bytes" (memcpy/memset), else -1
    sequence: IntArray  # args "Sequence number" (ops recorded in grad mode), else -1
    device_properties: tuple[Mapping[str, Any], ...] = ()
    distributed_info: DistributedInfo | None = None
    base_time_ns: int | None = None
    # Events per category over the whole file, all phases ('X', flows 's'/'f', ...): a census.
    category_counts: Mapping[str, int] = field(default_factory=dict)
    # (row, its decoded args) of the rows that carry an arg of ``KEPT_ARGS``: see ``kept_args``.
    kept_rows: Sequence[tuple[int, Any]] = ()

    def __len__(self) -> int:
        return int(self.ts_us.shape[0])

    @cached_property
    def end_us(self) -> FloatArray:
        return self.ts_us + self.dur_us

    @cached_property
    def _category_index(self) -> dict[str, int]:
        return {c: i for i, c in enumerate(self.categories)}

    def category_mask(self, *categories: str) -> BoolArray:
        """True for rows whose category is one of ``categories`` (unknown names match nothing)."""
        ids = [self._category_index[c] for c in categories if c in self._category_index]
        if not ids:
            return np.zeros(len(self), dtype=np.bool_)
        if len(ids) == 1:
            return np.equal(self.cat_id, ids[0])
        # A lookup table: np.isin costs ~20x more on a million rows (min, max, then a table).
        table = np.zeros(len(self.categories), dtype=np.bool_)
        table[ids] = True
        return np.take(table, self.cat_id)

    def name_ids(self, predicate: Callable[[str], bool]) -> IntArray:
        """Indices into ``names`` of the names for which ``predicate`` is true."""
        return np.fromiter((i for i, n in enumerate(self.names) if predicate(n)), dtype=np.int64)

    def outermost(self, rows: Iterable[int]) -> list[int]:
        """``rows`` less those inside another of them on the same thread (a cast within a cast,
        an operator its own wrapper calls), in thread and start order."""
        out: list[int] = []
        ends: dict[int, float] = {}
        for r in sorted(rows, key=lambda r: (int(self.tid[r]), float(self.ts_us[r]))):
            tid, start = int(self.tid[r]), float(self.ts_us[r])
            if start < ends.get(tid, -np.inf):
                continue
            out.append(r)
            ends[tid] = start + float(self.dur_us[r])
        return out

    def names_matching(self, prefix: str | tuple[str, ...]) -> IntArray:
        """Indices into ``names`` of the names starting with ``prefix`` (one or several)."""
        return self.name_ids(lambda n: n.startswith(prefix))

    def name_mask(
        self,
        *,
        prefix: str | tuple[str, ...] | None = None,
        names: Iterable[str] = (),
    ) -> BoolArray:
        """True for rows whose name starts with ``prefix`` or is one of ``names``."""
        wanted = set(names)
        ids = self.name_ids(lambda n: n in wanted or (prefix is not None and n.startswith(prefix)))
        if ids.size == 0:
            return np.zeros(len(self), dtype=np.bool_)
        # A lookup table beats np.isin when there are many events and few distinct names.
        table = np.zeros(len(self.names), dtype=np.bool_)
        table[ids] = True
        return table[self.name_id]

    @cached_property
    def gpu_mask(self) -> BoolArray:
        """Rows that are device activity (kernels, memcpy, memset) with a clock reading."""
        return self.category_mask(*GPU_CATEGORIES) & ~self.unclocked_gpu_mask

    @cached_property
    def unclocked_gpu_mask(self) -> BoolArray:
        """Device activity that CUPTI gave no timestamps (``ts`` and ``dur`` 0) in a trace whose
        clock is elsewhere: placed at 0, it would read as work done long before the window.
        Seen for every GPU event of a pageable-copy loop's trace (torch 2.11 + CUDA 13, H200)."""
        return self.category_mask(*GPU_CATEGORIES) & self.unclocked_mask

    @cached_property
    def unclocked_mask(self) -> BoolArray:
        """Rows at ``ts`` 0 with ``dur`` 0 in a trace whose clock is elsewhere: no clock reading
        (the CUDA runtime calls of those copies came the same way)."""
        zero: BoolArray = (self.ts_us == 0.0) & (self.dur_us == 0.0)
        if not zero.any() or not (np.abs(self.ts_us[~zero]) > _CLOCK_ELSEWHERE_US).any():
            return np.zeros(len(self), dtype=np.bool_)
        return zero

    @property
    def has_gpu_activity(self) -> bool:
        """Device activity in the trace, with or without a clock reading."""
        return bool(self.category_mask(*GPU_CATEGORIES).any())

    def name_of(self, row: int) -> str:
        return self.names[int(self.name_id[row])]

    @cached_property
    def kept_args(self) -> Mapping[str, Mapping[int, Any]]:
        """The args of ``KEPT_ARGS`` as written: attr -> row -> value, on the rows that carry
        them (read out on first use: most reports never ask)."""
        out: dict[str, dict[int, Any]] = {}
        for attr, _ in KEPT_ARGS:
            values = {
                row: v for row, args in self.kept_rows if (v := getattr(args, attr)) is not None
            }
            if values:
                out[attr] = values
        return out

    def kept_arg(self, attr: str, row: int, default: Any = None) -> Any:
        """Row ``row``'s arg ``attr`` of ``KEPT_ARGS`` (JSON text decoded now), else ``default``."""
        value = self.kept_args.get(attr, {}).get(row, default)
        # Raw text is a slice of the JSON the file decoded from: it decodes.
        return msgspec.json.decode(value) if isinstance(value, msgspec.Raw) else value


# Kineto event args read here, declared once: (Trace column, key in the event's "args"). The
# schema and the Trace columns are built from this table; the decoding loop spells each one out
# (a loop over it cost a third of that pass), and a test reads every one back.
ARG_COLUMNS: tuple[tuple[str, str], ...] = (
    ("correlation", "correlation"),  # joins a launch (cuda_runtime) to its GPU event
    ("external_id", "External id"),  # joins GPU events to the cpu_op that caused them
    ("stream", "stream"),  # GPU events
    ("device", "device"),  # GPU events
    ("bytes", "bytes"),  # memcpy / memset
    # Autograd's sequence number: set on an op recorded while grad mode was on (a forward op
    # that autograd records, or the backward node that replays it); absent under no_grad.
    ("sequence", "Sequence number"),
)

# Args kept as written (row -> value) rather than as columns: the few rows that carry them are
# read by one analysis each, so the one decode of the file keeps them for it. NCCL kernels'
# message size, communicator size and element type (the all-reduce's bandwidth: whatif), and
# an operator's input shapes when the profiler recorded them (a matmul's FLOPs: gpu_estimate);
# those stay JSON text (``msgspec.Raw``, no lists built for every operator) until read.
KEPT_ARGS: tuple[tuple[str, str], ...] = (
    ("msg_nelems", "In msg nelems"),
    ("group_size", "Group size"),
    ("dtype", "dtype"),
    ("input_dims", "Input Dims"),
    # An operator's input dtypes, recorded with its shapes (a CPU bfloat16 run's bfloat16
    # operators: analysis.cpu_bf16_casts).
    ("input_types", "Input type"),
)
_RAW_ARGS = frozenset({"input_dims", "input_types"})


def load_trace(path: str | Path) -> Trace:
    """Read a Kineto trace from ``.json`` or ``.json.gz`` (gzip detected by magic bytes).

    One decoding path: ``msgspec`` decodes the events straight into small typed records that
    keep only the fields read here. A document that does not fit that schema (a bare list of
    events, an ``args`` that is not an object) is decoded untyped and goes through
    :func:`load_trace_dict`, which converts it into the same records.

    Raises ``trace.source.InputError`` (a ValueError) when the file cannot be read (missing,
    damaged gzip, past the size cap) and ``ValueError`` when it is not a Kineto/Chrome trace (not JSON, or neither a dict with ``traceEvents`` nor a list of events).
    """
    from gpu_notebook.traces.source import read_input

    raw = read_input(path)  # gzip inflated as a stream, under a cap (InputError: a ValueError)
    trace = _trace_in_pieces(raw)
    if trace is not None:
        return trace
    # The whole document at once: a file whose events could not be read piece by piece (not
    # a dict of traceEvents, an event that does not fit the schema), and its errors said.
    decoder, _doc_cls = _schema(raw=True)
    try:
        doc = decoder.decode(raw)
    except (msgspec.ValidationError, msgspec.DecodeError):
        try:
            data = msgspec.json.decode(raw)
        except msgspec.DecodeError as exc:
            raise ValueError(f"{path}: not a JSON trace ({exc})") from exc
        return load_trace_dict(data)
    return _trace_of(doc)


def load_trace_dict(data: object) -> Trace:
    """Build a ``Trace`` from a parsed Kineto JSON document (or a bare list of events).

    ``data`` is whatever a JSON parser gave (typed ``object``: the checks below are the
    contract); any other top level raises ``ValueError``.
    """
    if isinstance(data, Mapping):
        events = data.get("traceEvents", [])
        meta: Mapping[str, Any] = data
    elif isinstance(data, Sequence) and not isinstance(data, (str, bytes)):
        events, meta = data, {}
    else:
        raise ValueError(f"not a Kineto trace: top level is {type(data).__name__}")
    if not isinstance(events, Sequence) or isinstance(events, (str, bytes)):
        raise ValueError("not a Kineto trace: traceEvents is not a list")
    # Only what the schema cannot take is dropped: events that are not objects, args that are not.
    clean = [
        ev
        if isinstance(ev.get("args", {}), Mapping)
        else {k: v for k, v in ev.items() if k != "args"}
        for ev in events
        if isinstance(ev, Mapping)
    ]
    _, doc_cls = _schema(raw=False)
    doc = msgspec.convert(
        {
            "traceEvents": clean,
            "deviceProperties": meta.get("deviceProperties"),
            "distributedInfo": meta.get("distributedInfo"),
            "baseTimeNanoseconds": meta.get("baseTimeNanoseconds"),
        },
        doc_cls,
    )
    return _trace_of(doc)


def _trace_of(doc: Any) -> Trace:
    cols = _Columns()
    cols.add_records(doc.traceEvents)
    return cols.to_trace(
        device_properties=doc.deviceProperties,
        distributed_info=doc.distributedInfo,
        base_time_ns=doc.baseTimeNanoseconds,
    )


# About 1,300 events of JSON: their records stay in cache while the column pass reads them,
# and the next piece's records take the memory this one's free (1 MB pieces faulted in twice
# as many fresh pages: 28k against 14k on the 1M-event trace, and 0.05-0.1 s more CPU).
PIECE_BYTES = 1 << 18


def _trace_in_pieces(raw: bytes, piece_bytes: int = PIECE_BYTES) -> Trace | None:
    """The trace of a file's bytes with its events decoded a piece at a time (``trace.pieces``),
    or None when the file does not read that way (the caller reads it whole).

    The same records, columns and census as the whole document's decode: only the events'
    memory is reused, piece after piece. The flow events are not kept: the few traces that need
    them (a launch or GPU event without ``correlation``) decode the pieces again for them.
    """
    from gpu_notebook.traces.pieces import array_pieces

    _, events_decoder = _piece_schema()
    for head, events in _events_array(raw):
        cols = _Columns(keep_flows=False)
        read = 0
        try:
            for piece in array_pieces(events, piece_bytes):
                cols.add_records(events_decoder.decode(piece))
                read += len(piece)
                # Room for as many rows as the file holds if the rest is like what was read.
                cols.flush(expect_rows=cols.rows * len(events) // read * 9 // 8 + 16)
        except (msgspec.ValidationError, msgspec.DecodeError):
            continue

        def flows(events: memoryview = events) -> list[Any]:
            return [
                ev
                for piece in array_pieces(events, piece_bytes)
                for ev in events_decoder.decode(piece)
                if ev.ph != "X" and isinstance(ev.cat, str) and ev.cat in FLOW_CATEGORIES
            ]

        return cols.to_trace(
            device_properties=head.deviceProperties,
            distributed_info=head.distributedInfo,
            base_time_ns=head.baseTimeNanoseconds,
            flows=flows,
        )
    return None


def _events_array(raw: bytes) -> Iterator[tuple[Any, memoryview]]:
    """The document's fields but its events, and the bytes of its events array: first where a
    search finds them (``pieces.key_array_candidates``: the events are not decoded twice), then
    where a decode of the document that skips over the events finds them."""
    from gpu_notebook.traces.pieces import STAND_IN, key_array_candidates

    head_decoder, _ = _piece_schema()
    for around, events in key_array_candidates(raw, "traceEvents"):
        try:
            head = head_decoder.decode(around)
        except (msgspec.ValidationError, msgspec.DecodeError):
            continue  # the array ends at another "]"
        if memoryview(head.traceEvents) == STAND_IN:
            yield head, events
        break  # found, or the key found is not the document's own
    try:
        head = head_decoder.decode(raw)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return
    events = memoryview(head.traceEvents)
    if events[:1].tobytes() == b"[":
        yield head, events


@lru_cache(maxsize=1)
def _piece_schema() -> tuple[msgspec.json.Decoder[Any], msgspec.json.Decoder[Any]]:
    """The decoder of a document with its events left as JSON text, and the decoder of a piece
    of its events (a list of the file decoder's event records)."""
    _, doc_cls = _schema(raw=True)
    event_cls = doc_cls.__annotations__["traceEvents"].__args__[0]
    head_cls = types.new_class(
        "_KinetoHead",
        (msgspec.Struct,),
        {"kw_only": True},
        lambda ns: ns.update(
            __annotations__={
                "traceEvents": msgspec.Raw,
                "deviceProperties": Any,
                "distributedInfo": Any,
                "baseTimeNanoseconds": Any,
            },
            # No events: an empty list's text.
            traceEvents=msgspec.Raw(b"[]"),
            deviceProperties=None,
            distributedInfo=None,
            baseTimeNanoseconds=None,
        ),
    )
    return msgspec.json.Decoder(head_cls), msgspec.json.Decoder(list[event_cls])  # type: ignore[valid-type]


@lru_cache(maxsize=2)
def _schema(raw: bool) -> tuple[msgspec.json.Decoder[Any], type[Any]]:
    """The msgspec decoder and document class: only the fields read here become objects.

    Scalars are typed ``Any``: Kineto writers disagree on them (ids as ints or strings such as
    "stream 7" or "0x0", names that are numbers), and the column builders below convert them
    without failing; what must be an object (the document, an event, its args) is typed.
    ``raw``: the args of ``_RAW_ARGS`` stay JSON text (a file's decoder; ``msgspec.convert``,
    which builds a dict's, has no raw type: there they are the objects already built).
    """
    struct, field_ = msgspec.Struct, msgspec.field
    # Classes built with real annotation objects: this module postpones annotations, and
    # msgspec could not resolve the string form of types local to this function.
    # gc=False: decoded events and their args hold JSON values only, never a reference cycle;
    # untracked, the collector does not walk the hundreds of thousands a trace decodes into
    # (benchmarks/README.md: the reader x0.85-0.90 of before, the kept args included).
    arg_keys = (*ARG_COLUMNS, *KEPT_ARGS)
    args_cls = types.new_class(
        "_KinetoArgs",
        (struct,),
        {"kw_only": True, "gc": False},
        lambda ns: ns.update(
            __annotations__={
                attr: msgspec.Raw if raw and attr in _RAW_ARGS else Any for attr, _ in arg_keys
            },
            # None when absent, even for a raw arg (msgspec does not check a default's type).
            **{attr: field_(default=None, name=key) for attr, key in arg_keys},
        ),
    )
    event_fields = ("ph", "cat", "name", "pid", "tid", "ts", "dur", "id")
    event_cls = types.new_class(
        "_KinetoEvent",
        (struct,),
        {"kw_only": True, "gc": False},
        lambda ns: ns.update(
            __annotations__={**dict.fromkeys(event_fields, Any), "args": args_cls | None},
            **dict.fromkeys((*event_fields, "args"), None),
        ),
    )
    doc_cls = types.new_class(
        "_KinetoDoc",
        (struct,),
        {"kw_only": True},
        lambda ns: ns.update(
            __annotations__={
                "traceEvents": list[event_cls],  # type: ignore[valid-type]
                "deviceProperties": Any,
                "distributedInfo": Any,
                "baseTimeNanoseconds": Any,
            },
            traceEvents=field_(default_factory=list),
            deviceProperties=None,
            distributedInfo=None,
            baseTimeNanoseconds=None,
        ),
    )
    return msgspec.json.Decoder(doc_cls), doc_cls


# The columns every row has, and their arrays' types.
_DENSE_COLUMNS: tuple[tuple[str, type[np.generic]], ...] = (
    ("name", np.int64),
    ("cat", np.int64),
    ("ts", np.float64),
    ("dur", np.float64),
    ("pid", np.int64),
    ("tid", np.int64),
)


class _Columns:
    """Lists filled in one pass over the events, turned into arrays at each ``flush`` (a piece
    of the file read) and joined at the end."""

    def __init__(self, *, keep_flows: bool = True) -> None:
        self.name_index: dict[str, int] = {}
        self.cat_index: dict[str, int] = {}
        self.counts: dict[str, int] = {}
        self.rows = 0  # rows added so far, flushed or not
        self.name: list[int] = []
        self.cat: list[int] = []
        self.ts: list[Any] = []
        self.dur: list[Any] = []
        self.pid: list[Any] = []
        self.tid: list[Any] = []
        # Args columns are sparse: (row, value) pairs scattered into arrays at the end, so
        # events without those args (most cpu_ops) cost nothing.
        self.sparse: dict[str, tuple[list[int], list[Any]]] = {
            attr: ([], []) for attr, _ in ARG_COLUMNS
        }
        # The flushed rows: each column's array, rows [0, flushed) written, room for more (one
        # array each from the first flush: no copies joined at the end, no pages touched twice).
        self.flushed = 0
        self.dense: dict[str, npt.NDArray[Any]] = {
            c: np.empty(0, dtype=dtype) for c, dtype in _DENSE_COLUMNS
        }
        self.done_sparse: dict[str, list[tuple[IntArray, IntArray]]] = {
            attr: [] for attr, _ in ARG_COLUMNS
        }
        # (row, args) of the events that carry a kept arg (KEPT_ARGS), read out at the end.
        self.kept: list[tuple[int, Any]] = []
        # Launch -> GPU flow events ('s' at the launch, 'f' at the kernel; id = correlation),
        # kept as decoded (unless the caller finds them again): read only to join events whose
        # args lack "correlation".
        self.keep_flows = keep_flows
        self.flows: list[Any] = []

    def add_records(self, events: Iterable[Any]) -> None:
        # The hot path, kept flat on purpose: one pass, no per-event helper call.
        name_index, cat_index, counts = self.name_index, self.cat_index, self.counts
        name_l, cat_l, ts_l, dur_l = self.name, self.cat, self.ts, self.dur
        pid_l, tid_l = self.pid, self.tid
        # The args columns one by one, spelled out: a loop over ARG_COLUMNS with getattr took a
        # third of this pass (tests/test_trace_pieces.py reads every column of ARG_COLUMNS).
        corr_rows, corr_vals = self.sparse["correlation"]
        ext_rows, ext_vals = self.sparse["external_id"]
        stream_rows, stream_vals = self.sparse["stream"]
        device_rows, device_vals = self.sparse["device"]
        bytes_rows, bytes_vals = self.sparse["bytes"]
        seq_rows, seq_vals = self.sparse["sequence"]
        kept = self.kept
        flows = self.flows if self.keep_flows else None
        row = self.rows
        for ev in events:
            cat = ev.cat
            if not isinstance(cat, str):
                cat = ""
            if ev.ph != "X":
                # Flows, metadata, instants: counted for the census, otherwise skipped.
                if cat:
                    counts[cat] = counts.get(cat, 0) + 1
                    if flows is not None and cat in FLOW_CATEGORIES:
                        flows.append(ev)
                continue
            ts = ev.ts
            if ts is None:
                continue
            ci = cat_index.get(cat)
            if ci is None:
                ci = cat_index[cat] = len(cat_index)
            name = ev.name
            if not isinstance(name, str):
                name = "" if name is None else str(name)
            ni = name_index.get(name)
            if ni is None:
                ni = name_index[name] = len(name_index)
            cat_l.append(ci)
            name_l.append(ni)
            ts_l.append(ts)
            dur = ev.dur
            dur_l.append(0 if dur is None else dur)
            pid_l.append(-1 if ev.pid is None else ev.pid)
            tid_l.append(-1 if ev.tid is None else ev.tid)
            args = ev.args
            if args is not None:
                v = args.correlation
                if v is not None:
                    corr_rows.append(row)
                    corr_vals.append(v)
                v = args.external_id
                if v is not None:
                    ext_rows.append(row)
                    ext_vals.append(v)
                v = args.stream
                if v is not None:
                    stream_rows.append(row)
                    stream_vals.append(v)
                v = args.device
                if v is not None:
                    device_rows.append(row)
                    device_vals.append(v)
                v = args.bytes
                if v is not None:
                    bytes_rows.append(row)
                    bytes_vals.append(v)
                v = args.sequence
                if v is not None:
                    seq_rows.append(row)
                    seq_vals.append(v)
                # Two looks, not one per kept arg: an NCCL kernel's group size and dtype come
                # with its message size.
                # (Input types come with the input dims: record_shapes writes both.)
                if args.input_dims is not None or args.msg_nelems is not None:
                    kept.append((row, args))
            row += 1
        self.rows = row

    def flush(self, expect_rows: int = 0) -> None:
        """The rows added since the last flush into the arrays (each value converted on its
        own, so flushing more often changes no value); the lists emptied. ``expect_rows``: how
        many rows the whole trace may hold (room is made for them at once)."""
        start, end = self.flushed, self.flushed + len(self.ts)
        dense = self.dense
        if end > dense["ts"].size:
            room = max(end, expect_rows, dense["ts"].size * 3 // 2)
            for c, dtype in _DENSE_COLUMNS:
                grown = np.empty(room, dtype=dtype)
                grown[:start] = dense[c][:start]
                dense[c] = grown
        dense["name"][start:end] = np.asarray(self.name, dtype=np.int64)
        dense["cat"][start:end] = np.asarray(self.cat, dtype=np.int64)
        dense["ts"][start:end] = _float_column(self.ts)
        dense["dur"][start:end] = _float_column(self.dur)
        dense["pid"][start:end] = _int_column(self.pid)
        dense["tid"][start:end] = _int_column(self.tid)
        self.flushed = end
        for lst in (self.name, self.cat, self.ts, self.dur, self.pid, self.tid):
            lst.clear()
        for attr, (rows, values) in self.sparse.items():
            if rows:
                pair = (np.asarray(rows, dtype=np.int64), _int_column(values))
                self.done_sparse[attr].append(pair)
                rows.clear()
                values.clear()

    def to_trace(
        self,
        *,
        device_properties: Any,
        distributed_info: Any,
        base_time_ns: Any,
        flows: Callable[[], list[Any]] | None = None,
    ) -> Trace:
        """The Trace of the rows added; ``flows`` finds the flow events again when they were
        not kept (called only when a launch or GPU event lacks its correlation)."""
        self.flush()
        n = self.rows
        column = {c: array[:n] for c, array in self.dense.items()}
        cat_ids = column["cat"]
        # Flows were seen when the census (non-'X' events only, so far) counts one.
        saw_flows = any(self.counts.get(c) for c in FLOW_CATEGORIES)
        categories, cat_ids, counts = _modern_categories(
            tuple(self.cat_index), cat_ids, self.counts
        )
        x_counts = np.bincount(cat_ids, minlength=len(categories)).tolist()
        for c, x_count in zip(categories, x_counts, strict=True):
            counts[c] = counts.get(c, 0) + int(x_count)
        ts_us, pid, tid = column["ts"], column["pid"], column["tid"]
        sparse = {attr: _sparse_int_column(n, self.done_sparse[attr]) for attr, _ in ARG_COLUMNS}
        if saw_flows:
            # Only launches and GPU work are flow endpoints (most cpu_ops carry no correlation).
            ends = [i for i, c in enumerate(categories) if c in _FLOW_ENDPOINTS]
            open_rows = np.flatnonzero(np.isin(cat_ids, ends) & (sparse["correlation"] < 0))
            if open_rows.size:
                _correlation_from_flows(
                    sparse["correlation"],
                    open_rows,
                    self.flows if flows is None else flows(),
                    ts_us,
                    pid,
                    tid,
                )
        return Trace(
            names=tuple(self.name_index),
            categories=categories,
            name_id=column["name"],
            cat_id=cat_ids,
            ts_us=ts_us,
            dur_us=column["dur"],
            pid=pid,
            tid=tid,
            **sparse,
            device_properties=_device_properties(device_properties),
            distributed_info=_distributed_info(distributed_info),
            base_time_ns=_optional_int(base_time_ns),
            category_counts=counts,
            kept_rows=self.kept,
        )


# ---------------------------------------------------------------------------------------------
# Column builders: the fast path hands the whole list to numpy; a slow path converts odd values
# (strings such as pid "Spans", tid "stream 7", stream "0x0") one by one without failing.
# ---------------------------------------------------------------------------------------------


def _correlation_from_flows(
    correlation: IntArray,
    open_rows: IntArray,
    flows: list[Any],
    ts_us: FloatArray,
    pid: IntArray,
    tid: IntArray,
) -> None:
    """Fill a missing ``correlation`` from the flow that starts or ends on the event.

    Kineto draws a flow from each launch ('s', bound to the launch's thread and timestamp) to
    its GPU work ('f', on the stream at the kernel's start), the flow's id being the launch's
    correlation: a writer that dropped the args still links them. In place.
    """
    ends: dict[tuple[int, int, float], int] = {}
    for ev in flows:
        flow_id = -1 if ev.id is None else _to_int(ev.id)
        if flow_id < 0 or ev.ts is None:
            continue
        ends.setdefault((_to_int(ev.pid), _to_int(ev.tid), _to_float(ev.ts)), flow_id)
    for r in open_rows.tolist():
        found = ends.get((int(pid[r]), int(tid[r]), float(ts_us[r])))
        if found is not None:
            correlation[r] = found


def _modern_categories(
    categories: tuple[str, ...], cat_ids: IntArray, counts: dict[str, int]
) -> tuple[tuple[str, ...], IntArray, dict[str, int]]:
    """Legacy category names renamed (``LEGACY_CATEGORIES``), merged with any modern twin."""
    if not any(c in LEGACY_CATEGORIES for c in categories):
        return categories, cat_ids, counts
    merged: dict[str, int] = {}
    remap = np.empty(len(categories), dtype=np.int64)
    for i, c in enumerate(categories):
        remap[i] = merged.setdefault(LEGACY_CATEGORIES.get(c, c), len(merged))
    renamed: dict[str, int] = {}
    for c, k in counts.items():
        key = LEGACY_CATEGORIES.get(c, c)
        renamed[key] = renamed.get(key, 0) + k
    return tuple(merged), remap[cat_ids] if cat_ids.size else cat_ids, renamed


def _float_column(values: list[Any]) -> FloatArray:
    try:
        # array's conversion takes exactly ints and floats (the usual column), and fast.
        return np.frombuffer(array.array("d", values), dtype=np.float64)
    except (TypeError, OverflowError):
        pass
    try:
        return np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        return np.fromiter((_to_float(v) for v in values), dtype=np.float64, count=len(values))


def _int_column(values: list[Any]) -> IntArray:
    try:
        # Exactly the ints (and bools) of int64's range, as numpy would convert them; fast.
        return np.frombuffer(array.array("q", values), dtype=np.int64)
    except (TypeError, OverflowError):
        pass
    try:
        arr = np.asarray(values)
        if arr.dtype.kind in "iu":
            return arr.astype(np.int64, copy=False)
        if arr.dtype.kind == "f":
            return arr.astype(np.int64)
    except (TypeError, ValueError, OverflowError):
        pass
    return np.fromiter((_to_int(v) for v in values), dtype=np.int64, count=len(values))


def _sparse_int_column(n: int, pieces: list[tuple[IntArray, IntArray]]) -> IntArray:
    """A column of ``n`` rows, -1 but where the (rows, values) pieces say."""
    out = np.full(n, -1, dtype=np.int64)
    for rows, values in pieces:
        out[rows] = values
    return out


def _to_float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")


def _to_int(value: Any) -> int:
    """An int from a Kineto id: ints, floats, "7", "stream 7", "0x1a"; anything else is -1."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value if -(2**63) <= value < 2**63 else -1
    if isinstance(value, float):
        return int(value) if value == value else -1
    if isinstance(value, str):
        text = value.strip()
        try:
            return int(text, 0)
        except ValueError:
            match = _STREAM_IN_TID.search(text)
            return int(match.group(1)) if match else -1
    return -1


def _optional_int(value: Any) -> int | None:
    if value is None:
        return None
    parsed = _to_int(value)
    return None if parsed == -1 else parsed


def _device_properties(value: Any) -> tuple[Mapping[str, Any], ...]:
    if not isinstance(value, list):
        return ()
    return tuple(v for v in value if isinstance(v, Mapping))


def _distributed_info(value: Any) -> DistributedInfo | None:
    if not isinstance(value, Mapping):
        return None
    backend = value.get("backend")
    return DistributedInfo(
        rank=_optional_int(value.get("rank")),
        world_size=_optional_int(value.get("world_size")),
        backend=backend if isinstance(backend, str) else None,
    )
