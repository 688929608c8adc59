"""Record Holistic Trace Analysis's figures on the shared reference traces, once, as JSON.

Run in a venv of its own (HTA pulls pandas, plotly, jupyterlab), never the project's:

    python3 -m venv /work/venvs/hta && /work/venvs/hta/bin/pip install HolisticTraceAnalysis 'pandas<3'
    /work/venvs/hta/bin/python benchmarks/hta_reference.py ../shared/reference_traces \
        > tests/data/hta_reference.json

Per trace: HTA's temporal breakdown (idle / compute / non-compute over the rank's kernel span),
its idle-time breakdown (host wait, kernel wait, other; summed over streams, as HTA reports it),
its communication/computation overlap and its kernel-type breakdown (shares of the busy time:
"COMMUNICATION" alone is the exposed communication). HTA reads the profiler steps but the last
one (``include_last_profiler_step=False``). Numbers only; the traces stay where they are.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import tempfile
from pathlib import Path
from typing import Any


def _figures(trace: Path) -> dict[str, Any]:
    import gzip

    from hta.trace_analysis import TraceAnalysis

    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        # HTA reads every trace of a folder as one job: one file per folder. It needs a rank.
        doc = json.loads(gzip.decompress(trace.read_bytes()))
        info = doc.get("distributedInfo") or {}
        if "rank" not in info:
            doc["distributedInfo"] = {**info, "rank": 0}
        (Path(tmp) / "rank.json").write_text(json.dumps(doc))
        try:
            with (
                contextlib.redirect_stdout(io.StringIO()),
                contextlib.redirect_stderr(io.StringIO()),
            ):
                ta = TraceAnalysis(trace_dir=tmp)
        except Exception as exc:  # noqa: BLE001 - a peer's failure is recorded, not fatal
            return {"error": f"{type(exc).__name__}: {exc}"[:200]}
        for key, call in (
            ("temporal", lambda: ta.get_temporal_breakdown(visualize=False)),
            ("idle", lambda: ta.get_idle_time_breakdown(visualize=False)[0]),
            ("overlap", lambda: ta.get_comm_comp_overlap(visualize=False)),
            ("kernel_types", lambda: ta.get_gpu_kernel_breakdown(visualize=False)[0]),
        ):
            try:
                with contextlib.redirect_stdout(io.StringIO()):
                    df = call()
                out[key] = json.loads(df.to_json(orient="records"))
            except Exception as exc:  # noqa: BLE001 - a peer's failure is recorded, not fatal
                out[key] = {"error": f"{type(exc).__name__}: {exc}"[:200]}
    return _condensed(out)


def _condensed(raw: dict[str, Any]) -> dict[str, Any]:
    """The figures the parity tests read, rounded; a failed analysis keeps its error."""
    out: dict[str, Any] = {}
    temporal = raw.get("temporal")
    if isinstance(temporal, list) and temporal:
        row = temporal[0]
        out["temporal"] = {
            "span_us": row["kernel_time(us)"],
            "idle_pct": row["idle_time_pctg"],
            "compute_pct": row["compute_time_pctg"],
            "non_compute_pct": row["non_compute_time_pctg"],
        }
    else:
        out["temporal"] = temporal
    idle = raw.get("idle")
    if isinstance(idle, list):
        sums: dict[str, float] = {}
        for row in idle:  # HTA sums per stream: kept as it reports it
            key = f"{row['idle_category']}_us"
            sums[key] = round(sums.get(key, 0.0) + float(row["idle_time"]), 1)
        out["idle_by_stream_sum"] = sums
    else:
        out["idle_by_stream_sum"] = idle
    overlap = raw.get("overlap")
    if isinstance(overlap, list) and overlap:
        out["comm_comp_overlap_pct"] = overlap[0]["comp_comm_overlap_pctg"]
    kinds = raw.get("kernel_types")
    if isinstance(kinds, list):
        out["kernel_type_pct"] = {row["kernel_type"]: row["percentage"] for row in kinds}
    return out


def main(folder: str) -> None:
    import importlib.metadata

    root = Path(folder)
    traces = sorted(p for p in root.rglob("*.json.gz"))
    result = {
        "tool": "HolisticTraceAnalysis",
        "version": importlib.metadata.version("HolisticTraceAnalysis"),
        "pandas": importlib.metadata.version("pandas"),
        "command": "/work/venvs/hta/bin/python benchmarks/hta_reference.py "
        "../shared/reference_traces > tests/data/hta_reference.json",
        "traces": {str(p.relative_to(root)): _figures(p) for p in traces},
    }
    json.dump(result, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "../shared/reference_traces")
