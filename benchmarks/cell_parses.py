"""Parses of the user's cell per report, and what each parser costs: why the cell is read as it is.

Two measurements:

* **parses per report**: the rules and the fixes of one report on a cell with two fixes (a
  per-step ``.item()`` and a per-step ``print``), counted by ``gpu_notebook.cell.parse.PARSES``
  (a real parse, never a cache hit); each patched cell is checked once ("check", our output);
* **parser cost** on the MLP and CNN cells of ``overhead.py`` and a 140-line cell, thread CPU, interleaved
  rounds: ``ast.parse``; ``libcst.parse_module``; libcst with the positions its nodes need to
  name lines (``PositionProvider``). The rules read ``ast`` facts and the codemods edit libcst:
  reading both from one text once costs ``ast + libcst``; libcst alone, with positions, is what
  replacing the ``ast`` reading would cost;
* **every catalog fix** applied to each cell, cold (parse caches emptied): the codemods read the
  rules' facts and edit the libcst nodes at their ranges, sharing one parse, one scan, one
  parent map and one position index per cell.
"""

from __future__ import annotations

import ast
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import Result, emit, interleave, median, parse_args, write_results

TWO_FIX_CELL = """\
for i, (x, y) in enumerate(loader):
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
    seen = loss.item()
    print("step done", i)
"""


def parses_per_report() -> dict[str, int]:
    from gpu_notebook.cell import parse
    from gpu_notebook.rules import run_rules
    from gpu_notebook.words.proposals import attach_fixes
    from tests.scenarios import synthetic as syn

    parse.forget()
    run = syn.make_run(TWO_FIX_CELL)
    analysis = syn.make_analysis({"sync": 0.1, "other": 0.1, "unattributed": 0.2})
    attach_fixes(run_rules(run, analysis, syn.VERDICT), "%%gpucheck\n" + TWO_FIX_CELL)
    return dict(parse.PARSES)


def _cells() -> dict[str, str]:
    import overhead

    cells = {w: overhead.cell_source("plain", w, 300) for w in ("mlp", "cnn")}
    body = "\n".join(f"    h{i} = layer{i % 7}(h{i - 1 if i else ''}).relu()" for i in range(140))
    cells["long"] = f"for step, (x, y) in enumerate(loader):\n    h = x\n{body}\n"
    return cells


def _cpu(fn: Callable[[], object], repeats: int) -> float:
    t = time.thread_time()
    for _ in range(repeats):
        fn()
    return (time.thread_time() - t) / repeats


def main() -> int:
    import libcst as cst
    from libcst.metadata import MetadataWrapper, PositionProvider

    args = parse_args(__doc__ or "")
    rows: list[Result] = []
    counts = parses_per_report()
    emit(
        Result(
            "cell.parses_per_report",
            "parses of the cell for one report with two fixes (ast, libcst; checks of patches)",
            float(counts.get("ast", 0) + counts.get("libcst", 0)),
            f"ast {counts.get('ast', 0)}, libcst {counts.get('libcst', 0)}, "
            f"check {counts.get('check', 0)}",
            "<= 2",
            counts.get("ast", 0) <= 1 and counts.get("libcst", 0) <= 1,
            "gpu_notebook.cell.parse.PARSES after run_rules + attach_fixes",
        ),
        rows,
    )
    repeats = 3 if args.quick else 20
    rounds = args.rounds or (2 if args.quick else 7)
    for name, code in _cells().items():
        variants: dict[str, Callable[[], float]] = {
            "ast": lambda c=code: _cpu(lambda: ast.parse(c), repeats),
            "libcst": lambda c=code: _cpu(lambda: cst.parse_module(c), repeats),
            "libcst+positions": lambda c=code: _cpu(
                lambda: MetadataWrapper(cst.parse_module(c)).resolve(PositionProvider), repeats
            ),
        }
        got = interleave(variants, rounds)
        ms = {k: median(v) * 1e3 for k, v in got.items()}
        lines = code.count("\n")
        for variant, value in ms.items():
            emit(
                Result(
                    f"cell.parse.{name.lower()}.{variant}",
                    f"{name} ({lines} lines): {variant}",
                    value / 1e3,
                    f"{value:.2f} ms CPU ({value / ms['ast']:.1f}x ast)",
                    "",
                    None,
                    f"thread CPU, median of {rounds} interleaved rounds of {repeats}",
                ),
                rows,
            )
    for name, code in _cells().items():
        got = interleave({"fixes": lambda c=code: _cpu(lambda: _all_fixes(c), 1)}, rounds)
        value = median(got["fixes"]) * 1e3
        emit(
            Result(
                f"cell.fixes.{name.lower()}",
                f"{name}: every catalog fix applied, cold (parse, scan, positions included)",
                value / 1e3,
                f"{value:.1f} ms CPU",
                "",
                None,
                f"thread CPU, median of {rounds} rounds",
            ),
            rows,
        )
    write_results(args.json_path, rows)
    return 0


def _all_fixes(code: str) -> None:
    from gpu_notebook.cell import parse
    from gpu_notebook.fixes import FIXES, apply_fix

    parse.forget()  # a new parse: the per-module scan, parent map and positions are made again
    for fix_id in FIXES:
        apply_fix(fix_id, code)


if __name__ == "__main__":
    raise SystemExit(main())
