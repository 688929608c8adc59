"""What a print every step costs (issue 26 item 2): none / ``print`` / ``print(..., flush=True)``
/ ``sys.stdout.write`` + ``flush``, in a real ipykernel (its output through the kernel's IO
thread and ZMQ to a jupyter_client that drains it) and in a script whose stdout is a pipe or a
pty. The step: a small MLP's forward, backward and SGD step (~0.4 ms on one thread).

Printed: per place, each variant's median step time over interleaved repeats and its ratio to
no print, and the stream messages the kernel sent. In ipykernel 7 ``flush()`` from the main
thread schedules the send on the IO thread and waits for it (``ipykernel/iostream.py``
``OutStream.flush``), where a plain print is batched. This is a measurement, not a test: the
figures move with the machine's load.
"""

from __future__ import annotations

import os
import pty
import statistics
import subprocess
import sys
from typing import Any

STEPS = 400
BODY = r"""
import time, sys, torch, statistics
torch.set_num_threads(1); torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
opt = torch.optim.SGD(m.parameters(), lr=0.01)
x = torch.randn(64, 128); y = torch.randint(0, 10, (64,))
def run(mode, steps):
    ts = []
    for i in range(steps):
        t0 = time.perf_counter()
        loss = torch.nn.functional.cross_entropy(m(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
        if mode == "print": print(f"step {i} lr 0.01")
        elif mode == "flush": print(f"step {i} lr 0.01", flush=True)
        elif mode == "write": sys.stdout.write(f"\rstep {i} lr 0.01"); sys.stdout.flush()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts[20:])
"""
MODES = ["none", "print", "flush", "write"]


def kernel(reps: int) -> dict[str, list[float]]:
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="python3")
    try:
        kc.execute_interactive(BODY, timeout=120, output_hook=lambda m: None)
        res: dict[str, list[float]] = {m: [] for m in MODES}
        for _ in range(reps):
            for mode in MODES:
                messages: list[int] = []
                result: list[float] = []

                def hook(msg: dict[str, Any], messages: list[int] = messages,
                         result: list[float] = result) -> None:  # fmt: skip
                    if msg["msg_type"] == "stream":
                        messages.append(len(msg["content"]["text"]))
                    if msg["msg_type"] == "execute_result":
                        result.append(float(msg["content"]["data"]["text/plain"]))

                kc.execute_interactive(f"run({mode!r}, {STEPS})", timeout=300, output_hook=hook)
                res[mode] += result
                res.setdefault(mode + "_msgs", []).append(len(messages))
        return res
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def script(reps: int, use_pty: bool) -> dict[str, list[float]]:
    res: dict[str, list[float]] = {m: [] for m in MODES}
    code = BODY + f"\nimport sys\nt = run(sys.argv[1], {STEPS})\nsys.stderr.write(repr(t))\n"
    for _ in range(reps):
        for mode in MODES:
            if use_pty:
                master, slave = pty.openpty()
                cmd = [sys.executable, "-c", code, mode]
                p = subprocess.Popen(cmd, stdout=slave, stderr=subprocess.PIPE)
                os.close(slave)
                while True:
                    try:
                        if not os.read(master, 65536):
                            break
                    except OSError:
                        break
                err = p.communicate()[1]
                os.close(master)
            else:
                done = subprocess.run([sys.executable, "-c", code, mode], capture_output=True)
                err = done.stderr
            res[mode].append(float(err.decode().strip().splitlines()[-1]))
    return res


def main(reps: int) -> None:
    for name, fn in (
        ("kernel", lambda: kernel(reps)),
        ("pipe", lambda: script(reps, False)),
        ("pty", lambda: script(reps, True)),
    ):
        r = fn()
        base = statistics.median(r["none"])
        steps = {
            m: f"{statistics.median(r[m]) * 1e6:.0f}us ({statistics.median(r[m]) / base:.3f}x)"
            for m in MODES
        }
        sent = {k: v for k, v in r.items() if k.endswith("_msgs")}
        print(name, steps, sent, "load", os.getloadavg()[0], flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
