"""Timed trials of one callable: warm-ups, then CUDA events with an L2 flush (or the host clock), stopping
adaptively once the median is known to ±1%, plus the profiler's device time as the CUDA-Agent environment
takes it."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

from opgen.sandbox.profiled import profiled_total_us

PROFILER_WARMUPS = 5  # the CUDA-Agent environment's profiler method: 5 warm-ups, 10 iterations
PROFILER_ITERS = 10
MIN_L2_FLUSH_BYTES = 256 * 1024 * 1024  # KernelBench's flush buffer; at least twice the L2 is also required
Z_95 = 1.959964
SETTLE_WARMUPS = 2  # of a locked run's warm-ups, those made right before the trials with the GPU held alone


@dataclass(frozen=True)
class TrialPlan:
    """How many trials: `fixed` runs exactly `max_trials` (the KernelBench protocol); `adaptive` stops when the
    95% confidence interval of the median lies within ±`rel_ci` of it, after at least `min_trials`."""

    warmups: int = 10
    max_trials: int = 100
    min_trials: int = 10
    mode: str = "adaptive"
    rel_ci: float = 0.01

    def __post_init__(self) -> None:
        if self.mode not in ("adaptive", "fixed"):
            raise ValueError(f"trial mode must be adaptive or fixed, not {self.mode!r}")

    def done(self, samples: Sequence[float]) -> bool:
        n = len(samples)
        if n >= self.max_trials:
            return True
        if self.mode == "fixed" or n < self.min_trials:
            return False
        low, high = median_ci(samples)
        middle = statistics.median(samples)
        return middle > 0 and low >= middle * (1 - self.rel_ci) and high <= middle * (1 + self.rel_ci)


def median_ci(samples: Sequence[float], z: float = Z_95) -> tuple[float, float]:
    """Distribution-free confidence interval of the median: the order statistics at ranks
    (n ∓ z·√n) / 2 (the binomial normal approximation)."""
    ordered = sorted(samples)
    n = len(ordered)
    spread = z * math.sqrt(n) / 2
    low_rank = max(1, math.floor(n / 2 - spread))
    high_rank = min(n, math.ceil(n / 2 + 1 + spread))
    return ordered[low_rank - 1], ordered[high_rank - 1]


def summarize(samples: Sequence[float]) -> dict[str, float | int | None]:
    """Median, interquartile range (inclusive quartiles, as numpy's default), mean, sample std, min, max, count."""
    values = [float(v) for v in samples]
    if not values:
        return {"median": None, "iqr": None, "mean": None, "std": None, "min": None, "max": None, "count": 0}
    if len(values) > 1:
        q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
        std = statistics.stdev(values)
    else:
        q1 = q3 = values[0]
        std = 0.0
    return {"median": statistics.median(values), "iqr": q3 - q1, "mean": statistics.fmean(values),
            "std": std, "min": min(values), "max": max(values), "count": len(values)}


def trial_times_ms(torch, fn: Callable, inputs: list, device: str, plan: TrialPlan) -> list[float]:
    """Warm-ups, then one sample per trial until `plan.done`: CUDA events around the call with the L2 flushed
    before it, or the host clock on the CPU.

    The flush is waited for before the start event is recorded. KernelBench's loop does not wait: its call then
    races the flush, and where the host's call takes about as long as the flush (compiled modules of a few
    kernels) the GPU's wait for the first kernel falls inside the window in some runs and not in others, which
    moved compiled medians of KernelBench level 2 by 2.6% from run to run on an H200; waiting, 1.7%
    (docs/benchmarks.md, "KernelBench timing")."""
    warm_up(torch, fn, inputs, plan.warmups)
    samples: list[float] = []
    if device != "cuda":
        while not plan.done(samples):
            start = time.perf_counter()
            fn(*inputs)
            samples.append((time.perf_counter() - start) * 1e3)
        return samples
    torch.cuda.synchronize()
    flush = flush_buffer(torch)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    while not plan.done(samples):
        flush.zero_()
        torch.cuda.synchronize()  # the flush done before the clock starts: the call's host time always counts
        start.record()
        fn(*inputs)
        end.record()
        torch.cuda.synchronize()
        samples.append(start.elapsed_time(end))
    return samples


def warm_up(torch, fn: Callable, inputs: list, calls: int) -> None:
    """Untimed calls, waited for."""
    for _ in range(calls):
        fn(*inputs)
    synchronize(torch)


def profiler_time_us(torch, fn: Callable, inputs: list, device: str) -> float:
    """As the CUDA-Agent environment: 5 warm-ups, then 10 profiled calls; summed device time / 10 (µs).

    On CPU the same path runs with the CPU activity and sums the ops' self CPU time.
    """
    return profiled_time_us(torch, fn, inputs, device, profile_calls(torch, fn, inputs, device))


def profile_calls(torch, fn: Callable, inputs: list, device: str, warmups: int = PROFILER_WARMUPS,
                  with_cpu: bool = False):
    """`warmups` calls, then PROFILER_ITERS calls under the profiler, waited for: the profile, not yet read.

    Reading it (`profiled_time_us`) builds the events in Python, host work of no use to hold the GPU for, so a
    timed run reads it after giving the GPU back."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(warmups):
        fn(*inputs)
    synchronize(torch)
    activities = [ProfilerActivity.CUDA] if device == "cuda" else [ProfilerActivity.CPU]
    if with_cpu and device == "cuda":
        activities.insert(0, ProfilerActivity.CPU)
    with profile(activities=activities) as prof:
        for _ in range(PROFILER_ITERS):
            fn(*inputs)
        synchronize(torch)
    return prof


def profiled_time_us(torch, fn: Callable, inputs: list, device: str, prof,
                     alone: Callable[[], AbstractContextManager] = nullcontext) -> float:
    """The summed device time per call (µs) of a profile from `profile_calls`. A CUDA profile with no device
    events (builds that record them only beside the CPU activity) is taken again with it, inside `alone()` (the
    GPU held alone, as for any timed call)."""
    total = profiled_total_us(prof, device)
    if device == "cuda" and total == 0:
        with alone():
            prof = profile_calls(torch, fn, inputs, device, warmups=0, with_cpu=True)
        total = profiled_total_us(prof, device)
    return total / PROFILER_ITERS


_FLUSH: dict[str, object] = {}


def flush_bytes(torch, device: str) -> int | None:
    if device != "cuda":
        return None
    l2 = int(getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0) or 0)
    return max(2 * l2, MIN_L2_FLUSH_BYTES)


def flush_buffer(torch):
    """One int32 buffer per worker, written before every trial to evict the L2 cache."""
    if "buffer" not in _FLUSH:
        _FLUSH["buffer"] = torch.empty(flush_bytes(torch, "cuda") // 4, dtype=torch.int32, device="cuda")
    return _FLUSH["buffer"]


def synchronize(torch) -> None:
    if torch.cuda.is_initialized():
        torch.cuda.synchronize()
