"""The parsed cell the source scanner walks: parents, line positions, loops, step loops, models.

:class:`CellTree` answers the structural questions every family of facts asks (which loop holds
this call, is it behind an ``if``, which names hold modules, which loops train); the families
(``loops``, ``syncs``, ``setup``) read it, and ``scan`` builds it.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator

from gpu_notebook.cell.expression_loops import (
    COMPREHENSIONS,
    build,
    candidates,
    mapped,
)
from gpu_notebook.cell.facts import ORIGIN_LINES, Origin, SourceLine
from gpu_notebook.cell.names import (
    Parents,
    dotted,
    has_backward,
    is_grad_mode_call,
    method_of,
    receiver_of,
)
from gpu_notebook.cell.step_calls import StepCalls
from gpu_notebook.cell.words import (
    MODULE_CHAIN_METHODS,
    MODULE_METHODS,
    builds_module,
    last,
    model_like,
)

# An ExpressionLoop is a ``for`` (a comprehension read as one: cell.expression_loops).
Loop = ast.For | ast.AsyncFor | ast.While
Function = ast.FunctionDef | ast.AsyncFunctionDef
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)  # a loop ends at them


def _heads(loop: Loop) -> tuple[ast.AST | None, ...]:
    """What a loop evaluates outside its body: a ``for``'s iterable, a ``while``'s test."""
    return (getattr(loop, "iter", None), getattr(loop, "test", None))


def _trains_in_a_loop(fn: Function) -> bool:
    """A loop in ``fn`` (not in a def nested in it) runs a backward: ``fn`` trains many steps.
    A comprehension is one (``[f(b).backward() for b in loader]``: cell.expression_loops)."""
    return any(
        isinstance(node, (ast.For, ast.AsyncFor, ast.While, *COMPREHENSIONS)) and has_backward(node)
        for node in ast.walk(fn)
    )


def handed(loop: Loop, *, called: bool = False) -> set[str]:
    """Names ``loop``'s body passes whole to a call (``loader`` of ``train(model, loader)``,
    ``closure`` of ``opt.step(closure)``); ``called``: and the names it calls (``closure()``)."""
    calls = [c for s in loop.body for c in ast.walk(s) if isinstance(c, ast.Call)]
    return {
        value.id
        for c in calls
        for value in ([c.func] if called else []) + [*c.args, *(k.value for k in c.keywords)]
        if isinstance(value, ast.Name)
    }


class CellTree(Parents):
    """The parsed cell and the structure every scanner family reads: positions, loops, models."""

    def __init__(
        self,
        tree: ast.Module,
        lines: list[str],
        mapping: list[int],
        live_models: frozenset[str],
        origins: tuple[Origin, ...] = (),
    ) -> None:
        super().__init__(tree)
        self.tree = tree
        self.lines = lines
        self.mapping = mapping
        # The user's functions read above the cell (cell.calls): a line from ``offset`` on is one
        # of theirs.
        self.origins = {origin.offset: origin for origin in origins}
        self._calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
        self.models = self._model_names() | live_models
        self.loops: list[Loop] = [n for n in ast.walk(tree) if isinstance(n, Loop)]
        self.loops.sort(key=lambda n: n.lineno)
        # Functions a loop defines and calls, or hands to a call (LBFGS's ``def closure(): ...``
        # then ``optimizer.step(closure)``): their body runs within the step, so the loop holds
        # it (ast.walk goes outer first: a closure inside a closure is found after its holder).
        self.closures: set[int] = set()
        for fn in ast.walk(tree):
            if isinstance(fn, Function):
                loop = self.enclosing_loop(fn)
                if loop is not None and fn.name in handed(loop, called=True):
                    self.closures.add(id(fn))
        # The cell's module-level functions that run a backward (``def train_step(model,
        # batch): ... loss.backward()``): a loop that calls one trains, and what the function
        # does runs on every step of that loop.
        # A function whose backward sits in a loop of its own (``def train_one_epoch(...):
        # for x, y in loader: ... loss.backward()``) runs a whole epoch a call: a loop calling
        # it is an epoch loop, which trains but is no step loop (an earlier cell's function read
        # with the cell, cell.calls: the measured cell's once-an-epoch print read as per step).
        # A step function may be nested in the function that calls it (``def fit(model): def
        # step(x, y): ... loss.backward() ...; losses = [step(x, y) for x, y in loader]``, unseen
        # 39): it is a step function, and the function that holds it and calls it from a loop
        # runs many steps a call, an epoch function. Not a closure a loop defines (LBFGS's: the
        # optimizer runs it, ``closures``) nor a method (``step_methods``).
        steps = [
            fn
            for fn in self._plain_functions(tree)
            if has_backward(fn) and not _trains_in_a_loop(fn)
        ]
        calling = {fn.name for fn in steps}
        self.epoch_functions = {
            node.name
            for node in tree.body
            if isinstance(node, Function)
            and (_trains_in_a_loop(node) or self._loop_calls(node, calling - {node.name}))
        }
        top = {id(node) for node in tree.body}
        # By name, as a loop calls them: the cell's top-level function wins over a nested one.
        self.step_functions = {
            fn.name: fn
            for fn in sorted(steps, key=lambda fn: id(fn) in top)
            if fn.name not in self.epoch_functions
        }
        # The same in a class of the cell (a hand-written trainer's ``def step(self, batch)``),
        # called as ``self.step(batch)`` from a loop in another method of that class (``fit``).
        self.step_methods: dict[tuple[str, str], Function] = {
            (cls.name, node.name): node
            for cls in ast.walk(tree)
            if isinstance(cls, ast.ClassDef)
            for node in cls.body
            if isinstance(node, Function) and has_backward(node) and not _trains_in_a_loop(node)
        }
        # Loops written as expressions (``[train_step(b) for b in loader]``, ``list(map(step,
        # loader))``: cell.expression_loops) that train, read as the ``for`` loops they are;
        # one that does not (``[x * 2 for x in range(10)]``) stays an expression.
        # One that a ``for`` iterates (``for loss in map(train_step, loader): print(loss)``)
        # runs its element once per pass of that loop: the ``for`` is the step loop, its body
        # and the element one step (``per_item``: id of the ``for`` -> the element's statements).
        self.per_item: dict[int, list[ast.stmt]] = {}
        for source in candidates(tree):
            made, parents = build(source)
            # The parents first: a method's loop asks its class (``_step_function_calls``).
            self.parent.update({loop: held for loop, held in parents.items() if loop in made})
            if not any(self._trains(loop) for loop in made):
                continue
            header = self._iterated_by(source)
            if header is not None and len(made) == 1:
                self.per_item.setdefault(id(header), []).extend(made[0].body)
                continue
            self.parent.update(parents)
            self.loops.extend(made)
        self.loops.sort(key=lambda n: n.lineno)
        self.trains = {id(loop): self._trains(loop) for loop in self.loops}
        # The step loops: loops that call .backward() and hold no other loop that does (an
        # epoch loop around them trains too, but runs once per epoch), nor call a function
        # that runs a whole epoch.
        self.step_loops = {
            id(loop)
            for loop in self.loops
            if self.trains[id(loop)]
            and not self._calls_epoch_function(loop)
            and not any(
                o is not loop and self.trains[id(o)] and self.inside(o, loop) for o in self.loops
            )
        }
        # The cell's functions a step loop runs every step through its calls (a model's forward).
        self.step_calls = StepCalls(
            tree,
            [lp for lp in self.loops if id(lp) in self.step_loops],
            self._class_of,
            self.gated,
            self.step_body,
        )
        self.global_no_grad = any(
            isinstance(n, ast.Expr) and is_grad_mode_call(n.value) and isinstance(n.value, ast.Call)
            and last(dotted(n.value.func)) == "set_grad_enabled"
            for n in ast.walk(tree)
        )  # fmt: skip

    # ---------------------------------------------------------------- positions

    def line_of(self, node: ast.AST) -> int:
        lineno = getattr(node, "lineno", 1)
        return self.mapping[lineno - 1] if 0 < lineno <= len(self.mapping) else lineno

    def origin_of(self, node: ast.AST) -> Origin | None:
        """The function of an earlier cell or a user's file ``node`` is in (None: the cell)."""
        line = self.line_of(node)
        return self.origins.get(line - line % ORIGIN_LINES) if line >= ORIGIN_LINES else None

    def in_cell(self, node: ast.AST) -> bool:
        """``node`` is the measured cell's own, not a function's read above it (cell.calls):
        the families not yet said through calls keep to these."""
        return self.line_of(node) < ORIGIN_LINES

    def text_of(self, node: ast.AST) -> str:
        lineno = getattr(node, "lineno", 1)
        return self.lines[lineno - 1].strip() if 0 < lineno <= len(self.lines) else ""

    def enclosing_loop(self, node: ast.AST) -> Loop | None:
        """The innermost loop whose body holds ``node`` (not its iterable or test)."""
        return self._loop_around(node, lambda loop: node not in _heads(loop))

    def _loop_around(self, node: ast.AST, accept: Callable[[Loop], bool]) -> Loop | None:
        """The innermost loop around ``node`` that ``accept`` takes, not through a def (but
        through a closure the loop calls)."""
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, Loop) and accept(ancestor):
                return ancestor
            if isinstance(ancestor, _SCOPES) and id(ancestor) not in self.closures:
                return None
        return None

    def gated(self, node: ast.AST, loop: Loop | Function) -> bool:
        """True when an ``if`` (or a ternary) sits between ``node`` and its loop (or the function
        that holds it), or ``node`` is in an assert's message."""
        child = node
        for ancestor in self.ancestors(node):
            if ancestor is loop:
                return False
            # The test itself runs every time: `if loss.item() < x: break` reads every step.
            # ... and ``if x is not None:`` holds every step once x is set (``_set_test``).
            if (
                isinstance(ancestor, (ast.If, ast.IfExp))
                and child is not ancestor.test
                and not (
                    isinstance(ancestor, ast.If)
                    and child in ancestor.body
                    and _set_test(ancestor.test)
                )
            ):
                return True
            # An assert's message is built only when its test fails (the step that stops the
            # loop), never on the steps that pass: a read there is no per-step read.
            if isinstance(ancestor, ast.Assert) and child is ancestor.msg:
                return True
            child = ancestor
        return False

    def cuda_gated(self, node: ast.AST, loop: Loop) -> bool:
        """True when every ``if`` between ``node`` and its loop holds it under a test for CUDA
        (``if torch.cuda.is_available():``, ``if device.type == "cuda":``): a CPU run skips it,
        a GPU run runs it every step."""
        child, seen = node, False
        for ancestor in self.ancestors(node):
            if ancestor is loop:
                return seen
            if isinstance(ancestor, ast.IfExp) and child is not ancestor.test:
                return False
            if isinstance(ancestor, ast.If) and child is not ancestor.test:
                test = ancestor.test
                # The test is one check for CUDA: not negated, not joined to another condition
                # (`if step % 10 == 0 and torch.cuda.is_available():` runs every 10 steps).
                only_cuda = not isinstance(test, (ast.UnaryOp, ast.BoolOp)) and (
                    "cuda" in ast.unparse(test).lower()
                )
                if child not in ancestor.body or not only_cuda:
                    return False
                seen = True
            child = ancestor
        return False

    def step_loop_of(self, node: ast.AST) -> Loop | None:
        """The training step loop around ``node`` (through nested loops, not through defs), or
        for a node of a step function (not in a loop of its own), the step loop that calls it."""
        found = self._loop_around(node, lambda loop: id(loop) in self.step_loops)
        if found is not None or self.enclosing_loop(node) is not None:
            return found
        holder = self.nearest(node, Function)
        if not isinstance(holder, Function):
            return None
        method = self.step_methods.get((self._class_of(holder) or "", holder.name))
        if holder is not method and holder is not self.step_functions.get(holder.name):
            return None
        return next(
            (lp for lp in self.loops
             if id(lp) in self.step_loops and holder.name in self._step_function_calls(lp)),
            None,
        )  # fmt: skip

    def run_by_step(self, node: ast.AST) -> tuple[Loop, str, Function] | None:
        """For ``node`` in a function of the cell the step loop runs through its calls (the
        model's ``forward``, a helper it calls: cell.step_calls), the step loop, the function's
        name as said and the function; None elsewhere."""
        holder = self.nearest(node, Function)
        if not isinstance(holder, Function) or id(holder) not in self.step_calls.reached:
            return None
        loop, name = self.step_calls.reached[id(holder)]
        return loop, name, holder

    def _plain_functions(self, tree: ast.Module) -> list[Function]:
        """The cell's functions at its top level or nested in one of them, neither a method nor
        defined in a loop."""
        top = {id(node) for node in tree.body}
        return [
            fn
            for fn in ast.walk(tree)
            if isinstance(fn, Function)
            and id(fn) not in self.closures
            and (id(fn) in top or isinstance(self.nearest(fn, _SCOPES), Function))
            and self.enclosing_loop(fn) is None
        ]

    @staticmethod
    def _loop_calls(fn: Function, names: set[str]) -> bool:
        """A loop in ``fn`` calls one of ``names`` (a step function nested in it) by name, or
        maps it (``map(step, loader)``: cell.expression_loops)."""
        return any(
            (
                isinstance(loop, (ast.For, ast.AsyncFor, ast.While, *COMPREHENSIONS))
                and any(
                    isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id in names
                    for c in ast.walk(loop)
                )
            )
            or (
                isinstance(loop, ast.Call)
                and (pair := mapped(loop)) is not None
                and isinstance(pair[0], ast.Name)
                and pair[0].id in names
            )
            for loop in ast.walk(fn)
        )

    def _trains(self, loop: Loop) -> bool:
        """``loop`` calls ``.backward()``, a step function or an epoch function."""
        return (
            has_backward(loop)
            or bool(self._step_function_calls(loop))
            or self._calls_epoch_function(loop)
        )

    def _calls_epoch_function(self, loop: Loop) -> bool:
        """``loop``'s body calls, by name, a function that runs a training loop of its own."""
        return any(
            isinstance(c, ast.Call)
            and isinstance(c.func, ast.Name)
            and c.func.id in self.epoch_functions
            for s in self.step_body(loop)
            for c in ast.walk(s)
        )

    def step_body(self, loop: Loop) -> list[ast.stmt]:
        """What ``loop`` runs on each pass: its body, and the element of an expression loop it
        iterates (``for loss in map(train_step, loader):``'s ``train_step(...)``)."""
        return [*loop.body, *self.per_item.get(id(loop), [])]

    def _iterated_by(self, source: ast.expr) -> ast.For | ast.AsyncFor | None:
        """The ``for`` whose iterable is ``source`` (through calls that wrap it: ``enumerate``,
        ``tqdm``, ``zip``), else None."""
        child: ast.AST = source
        for ancestor in self.ancestors(source):
            if isinstance(ancestor, (ast.For, ast.AsyncFor)) and child is ancestor.iter:
                return ancestor
            if not isinstance(ancestor, ast.Call) or not any(a is child for a in ancestor.args):
                return None
            child = ancestor
        return None

    def _step_function_calls(self, loop: Loop) -> set[str]:
        """The step functions ``loop``'s body calls by name (``self.step(...)`` from a method of
        the class that defines ``step``)."""
        owner = self._class_of(loop)
        called = set()
        for c in (c for s in self.step_body(loop) for c in ast.walk(s) if isinstance(c, ast.Call)):
            if isinstance(c.func, ast.Name) and c.func.id in self.step_functions:
                called.add(c.func.id)
            elif (
                owner is not None
                and isinstance(c.func, ast.Attribute)
                and isinstance(c.func.value, ast.Name)
                and c.func.value.id == "self"
                and (owner, c.func.attr) in self.step_methods
            ):
                called.add(c.func.attr)
        return called

    def _class_of(self, node: ast.AST) -> str | None:
        """The class whose method holds ``node`` (None: not in a method)."""
        owner = self.nearest(node, ast.ClassDef)
        return owner.name if isinstance(owner, ast.ClassDef) else None

    def source_line(self, node: ast.AST, kind: str, step_loop: Loop | None = None) -> SourceLine:
        """The fact of ``node``; ``step_loop``: the step loop the caller found it in, which then
        stands for its loop too."""
        loop = step_loop or self.enclosing_loop(node)
        step_loop = step_loop or self.step_loop_of(node)
        # Gated relative to the step: `if step % 10 == 0: for p in params: print(p)` is gated.
        reference = step_loop if step_loop is not None else loop
        return SourceLine(
            line=self.line_of(node),
            text=self.text_of(node),
            kind=kind,
            gated=reference is not None and self.gated(node, reference),
            cuda_only=reference is not None and self.cuda_gated(node, reference),
            loop_line=self.line_of(loop) if loop is not None else None,
            step_loop_line=self.line_of(step_loop) if step_loop is not None else None,
            node=node,
            origin=self.origin_of(node),
        )

    # ---------------------------------------------------------------- what names hold

    def _module_classes(self) -> set[str]:
        classes: set[str] = set()
        for node in ast.walk(self.tree):
            if isinstance(node, ast.ClassDef):
                for base in node.bases:
                    name = dotted(base) or ""
                    if "Module" in name or last(name) in classes:
                        classes.add(node.name)
        return classes

    def _is_module_constructor(self, value: ast.AST, classes: set[str]) -> bool:
        # model = Net().to(device) / nn.Sequential(...) / torchvision.models.resnet18()
        while isinstance(value, ast.Call) and method_of(value) in MODULE_CHAIN_METHODS:
            value = receiver_of(value) or value
            if not isinstance(value, ast.Call):
                return False
        if not isinstance(value, ast.Call):
            return False
        return builds_module(dotted(value.func) or "", classes)

    def _model_names(self) -> set[str]:
        classes = self._module_classes()
        names: set[str] = set()
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Call):
                called = dotted(node.func)
                if called is not None and model_like(called):
                    names.add(called)  # model(x), self.net(x): named like a module, called like one
                if method_of(node) in MODULE_METHODS:
                    name = dotted(receiver_of(node))
                    if name is not None:
                        names.add(name)
            elif isinstance(node, ast.Assign) and self._is_module_constructor(node.value, classes):
                for target in node.targets:
                    name = dotted(target)
                    if name is not None:
                        names.add(name)
        return names

    def grad_off_at(self, node: ast.AST) -> bool:
        """True when ``node`` runs with autograd off: a grad-mode ``with``, decorator, or global."""
        if self.global_no_grad:
            return True
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, (ast.With, ast.AsyncWith)) and any(
                is_grad_mode_call(item.context_expr) for item in ancestor.items
            ):
                return True
            if isinstance(ancestor, Function) and any(
                is_grad_mode_call(d) for d in ancestor.decorator_list
            ):
                return True
        return False

    def under_grad_mode(self, loop: Loop) -> bool:
        """Every model call of the loop runs with autograd off (or the loop calls no model)."""
        calls = self.model_calls(loop)
        return all(self.grad_off_at(c) for c in calls) if calls else self.grad_off_at(loop)

    def model_calls(self, node: ast.AST) -> list[ast.Call]:
        return [
            c for c in ast.walk(node) if isinstance(c, ast.Call) and dotted(c.func) in self.models
        ]

    def calls(self) -> Iterator[ast.Call]:
        """Every call of the cell, in ``ast.walk`` order (walked once: every family asks)."""
        return iter(self._calls)


def _set_test(test: ast.expr) -> bool:
    """``x is not None`` alone: a guard that holds on every step once the value is set (``if
    p.grad is not None:`` in a loop over the parameters, ``if sched is not None:``), no gate
    that skips steps (unseen round 16: a hand-written clip's ``p.grad.norm().item()`` under it
    was read as a gated read, and no per-step read was named)."""
    return (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.IsNot)
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value is None
    )
