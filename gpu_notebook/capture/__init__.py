"""Capture: what watches a running cell and hands back a ``Run`` record; it never decides.

The one door to each foreign system (``nvml``: NVML; ``profiler``: torch.profiler, one bounded
window), the background samplers (``sampler``: GPU and machine load; ``stacks``: Python stacks),
the step clock (``stepclock``: global torch hooks -> steps; ``children``: steps in child
processes), what the cell imports and starts (``imports``, ``streams``, ``threads``;
``unseen``: our hooks out of sight of torch's compilers), where the run happens
(``environment``, ``ranks``), and ``session``, which starts them all and always cleans up. It
stands on ``records`` alone (pyproject's import-linter contracts)."""
