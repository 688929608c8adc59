"""Collects what a user could observe after a program ran, as a flat JSON-able dict.

Runs inside the program's own process (a notebook's probe cell, or the last lines of a script),
identically in the plain and the measured run; the harness compares the two dicts field by field.
It only reads state: it never imports torch (or torch._dynamo) when the program did not, so that
asking does not change the answer.
"""

from __future__ import annotations

import copy
import hashlib
import io
import json
import os
import pickle
import random
import re
import signal
import sys
import tempfile
import threading
import warnings
from typing import Any

PROBE_MARK = "@@DIFF-PROBE@@"
# Names whose files in the temp folder are ours (the capture's traces, exports, fixes).
_OUR_TEMP_NAMES = re.compile(r"(?i)gpu_?check|gpu_?notebook|kineto|pt\.trace")
# IPython's own names in the user namespace (`_i3`, `_5`, `In`, `Out`...): shifted by one cell in
# the measured run (its `%load_ext` cell), so they say nothing about the program.
_IPYTHON_NAMES = {"In", "Out", "get_ipython", "exit", "quit", "open"}
# Variables whose VALUE is per-process noise (their presence still counts): inductor publishes
# an address there for its subprocesses.
_ENV_VALUE_NOISE = {"_TORCHINDUCTOR_PYOBJECT_TENSOR_DATA_PTR"}


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def _name(fn: Any) -> str | None:
    """A process-independent name for a callable: module.qualname (None stays None)."""
    if fn is None:
        return None
    if isinstance(fn, (int, signal.Handlers)):
        return repr(fn)
    target = getattr(fn, "__func__", fn)
    mod = getattr(target, "__module__", None) or type(target).__module__
    qual = getattr(target, "__qualname__", None) or type(target).__qualname__
    return f"{mod}.{qual}"


def _try(fn: Any) -> Any:
    try:
        return fn()
    except BaseException as exc:  # noqa: BLE001 - a failure is an observable too (KeyboardInterrupt included)
        return f"raises {type(exc).__name__}: {str(exc)[:160]}"


def _tensor_sha(t: Any) -> str:
    import torch

    t = t.detach()
    if t.is_nested:
        return "nested:" + _sha(b"".join(bytes.fromhex(_tensor_sha(x)) for x in t.unbind()))
    t = t.cpu().contiguous()
    raw = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
    return f"{str(t.dtype)[6:]}{list(t.shape)}:{_sha(raw)}"


def _hooks_of(obj: Any) -> dict[str, list[str]]:
    """Every `*_hooks*` dict on an object (modules, optimizers), as the hooks' names."""
    out = {}
    for key, value in sorted(vars(obj).items()):
        if "hook" in key and isinstance(value, dict) and value:
            out[key] = [_name(h[0] if isinstance(h, tuple) else h) for h in value.values()]
    return out


_STORAGE_KEY = re.compile(rb"X(....)(\d{9,20})", re.S)


def _canonical_storage_keys(data: bytes) -> bytes:
    """Tensors pickle their storages under the storage's address (a per-process number written
    as a pickled string: ``X``, 4-byte length, digits); number them in order of appearance
    instead, keeping each one's length so the enclosing lengths stay valid."""
    seen: dict[bytes, int] = {}

    def key(m: re.Match[bytes]) -> bytes:
        digits = m.group(2)
        if int.from_bytes(m.group(1), "little") != len(digits):
            return m.group(0)
        index = seen.setdefault(digits, len(seen))
        return b"X" + m.group(1) + str(index).zfill(len(digits)).encode()

    return _STORAGE_KEY.sub(key, data)


def _pickles(obj: Any) -> dict[str, Any]:
    import torch

    def dumps() -> str:
        return _sha(_canonical_storage_keys(pickle.dumps(obj)))

    def save() -> str:
        buf = io.BytesIO()
        torch.save(obj, buf)
        return _sha(buf.getvalue())

    def deep() -> str:
        clone = copy.deepcopy(obj)
        return type(clone).__name__

    return {"pickle": _try(dumps), "torch_save": _try(save), "deepcopy": _try(deep)}


def _module(m: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"training": m.training}
    out["tensors"] = {k: _tensor_sha(v) for k, v in m.state_dict(keep_vars=True).items()}
    out["grads"] = {
        k: (None if p.grad is None else _tensor_sha(p.grad)) for k, p in m.named_parameters()
    }
    subs = {}
    for name, sub in m.named_modules(remove_duplicate=False):
        entry: dict[str, Any] = {"attrs": sorted(vars(sub))}
        hooks = _hooks_of(sub)
        if hooks:
            entry["hooks"] = hooks
        forward = vars(sub).get("forward")
        if forward is not None:
            entry["forward"] = _name(forward)
        subs[name or "."] = entry
    out["modules"] = subs
    out.update(_pickles(m))
    return out


def _optimizer(o: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"attrs": sorted(vars(o)), "hooks": _hooks_of(o)}
    state = o.state_dict()
    out["state"] = {
        str(pid): {k: (_tensor_sha(v) if hasattr(v, "detach") else repr(v)) for k, v in s.items()}
        for pid, s in state["state"].items()
    }
    out["param_groups"] = repr(
        [{k: v for k, v in g.items() if k != "params"} for g in state["param_groups"]]
    )
    out["step"] = _name(vars(o).get("step", type(o).step))
    out.update(_pickles(o))
    return out


