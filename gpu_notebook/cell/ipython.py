"""Hide a cell's IPython-only lines from libcst behind placeholders, and put them back verbatim.

Notebook cells hold line magics (``%time x``), shell escapes (``!nvidia-smi``, ``files = !ls``),
help (``obj?``) and a cell magic on the first line. libcst parses only Python, so each such
logical line becomes one placeholder statement ``__gpucheck_ipy_<n>__()`` with the same
indentation; after a codemod the placeholders are replaced by the exact original lines
(re-indented only when the codemod moved them into or out of a block).

Finding these lines is IPython's own job: its token transformers already know where magics may
appear (not inside strings, not inside brackets), so we reuse their ``find`` methods instead of
guessing with regular expressions.
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass
from typing import Any

from gpu_notebook.cell.names import targets_of
from gpu_notebook.cell.parse import check_parse, parse_ast

# Cell magics whose body is ordinary Python: the first line is kept, the body is patched.
PYTHON_BODY_CELL_MAGICS = frozenset({"gpucheck", "time", "timeit", "capture", "prun"})

_PLACEHOLDER_NAME = "__gpucheck_ipy_{}__"
PLACEHOLDER_LINE = re.compile(r"^(?P<indent>[ \t]*)__gpucheck_ipy_(?P<index>\d+)__\(\)[ \t]*$")
# IPython gives up after this many rewrites of one cell; so do we.
_MAX_CONSTRUCTS = 500


class NotPythonCell(ValueError):
    """The cell cannot be made parseable Python; the message says why, for the user."""


@dataclass(frozen=True)
class ProtectedCell:
    """A cell split into its kept cell-magic line and a pure-Python body with placeholders."""

    magic_line: str | None  # "%%gpucheck --steps 20\n", kept verbatim above the body
    code: str  # the body, every IPython-only logical line replaced by a placeholder call
    originals: tuple[tuple[str, ...], ...]  # placeholder n -> its original physical lines


def protect(source: str, *, ours: bool = False) -> ProtectedCell:
    """Split off a leading Python-bodied cell magic and replace IPython lines by placeholders.

    Raises NotPythonCell when the first line is a cell magic whose body is not Python
    (``%%bash``, ``%%html``...). ``ours``: the source is a patched cell of ours being checked,
    not the user's cell (its parse is not cached; see ``cell/parse.py``).
    """
    magic_line: str | None = None
    body = source
    if source.startswith("%%"):
        first, newline, rest = source.partition("\n")
        name = re.match(r"%%([\w.-]*)", first)
        magic = name.group(1) if name else ""
        if magic not in PYTHON_BODY_CELL_MAGICS:
            raise NotPythonCell(
                f"this cell starts with %%{magic}; gpucheck fixes only Python cells"
            )
        magic_line, body = first + newline, rest

    if _is_python(body, ours=ours):
        # Valid Python has no IPython-only line (each of them is a syntax error in Python), and
        # IPython is not imported for it: `gpucheck run` on a script never needs it.
        return ProtectedCell(magic_line=magic_line, code=body, originals=())
    lines = body.splitlines(keepends=True)
    originals: list[tuple[str, ...]] = []
    for _ in range(_MAX_CONSTRUCTS):
        span = _first_ipython_span(lines)
        if span is None:
            break
        start, end, indent = span
        originals.append(tuple(lines[start : end + 1]))
        ending = _line_ending(lines[end])
        placeholder = f"{indent}{_PLACEHOLDER_NAME.format(len(originals) - 1)}(){ending}"
        lines[start : end + 1] = [placeholder]
    else:
        raise NotPythonCell(
            f"this cell has more than {_MAX_CONSTRUCTS} IPython magics or shell lines"
        )
    return ProtectedCell(magic_line=magic_line, code="".join(lines), originals=tuple(originals))


def restore(code: str, cell: ProtectedCell, header: str = "") -> str:
    """Put the original IPython lines back in place of their placeholders, and the magic line.

    ``header`` (whole lines) goes first, or right after a kept cell-magic line, which IPython
    only recognises on the first line of a cell.

    A placeholder the codemod moved deeper (or shallower) carries its original lines along by
    the same indentation difference, so ``%time`` inside a new ``with`` block stays inside it.
    Raises ValueError if a placeholder went missing or was duplicated (a codemod bug).
    """
    out: list[str] = []
    seen: set[int] = set()
    for line in code.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        match = PLACEHOLDER_LINE.match(body)
        if match is None:
            out.append(line)
            continue
        index = int(match.group("index"))
        if index in seen or index >= len(cell.originals):
            raise ValueError(f"placeholder {index} appears twice or was never made")
        seen.add(index)
        original = cell.originals[index]
        old_indent = _indent_of(original[0])
        new_indent = match.group("indent")
        for piece in original:
            if old_indent != new_indent and piece[: len(old_indent)] == old_indent:
                piece = new_indent + piece[len(old_indent) :]
            out.append(piece)
        if not out[-1].endswith(("\n", "\r")) and line.endswith(("\n", "\r")):
            # The original cell ended on this line without a newline; the codemod put more
            # code after it, so the line needs one now.
            out[-1] += _line_ending(line)
    missing = set(range(len(cell.originals))) - seen
    if missing:
        raise ValueError(f"placeholders {sorted(missing)} were dropped by the codemod")
    return (cell.magic_line or "") + header + "".join(out)


# Line magics that run their statement in the user's namespace: what it assigns stays bound
# (``%time loader = DataLoader(...)``). ``%timeit`` runs it inside a function of its own, so its
# assignments are gone after it.
_BINDING_LINE_MAGICS = frozenset({"time", "prun"})
_ASSIGNED_MAGIC = re.compile(r"^[ \t]*(?P<targets>[^=!%]+?)[ \t]*=[ \t]*[!%]")
_STATEMENT_MAGIC = re.compile(
    r"^[ \t]*%(?P<name>\w+)(?:[ \t]+-\S+)*[ \t]+(?P<statement>\S.*)$", re.S
)


def bound_by(original: tuple[str, ...]) -> tuple[str, ...]:
    """The plain names an IPython line binds in the user's namespace, from its original
    physical lines: ``files = !ls`` and ``env = %env`` (IPython assigns the result),
    ``%time x = f()`` and ``%prun x = f()`` (the statement runs in the namespace). Anything
    else binds nothing we can name."""
    text = "".join(original).replace("\\\n", " ")
    assigned = _ASSIGNED_MAGIC.match(text)
    if assigned is not None:
        return _assigned_names(f"{assigned.group('targets')} = None")
    statement = _STATEMENT_MAGIC.match(text)
    if statement is not None and statement.group("name") in _BINDING_LINE_MAGICS:
        return _assigned_names(statement.group("statement"))
    return ()


# Line magics whose argument is a Python statement run in the user's namespace or a copy of it
# (``%time hist = fit(model)``, ``%timeit -n1 step()``, ``%prun fit(model)``).
_STATEMENT_LINE_MAGICS = _BINDING_LINE_MAGICS | {"timeit"}


def magic_statements(cell: ProtectedCell) -> tuple[ast.stmt, ...]:
    """The Python statements the cell's line magics run (``%time hist = fit(model)``: its
    ``hist = fit(model)``), parsed; one that does not parse is left out. The placeholder hides
    them from a reading of the cell's calls: ``fit`` is called all the same."""
    out: list[ast.stmt] = []
    for original in cell.originals:
        text = "".join(original).replace("\\\n", " ")
        statement = _STATEMENT_MAGIC.match(text)
        if statement is None or statement.group("name") not in _STATEMENT_LINE_MAGICS:
            continue
        try:
            out.extend(ast.parse(statement.group("statement").strip()).body)
        except (SyntaxError, ValueError):
            continue
    return tuple(out)


