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

Hooks fire only for the thread that runs the cell. While the profiler window records, the hooks
also write named ranges into the trace (markers.py) so the analysis can split steps into phases.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from gpu_notebook import markers
from gpu_notebook.records import StepAnchor, StepClockRecord, StepTiming

_PRIORITY: dict[str, int] = {"none": 0, "backward": 1, "forward": 2, "dataloader": 3, "optimizer": 4}

# Called at each step boundary with the index of the step that starts there.
BoundaryListener = Callable[[int], None]


class StepClock:
    """Global hooks that turn a cell's torch activity into steps; ``install``/``uninstall``.

    ``capacity`` bounds the kept per-step timings: when full, every other one is dropped and
    ``decimation`` doubles, so a 50,000-step cell costs the same memory as a 5,000-step one.
    """

    def __init__(self, t0_ns: int, capacity: int = 4096) -> None:
        self._t0_ns = t0_ns
        self._capacity = capacity
        self._tid = threading.get_ident()
        self._handles: list[Any] = []
        self._patches: list[tuple[Any, str, Any]] = []
        self._installed = False
        self.boundary_listener: BoundaryListener | None = None
        # Called when a higher-priority anchor replaces the current one (steps restart at 0).
        self.anchor_listener: Callable[[str], None] | None = None
        # While True, forward/backward write ranges into the profiler trace.
        self.annotate = False
        self._record_function: Any = None

        self.anchor: StepAnchor = "none"
        self._steps: list[StepTiming] = []
        self._decimation = 1
        self._step_count = 0  # complete steps under the current anchor
        self._counts = {"optimizer": 0, "dataloader": 0, "forward": 0, "backward": 0}

        # Accumulators of the open step (ns).
        self._cur_start_ns: int | None = None
        self._acc = {"dataloader": 0, "forward": 0, "backward": 0, "optimizer": 0}
        self._fwd_calls = 0
        self._bwd_calls = 0
        self._batch_size: int | None = None

        # Forward depth tracking: only top-level module calls are timed.
        self._depth = 0
        self._fwd_start_ns = 0
        self._fwd_range: Any = None
        self._primary_type: type | None = None
        self._opt_start_ns = 0

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
            self._handles.append(optim_mod.register_optimizer_step_pre_hook(self._on_opt_pre))
            self._handles.append(optim_mod.register_optimizer_step_post_hook(self._on_opt_post))
            self._handles.append(module_mod.register_module_forward_pre_hook(self._on_fwd_pre))
            self._handles.append(
                module_mod.register_module_forward_hook(self._on_fwd_post, always_call=True)
            )
            self._patch(dl_mod._BaseDataLoaderIter, "__next__", self._wrap_next)
            self._patch(torch.autograd, "backward", self._wrap_backward)
        except BaseException:
            self.uninstall()
            raise
        self._installed = True

    def uninstall(self) -> None:
        """Remove every hook and restore every patched attribute (idempotent)."""
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        for owner, name, original in reversed(self._patches):
            setattr(owner, name, original)
        self._patches.clear()
        self._close_forward_range()
        self._installed = False

    def _patch(self, owner: Any, name: str, make: Callable[[Any], Any]) -> None:
        original = owner.__dict__[name] if name in getattr(owner, "__dict__", {}) else getattr(owner, name)
        setattr(owner, name, make(original))
        self._patches.append((owner, name, original))

    # ---------------------------------------------------------------- hooks

    def _on_opt_pre(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if threading.get_ident() == self._tid:
            self._opt_start_ns = time.perf_counter_ns()
            self._touch(self._opt_start_ns)

    def _on_opt_post(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if threading.get_ident() != self._tid:
            return
        now = time.perf_counter_ns()
        if self._opt_start_ns:
            self._acc["optimizer"] += now - self._opt_start_ns
            self._opt_start_ns = 0
        self._counts["optimizer"] += 1
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
        if kind is self._primary_type:
            self._counts["forward"] += 1
            if args and hasattr(args[0], "shape") and len(args[0].shape) > 0:
                self._batch_size = int(args[0].shape[0])
            self._event("forward", now, ends_step=False)
        else:
            self._touch(now)

    def _on_fwd_post(self, module: Any, args: Any, output: Any) -> None:
        if threading.get_ident() != self._tid or self._depth == 0:
            return
        self._depth -= 1
        if self._depth == 0:
            self._close_forward_range()
            self._acc["forward"] += time.perf_counter_ns() - self._fwd_start_ns

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
                clock._acc["dataloader"] += time.perf_counter_ns() - start

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
                clock._acc["backward"] += time.perf_counter_ns() - start

        backward.__doc__ = original.__doc__
        backward.__wrapped__ = original  # type: ignore[attr-defined]
        return backward

    # ---------------------------------------------------------------- step accounting

    def _touch(self, now_ns: int) -> None:
        if self._cur_start_ns is None:
            self._cur_start_ns = now_ns

    def _event(self, kind: str, now_ns: int, *, ends_step: bool) -> None:
        """One hook event. Start-kind anchors open a step at ``now``; the optimizer closes one."""
        if _PRIORITY[kind] > _PRIORITY[self.anchor]:
            self._upgrade(kind)  # type: ignore[arg-type]
        if kind != self.anchor:
            self._touch(now_ns)
            return
        if ends_step:
            self._touch(now_ns)
            self._close_step(now_ns)
            self._cur_start_ns = now_ns
        else:
            if self._cur_start_ns is not None and self._has_activity():
                self._close_step(now_ns)
            self._cur_start_ns = now_ns
        listener = self.boundary_listener
        if listener is not None:
            listener(self._step_count)

    def _has_activity(self) -> bool:
        return any(self._acc.values()) or self._fwd_calls > 0 or self._bwd_calls > 0

    def _upgrade(self, kind: StepAnchor) -> None:
        self.anchor = kind
        self._steps.clear()
        self._decimation = 1
        self._step_count = 0
        if self.anchor_listener is not None:
            self.anchor_listener(kind)

    def _close_step(self, end_ns: int) -> None:
        start_ns = self._cur_start_ns if self._cur_start_ns is not None else end_ns
        index = self._step_count
        self._step_count += 1
        if index % self._decimation == 0:
            self._steps.append(
                StepTiming(
                    index=index,
                    start_s=(start_ns - self._t0_ns) / 1e9,
                    duration_s=(end_ns - start_ns) / 1e9,
                    data_s=self._acc["dataloader"] / 1e9,
                    forward_s=self._acc["forward"] / 1e9,
                    backward_s=self._acc["backward"] / 1e9,
                    optimizer_s=self._acc["optimizer"] / 1e9,
                    forward_calls=self._fwd_calls,
                    backward_calls=self._bwd_calls,
                    batch_size=self._batch_size,
                )
            )
            if len(self._steps) >= self._capacity:
                self._decimation *= 2
                self._steps = [s for s in self._steps if s.index % self._decimation == 0]
        for key in self._acc:
            self._acc[key] = 0
        self._fwd_calls = 0
        self._bwd_calls = 0

    # ---------------------------------------------------------------- results

    @property
    def step_count(self) -> int:
        return self._step_count

    def median_step_s(self, last: int = 50) -> float | None:
        """Median of the latest kept steps, for the live view (cheap, no numpy)."""
        recent = sorted(s.duration_s for s in self._steps[-last:])
        if not recent:
            return None
        return recent[len(recent) // 2]

    def record(self) -> StepClockRecord:
        return StepClockRecord(
            anchor=self.anchor,
            step_count=self._step_count,
            steps=tuple(self._steps),
            decimation=self._decimation,
            event_counts=dict(self._counts),
        )
