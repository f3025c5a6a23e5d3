"""Execute filter `runtime_out_of_range`: a first, rough eager median (host clock, a few runs) inside the window.

The window comes with the payload (on CUDA the default 1-100 ms when none is given; none on the CPU). The
median is always recorded as `eager_ms_<device>`. The timing stage applies the same rule to its exact times.

The rough passes share the GPU with the other workers' checks, whose kernels can slow them several times over
(on the H200, tasks whose timed eager median was 28 and 34 ms read 234 and 279 ms beside eleven other
workers). Sharing only ever slows a pass, so a median below the window is surely below it; a median above it
is measured again with the GPU to itself (`ALONE_RUNS` passes holding its lock exclusively) before the task
is rejected, so that how busy the GPU was never decides a verdict.
"""

from __future__ import annotations

import statistics
import time

from filters.base import Filter, Verdict
from filters.execute.task_run import TaskRun

ALONE_RUNS = 3   # passes with the GPU to itself, for a task whose shared-GPU median reads too slow


def median_eager_ms(run: TaskRun) -> float:
    """Median host-clock milliseconds of a few forward passes after one warm-up, each pass in its own hold of
    the GPU's lock (a timed run waits for one pass, not for all of them)."""
    inputs = run.inputs
    run.forward(run.model, inputs)  # warm-up
    samples = []
    for _ in range(max(1, run.timing_runs)):
        with run.sharing_gpu():  # taken before the clock starts: the pass inside it takes no second wait
            samples.append(pass_ms(run, inputs))
    return statistics.median(samples)


def pass_ms(run: TaskRun, inputs: list) -> float:
    """Host-clock milliseconds of one forward pass, waited for (inside a hold of the GPU's lock: no wait in it)."""
    start = time.perf_counter()
    run.forward(run.model, inputs)
    return (time.perf_counter() - start) * 1000


def alone_eager_ms(run: TaskRun, decisive_ms: float) -> float:
    """Median host-clock milliseconds of ALONE_RUNS forward passes (the model is warm) in one exclusive hold of
    the GPU's lock: no other worker's check runs meanwhile. A pass past `decisive_ms` ends it early: alone, a
    warm model's passes differ by far less than that, and the others wait while it holds the GPU."""
    inputs = run.inputs
    samples = []
    with run.alone_on_gpu():
        for _ in range(ALONE_RUNS):
            samples.append(pass_ms(run, inputs))
            if samples[-1] > decisive_ms:
                break
    return statistics.median(samples)


class RuntimeCheck(Filter):
    name = "runtime"
    holds_gpu_lock_itself = True   # its passes hold it one at a time, and alone (exclusive) when they read too slow
    reads = ("model", "inputs")

    def filter(self, run: TaskRun) -> Verdict:
        median = median_eager_ms(run)
        key = f"eager_ms_{run.device.split(':')[0]}"
        metrics = {key: round(median, 4)}
        if run.window is None or run.window.contains(median):
            return Verdict.ok(**metrics)
        if median > run.window.hi_ms:  # perhaps only the other workers' kernels: measure it alone
            metrics[f"{key}_shared"] = metrics[key]
            median = alone_eager_ms(run, decisive_ms=2 * run.window.hi_ms)
            metrics[key] = round(median, 4)
            if run.window.contains(median):
                return Verdict.ok(**metrics)
        verdict = run.window.verdict(median)
        return Verdict.reject("runtime_out_of_range", verdict.detail, **metrics)
