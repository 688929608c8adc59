"""Name-level reading of the cell's nodes (the scanner's :mod:`ast`, the fixes' libcst): dotted
names, literals, loop targets, names read, parents.

The one set of these helpers: the scanner modules (``tree``, ``loops``, ``syncs``, ``setup``)
and the codemods (``fixes/``) ask here, most with either tree, so a name means one thing to a
rule and to its fix. A heuristic over names, never a type check (see ``scan``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Any

from gpu_notebook.cell.words import GRAD_MODES, MATH_MODULES, LogKind, last, log_kind


def dotted(node: Any) -> str | None:
    """``torch.utils.data.DataLoader`` for a Name/Attribute chain, else None. Either tree: the
    facts' :mod:`ast` nodes or the libcst nodes a fix edits (by their kind's name: libcst is not
    imported here), so a name means one thing to a rule and to its fix."""
    kind = type(node).__name__
    if kind == "Name":
        return node.id if isinstance(node, ast.Name) else str(node.value)
    if kind == "Attribute":
        base = dotted(node.value)
        attr = node.attr if isinstance(node.attr, str) else node.attr.value
        return None if base is None else f"{base}.{attr}"
    return None


def method_of(call: Any) -> str | None:
    """``backward`` for ``loss.backward()``: the attribute called, whatever the receiver."""
    func = call.func
    if type(func).__name__ != "Attribute":
        return None
    return func.attr if isinstance(func.attr, str) else str(func.attr.value)


def logs_with(call: Any) -> LogKind | None:
    """What the call logs with (``words.log_kind``: "print", "logger"...), None if it does not
    log. Either tree: what the rule counts as logging is what the fix gates."""
    name, method = dotted(call.func), method_of(call)
    if method == "log" and _logarithm(call, name):
        return None
    return log_kind(name, method)


def _logarithm(call: Any, name: str | None) -> bool:
    """A ``.log`` call that takes a logarithm: a math module's (``math.log(100)``,
    ``torch.log(p)``) or a tensor's, which takes no argument (``p.log()``); every tracker's
    ``log`` takes what it logs (``wandb.log({...})``, ``self.log("loss", loss)``)."""
    given = len(call.args) + len(getattr(call, "keywords", ()))  # libcst: keywords in args
    return given == 0 or (name is not None and name.split(".")[0] in MATH_MODULES)


def receiver_of(call: Any) -> Any:
    """``loss`` for ``loss.backward()``; None when the call is not a method call."""
    return call.func.value if type(call.func).__name__ == "Attribute" else None


def children_of(node: Any) -> list[Any]:
    """The node's direct children, either tree (libcst's ``children``; ast nodes have none)."""
    held = getattr(node, "children", None)
    return list(held) if held is not None else list(ast.iter_child_nodes(node))


def walk(node: Any) -> Iterator[Any]:
    """The node and all its descendants, in source order: either tree, the facts' :mod:`ast`
    or the libcst one a fix edits."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(children_of(current)))


class Parents:
    """Each node's parent in a tree (either kind), so a reader can ask where a node sits."""

    def __init__(self, root: Any) -> None:
        self.parent: dict[Any, Any] = {}
        for node in walk(root):
            for child in children_of(node):
                self.parent[child] = node

    def ancestors(self, node: Any) -> Iterator[Any]:
        current = self.parent.get(node)
        while current is not None:
            yield current
            current = self.parent.get(current)

    def nearest(self, node: Any, kinds: Any) -> Any:
        """The nearest ancestor of ``node`` that is one of ``kinds`` (what isinstance takes)."""
        return next((a for a in self.ancestors(node) if isinstance(a, kinds)), None)

    def inside(self, node: Any, container: Any) -> bool:
        return any(a is container for a in self.ancestors(node))

    def statement_of(self, node: Any) -> Any:
        """The statement that is or holds ``node`` (ast's ``stmt``, libcst's ``BaseStatement``: a
        line or a compound statement), None when none does."""
        return next((n for n in (node, *self.ancestors(node)) if _is_statement(n)), None)


def _is_statement(node: Any) -> bool:
    return isinstance(node, ast.stmt) or any(
        kind.__name__ == "BaseStatement" for kind in type(node).__mro__
    )


def calls_in(node: Any) -> Iterator[Any]:
    return (child for child in walk(node) if type(child).__name__ == "Call")


def is_backward(call: Any) -> bool:
    return method_of(call) == "backward" or dotted(call.func) == "torch.autograd.backward"


