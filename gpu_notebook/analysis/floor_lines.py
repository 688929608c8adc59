"""Per-call host lines read in this machine's small-operator floor, not in microseconds.

A line on a host call's time that stands for a CPU's per-call cost (an operator too small to
be work, a compiled graph's guards and wrappers) means what it means on the machine it was
measured on: a CPU three times as slow, or one shared with three times the load, runs the same
program's calls three times as long, and an absolute line then reads its small operators as
work. Each such line keeps its value on the reference machine (the 2-core machine the rules
were measured on) and moves with the small-operator floor the run's own trace reads
(``HostOverhead.op_floor_us``: the median call floor of the operators under the line).

That floor is the program's as well as the machine's: on the reference machine nanoGPT's
loop of views and reshapes reads 0.63-0.66 us (tests/test_core_wait's recorded windows, quiet
and loaded), a batch-1 MLP 1.9-2.1 us, a two-tower model under Adam 3.7-5.9 us. Within that
band (``REFERENCE_FLOOR_US``) the floor does not tell the machine from the program, and the
reference lines stand; past it the machine is slower (or busier) by the floor over the band's
top, and under it faster by the floor over its bottom (``floor_scale``). Two machines on the
same side of the band read the same calls in the same floors; a program whose floor here sits
inside the band reads its lines moved only by what the other machine puts past the band's edge.

Only a CPU-only run's: on a GPU run the small-operator line compares the host's call with the
GPU's launch gap (HTA's 30 us kernel wait), a device's latency the host's speed does not move,
and the host's calls there hold the launch's runtime calls the reference floor never held.
"""

from __future__ import annotations

import numpy as np

from gpu_notebook.records import HostOverhead

# The small-operator floors the reference machine reads (us), its programs' least and most:
# nanoGPT's views 0.63 us quiet, the two-tower model under Adam 5.9 us loaded.
REFERENCE_FLOOR_US = (0.5, 6.0)
# The fixed point is found in a few rounds (each round moves the line to another call's floor
# of a finite set); past this many the last line stands.
_ROUNDS = 32


def floor_scale(op_floor_us: float | None) -> float:
    """How much slower (over 1) or faster (under 1) this run's small operator
    (``op_floor_us``, ``HostOverhead.op_floor_us``) is than the reference machine's band
    (``REFERENCE_FLOOR_US``); 1 within it or where not read."""
    low, high = REFERENCE_FLOOR_US
    if op_floor_us is None or op_floor_us <= 0:
        return 1.0
    if op_floor_us > high:
        return op_floor_us / high
    if op_floor_us < low:
        return op_floor_us / low
    return 1.0


def host_floors(host: HostOverhead | None) -> float:
    """The run's ``HostOverhead.floor_scale``: what a reference per-call host line is
    multiplied by here; 1 on a GPU run or where not read."""
    if host is None or host.floor_scale is None or host.floor_scale <= 0:
        return 1.0
    return host.floor_scale


def small_floor(floors_us: np.ndarray, line_us: float) -> float | None:
    """The small operator's floor: the median of the call floors (``floors_us``) under
    ``line_us``, the least of them where none is; None: no call."""
    if floors_us.size == 0:
        return None
    small = floors_us[floors_us < line_us]
    return float(np.median(small)) if small.size else float(floors_us.min())


def settled_small_line(
    floors_us: np.ndarray, reference_line_us: float
) -> tuple[float, float | None]:
    """The small-operator line and floor that read each other: the line is
    ``reference_line_us`` times ``floor_scale`` of the floor, the floor the median call under
    the line (``small_floor``). Read from the reference line, each round moves the line to the
    floor the last one read until it stands (the map only rises with the line, so the rounds
    move one way): a floor in the reference band keeps the reference line, and the same calls
    run k times as long past the band settle at k times the line (where no other line stands
    between the two), the same operators small. (line, floor); the reference line where no
    call was read."""
    line = reference_line_us
    floor = small_floor(floors_us, line)
    for _ in range(_ROUNDS):
        if floor is None:
            return reference_line_us, None
        moved = reference_line_us * floor_scale(floor)
        if moved == line:
            break
        line = moved
        floor = small_floor(floors_us, line)
    return line, floor
