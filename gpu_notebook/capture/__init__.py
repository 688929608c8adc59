"""Capture: what watches a running cell (NVML door, sampler, step clock, profiler window)."""
