"""What a fused CPU AdamW step takes away beyond ``opt.step()``: the allocator's page faults.

Why (issue 26, fusedzip 2026-12-05): zip_two_loaders' fused-AdamW fix measured 1.25x (interval
1.17x-1.35x, load 13-17) over its predicted high end 1.21x (``analysis.fused_update``: the update
keeps 38%, 1.07x-1.08x before widening). By phase on the thread's CPU clock at load 5-10 the
unfused loop faulted ~1,000 pages a step, the fused one 55-600: ``opt.step`` kept 0.27-0.30 (the
model reads 0.38), and in some runs backward and ``zero_grad`` also took ~1.4 ms less (they are
outside the optimizer share the bound rests on). With glibc's thresholds fixed
(``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TRIM_THRESHOLD_``) the faults went, the phases outside the
step matched and the fix was inside the model's range. This script, 5 rounds at load 3.7-4.9:
default x1.29 (opt.step kept 0.27; backward+zero_grad 2.32 -> 1.59 ms; faults a step 728 -> 222,
413 -> 0 inside opt.step), fixed x1.09 (kept 0.45; backward+zero_grad 1.13 -> 1.15 ms; 0 faults).

The mechanism: the unfused update allocates full-size temporaries a tensor (Adam's denominator:
``sqrt`` then the division); a tensor past glibc's mmap threshold (128 KiB at start) gets fresh
pages for each, zeroed on first touch and unmapped when freed, and the heap they leave can be
trimmed back to the OS, so backward's fresh gradients (``zero_grad`` sets them to None) fault
their pages in again. The fused kernel makes no such temporaries. The fit in ``fused_update``
(``opt.step()`` alone) holds the first part only where its sizes did; the second is not an
optimizer cost at all, and depends on the allocator's state (run to run).

Each row: fresh processes, interleaved (the order alternating by round), zip_two_loaders' loop
unfused and with ``fused=True``, each phase on the thread's CPU clock (medians over the steps,
then over rounds), minor page faults a step (means) from ``getrusage(RUSAGE_THREAD)``; beside
it the same with glibc's thresholds fixed high (``env=fixed``): what is left is the update's
own arithmetic, the part ``fused_update`` models. ``python benchmarks/fused_update_faults.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import median, parse_args

FIXED_ENV = {"MALLOC_MMAP_THRESHOLD_": "100000000", "MALLOC_TRIM_THRESHOLD_": "1000000000"}

# zip_two_loaders' loop (benchmarks/unseen_programs), each phase on the thread's CPU clock.
CHILD = r"""
import json, resource, sys, time
import numpy as np, torch
from torch import nn
from torch.utils.data import DataLoader, Dataset
torch.manual_seed(0); torch.set_num_threads(1)
fused = sys.argv[1] == "1"
class Images(Dataset):
    def __init__(self, n, seed):
        r = np.random.default_rng(seed)
        self.x = r.standard_normal((n, 3, 40, 40)).astype(np.float32)
        self.y = r.integers(0, 5, n); self.r = r
    def __len__(self): return len(self.x)
    def __getitem__(self, i):
        img = self.x[i]; dy, dx = self.r.integers(0, 9, 2)
        img = img[:, dy : dy + 32, dx : dx + 32]
        if self.r.random() < 0.5: img = img[:, :, ::-1]
        img = img + 0.05 * self.r.standard_normal(img.shape).astype(np.float32)
        img = (img - img.mean()) / (img.std() + 1e-6)
        return torch.from_numpy(np.ascontiguousarray(img)), int(self.y[i])
loader_a = DataLoader(Images(1536, 1), batch_size=32, shuffle=True)
loader_b = DataLoader(Images(1536, 2), batch_size=32, shuffle=True)
backbone = nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 128), nn.ReLU())
head_a, head_b = nn.Linear(128, 5), nn.Linear(128, 5)
params = list(backbone.parameters()) + list(head_a.parameters()) + list(head_b.parameters())
opt = torch.optim.AdamW(params, lr=1e-3, fused=True) if fused else torch.optim.AdamW(params, lr=1e-3)
T = time.thread_time
F = lambda: resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
rows = []
for epoch in range(2):
    it = zip(loader_a, loader_b)
    while True:
        t0, f0 = T(), F()
        try: (xa, ya), (xb, yb) = next(it)
        except StopIteration: break
        loss = (nn.functional.cross_entropy(head_a(backbone(xa)), ya)
                + nn.functional.cross_entropy(head_b(backbone(xb)), yb))
        t1 = T(); opt.zero_grad(); loss.backward(); t2, f2 = T(), F(); opt.step(); t3, f3 = T(), F()
        rows.append((t3 - t0, t3 - t2, t2 - t1, f3 - f2, f3 - f0))
rows = rows[5:]
med = lambda xs: sorted(xs)[len(xs) // 2]
print(json.dumps({"step_s": med([r[0] for r in rows]), "opt_s": med([r[1] for r in rows]),
                  "bwd_s": med([r[2] for r in rows]),
                  "opt_faults": sum(r[3] for r in rows) / len(rows),
                  "faults": sum(r[4] for r in rows) / len(rows)}))
"""

KEYS = ("step_s", "opt_s", "bwd_s", "opt_faults", "faults")


def _one(fused: bool, env: dict[str, str]) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, "1" if fused else "0"],
        capture_output=True, text=True, check=True, env=os.environ | env,
    )  # fmt: skip
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    args = parse_args(__doc__ or "")
    rounds = args.rounds or (1 if args.quick else 5)
    rows = []
    for env_name, env in (("default", {}), ("fixed", FIXED_ENV)):
        got: dict[bool, list[dict[str, float]]] = {False: [], True: []}
        for r in range(rounds):
            for fused in (False, True) if r % 2 == 0 else (True, False):
                got[fused].append(_one(fused, env))
        m = {f: {k: median([g[k] for g in got[f]]) for k in KEYS} for f in got}
        u, f = m[False], m[True]
        row = {"env": env_name, "unfused": u, "fused": f, "rounds": rounds,
               "speedup": u["step_s"] / f["step_s"], "kept": f["opt_s"] / u["opt_s"]}  # fmt: skip
        rows.append(row)
        print(
            f"RESULT env={env_name}: step {u['step_s'] * 1e3:.2f} -> {f['step_s'] * 1e3:.2f} ms "
            f"(x{row['speedup']:.2f}); opt.step {u['opt_s'] * 1e3:.2f} -> {f['opt_s'] * 1e3:.2f} ms "
            f"(kept {row['kept']:.2f}); backward+zero_grad {u['bwd_s'] * 1e3:.2f} -> "
            f"{f['bwd_s'] * 1e3:.2f} ms; page faults a step {u['faults']:.0f} -> {f['faults']:.0f} "
            f"(in opt.step {u['opt_faults']:.0f} -> {f['opt_faults']:.0f})",
            flush=True,
        )
    print(f"load: {os.getloadavg()[0]:.1f}")
    if args.json_path is not None:
        args.json_path.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
