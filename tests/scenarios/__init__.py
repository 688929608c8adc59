"""Scenario suite: CPU-runnable training cells, each with one planted bottleneck, and healthy controls."""
