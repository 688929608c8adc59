"""Shared libcst vocabulary of the codemods: the cell's facts as libcst nodes, and careful edits.

Reading goes through the facts (``facts_of``) and ``cell/parse.py`` (the libcst node at a fact's
range); names, literals and the parent map come from ``cell/names.py``, which reads either tree.
Writing: one pass that replaces nodes by identity (libcst rebuilds every ancestor of a change,
so edits found in a first pass must all be applied in a single second pass), keyword arguments
added in the call's own layout, and ``import torch`` when a fix needs it. A codemod declines
(``Declined``) when the facts give it nothing to act on, rather than guess.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar

import libcst as cst

from gpu_notebook.cell.facts import LoopFacts, SourceFacts
from gpu_notebook.cell.ipython import PLACEHOLDER_LINE
from gpu_notebook.cell.loops import expression_step_loop, trains_in_a_while
from gpu_notebook.cell.names import Parents, dotted, targets_of
from gpu_notebook.cell.parse import FactNode, cst_nodes, once_per_module
from gpu_notebook.cell.scan import scan_source


@dataclass(frozen=True)
class Edited:
    """The patched module, and the parameters worth naming in the header comment."""

    module: cst.Module
    detail: str  # "num_workers=4, pin_memory=True"; "" for none


@dataclass(frozen=True)
class Declined:
    """Why the codemod made no change; shown to the user as is (``on_script``: as said of a
    script, where a cell's reason names earlier cells; ``fixes.records.Refusal``)."""

    reason: str
    on_script: str | None = None


CodemodResult: TypeAlias = Edited | Declined
StatementT = TypeVar("StatementT", bound=cst.BaseStatement)
CompoundT = TypeVar("CompoundT", cst.With, cst.If)
NodeT = TypeVar("NodeT", bound=cst.CSTNode)


def only_small(stmt: cst.CSTNode) -> cst.BaseSmallStatement | None:
    """The statement of a line that holds one (``x = f()``, ``opt.step()``), else None."""
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
        return stmt.body[0]
    return None


def backward_block(
    tree: Tree, backward_calls: Sequence[cst.Call]
) -> tuple[cst.IndentedBlock, int] | Declined:
    """The loop body holding the first of ``backward_calls`` (the facts') that is a statement
    of its own, and that statement's index in it: where a codemod wraps the forward before it."""
    lines = (tree.statement_of(call) for call in backward_calls)
    backward_stmt = next((s for s in lines if isinstance(s, cst.SimpleStatementLine)), None)
    if backward_stmt is None:
        return Declined(".backward() is not a statement of its own in the training loop")
    block = tree.block_of(backward_stmt)
    if not isinstance(block, cst.IndentedBlock):
        return Declined(".backward() is not inside an indented loop body")
    return block, list(block.body).index(backward_stmt)


def only_call(stmt: cst.CSTNode) -> cst.Call | None:
    """The call of a line that is one bare call (``opt.step()``), else None."""
    small = only_small(stmt)
    value = small.value if isinstance(small, cst.Expr) else None
    return value if isinstance(value, cst.Call) else None


class Tree(Parents):
    """A module with a parent map, so codemods can ask where a node sits."""

    def __init__(self, module: cst.Module) -> None:
        super().__init__(module)
        self.module = module

    def block_of(self, statement: cst.BaseStatement) -> cst.Module | cst.IndentedBlock | None:
        """The Module or IndentedBlock whose body lists ``statement``."""
        parent = self.parent.get(statement)
        if isinstance(parent, (cst.Module, cst.IndentedBlock)):
            return parent
        return None

    def around(self, statement: cst.BaseStatement) -> tuple[list[Any], list[Any]]:
        """The statements before and after ``statement`` in its block (none outside one)."""
        block = self.block_of(statement)
        body = list(block.body) if block is not None else [statement]
        at = body.index(statement)
        return body[:at], body[at + 1 :]

    def code(self, node: cst.CSTNode) -> str:
        """``node``'s text; a small statement's without the `;` that separates it from the
        next (libcst's, part of the node): a quote of `opt.zero_grad()` says just that."""
        if isinstance(node, cst.BaseSmallStatement):
            node = node.with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
        return self.module.code_for_node(node)


def facts_of(module: cst.Module, model_name: str | None = None) -> SourceFacts:
    """The facts the rules read, of the text this module was parsed from (its :mod:`ast` parse
    is the rules' own, cached): what a codemod acts on is what the rule counted. Scanned once
    per module: a report's fixes share the one libcst parse (``cell/parse.py``), so its scan.
    ``model_name``: a model the caller names, which the scan then knows too (scanned again)."""
    if model_name:
        return scan_source(module.code, model_names=[model_name])
    return once_per_module(module, "facts", lambda: scan_source(module.code))


def tree_of(module: cst.Module) -> Tree:
    """The module's parent map, built once per module (shared by a report's fixes)."""
    return once_per_module(module, "tree", lambda: Tree(module))


def nodes_of(module: cst.Module, found: Sequence[FactNode]) -> list[Any]:
    """The libcst nodes of ``module`` at the facts' nodes ``found`` (those without one left out)."""
    return [node for node in cst_nodes(module, found) if node is not None]


def paired(module: cst.Module, found: Sequence[FactNode]) -> dict[Any, Any]:
    """Each libcst node of ``module`` at the facts' nodes ``found``, with the fact's node: what
    the fix edits, and where the cell's reading (``gpu_notebook.cell``) asks further."""
    return {c: a for a, c in zip(found, cst_nodes(module, found), strict=True) if c is not None}


def for_loops(module: cst.Module, loops: Sequence[LoopFacts]) -> dict[cst.For, LoopFacts]:
    """The libcst ``for`` loops of ``loops`` (facts of the module's cell), each with its facts:
    the loop fixes leave ``while`` loops alone."""
    found = cst_nodes(module, [loop.node for loop in loops])
    return {n: loop for n, loop in zip(found, loops, strict=True) if isinstance(n, cst.For)}


def training_loops(module: cst.Module) -> dict[cst.For, LoopFacts]:
    """The step loops of the facts (loops that call ``.backward()`` and hold no other that
    does) that are ``for`` loops, each with its facts."""
    return for_loops(module, facts_of(module).training_loops())


def no_training_loop_reason(module: cst.Module) -> str:
    """Why a loop fix declines a cell without a ``for`` training loop (a ``while`` one is named)."""
    tree = facts_of(module).tree
    shaped = expression_step_loop(tree) if tree is not None else None
    if tree is not None and shaped is not None:
        return (
            f"the training loop is an expression (line {shaped.line}: `{shaped.text}`), not a "
            f"for loop: gpucheck patches for loops only; write it as "
            f"`for ... in {shaped.iterable}:` around the step to apply this fix"
        )
    if tree is not None and trains_in_a_while(tree):
        return (
            "the training loop is a while loop; gpucheck patches for loops only "
            "(it cannot tell which variable counts the steps)"
        )
    return "no for loop calling .backward() in this cell"


def assigned_names(statement: cst.CSTNode) -> list[tuple[str, cst.BaseExpression]]:
    """(target name, value) for each ``name = value`` (annotated too, not ``+=``) of a line."""
    body = statement.body if isinstance(statement, cst.SimpleStatementLine) else ()
    return [
        (name, small.value)
        for small in body
        if isinstance(small, (cst.Assign, cst.AnnAssign)) and small.value is not None
        for target in targets_of(small)
        if (name := dotted(target)) is not None
    ]


def optimizer_names(module: cst.Module) -> set[str]:
    return {opt.name for opt in facts_of(module).optimizers if opt.name is not None}


def fresh_name(used: set[str], choices: Sequence[str]) -> str:
    """The first of ``choices`` the cell does not use, else the last one with a suffix (``_``,
    ``_0``, ``_1``...)."""
    numbered = (f"{choices[-1]}_{n}" for n in itertools.chain([""], itertools.count()))
    return next(name for name in itertools.chain(choices, numbered) if name not in used)


def is_placeholder(statement: cst.CSTNode) -> bool:
    """A statement standing in for an IPython line (see cell/ipython.py)."""
    call = only_call(statement)
    return call is not None and PLACEHOLDER_LINE.match(f"{dotted(call.func)}()") is not None


Replacement: TypeAlias = Callable[
    [Any], "cst.CSTNode | cst.RemovalSentinel | cst.FlattenSentinel[Any]"
]


class _Replacer(cst.CSTTransformer):
    def __init__(self, edits: Mapping[cst.CSTNode, Replacement]) -> None:
        super().__init__()
        self._edits = edits

    def on_leave(  # type: ignore[override]
        self, original_node: cst.CSTNode, updated_node: cst.CSTNode
    ) -> cst.CSTNode | cst.RemovalSentinel | cst.FlattenSentinel[Any]:
        edit = self._edits.get(original_node)
        return updated_node if edit is None else edit(updated_node)


def removed(_node: cst.CSTNode) -> cst.RemovalSentinel:
    """The edit that removes the node (a statement the fix makes redundant)."""
    return cst.RemovalSentinel.REMOVE


def replace_nodes(node: NodeT, edits: Mapping[cst.CSTNode, Replacement]) -> NodeT:
    """Apply every edit under ``node`` (the module, or a statement being rewritten) in one pass;
    each gets the node with its descendants already edited."""
    result = node.visit(_Replacer(edits))
    assert isinstance(result, type(node))
    return result


def statement(code: str) -> cst.SimpleStatementLine:
    parsed = cst.parse_statement(code)
    assert isinstance(parsed, cst.SimpleStatementLine), code
    return parsed


def expression(code: str) -> cst.BaseExpression:
    return cst.parse_expression(code)


def set_keyword(call: cst.Call, name: str, value: cst.BaseExpression) -> cst.Call:
    """``call`` with ``name=value``: replaced in place if present, else appended in its layout.

    A call written one argument per line gets the new argument on its own line with the same
    indentation; a trailing comma and a comment on the last line stay where they were.
    """
    args = list(call.args)
    for index, arg in enumerate(args):
        if arg.keyword is not None and arg.keyword.value == name:
            args[index] = arg.with_changes(value=value)
            return call.with_changes(args=args)
    new = cst.Arg(
        value=value,
        keyword=cst.Name(name),
        equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
        ),
    )
    if not args:
        return call.with_changes(args=[new])
    sep = _separator(call)
    last = args[-1]
    trailing = isinstance(last.comma, cst.Comma)
    closing = (
        last.comma.whitespace_after
        if isinstance(last.comma, cst.Comma)
        else last.whitespace_after_arg
    )
    if isinstance(closing, cst.ParenthesizedWhitespace):
        # Multi-line call: the last argument keeps its own comment, the new one closes the call.
        item = sep.whitespace_after
        indent_line = (
            item.last_line if isinstance(item, cst.ParenthesizedWhitespace) else closing.last_line
        )
        last = last.with_changes(
            comma=cst.Comma(
                whitespace_after=closing.with_changes(indent=True, last_line=indent_line)
            ),
            whitespace_after_arg=cst.SimpleWhitespace(""),
        )
        close = cst.ParenthesizedWhitespace(
            first_line=cst.TrailingWhitespace(), indent=closing.indent, last_line=closing.last_line
        )
        if trailing:
            new = new.with_changes(comma=cst.Comma(whitespace_after=close))
        else:
            new = new.with_changes(whitespace_after_arg=close)
    elif trailing:
        new = new.with_changes(comma=last.comma)
        last = last.with_changes(comma=sep)
    else:
        new = new.with_changes(whitespace_after_arg=last.whitespace_after_arg)
        last = last.with_changes(comma=sep, whitespace_after_arg=cst.SimpleWhitespace(""))
    return call.with_changes(args=[*args[:-1], last, new])


