"""The cell's own functions a training step runs through its calls, found from the step loop.

A step loop calls the model (``model(x, lengths)``), which runs its class's ``forward``; that
forward calls helpers (``self.encode(x)``), submodules (``self.block(h)``) and functions of the
cell by name. Each of these runs every step, so a host read inside one (``lengths.cpu()`` for
``pack_padded_sequence``, ``mask.sum().item()``) waits for the device every step on a GPU as a
read written in the loop does (unseen round 13: ``Net.forward``'s read was unseen). Resolved by
names alone: an instance is of a class where the cell assigns it from that class's constructor
(``model = Net().to(device)``, ``self.block = Block()`` in a method of the same class).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable

from gpu_notebook.cell.names import dotted, has_backward, method_of, receiver_of
from gpu_notebook.cell.words import CONSTRUCTORS, MODULE_CHAIN_METHODS, last

Function = ast.FunctionDef | ast.AsyncFunctionDef


class StepCalls:
    """``reached``: id of a function -> (the step loop that runs it every step, its name as said:
    ``Net.forward``); ``sites``: id of a function -> the calls that reach it (in the step loop
    or in a function it reaches), in the order found. ``body_of``: what a step loop runs on
    each pass (its body, and the element of a ``map`` it iterates: ``CellTree.step_body``)."""

    def __init__(
        self,
        module: ast.Module,
        step_loops: Iterable[ast.For | ast.AsyncFor | ast.While],
        class_of: Callable[[ast.AST], str | None],
        gated: Callable[[ast.AST, ast.For | ast.AsyncFor | ast.While], bool],
        body_of: Callable[[ast.For | ast.AsyncFor | ast.While], list[ast.stmt]],
    ) -> None:
        self.reached: dict[int, tuple[ast.For | ast.AsyncFor | ast.While, str]] = {}
        self.sites: dict[int, list[ast.Call]] = {}
        self._functions = {n.name: n for n in module.body if isinstance(n, Function)}
        classes = [c for c in ast.walk(module) if isinstance(c, ast.ClassDef)]
        self._methods = {
            (c.name, n.name): n for c in classes for n in c.body if isinstance(n, Function)
        }
        self._bases = {c.name: [last(dotted(b) or "") for b in c.bases] for c in classes}
        # (the class whose method assigns a ``self.`` name, else None; the dotted name) -> the
        # class of the cell the value is made from.
        self._made: dict[tuple[str | None, str], str] = {}
        for node in ast.walk(module):
            if not isinstance(node, ast.Assign):
                continue
            made = self._constructed(node.value)
            for target in node.targets if made is not None else []:
                name = dotted(target)
                if made is not None and name is not None:
                    owner = class_of(node) if name.startswith("self.") else None
                    self._made[(owner, name)] = made
        for loop in step_loops:
            owner = class_of(loop)
            # A call under an ``if`` of the loop (``if step % 25 == 0: evaluate(model)``) runs
            # some steps only: what it reaches is no step's work (unseen round 15: a read in
            # an every-25-steps evaluation said "every step" and "needed").
            todo = [
                (c, owner)
                for s in body_of(loop)
                for c in ast.walk(s)
                if isinstance(c, ast.Call) and not gated(c, loop)
            ]
            while todo:
                call, holder = todo.pop(0)
                fn = self._resolve(call, holder)
                if fn is None or fn.name in CONSTRUCTORS or has_backward(fn):
                    continue  # a step function (it runs a backward) is the tree's own
                self.sites.setdefault(id(fn), []).append(call)
                if id(fn) in self.reached:
                    continue
                cls = class_of(fn)
                self.reached[id(fn)] = (loop, f"{cls}.{fn.name}" if cls else fn.name)
                todo.extend((c, cls) for c in ast.walk(fn) if isinstance(c, ast.Call))

    def _constructed(self, value: ast.AST) -> str | None:
        """The cell's class ``value`` makes an instance of (``Net(...).to(device)``), else None."""
        while isinstance(value, ast.Call) and method_of(value) in MODULE_CHAIN_METHODS:
            value = receiver_of(value)
        if not isinstance(value, ast.Call):
            return None
        name = last(dotted(value.func) or "")
        return name if name in self._bases else None

    def _method(self, cls: str, name: str, seen: frozenset[str] = frozenset()) -> Function | None:
        """``cls``'s method ``name``, its own or one of its cell bases'."""
        if (cls, name) in self._methods:
            return self._methods[(cls, name)]
        for base in self._bases.get(cls, []):
            if base in self._bases and base not in seen:
                found = self._method(base, name, seen | {cls})
                if found is not None:
                    return found
        return None

    def _resolve(self, call: ast.Call, holder: str | None) -> Function | None:
        """The cell's function ``call`` runs: a function by name, a method of ``self``, or the
        ``forward`` of an instance of a cell class (a module called like a function)."""
        if isinstance(call.func, ast.Name) and call.func.id in self._functions:
            return self._functions[call.func.id]
        name = dotted(call.func)
        if name is None:
            return None
        if name.startswith("self.") and holder is not None:
            attr = name.removeprefix("self.")
            if "." not in attr and (own := self._method(holder, attr)) is not None:
                return own
        made = self._made.get((holder if name.startswith("self.") else None, name))
        if made is None and name.endswith(".forward"):
            base = name.removesuffix(".forward")
            made = self._made.get((holder if base.startswith("self.") else None, base))
        return self._method(made, "forward") if made is not None else None