def _assigned_names(code: str) -> tuple[str, ...]:
    try:
        module = ast.parse(code.strip())
    except (SyntaxError, ValueError):
        return ()
    return tuple(n for stmt in module.body for t in targets_of(stmt) for n in plain_names(t))


def plain_names(target: Any) -> list[str]:
    """The names an assignment target binds: a name, or the names of a tuple or list of them
    (``a, *b = ...``); ``obj.attr = ...`` and ``d[k] = ...`` bind no name (they change an
    object the name already holds)."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, ast.Starred):
        return plain_names(target.value)
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for elt in target.elts for n in plain_names(elt)]
    return []


def _is_python(source: str, *, ours: bool = False) -> bool:
    try:
        if ours:
            check_parse(source)
        else:
            parse_ast(source)
    except (SyntaxError, ValueError):  # ValueError: a NUL byte
        return False
    return True


def _first_ipython_span(lines: list[str]) -> tuple[int, int, str] | None:
    """(first line, last line, indentation) of the earliest IPython construct, 0-based."""
    from IPython.core import inputtransformer2 as it2  # only for cells that are not Python

    if not lines:
        return None
    # IPython's tokenizer wants every line but the last to end with a newline; it is.
    tokens_by_line = it2.make_tokens_by_line(lines)
    # IPython's transformers are untyped; each ``find`` returns an instance or None.
    transformers: tuple[Any, ...] = (
        it2.MagicAssign,
        it2.SystemAssign,
        it2.EscapedCommand,
        it2.HelpEnd,
    )
    found = [hit for t in transformers if (hit := t.find(tokens_by_line)) is not None]
    if not found:
        return None
    hit = min(found, key=it2.TokenTransformBase.sortby)
    start: int = hit.start_line
    if isinstance(hit, it2.HelpEnd):
        end: int = hit.q_line
    else:
        end = it2.find_end_of_continued_line(lines, start)
    return start, min(end, len(lines) - 1), _indent_of(lines[start])


def _indent_of(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def _line_ending(line: str) -> str:
    if line.endswith("\r\n"):
        return "\r\n"
    if line.endswith(("\n", "\r")):
        return line[-1]
    return ""


def cell_number(filename: str) -> int | None:
    """The execution number IPython gave the cell compiled under ``filename`` ("In[3]"), as its
    tracebacks name it (``shell.compile.format_code_name``); None when there is no shell, or the
    file is not one of its cells. IPython is asked only when already imported."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    compiler = getattr(shell, "compile", None)
    named = getattr(compiler, "format_code_name", None)
    label = named(filename) if callable(named) else None
    if isinstance(label, tuple) and len(label) == 2:
        number = re.fullmatch(r"In\[(\d+)\]", str(label[1]))
        if number is not None:
            return int(number.group(1))
    if filename.startswith("<ipython-input-"):  # terminal IPython's name holds it
        head = filename[len("<ipython-input-") :].split("-", 1)[0]
        return int(head) if head.isdigit() else None
    return None


