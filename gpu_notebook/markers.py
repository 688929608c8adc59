"""Names of the ranges gpu_notebook writes into a torch.profiler trace, and the names torch writes.

The step clock writes these while the profiler window records; the trace analysis reads them.
Keeping both sides on one list is what lets the analysis split steps it did not see happen.
"""

from __future__ import annotations

# Written by gpu_notebook (record_function ranges, category "user_annotation" in Kineto JSON).
STEP_MARK_PREFIX = "gpucheck::step#"  # zero-length mark at each step boundary: "gpucheck::step#12"
FORWARD_PREFIX = "gpucheck::forward#"  # a top-level module forward: "gpucheck::forward#Net"
BACKWARD = "gpucheck::backward"  # one torch.autograd.backward call
# One call of the closure an optimizer's step(closure) was given (LBFGS, Lightning): inside an
# ``Optimizer.step`` range, the model's and the framework's time, not the update's.
CLOSURE = "gpucheck::closure"

# Written by torch itself.
PROFILER_STEP_PREFIX = "ProfilerStep#"  # prof.step() ranges in traces recorded elsewhere
DATALOADER_PREFIX = "enumerate(DataLoader)#"  # DataLoader iterator __next__
OPTIMIZER_STEP_PREFIX = "Optimizer.step#"
OPTIMIZER_ZERO_GRAD_PREFIX = "Optimizer.zero_grad#"
AUTOGRAD_PREFIX = "autograd::engine::evaluate_function"
# A read of a device value into Python (.item(), .tolist(), int(t)): its operators.
VALUE_READ_OPS = ("aten::_local_scalar_dense", "aten::item")
SYNC_OPS = frozenset(
    {
        *VALUE_READ_OPS,
        "cudaStreamSynchronize",
        "cudaDeviceSynchronize",
        "cudaEventSynchronize",
        "hipStreamSynchronize",
        "hipDeviceSynchronize",
        "hipEventSynchronize",
        # the driver API's (Triton, CUDA-graph runtimes and others call it directly)
        "cuStreamSynchronize",
        "cuCtxSynchronize",
        "cuEventSynchronize",
    }
)
# Host side of host<->device copies: runtime (cudaMemcpy*, hipMemcpy*) and driver (cuMemcpy*).
COPY_RUNTIME_PREFIXES = ("cudaMemcpy", "hipMemcpy", "cuMemcpy")
