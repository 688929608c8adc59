"""Damaged and hostile inputs to `gpucheck analyze` and `compare`: truncated and corrupt gzip,
JSON nested 100,000 deep, ts/dur of 1e308, a 3 MB gzip bomb that inflates to 3 GB (under a
2.5 GB address-space limit, with the default 1024 MB cap; and under a small cap set by
GPUCHECK_MAX_INPUT_MB), a report JSON that is not one, a file name with escape sequences.
Each gets one line, `gpucheck: cannot read FILE: <why>`, exit 2, in bounded memory."""
import gzip
import json
import zlib
from pathlib import Path

events = [{"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
          {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10, "dur": 50},
          {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 20, "dur": 40,
           "args": {"stream": 7, "device": 0, "correlation": 1}}]
raw = json.dumps({"traceEvents": events}).encode()
packed = gzip.compress(raw)
Path("truncated.json.gz").write_bytes(packed[: len(packed) // 2])
bad = bytearray(packed)
bad[len(bad) // 2] ^= 0xFF
Path("corrupt.json.gz").write_bytes(bytes(bad))
Path("nested.json").write_bytes(b'{"traceEvents": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
huge = [dict(e, ts=1e308, dur=1e308) for e in events]
Path("overflow.json").write_text(json.dumps({"traceEvents": huge}))
co = zlib.compressobj(9, zlib.DEFLATED, 31)
with open("bomb.json.gz", "wb") as out:
    out.write(co.compress(b'{"traceEvents": ['))
    block = b" " * (1 << 20)
    for _ in range(3072):
        out.write(co.compress(block))
    out.write(co.compress(b"]}") + co.flush())
Path("report.json").write_bytes(b'{"schema_version": 1, "run": ' + b"[" * 100_000)
Path("evil\x1b]0;t\x07.json").write_bytes(b"\x1b[2J not json")

RUNS = [
    {"args": ["analyze", "truncated.json.gz"], "exit": 2, "stderr": r"gpucheck: cannot read \S.*: .+"},
    {"args": ["analyze", "corrupt.json.gz"], "exit": 2, "stderr": r"gpucheck: cannot read \S.*: .+"},
    {"args": ["analyze", "nested.json"], "exit": 2, "stderr": r"gpucheck: cannot read \S.*: .+"},
    {"args": ["analyze", "overflow.json"], "exit": 2, "stderr": r"gpucheck: cannot read \S.*: .+"},
    {"args": ["analyze", "bomb.json.gz"], "exit": 2, "memory_mb": 2560,
     "stderr": r"gpucheck: cannot read bomb.json.gz: it inflates to more than 1024 MB.*GPUCHECK_MAX_INPUT_MB=2048.*"},
    {"args": ["analyze", "bomb.json.gz"], "exit": 2, "memory_mb": 1024, "env": {"GPUCHECK_MAX_INPUT_MB": "64"},
     "stderr": r"gpucheck: cannot read bomb.json.gz: it inflates to more than 64 MB.*"},
    {"args": ["analyze", "evil\x1b]0;t\x07.json"], "exit": 2, "stderr": r"gpucheck: cannot read evil\\x1b\]0;t\\x07\.json: .+"},
    {"args": ["compare", "report.json", "report.json"], "exit": 2, "stderr": r"gpucheck: cannot read \S.*: .+"},
    {"args": ["compare", "bomb.json.gz", "report.json"], "exit": 2, "memory_mb": 1024,
     "env": {"GPUCHECK_MAX_INPUT_MB": "64"}, "stderr": r"gpucheck: cannot read \S.*: .+"},
]
TIMEOUT_S = 300
