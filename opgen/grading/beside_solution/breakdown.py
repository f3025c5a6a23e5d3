"""Where a model's time goes, kernel by kernel: a few calls under the PyTorch profiler, its events summed by name (on
CUDA the kernels' device time; on the CPU each operator's own host time, and the time outside any operator, which is
where a C++ extension's own code runs)."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable

import torch
from torch.profiler import ProfilerActivity, profile

CALLS = 5   # profiled calls, after one untimed warm-up
TOP = 12    # rows kept, the costliest first


def kernel_breakdown(fn: Callable, inputs: list, device: str, calls: int = CALLS, top: int = TOP) -> dict:
    """{"unit", "ms_per_call", "rows": [{"name", "calls", "ms", "share"}], "outside_ms"}: per call of `fn`."""
    cuda = device == "cuda"
    activities = [ProfilerActivity.CPU, ProfilerActivity.CUDA] if cuda else [ProfilerActivity.CPU]
    with torch.no_grad():
        fn(*inputs)
        _synchronize(cuda)
        with profile(activities=activities) as profiler:
            started = time.perf_counter()
            for _ in range(calls):
                fn(*inputs)
            _synchronize(cuda)
            wall_us = (time.perf_counter() - started) * 1e6
    totals: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    for event in profiler.events():
        if cuda:
            if event.device_type != torch.autograd.DeviceType.CUDA:
                continue
            spent = getattr(event, "device_time", None) or getattr(event, "cuda_time", 0.0)
        else:
            spent = event.self_cpu_time_total
        totals[event.name] += spent
        counts[event.name] += 1
    inside = sum(totals.values())
    total = inside if cuda else max(wall_us, inside)
    rows = [{"name": name, "calls": counts[name] / calls, "ms": spent / calls / 1e3,
             "share": spent / total if total else None}
            for name, spent in sorted(totals.items(), key=lambda item: -item[1])[:top]]
    return {"unit": "CUDA device time of each kernel" if cuda else "host time of each operator (its own part)",
            "ms_per_call": total / calls / 1e3, "rows": rows,
            "outside_ms": None if cuda else (total - inside) / calls / 1e3}


def _synchronize(cuda: bool) -> None:
    if cuda:
        torch.cuda.synchronize()
