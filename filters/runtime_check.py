"""Execute filter `runtime_out_of_range`: the median eager time of one forward call lies in the window.

On CUDA the window defaults to 1-100 ms (the consuming environment's rule); on the CPU it is off unless given.
The median is always recorded as `eager_ms_<device>`.
"""

from __future__ import annotations

import statistics
import time

from filters.base import Verdict
from filters.task_run import TaskRun
from filters.task_runtime import run_forward

CUDA_DEFAULT_WINDOW_MS = (1.0, 100.0)


def median_eager_ms(run: TaskRun) -> float:
    inputs = run.inputs[0]
    run_forward(run.model, inputs)  # warm-up
    samples = []
    for _ in range(max(1, run.timing_runs)):
        run.synchronize()
        start = time.perf_counter()
        run_forward(run.model, inputs)
        run.synchronize()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def check(run: TaskRun) -> Verdict:
    median = median_eager_ms(run)
    device_kind = run.device.split(":")[0]
    run.metrics[f"eager_ms_{device_kind}"] = round(median, 4)
    window = run.runtime_window_ms or (CUDA_DEFAULT_WINDOW_MS if device_kind == "cuda" else None)
    if window and not window[0] <= median <= window[1]:
        return Verdict.reject("runtime_out_of_range", f"eager median {median:.3f} ms outside {window[0]}-{window[1]} ms")
    return Verdict.ok()
