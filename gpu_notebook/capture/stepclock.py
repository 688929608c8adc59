"""Find training steps in an unmodified cell through global torch hooks, and time their phases.

No ``prof.step()`` and no change to the user's code: four kinds of events are watched, and the
highest-priority kind seen so far ends a step (the *anchor*):

1. ``optimizer`` — a global optimizer step post hook (any ``torch.optim.Optimizer``): one step per
   optimizer step, so gradient accumulation (several forward/backward per step) and closure
   optimizers (LBFGS calls forward/backward many times inside ``step``) count right;
2. ``dataloader`` — ``DataLoader`` iterator ``__next__``: inference loops, manual SGD with a loader;
3. ``forward`` — the first top-level module the cell calls (the loss module is top level too, but
   it is not the first): manual loops over pre-loaded tensors;
4. ``backward`` — ``torch.autograd.backward``: models written without ``nn.Module``.

When a higher kind first appears (the optimizer shows up at the end of the first iteration) the
anchor is upgraded and the steps counted so far are dropped: they were warm-up anyway.

Two modes. *Timing* (the first steps, through the profiler window): every hook is on and each
step's data/forward/backward/optimizer time is measured; global module hooks put every module
call on torch's slow path, which costs ~10-20 us a step on tiny models. *Lean* (``lean()``,
after the window): only the hook that ends a step stays, so a long cell pays almost nothing.

Hooks fire only for the thread that runs the cell. While the profiler window records, the hooks
also write named ranges into the trace (markers.py) so the analysis can split steps into phases.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from gpu_notebook import markers
from gpu_notebook.records import StepAnchor, StepClockRecord, StepTiming

_PRIORITY: dict[str, int] = {"none": 0, "backward": 1, "forward": 2, "dataloader": 3, "optimizer": 4}

# Called at each step boundary with the index of the step that starts there.
BoundaryListener = Callable[[int], None]

# One kept step: (index, start_ns, end_ns, data_ns, forward_ns, backward_ns, optimizer_ns,
# forward_calls, backward_calls, batch_size, timed). Tuples, not records: this runs every step.
_Row = tuple[int, int, int, int, int, int, int, int, int, "int | None", bool]


class StepClock:
    """Global hooks that turn a cell's torch activity into steps; ``install``/``uninstall``.

    ``capacity`` bounds the kept per-step rows: when full, every other one is dropped and
    ``decimation`` doubles, so a 50,000-step cell costs the same memory as a 5,000-step one.
    """

    def __init__(self, t0_ns: int, capacity: int = 4096) -> None:
        self._t0_ns = t0_ns
        self._capacity = capacity
        self._tid = threading.get_ident()
        self._handles: dict[str, Any] = {}
        self._patches: dict[str, tuple[Any, str, Any]] = {}
        self._installed = False
        self._lean = False
        self.boundary_listener: BoundaryListener | None = None
        # Called when a higher-priority anchor replaces the current one (steps restart at 0).
        self.anchor_listener: Callable[[str], None] | None = None
        # While True, forward/backward write ranges into the profiler trace.
        self.annotate = False
        self._record_function: Any = None

        self.anchor: StepAnchor = "none"
        self._rows: list[_Row] = []
        self._decimation = 1
        self._step_count = 0  # complete steps under the current anchor
        self._counts = {"optimizer": 0, "dataloader": 0, "forward": 0, "backward": 0}

        # Accumulators of the open step (ns).
        self._cur_start_ns: int | None = None
        self._data_ns = 0
        self._fwd_ns = 0
        self._bwd_ns = 0
        self._opt_ns = 0
        self._fwd_calls = 0
        self._bwd_calls = 0
        self._batch_size: int | None = None

        # Forward depth tracking: only top-level module calls are timed.
        self._depth = 0
        self._fwd_start_ns = 0
        self._fwd_range: Any = None
        self._primary_type: type | None = None
        self._primary_ref: weakref.ReferenceType[Any] | None = None
        self._opt_start_ns = 0
        self._grad_bytes: int | None = None

    # ---------------------------------------------------------------- install / uninstall

    def install(self) -> None:
        """Register the global hooks and patches; ``uninstall`` removes every one of them."""
        import torch
        import torch.nn.modules.module as module_mod
        import torch.optim.optimizer as optim_mod
        from torch.utils.data import dataloader as dl_mod

        if self._installed:
            return
        self._record_function = torch.autograd.profiler.record_function
        try:
            h = self._handles
            h["opt_pre"] = optim_mod.register_optimizer_step_pre_hook(self._on_opt_pre)
            h["opt_post"] = optim_mod.register_optimizer_step_post_hook(self._on_opt_post)
            h["fwd_pre"] = module_mod.register_module_forward_pre_hook(self._on_fwd_pre)
            h["fwd_post"] = module_mod.register_module_forward_hook(self._on_fwd_post, always_call=True)
            self._patch("dataloader", dl_mod._BaseDataLoaderIter, "__next__", self._wrap_next)
            self._patch("backward", torch.autograd, "backward", self._wrap_backward)
        except BaseException:
            self.uninstall()
            raise
        self._installed = True

    def uninstall(self) -> None:
        """Remove every hook and restore every patched attribute (idempotent)."""
        for handle in self._handles.values():
            handle.remove()
        self._handles.clear()
        for owner, name, original in reversed(list(self._patches.values())):
            setattr(owner, name, original)
        self._patches.clear()
        self._close_forward_range()
        self._installed = False

    def lean(self) -> None:
        """Keep only the hook that ends a step; phases are no longer timed from here on.

        Safe to call from inside a hook: torch copies module hook dicts before iterating them,
        and the optimizer post hook (iterated lazily) is kept when it is the anchor.
        """
        if self._lean or not self._installed:
            return
        self._lean = True
        self.annotate = False
        self._close_forward_range()
        keep_opt_post = self.anchor == "optimizer"
        for name in ("opt_pre", "fwd_pre", "fwd_post") + (() if keep_opt_post else ("opt_post",)):
            handle = self._handles.pop(name, None)
            if handle is not None:
                handle.remove()
        self._depth = 0
        for name in ("dataloader", "backward"):
            if self.anchor != name and name in self._patches:
                owner, attr, original = self._patches.pop(name)
                setattr(owner, attr, original)
        primary = self._primary_ref() if self._primary_ref is not None else None
        if self.anchor == "forward" and primary is not None:
            self._handles["primary_pre"] = primary.register_forward_pre_hook(self._on_primary_pre)

    def _patch(self, key: str, owner: Any, name: str, make: Callable[[Any], Any]) -> None:
        original = owner.__dict__[name] if name in getattr(owner, "__dict__", {}) else getattr(owner, name)
        setattr(owner, name, make(original))
        self._patches[key] = (owner, name, original)

    # ---------------------------------------------------------------- hooks

    def _on_opt_pre(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if threading.get_ident() == self._tid:
            self._opt_start_ns = now = time.perf_counter_ns()
            if self._cur_start_ns is None:
                self._cur_start_ns = now

    def _on_opt_post(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if threading.get_ident() != self._tid:
            return
        now = time.perf_counter_ns()
        if self._opt_start_ns:
            self._opt_ns += now - self._opt_start_ns
            self._opt_start_ns = 0
        self._counts["optimizer"] += 1
        if self._grad_bytes is None:
            self._grad_bytes = _trainable_bytes(p for g in optimizer.param_groups for p in g["params"])
        self._event("optimizer", now, ends_step=True)

    def _on_fwd_pre(self, module: Any, args: Any) -> None:
        if threading.get_ident() != self._tid:
            return
        self._depth += 1
        if self._depth != 1:
            return
        kind = type(module)
        if self.annotate:  # first, so the range covers as much of the forward as it can
            self._fwd_range = self._record_function(markers.FORWARD_PREFIX + kind.__name__)
            self._fwd_range.__enter__()
        now = time.perf_counter_ns()
        self._fwd_start_ns = now
        self._fwd_calls += 1
        if self._primary_type is None:
            self._primary_type = kind
            self._primary_ref = weakref.ref(module)
        if kind is self._primary_type:
            self._counts["forward"] += 1
            if args:
                shape = getattr(args[0], "shape", None)
                if shape:
                    self._batch_size = int(shape[0])
            self._event("forward", now, ends_step=False)
        elif self._cur_start_ns is None:
            self._cur_start_ns = now

    def _on_fwd_post(self, module: Any, args: Any, output: Any) -> None:
        if threading.get_ident() != self._tid or self._depth == 0:
            return
        self._depth -= 1
        if self._depth == 0:
            self._close_forward_range()
            self._fwd_ns += time.perf_counter_ns() - self._fwd_start_ns

    def _on_primary_pre(self, module: Any, args: Any) -> None:
        """Lean mode, forward anchor: count the primary module's calls, nothing else."""
        if threading.get_ident() == self._tid:
            self._counts["forward"] += 1
            self._event("forward", time.perf_counter_ns(), ends_step=False)

    def _close_forward_range(self) -> None:
        if self._fwd_range is not None:
            rng, self._fwd_range = self._fwd_range, None
            rng.__exit__(None, None, None)

    def _wrap_next(self, original: Callable[..., Any]) -> Callable[..., Any]:
        clock = self

        def __next__(it: Any) -> Any:  # noqa: N807 - replaces the iterator method
            if threading.get_ident() != clock._tid:
                return original(it)
            start = time.perf_counter_ns()
            clock._counts["dataloader"] += 1
            clock._event("dataloader", start, ends_step=False)
            try:
                return original(it)
            finally:
                clock._data_ns += time.perf_counter_ns() - start

        return __next__

    def _wrap_backward(self, original: Callable[..., Any]) -> Callable[..., Any]:
        clock = self

        def backward(*args: Any, **kwargs: Any) -> Any:
            if threading.get_ident() != clock._tid:
                return original(*args, **kwargs)
            start = time.perf_counter_ns()
            clock._counts["backward"] += 1
            clock._bwd_calls += 1
            clock._event("backward", start, ends_step=False)
            rng = None
            if clock.annotate:
                rng = clock._record_function(markers.BACKWARD)
                rng.__enter__()
            try:
                return original(*args, **kwargs)
            finally:
                if rng is not None:
                    rng.__exit__(None, None, None)
                clock._bwd_ns += time.perf_counter_ns() - start

        backward.__doc__ = original.__doc__
        backward.__wrapped__ = original  # type: ignore[attr-defined]
        return backward

    # ---------------------------------------------------------------- step accounting

    def _event(self, kind: str, now_ns: int, *, ends_step: bool) -> None:
        """One hook event. Start-kind anchors open a step at ``now``; the optimizer closes one."""
        if kind != self.anchor:
            if _PRIORITY[kind] <= _PRIORITY[self.anchor]:
                if self._cur_start_ns is None:
                    self._cur_start_ns = now_ns
                return
            self._upgrade(kind)  # type: ignore[arg-type]
        if ends_step:
            if self._cur_start_ns is None:
                self._cur_start_ns = now_ns
            self._close_step(now_ns)
        elif self._cur_start_ns is not None and (self._fwd_calls or self._bwd_calls or self._data_ns or self._opt_ns):
            self._close_step(now_ns)
        self._cur_start_ns = now_ns
        listener = self.boundary_listener
        if listener is not None:
            listener(self._step_count)

    def _upgrade(self, kind: StepAnchor) -> None:
        self.anchor = kind
        self._rows.clear()
        self._decimation = 1
        self._step_count = 0
        if self.anchor_listener is not None:
            self.anchor_listener(kind)

    def _close_step(self, end_ns: int) -> None:
        index = self._step_count
        self._step_count = index + 1
        if index % self._decimation == 0:
            start_ns = self._cur_start_ns if self._cur_start_ns is not None else end_ns
            self._rows.append(
                (index, start_ns, end_ns, self._data_ns, self._fwd_ns, self._bwd_ns, self._opt_ns,
                 self._fwd_calls, self._bwd_calls, self._batch_size, not self._lean)
            )
            if len(self._rows) >= self._capacity:
                self._decimation *= 2
                self._rows = [r for r in self._rows if r[0] % self._decimation == 0]
        self._data_ns = self._fwd_ns = self._bwd_ns = self._opt_ns = 0
        self._fwd_calls = self._bwd_calls = 0

    # ---------------------------------------------------------------- results

    @property
    def step_count(self) -> int:
        return self._step_count

    @property
    def is_lean(self) -> bool:
        return self._lean

    def median_step_s(self, last: int = 50) -> float | None:
        """Median of the latest kept steps, for the live view (cheap, no numpy)."""
        recent = sorted(r[2] - r[1] for r in self._rows[-last:])
        if not recent:
            return None
        return recent[len(recent) // 2] / 1e9

    def record(self) -> StepClockRecord:
        t0 = self._t0_ns
        steps = tuple(
            StepTiming(
                index=r[0],
                start_s=(r[1] - t0) / 1e9,
                duration_s=(r[2] - r[1]) / 1e9,
                data_s=r[3] / 1e9,
                forward_s=r[4] / 1e9,
                backward_s=r[5] / 1e9,
                optimizer_s=r[6] / 1e9,
                forward_calls=r[7],
                backward_calls=r[8],
                batch_size=r[9],
                timed=r[10],
            )
            for r in self._rows
        )
        grad_bytes = self._grad_bytes
        primary = self._primary_ref() if self._primary_ref is not None else None
        if grad_bytes is None and primary is not None:
            grad_bytes = _trainable_bytes(primary.parameters())
        return StepClockRecord(
            anchor=self.anchor,
            step_count=self._step_count,
            steps=steps,
            decimation=self._decimation,
            event_counts=dict(self._counts),
            grad_bytes=grad_bytes or None,
        )


def _trainable_bytes(params: Any) -> int:
    """Bytes of the parameters that get gradients: what data parallelism all-reduces a step."""
    seen: set[int] = set()
    total = 0
    for p in params:
        if id(p) in seen or not getattr(p, "requires_grad", False):
            continue
        seen.add(id(p))
        total += p.numel() * p.element_size()
    return total
