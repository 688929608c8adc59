"""Dump what the package reads from, and does to, a corpus of cells: a behaviour-identity check.

Issue 23 asks refactors of ``gpu_notebook/cell/``, ``fixes/`` and ``rules/`` to leave behaviour
unchanged. This script prints, for every cell of a corpus, the full ``repr`` of:

* ``scan_source`` facts (``SourceFacts``, dataclasses walked field by field, sets sorted), at line
  offsets 0 and 1, and ``names_mentioned`` of the cell and of the cell without each of its loops;
* the cell readers the rules use beside the facts: ``blocks.periodic_blocks``, ``epoch_blocks``,
  ``kept_graph_line``, ``scaler.precision``, ``scalers_made`` (with ``scaler_off`` and
  ``scaler_uses``) and ``loops.remade_loaders``;
* every catalog fix and every rule-owned fix (``RULE_FIXES``) applied to the cell, a few
  parameter sets for the fixes that take parameters: the whole ``Patch`` or ``Refusal``, or the
  exception a fix raised.

The corpus is read from the repository (``--root``, default: the checkout holding this script):
``benchmarks/ledger_programs``, ``benchmarks/unseen_programs``, ``benchmarks/gpu_scripts``, the
code cells of ``example_notebooks`` (a leading ``%%`` magic line dropped, as the magic runs the
body) and every multi-line string literal of ``tests/test_*.py`` that parses as Python and looks
like a cell. The output is JSON, one ``"cell|reading": "repr"`` entry per line, keys sorted.

The code under test is whichever ``gpu_notebook`` Python imports (``PYTHONPATH``); the corpus is
read from ``--root``. To compare two commits, dump both with the SAME corpus root and compare the
files byte for byte (the script re-runs itself under ``PYTHONHASHSEED=0`` when that is not set)::

    git worktree add /tmp/base BASE
    PYTHONHASHSEED=0 PYTHONPATH=/tmp/base python benchmarks/cell_facts_dump.py --root /tmp/base --out a.txt
    PYTHONHASHSEED=0 PYTHONPATH=$PWD python benchmarks/cell_facts_dump.py --root /tmp/base --out b.txt
    cmp a.txt b.txt && echo IDENTICAL || diff a.txt b.txt | head

(Using the base's corpus for both keeps tests added by the refactor out of the comparison.)
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
CORPORA = ("programs", "notebooks", "tests")
PROGRAM_DIRS = (
    "benchmarks/ledger_programs",
    "benchmarks/unseen_programs",
    "benchmarks/gpu_scripts",
)

# Parameter sets tried for the fixes that take parameters (names a fix lacks are dropped).
VARIANTS: dict[str, list[dict[str, object]]] = {
    "dataloader_workers": [
        {},
        {"running_workers": 2},
        {"num_workers": None},
        {"prefetch_factor": 2},
    ],
    "autocast": [{}, {"dtype": "float16"}],
    "bigger_batch": [{}, {"factor": 4}],
    "foreach_fused_optimizer": [{}, {"implementation": "foreach"}],
    # No default: the rule names the list the calls index (the tests' cells call it ``rows``).
    "stack_arrays": [{"items": "rows"}, {"items": "arrays"}],
}


def _programs(root: Path) -> Iterator[tuple[str, str]]:
    for folder in PROGRAM_DIRS:
        for path in sorted((root / folder).glob("*.py")):
            yield f"{folder}/{path.name}", path.read_text()


def _notebooks(root: Path) -> Iterator[tuple[str, str]]:
    for path in sorted((root / "example_notebooks").rglob("*.ipynb")):
        cells = json.loads(path.read_text()).get("cells", [])
        for i, cell in enumerate(cells):
            if cell.get("cell_type") != "code":
                continue
            text = cell.get("source", "")
            text = "".join(text) if isinstance(text, list) else text
            if text.startswith("%%"):
                text = text.partition("\n")[2]
            if text.strip():
                yield f"{path.relative_to(root)}#{i}", text


def _looks_like_cell(text: str) -> bool:
    if "\n" not in text or len(text) <= 20:
        return False
    if not ("for " in text or "DataLoader" in text or "=" in text):
        return False
    try:
        ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    return True


def _test_strings(root: Path) -> Iterator[tuple[str, str]]:
    for path in sorted((root / "tests").glob("test_*.py")):
        try:
            tree = ast.parse(path.read_text())
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and _looks_like_cell(node.value)
            ):
                yield f"tests/{path.name}:{node.lineno}", node.value


def read_corpus(root: Path, kinds: tuple[str, ...]) -> dict[str, str]:
    readers: dict[str, Callable[[Path], Iterator[tuple[str, str]]]] = {
        "programs": _programs,
        "notebooks": _notebooks,
        "tests": _test_strings,
    }
    corpus: dict[str, str] = {}
    for kind in kinds:
        corpus.update(readers[kind](root))
    return dict(sorted(corpus.items()))


def norm(x: object) -> object:
    """A value's repr that does not depend on set order: dataclasses field by field, sets sorted."""
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        fields = [(f.name, norm(getattr(x, f.name))) for f in dataclasses.fields(x) if f.repr]
        return (type(x).__name__, fields)
    if isinstance(x, (set, frozenset)):
        return sorted(repr(norm(v)) for v in x)
    if isinstance(x, (list, tuple)):
        return [norm(v) for v in x]
    return repr(x)