def _plain_value(v: Any, depth: int = 0) -> Any:
    """Simple values (numbers, strings, short containers of them) as JSON, else a marker."""
    if v is None or isinstance(v, (bool, int, str)):
        return v if not isinstance(v, str) else v[:400]
    if isinstance(v, float):
        return repr(v)
    if depth < 3 and isinstance(v, (list, tuple)) and len(v) <= 200:
        items = [_plain_value(x, depth + 1) for x in v]
        return items if all(x is not _SKIP for x in items) else _SKIP
    if depth < 3 and isinstance(v, dict) and len(v) <= 200 and all(isinstance(k, str) for k in v):
        items = {k: _plain_value(x, depth + 1) for k, x in v.items()}
        return items if all(x is not _SKIP for x in items.values()) else _SKIP
    return _SKIP


_SKIP = object()


def _torch_globals() -> dict[str, Any]:
    import torch
    import torch.nn.modules.module as mm
    import torch.utils.data.dataloader as dl

    out: dict[str, Any] = {}
    for key in sorted(vars(mm)):
        if key.startswith("_global_") and isinstance(getattr(mm, key), dict):
            out[f"module.{key}"] = [_name(h) for h in getattr(mm, key).values()]
    import torch.optim.optimizer as oo

    for key in sorted(vars(oo)):
        if key.startswith("_global_") and isinstance(getattr(oo, key), dict):
            out[f"optim.{key}"] = [_name(h) for h in getattr(oo, key).values()]
    out["autograd.backward"] = _name(torch.autograd.backward)
    out["Tensor.backward"] = _name(torch.Tensor.backward)
    out["autograd.grad"] = _name(torch.autograd.grad)
    out["Module.__call__"] = _name(torch.nn.Module.__call__)
    out["Module._call_impl"] = _name(torch.nn.Module._call_impl)
    out["Optimizer.zero_grad"] = _name(torch.optim.Optimizer.zero_grad)
    for cls in (
        dl._BaseDataLoaderIter,
        dl._SingleProcessDataLoaderIter,
        dl._MultiProcessingDataLoaderIter,
    ):
        for meth in ("__next__", "_next_data", "__iter__"):
            fn = vars(cls).get(meth)
            if fn is not None:
                out[f"{cls.__name__}.{meth}"] = _name(fn)
    out["DataLoader.__iter__"] = _name(torch.utils.data.DataLoader.__iter__)
    out["rng.torch"] = _sha(torch.get_rng_state().numpy().tobytes())
    out["rng.torch_seed"] = torch.initial_seed()
    out["num_threads"] = torch.get_num_threads()
    out["num_interop_threads"] = torch.get_num_interop_threads()
    out["grad_enabled"] = torch.is_grad_enabled()
    out["default_dtype"] = str(torch.get_default_dtype())
    out["deterministic"] = torch.are_deterministic_algorithms_enabled()
    out["profiler_enabled"] = _try(lambda: torch.autograd.profiler._is_profiler_enabled)
    out["kineto_available"] = _try(torch.autograd.kineto_available)
    out["torch_function_modes"] = _try(torch._C._len_torch_function_stack)
    out["dispatch_modes"] = _try(torch._C._len_torch_dispatch_stack)
    if "torch._dynamo" in sys.modules:
        counters = sys.modules["torch._dynamo"].utils.counters
        # Cache hits/misses depend on what an earlier run left in the (shared) inductor cache.
        compiled = {
            k: {str(kk): vv for kk, vv in sorted(v.items()) if "cache" not in str(kk)}
            for k, v in sorted(counters.items())
            if v and "cache" not in k
        }
        # torch.profiler imports torch._dynamo itself when it starts (torch's behaviour, not
        # ours): dynamo merely loaded, with nothing compiled, reads as "never imported".
        if compiled:
            out["dynamo.counters"] = compiled
    return out


def _files(folder: str, pattern: re.Pattern[str] | None = None) -> dict[str, str]:
    out = {}
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        rel_root = os.path.relpath(root, folder)
        for f in sorted(files) + [d + "/" for d in dirs]:
            rel = os.path.normpath(os.path.join(rel_root, f)) + ("/" if f.endswith("/") else "")
            if pattern is not None and not pattern.search(rel):
                continue
            path = os.path.join(root, f)
            if f.endswith("/"):
                out[rel] = "dir"
            else:
                try:
                    with open(path, "rb") as fh:
                        out[rel] = _sha(fh.read())
                except OSError as exc:
                    out[rel] = f"unreadable {exc.errno}"
    return out


