"""Does ``Trainer(log_every_n_steps=50)`` shorten a fit that logs every step (issue 26)?

``benchmarks/unseen_programs/lightning_sync_every_step.py`` calls ``self.log_dict`` of six
tensors with ``on_step=True, prog_bar=True, sync_dist=True`` every step, with a CSVLogger and
``log_every_n_steps=1``. Arms, each a fresh process, interleaved (A B C | C B A ...): the script
as it is; ``log_every_n_steps=50`` (the patch a fix would make); the ``log_dict`` call removed
(all that Lightning's logging costs there). Timed: ``trainer.fit`` on the main thread's CPU clock
(a neighbour's load does not count) and on the wall clock.

Printed: each arm's fit times and medians, and the ratios to the script as it is. Lightning
2.x's source says what to expect: ``log_every_n_steps`` gates ``_LoggerConnector.log_metrics``
(the logger's write, and the metrics' conversion to floats for it) alone; every ``self.log``
call still runs in full each step (its checks, ``detach``, the result collection's update).

    python benchmarks/lightning_log_every_n.py [--rounds 4]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

SCRIPT = Path(__file__).parent / "unseen_programs" / "lightning_sync_every_step.py"
CLOCKED = (
    "import time as _t\n_c, _w = _t.thread_time(), _t.perf_counter()\ntrainer.fit(",
    "\nprint('FIT', _t.thread_time() - _c, _t.perf_counter() - _w)\n",
)
LOG_CALL = "        self.log_dict(metrics, on_step=True, prog_bar=True, sync_dist=True)\n"


def arms() -> dict[str, str]:
    source = SCRIPT.read_text()
    assert "log_every_n_steps=1," in source and LOG_CALL in source and "trainer.fit(" in source
    clocked = source.replace("trainer.fit(", CLOCKED[0]) + CLOCKED[1]
    return {
        "as is": clocked,
        "log_every_n_steps=50": clocked.replace("log_every_n_steps=1,", "log_every_n_steps=50,"),
        "no log_dict": clocked.replace(LOG_CALL, ""),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    rounds = parser.parse_args().rounds
    sources = arms()
    cpu: dict[str, list[float]] = {name: [] for name in sources}
    wall: dict[str, list[float]] = {name: [] for name in sources}
    loads = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory() as tmp:
        paths = {}
        for i, (name, source) in enumerate(sources.items()):
            paths[name] = Path(tmp) / f"arm{i}.py"
            paths[name].write_text(source)
        order = list(sources)
        for r in range(rounds):
            for name in order if r % 2 == 0 else order[::-1]:
                out = subprocess.run(
                    [sys.executable, str(paths[name])], capture_output=True, text=True, check=True
                ).stdout
                found = re.search(r"FIT ([\d.]+) ([\d.]+)", out)
                assert found is not None, out[-2000:]
                cpu[name].append(float(found.group(1)))
                wall[name].append(float(found.group(2)))
            loads.append(os.getloadavg()[0])
    base_cpu, base_wall = statistics.median(cpu["as is"]), statistics.median(wall["as is"])
    for name in sources:
        c, w = statistics.median(cpu[name]), statistics.median(wall[name])
        print(
            f"{name:22s} fit CPU {' '.join(f'{v:.2f}' for v in cpu[name])} s, median {c:.2f} s "
            f"({base_cpu / c:.2f}x); wall median {w:.2f} s ({base_wall / w:.2f}x)"
        )
    print(f"load (1 min) over the rounds: {' '.join(f'{v:.1f}' for v in loads)}")


if __name__ == "__main__":
    main()