def remove_keyword(call: cst.Call, name: str) -> cst.Call:
    args = [a for a in call.args if a.keyword is None or a.keyword.value != name]
    if len(args) == len(call.args):
        return call
    if args and not isinstance(call.args[-1].comma, cst.Comma):
        # The removed argument may have been last: the new last one must not end in a comma.
        args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return call.with_changes(args=args)


def _separator(call: cst.Call) -> cst.Comma:
    """The comma-and-whitespace this call puts between arguments, without any comment."""
    if len(call.args) >= 2 and isinstance(call.args[-2].comma, cst.Comma):
        after = call.args[-2].comma.whitespace_after
        if isinstance(after, cst.ParenthesizedWhitespace):
            after = after.with_changes(first_line=cst.TrailingWhitespace(), empty_lines=[])
        return cst.Comma(whitespace_after=after)
    before = call.whitespace_before_args
    if isinstance(before, cst.ParenthesizedWhitespace):
        return cst.Comma(
            whitespace_after=before.with_changes(
                first_line=cst.TrailingWhitespace(), empty_lines=[]
            )
        )
    return cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))


def after_imports_index(body: Sequence[cst.BaseStatement]) -> int:
    """Index in a module body just after the imports at its top (0 when it opens with code)."""
    index = 0
    for position, stmt in enumerate(body):
        if _is_import(stmt):
            index = position + 1
        elif not (is_placeholder(stmt) or _is_docstring(stmt)):
            break
    return index


