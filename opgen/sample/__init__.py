"""Sampling candidates: the graph sampler, the renderer to KernelBench-format code, and FLOPs/bytes analysis."""