def _guarded(fn: Callable[[], object]) -> str:
    try:
        return repr(fn())
    except Exception as exc:  # noqa: BLE001 - a raise is behaviour too: recorded, compared
        return f"EXC {type(exc).__name__}: {exc}"


def dump_cell(key: str, source: str) -> dict[str, str]:
    from gpu_notebook.cell import blocks, loops, scaler
    from gpu_notebook.cell.scan import names_mentioned, scan_source
    from gpu_notebook.fixes.catalog import FIXES, apply_fix
    from gpu_notebook.rules import RULE_FIXES

    out: dict[str, str] = {}
    for offset in (0, 1):
        out[f"{key}|facts{offset}"] = repr(norm(scan_source(source, line_offset=offset)))
    facts = scan_source(source)
    out[f"{key}|names"] = repr(sorted(names_mentioned(facts)))
    for i, loop in enumerate(facts.loops):
        out[f"{key}|names-skip{i}"] = repr(sorted(names_mentioned(facts, loop)))

    facts1 = scan_source(source, line_offset=1)
    tree = facts1.tree
    if tree is not None:
        made = scaler.scalers_made(tree)
        readers: dict[str, Callable[[], object]] = {
            "periodic": lambda: blocks.periodic_blocks(tree),
            "epoch": lambda: blocks.epoch_blocks(tree),
            "kept": lambda: blocks.kept_graph_line(tree),
            "precision": lambda: scaler.precision(tree),
            "scalers": lambda: [
                (
                    name,
                    tree.line_of(call),
                    scaler.scaler_off(call),
                    [(u.kind, u.line) for u in (scaler.scaler_uses(tree, name) if name else [])],
                )
                for name, call in made
            ],
            "remade": lambda: [
                (r.call.line, r.outer_line, r.step_line, r.function)
                for r in loops.remade_loaders(tree, facts1.loaders)
            ],
        }
        for name, read in readers.items():
            out[f"{key}|reader:{name}"] = _guarded(read)

    all_fixes = dict(FIXES)
    for fix in RULE_FIXES.values():
        all_fixes.setdefault(fix.fix_id, fix)
    for fix_id, fix in sorted(all_fixes.items()):
        known = {p.name for p in fix.params}
        for params in VARIANTS.get(fix_id, [{}]):
            use = {k: v for k, v in params.items() if k in known}
            out[f"{key}|{fix_id}|{sorted(use.items())}"] = _guarded(
                lambda fix=fix, use=use: apply_fix(fix, source, **use)
            )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--root", type=Path, default=REPO_ROOT, help="checkout to read cells from")
    parser.add_argument(
        "--corpus",
        nargs="+",
        choices=CORPORA,
        default=list(CORPORA),
        help="which cells: benchmark programs, example notebooks' code cells, tests' strings",
    )
    parser.add_argument("--limit", type=int, default=None, help="only the first N cells (sorted)")
    parser.add_argument("--out", type=Path, required=True, help="JSON file to write")
    args = parser.parse_args(argv)
    import gpu_notebook

    corpus = read_corpus(args.root.resolve(), tuple(args.corpus))
    if args.limit is not None:
        corpus = dict(list(corpus.items())[: args.limit])
    start = time.perf_counter()
    out: dict[str, str] = {}
    for key, source in corpus.items():
        out.update(dump_cell(key, source))
    args.out.write_text(json.dumps(out, indent=0, sort_keys=True) + "\n")
    print(
        f"{len(corpus)} cells, {len(out)} readings in {time.perf_counter() - start:.1f} s "
        f"(gpu_notebook from {Path(gpu_notebook.__file__).parent}, corpus from {args.root})",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    if os.environ.get("PYTHONHASHSEED") != "0":
        # Set iteration order inside the package must not differ between the two runs compared.
        os.execve(
            sys.executable, [sys.executable, *sys.argv], {**os.environ, "PYTHONHASHSEED": "0"}
        )
    raise SystemExit(main())