def _is_import(stmt: cst.BaseStatement) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and all(
        isinstance(small, (cst.Import, cst.ImportFrom)) for small in stmt.body
    )


def _is_docstring(stmt: cst.BaseStatement) -> bool:
    small = only_small(stmt)
    return isinstance(small, cst.Expr) and isinstance(
        small.value, (cst.SimpleString, cst.ConcatenatedString)
    )


def opened_with(block: cst.IndentedBlock, first: cst.BaseStatement) -> cst.IndentedBlock:
    """``block`` (a function's body) with ``first`` as its first statement, after its
    docstring where it opens with one."""
    body = list(block.body)
    at = 1 if body and _is_docstring(body[0]) else 0
    return block.with_changes(body=[*body[:at], first, *body[at:]])


def with_torch_import(module: cst.Module, edits: Mapping[cst.CSTNode, Replacement]) -> cst.Module:
    """``module`` with ``edits`` made, and ``import torch`` added before its first import when no
    import of the cell binds torch (``import torch.nn`` does, ``import torch as T`` not)."""
    patched = replace_nodes(module, edits)
    if "torch" in facts_of(module).imported:
        return patched
    body = list(patched.body)
    first_import = next((i for i, stmt in enumerate(body) if _is_import(stmt)), 0)
    body.insert(first_import, statement("import torch\n"))
    return patched.with_changes(body=body)


