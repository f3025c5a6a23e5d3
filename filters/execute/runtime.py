"""Execute filter `runtime_out_of_range`: a first, rough eager median (host clock, a few runs) inside the window.

The window comes with the payload (on CUDA the default 1-100 ms when none is given; none on the CPU). The
median is always recorded as `eager_ms_<device>`. The timing stage applies the same rule to its exact times.
"""

from __future__ import annotations

import statistics
import time

from filters.base import Filter, Verdict
from filters.execute.task_run import TaskRun


def median_eager_ms(run: TaskRun) -> float:
    """Median host-clock milliseconds of a few forward passes after one warm-up, each pass in its own hold of
    the GPU's lock (a timed run waits for one pass, not for all of them)."""
    inputs = run.inputs[0]
    run.forward(run.model, inputs)  # warm-up
    samples = []
    for _ in range(max(1, run.timing_runs)):
        with run.sharing_gpu():  # taken before the clock starts: the pass inside it takes no second wait
            start = time.perf_counter()
            run.forward(run.model, inputs)
            samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


class RuntimeCheck(Filter):
    name = "runtime"
    reads = ("model", "inputs")

    def filter(self, run: TaskRun) -> Verdict:
        median = median_eager_ms(run)
        metrics = {f"eager_ms_{run.device.split(':')[0]}": round(median, 4)}
        if run.window is None or run.window.contains(median):
            return Verdict.ok(**metrics)
        verdict = run.window.verdict(median)
        return Verdict.reject("runtime_out_of_range", verdict.detail, **metrics)