def binding_cell(name: str) -> int | None:
    """The execution number of the last earlier cell (``In[N]``) whose top level binds ``name``
    (an assignment, a ``for`` or ``with`` target, a def, a class, an import; not inside a
    function or class), from the running shell's raw input history: where an object the
    measured cell uses was made, for a refusal to name. None: no shell, or no cell binds it."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    history = getattr(getattr(shell, "history_manager", None), "input_hist_raw", None)
    now = getattr(shell, "execution_count", None)
    if not isinstance(history, list) or not isinstance(now, int):
        return None
    # The running cell is stored at ``now`` as it starts (ipykernel, InteractiveShell).
    for number in range(min(now, len(history)) - 1, 0, -1):
        source = history[number]
        if isinstance(source, str) and name in source and name in _top_level_bound(source):
            return number
    return None


def _top_level_bound(source: str) -> set[str]:
    try:
        code = protect(source).code
        module = ast.parse(code)
    except (NotPythonCell, SyntaxError, ValueError):
        return set()
    bound: set[str] = set()
    todo: list[ast.stmt] = list(module.body)
    while todo:
        stmt = todo.pop()
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(stmt.name)
            continue
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in stmt.names)
            continue
        for target in targets_of(stmt):
            bound.update(plain_names(target))
        if isinstance(stmt, (ast.For, ast.AsyncFor)):
            bound.update(plain_names(stmt.target))
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            bound.update(
                n for i in stmt.items if i.optional_vars for n in plain_names(i.optional_vars)
            )
        for field in ("body", "orelse", "finalbody", "handlers"):
            todo.extend(s for s in getattr(stmt, field, ()) if isinstance(s, ast.stmt))
        for handler in getattr(stmt, "handlers", ()):
            todo.extend(handler.body)
    return bound