def collect(ns: dict[str, Any]) -> dict[str, Any]:
    """Everything observable in this process, ``ns`` being the program's global namespace."""
    obs: dict[str, Any] = {}
    names = sorted(k for k in ns if not k.startswith("_") and k not in _IPYTHON_NAMES)
    obs["globals"] = names
    torch = sys.modules.get("torch")
    obs["torch_imported"] = torch is not None
    for name in names:
        value = ns[name]
        plain = _plain_value(value)
        if plain is not _SKIP:
            obs[f"var.{name}"] = plain
            continue
        if torch is None:
            continue
        from torch.utils.data import DataLoader, Dataset, IterableDataset

        if isinstance(value, torch.nn.Module):
            for k, v in _module(value).items():
                obs[f"module.{name}.{k}"] = v
        elif isinstance(value, torch.optim.Optimizer):
            for k, v in _optimizer(value).items():
                obs[f"optim.{name}.{k}"] = v
        elif isinstance(value, DataLoader):
            obs[f"loader.{name}.attrs"] = sorted(vars(value))
            obs[f"loader.{name}.iter"] = _name(type(value).__iter__)
            for k, v in _pickles(value).items():
                obs[f"loader.{name}.{k}"] = v
        elif isinstance(value, (Dataset, IterableDataset)):
            obs[f"dataset.{name}.attrs"] = sorted(vars(value))
            for k, v in _pickles(value).items():
                obs[f"dataset.{name}.{k}"] = v
        elif isinstance(value, torch.Tensor):
            obs[f"tensor.{name}"] = _tensor_sha(value)
        elif hasattr(type(value), "__next__") and type(value).__module__.startswith("torch"):
            # A DataLoader iterator the program kept: who answers next(), and what it carries.
            obs[f"iter.{name}.next"] = _name(vars(value).get("__next__", type(value).__next__))
            obs[f"iter.{name}.attrs"] = sorted(vars(value))
    if torch is not None:
        for k, v in _torch_globals().items():
            obs[f"torch.{k}"] = v
    obs["rng.random"] = _sha(pickle.dumps(random.getstate()))
    np = sys.modules.get("numpy")
    if np is not None:
        obs["rng.numpy"] = _sha(pickle.dumps(np.random.get_state()))
    for sig in ("SIGALRM", "SIGPROF", "SIGVTALRM", "SIGINT", "SIGTERM", "SIGCHLD", "SIGUSR1"):
        obs[f"signal.{sig}"] = _name(signal.getsignal(getattr(signal, sig)))
    for timer in ("ITIMER_REAL", "ITIMER_PROF", "ITIMER_VIRTUAL"):
        remaining_s, interval_s = signal.getitimer(getattr(signal, timer))
        obs[f"itimer.{timer}"] = {"armed": remaining_s > 0, "interval_s": interval_s}
    obs["sys.switchinterval"] = sys.getswitchinterval()
    obs["sys.trace"] = _name(sys.gettrace())
    obs["sys.profile"] = _name(sys.getprofile())
    obs["threading.trace"] = _name(getattr(threading, "_trace_hook", None))
    obs["threading.profile"] = _name(getattr(threading, "_profile_hook", None))
    obs["sys.excepthook"] = _name(sys.excepthook)
    obs["warnings.formatwarning"] = _name(warnings.formatwarning)
    obs["warnings.showwarning"] = _name(warnings.showwarning)
    obs["threading.excepthook"] = _name(threading.excepthook)
    obs["sys.path"] = list(sys.path)
    obs["sys.recursionlimit"] = sys.getrecursionlimit()
    import gc

    obs["gc.enabled"] = gc.isenabled()
    obs["gc.callbacks"] = [_name(c) for c in gc.callbacks]
    obs["warnings.filters"] = [
        f"{action} {getattr(msg, 'pattern', msg)!r} {getattr(cat, '__name__', cat)} {getattr(mod, 'pattern', mod)!r}"
        for action, msg, cat, mod, _line in warnings.filters
    ]
    # pyzmq starts its zero-copy garbage collector thread the first time the kernel sends a
    # large message (any big output does it, e.g. a plot): the kernel's thread, not the program's.
    obs["threads"] = sorted(
        f"{t.name} daemon={t.daemon}"
        for t in threading.enumerate()
        if t.is_alive() and type(t).__module__.split(".")[0] != "zmq"
    )
    obs["env"] = {
        k: ("<per-process>" if k in _ENV_VALUE_NOISE else v) for k, v in sorted(os.environ.items())
    }
    obs["cwd"] = os.getcwd()
    obs["cwd.files"] = _files(os.getcwd())
    tmp = tempfile.gettempdir()
    obs["tmp.ours"] = sorted(_files(tmp, _OUR_TEMP_NAMES))
    obs["mp.start_method"] = _try(
        lambda: (
            sys.modules["multiprocessing"].get_start_method(allow_none=True)
            if "multiprocessing" in sys.modules
            else None
        )
    )
    return obs


def report(ns: dict[str, Any]) -> None:
    """Print the observables on one marked line (the probe cell of a notebook program)."""
    print(PROBE_MARK + json.dumps(collect(ns), sort_keys=True, default=repr))


def dump(ns: dict[str, Any]) -> None:
    """Write the observables to $DIFF_PROBE_PATH (the last lines of a script program)."""
    path = os.environ.get("DIFF_PROBE_PATH")
    if not path:
        return
    with open(path, "w") as fh:
        json.dump(collect(ns), fh, sort_keys=True, default=repr)