def has_backward(node: Any) -> bool:
    return any(is_backward(call) for call in calls_in(node))


def loss_names(node: Any) -> set[str]:
    """Names ``.backward()`` is called on in ``node``: ``loss`` in ``loss.backward()`` or
    ``scaler.scale(loss).backward()``."""
    found = (backward_target(c) for c in calls_in(node) if method_of(c) == "backward")
    return {name for name in found if name is not None}


def backward_target(call: Any) -> str | None:
    """``loss`` of ``loss.backward()`` or ``scaler.scale(loss).backward()``."""
    target = receiver_of(call)
    if type(target).__name__ == "Call" and method_of(target) == "scale" and target.args:
        target = target.args[0]
        target = target.value if type(target).__name__ == "Arg" else target  # libcst's Arg
    return dotted(target)


def keyword_of(call: Any, name: str) -> Any:
    """The ``name=`` argument of a call (its ``.value`` is the expression), None when absent.
    Either tree: ast's ``keyword``, libcst's ``Arg``."""
    if isinstance(call, ast.Call):
        return next((k for k in call.keywords if k.arg == name), None)
    return next((a for a in call.args if a.keyword is not None and a.keyword.value == name), None)


def keyword_value(call: Any, name: str) -> Any:
    """The expression a call gives as ``name=``, None when absent. Either tree."""
    arg = keyword_of(call, name)
    return None if arg is None else arg.value


def has_star_kwargs(call: Any) -> bool:
    """The call passes ``**kwargs``: any keyword may be set after all. Either tree."""
    if isinstance(call, ast.Call):
        return any(k.arg is None for k in call.keywords)
    return any(arg.star == "**" for arg in call.args)


def literal_of(node: Any) -> object:
    """The value of a literal constant (``-1`` too), else the ``NOT_LITERAL`` marker. Either
    tree: libcst's ``Integer``, ``Float`` and ``True``/``False``/``None`` read as ast's."""
    if isinstance(node, ast.Constant):
        return node.value
    kind = type(node).__name__
    if kind in ("Integer", "Float"):
        return node.evaluated_value
    if kind == "Name" and not isinstance(node, ast.Name) and node.value in _NAMED_CONSTANTS:
        return _NAMED_CONSTANTS[node.value]
    if kind in ("UnaryOp", "UnaryOperation"):  # ast's USub, libcst's Minus
        sign, inner = (
            (node.op, node.operand) if kind == "UnaryOp" else (node.operator, node.expression)
        )
        if type(sign).__name__ in ("USub", "Minus") and type(inner).__name__ in _NUMBERS:
            value = literal_of(inner)
            return -value if isinstance(value, (int, float)) else NOT_LITERAL
    return NOT_LITERAL


_NUMBERS = ("Constant", "Integer", "Float")
NOT_LITERAL = object()
_NAMED_CONSTANTS = {"True": True, "False": False, "None": None}


def int_or_none(node: Any, default: int | None) -> int | None:
    """The int literal ``node`` holds (not a bool); ``default`` when there is no node."""
    value = default if node is None else literal_of(node)
    return value if type(value) is int else None


def bool_or_none(node: Any, default: bool | None) -> bool | None:
    """The bool literal ``node`` holds; ``default`` when there is no node."""
    value = default if node is None else literal_of(node)
    return value if isinstance(value, bool) else None


def position(node: ast.AST | None) -> tuple[int, int, int, int]:
    """Sort by it for source order, each node before the nodes it holds: the order libcst
    walks in (``ast.walk`` goes breadth first)."""
    end_line, end_col = getattr(node, "end_lineno", 0) or 0, getattr(node, "end_col_offset", 0)
    return getattr(node, "lineno", 0), getattr(node, "col_offset", 0), -end_line, -(end_col or 0)


def targets_of(node: Any) -> list[Any]:
    """What an assignment (``=``, ``+=``, annotated) binds; [] for any other node. Either tree
    (libcst wraps each ``=`` target in an ``AssignTarget``)."""
    kind = type(node).__name__
    if kind == "Assign":
        return [t if isinstance(t, ast.AST) else t.target for t in node.targets]
    return [node.target] if kind in ("AugAssign", "AnnAssign") else []


