"""The CPU's bfloat16 instructions, read from ``/proc/cpuinfo``'s flags (Linux x86).

Why it matters: a CPU-only run that autocasts to bfloat16 is fast only where the CPU multiplies
bfloat16 matrices in hardware tiles (``amx_bf16``, Intel Sapphire Rapids and later). With
``avx512_bf16`` alone (Cooper Lake, Zen 4) oneDNN's bfloat16 matmul has no such lead, and every
autocast op also casts its float32 weights and inputs: unseen round 21's Lightning
``precision="bf16-mixed"`` MLP ran 1.60x slower than in float32 on such a CPU.
"""

from __future__ import annotations

from pathlib import Path

BF16_FLAGS = ("avx512_bf16", "amx_bf16")  # the flags read; ``amx_bf16``: hardware bf16 tiles
CPUINFO = Path("/proc/cpuinfo")


def cpu_bf16_flags(cpuinfo: Path = CPUINFO) -> tuple[str, ...] | None:
    """The flags of ``BF16_FLAGS`` the first CPU lists (``()``: none of them); None where the
    file cannot be read or lists no x86 ``flags`` line (another OS, an ARM CPU): not known."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "flags":
            flags = set(value.split())
            return tuple(flag for flag in BF16_FLAGS if flag in flags)
    return None
