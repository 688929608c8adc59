"""How figures read, in one place: seconds, bytes, percents, shares and the gain-bound wording.

Every stage may import it (it imports nothing of the package); the views use it for everything
they print, and rules and analysis word their evidence with it, so a gain reads "1.12x-1.80x"
(or "up to 1.80x" where no low end is known)
in a finding, the text report and the HTML page alike.
"""

from __future__ import annotations

import math

__all__ = [
    "MISSING",
    "fmt_bytes",
    "fmt_cost",
    "fmt_factor",
    "fmt_gain",
    "fmt_megabytes",
    "fmt_ms",
    "fmt_pct",
    "fmt_rate",
    "fmt_seconds",
    "fmt_share",
]

MISSING = "n/a"  # a figure that was not measured (None): never printed as 0


def fmt_seconds(s: float | None) -> str:
    """The unit that keeps 2-3 digits: "1.25 s", "12.3 ms", "85 us"."""
    if s is None:
        return MISSING
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.1f} ms"
    return f"{s * 1e6:.0f} us"


def fmt_ms(s: float | None) -> str:
    """Seconds as milliseconds, two decimals (columns of step times compare digit by digit)."""
    return MISSING if s is None else f"{s * 1e3:.2f} ms"


def fmt_bytes(n: int | None) -> str:
    """Binary units, named as such (memory, as nvidia-smi shows it: 80 GiB cards read "79.3 GiB")."""
    if n is None:
        return MISSING
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.1f} {unit}" if unit != "B" else f"{int(size)} B"
        size /= 1024
    return f"{size:.1f} GiB"


def fmt_megabytes(n: float | None) -> str:
    """Decimal megabytes, as NCCL and DDP count message sizes: 102,228,128 -> "102.2 MB"."""
    return MISSING if n is None else f"{n / 1e6:.1f} MB"


def fmt_pct(pct: float | None) -> str:
    """A value already in percent (``utilization_pct``, ``process_cpu_pct``): "45%"."""
    return MISSING if pct is None else f"{pct:.0f}%"


def fmt_share(share: float | None, *, decimals: int = 0, missing: str = MISSING) -> str:
    """A fraction of a whole (a phase's share of the step) as a percent: 0.123 -> "12%"."""
    return missing if share is None else f"{100 * share:.{decimals}f}%"


def fmt_rate(x: float | None) -> str:
    """A throughput (samples/s), thousands separated: "12,345"."""
    return MISSING if x is None else f"{x:,.0f}"


def fmt_factor(x: float | None) -> str:
    """A measured or predicted ratio of step times or throughputs: "1.60x" (two decimals)."""
    return MISSING if x is None else f"{x:.2f}x"


def fmt_cost(x: float | None) -> str:
    """A price in the unit the user gave (GPU-hour price x hours): "1,234.56"."""
    return MISSING if x is None else f"{x:,.2f}"


def fmt_gain(bound: float | None, low: float | None = None) -> str:
    """What a fix can speed a step up, one wording everywhere: "1.12x-1.80x" when the range's low
    end is known (``Finding.gain_low``), else "up to 1.80x" (the range is 1x to the bound).

    Two decimals: "up to 1.0x" would read as "no gain" for a 4% bound. ``None`` (nothing bounds
    it) reads "not bounded"; a phase taking the whole step gives ``inf``.
    """
    if bound is None:
        return "not bounded"
    if math.isinf(bound):
        return "unbounded (the whole step)"
    if bound >= 100:
        high = ">100x"
    else:
        high = f"{bound:.2f}x"
    if low is None or math.isinf(low):
        return f"up to {high}"
    return f"{min(low, bound):.2f}x-{high}"
