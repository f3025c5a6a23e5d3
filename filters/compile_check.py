"""Execute filters `compile_error` and `compile_mismatch`: torch.compile runs and matches eager on every draw.

Compiled and eager outputs are compared at atol = rtol = 1e-2 on each input draw, as the consuming
environment compares a candidate with the reference.
"""

from __future__ import annotations

import time

import torch

from filters.base import Verdict
from filters.task_run import CHECK_ATOL, CHECK_RTOL, TaskRun
from filters.task_runtime import all_close, max_abs_diff, run_forward


def check(run: TaskRun) -> Verdict:
    torch._dynamo.reset()
    try:
        compiled = torch.compile(run.model)
        start = time.perf_counter()
        compiled_outputs = [run_forward(compiled, run.inputs[0])]
        run.synchronize()
        run.metrics["compile_s"] = round(time.perf_counter() - start, 3)
        compiled_outputs += [run_forward(compiled, inputs) for inputs in run.inputs[1:]]
    except Exception as error:  # noqa: BLE001 - any failure under compile is the verdict
        return Verdict.reject("compile_error", f"{type(error).__name__}: {error}")
    worst = 0.0
    for draw, (eager, compiled_out) in enumerate(zip(run.outputs, compiled_outputs)):
        diff = max_abs_diff(eager, compiled_out)
        if diff is None:
            return Verdict.reject("compile_mismatch", f"draw {draw}: output shapes differ")
        worst = max(worst, diff)
        if not all_close(eager, compiled_out, CHECK_ATOL, CHECK_RTOL):
            run.metrics["max_abs_diff"] = diff
            return Verdict.reject("compile_mismatch", f"draw {draw}: max abs diff {diff:.4g} beyond "
                                                      f"atol=rtol={CHECK_ATOL}", )
    run.metrics["max_abs_diff"] = worst
    return Verdict.ok()