def leading_lines(stmt: cst.BaseStatement) -> Sequence[cst.EmptyLine]:
    """Blank and comment lines above a statement (every concrete statement has them)."""
    assert isinstance(stmt, (cst.SimpleStatementLine, cst.BaseCompoundStatement)), stmt
    return stmt.leading_lines


def with_leading_lines(stmt: StatementT, lines: Sequence[cst.EmptyLine]) -> StatementT:
    return stmt.with_changes(leading_lines=list(lines))


def add_comment(stmt: StatementT, text: str) -> StatementT:
    """``stmt`` with ``text`` as the last comment line above it, at its indentation."""
    line = cst.EmptyLine(indent=True, comment=cst.Comment(text))
    return with_leading_lines(stmt, [*leading_lines(stmt), line])


def put_before(line: cst.BaseStatement, stmt: cst.BaseStatement) -> list[cst.BaseStatement]:
    """``line`` then ``stmt``: the comments and blank lines above ``stmt`` move above ``line``."""
    return [with_leading_lines(line, leading_lines(stmt)), with_leading_lines(stmt, [])]


def with_block(context: str, statements: Sequence[cst.BaseStatement]) -> cst.With:
    """``with <context>:`` holding ``statements`` (see ``wrap``)."""
    empty = cst.IndentedBlock(body=[])
    return wrap(cst.With(items=[cst.WithItem(item=expression(context))], body=empty), statements)


def wrap(wrapper: CompoundT, statements: Sequence[cst.BaseStatement]) -> CompoundT:
    """``wrapper`` (a with/if) holding ``statements`` as its body; comments above the first
    statement move above the wrapper, where they still describe what follows."""
    first, *rest = statements
    inner = [with_leading_lines(first, []), *rest]
    return wrapper.with_changes(
        leading_lines=list(leading_lines(first)), body=cst.IndentedBlock(body=inner)
    )
