"""A dataset method that loads the same whole file on every call, whatever the index.

``with open(self.path, "rb") as f: data = pickle.load(f)`` in ``__getitem__(self, i)`` reads
and decodes the whole file for each item, then keeps one row of it: the file does not depend on
``i``. Loading it once in ``__init__`` and indexing it per item is the fix; workers only spread
the same waste over more processes. A file named by the index (``self.paths[i]``, an image per
item) is the ordinary per-item read and is not one.
"""

from __future__ import annotations

import ast

from gpu_notebook.cell.names import dotted
from gpu_notebook.cell.tree import CellTree

# Calls that read and decode a whole file (or an open file object) in one go.
WHOLE_FILE_LOADS = frozenset(
    {"pickle.load", "torch.load", "np.load", "numpy.load", "json.load", "joblib.load",
     "pd.read_csv", "pd.read_parquet", "pd.read_pickle", "pd.read_json", "pandas.read_csv",
     "pandas.read_parquet", "pandas.read_pickle", "np.loadtxt", "numpy.loadtxt",
     "np.genfromtxt", "numpy.genfromtxt", "safetensors.torch.load_file", "load_file"}
)  # fmt: skip


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _index_names(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """The method's index parameters and every local name assigned from one (to a fixpoint:
    ``j = idx % n; path = self.files[j]``)."""
    params = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)]
    held = set(params[1:])  # not self
    assigns = [n for n in ast.walk(fn) if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign))]
    withs = [n for n in ast.walk(fn) if isinstance(n, (ast.With, ast.AsyncWith))]
    while True:
        before = len(held)
        for a in assigns:
            if a.value is not None and _names(a.value) & held:
                targets = a.targets if isinstance(a, ast.Assign) else [a.target]
                for t in targets:
                    held |= _names(t)
        for w in withs:
            for item in w.items:
                if item.optional_vars is not None and _names(item.context_expr) & held:
                    held |= _names(item.optional_vars)
        if len(held) == before:
            return held


def _opened_as(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, ast.expr]:
    """``with open(X) as f``: f -> X."""
    out: dict[str, ast.expr] = {}
    for w in ast.walk(fn):
        if not isinstance(w, (ast.With, ast.AsyncWith)):
            continue
        for item in w.items:
            call = item.context_expr
            if (
                isinstance(call, ast.Call)
                and dotted(call.func) in ("open", "io.open", "gzip.open", "bz2.open")
                and call.args
                and isinstance(item.optional_vars, ast.Name)
            ):
                out[item.optional_vars.id] = call.args[0]
    return out


def same_file_loads(tree: CellTree, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[int, str]:
    """Line -> the file's expression as written, for each whole-file load in ``fn`` whose file
    does not depend on the method's parameters (the index): the same file every call."""
    index = _index_names(fn)
    opened = _opened_as(fn)
    out: dict[int, str] = {}
    for call in ast.walk(fn):
        if not isinstance(call, ast.Call) or dotted(call.func) not in WHOLE_FILE_LOADS:
            continue
        if not call.args:
            continue
        source = call.args[0]
        if isinstance(source, ast.Name) and source.id in opened:
            source = opened[source.id]
        if _names(source) & index:
            continue
        out[tree.line_of(call)] = ast.unparse(source)
    return out