def names_in(node: Any, skip: Any = None) -> set[str]:
    """Every variable name in ``node`` outside ``skip``, reads and writes alike. Either tree:
    libcst's attribute names (``step`` in ``opt.step()``) and keyword names (``lr=``) are not
    variables (ast keeps them as strings, not names)."""
    found: set[str] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        if current is skip:
            continue
        kind = type(current).__name__
        if kind == "Name":
            name = current.id if isinstance(current, ast.Name) else current.value
            found |= set() if name in _NAMED_CONSTANTS else {name}  # libcst's True is a Name
        elif kind in ("Attribute", "Arg"):  # ast's Attribute holds one expression too: value
            stack.append(current.value)
        else:
            stack.extend(children_of(current))
    return found


def is_grad_mode_call(node: ast.AST) -> bool:
    if isinstance(node, ast.Call):
        name = last(dotted(node.func))
        if name == "set_grad_enabled":
            return literal_of(node.args[0]) is False if node.args else False
        return name in GRAD_MODES
    return last(dotted(node)) in GRAD_MODES


def loop_target_names(loop: Any) -> tuple[set[str], set[str]]:
    """(names bound to batch values, names bound to counters) by a ``for`` target, either tree.
    A counter is a plain name: ``i`` of ``for i in range(n)``, the index of ``enumerate``."""
    target, it = loop.target, loop.iter
    called = dotted(it.func) if type(it).__name__ == "Call" else None
    if called == "range":
        return set(), _plain_name(target)
    items = _tuple_items(target)
    if called == "enumerate" and items:
        values: set[str] = set()
        for item in items[1:]:
            values |= names_in(item)
        return values, _plain_name(items[0])
    return names_in(target), set()


def _plain_name(node: Any) -> set[str]:
    return {dotted(node) or ""} if type(node).__name__ == "Name" else set()


def _tuple_items(node: Any) -> list[Any]:
    """The items of a tuple, either tree (libcst wraps each in an ``Element``)."""
    if isinstance(node, ast.Tuple):
        return list(node.elts)
    return [e.value for e in node.elements] if type(node).__name__ == "Tuple" else []


def _in_place(method: str | None) -> bool:
    """torch's in-place methods end in one underscore (``add_``, ``div_``, ``renorm_``,
    ``nn.init.normal_``); a dunder or a private name does not count."""
    return (
        method is not None
        and method.endswith("_")
        and not method.endswith("__")
        and not method.startswith("_")
    )


def updates_in_place(block: ast.AST) -> bool:
    """The block updates tensors in place: ``p -= ...``, ``p.data = ...``, ``p.add_(...)``,
    ``w.div_(w.norm(dim=1, keepdim=True))`` (TransE's renormalisation, unseen round 17: any
    in-place method, not a list of the optimizers' own)."""
    for node in ast.walk(block):
        if isinstance(node, ast.AugAssign):
            return True
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Attribute) and t.attr in ("data", "grad") for t in node.targets
        ):
            return True
        if isinstance(node, ast.Call) and _in_place(method_of(node)):
            return True
    return False


def iterated_names(expr: ast.expr) -> tuple[str, ...]:
    """``loader`` for ``loader``, ``enumerate(loader)``, ``tqdm(loader, ...)``, ``zip(a, b)``."""
    out: list[str] = []
    stack: list[ast.expr] = [expr]
    while stack:
        node = stack.pop()
        name = dotted(node)
        if name is not None:
            out.append(name)
        elif isinstance(node, ast.Call):
            stack.extend(reversed(node.args))
    return tuple(out)


# Nodes that hold a name as text, not as a Name node (libcst holds each as a Name): the fields.
NAMES_HELD: dict[type, tuple[str, ...]] = {
    ast.arg: ("arg",),
    ast.alias: ("name", "asname"),
    ast.Global: ("names",),
    ast.Nonlocal: ("names",),
    ast.FunctionDef: ("name",),
    ast.AsyncFunctionDef: ("name",),
    ast.ClassDef: ("name",),
    ast.ExceptHandler: ("name",),
    ast.ImportFrom: ("module",),
    ast.MatchAs: ("name",),
    ast.MatchStar: ("name",),
    ast.MatchMapping: ("rest",),
}


def names_held(node: ast.AST, fields: dict[type, tuple[str, ...]] = NAMES_HELD) -> set[str]:
    """The names ``node`` holds as text in ``fields`` (a parameter, an import, a def...)."""
    found: set[str] = set()
    for field in fields.get(type(node), ()):
        held = getattr(node, field, None)
        texts = held if isinstance(held, list) else [held] if isinstance(held, str) else []
        # ``a.b`` of an import: ``b`` is an attribute; ``*`` of ``from m import *`` no name
        found |= {text.split(".")[0] for text in texts if text != "*"}
    return found
