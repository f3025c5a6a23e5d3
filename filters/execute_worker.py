"""The sandbox entry point of the execute checks: `check_task(payload) -> dict`, run in a worker process.

Order, cheapest first and stopping at the first rejection: eager (exec_error, run-time invalid_task and
stochastic_op), finite, determinism, degenerate, trivial, runtime, compile (compile_error, compile_mismatch).
"""

from __future__ import annotations

import time

import torch

from filters import (
    compile_check,
    degenerate_check,
    determinism_check,
    eager_check,
    finite_check,
    runtime_check,
    trivial_check,
)
from filters.base import Verdict
from filters.runtime_state import isolated_torch_state
from filters.task_run import TaskRun
from filters.task_runtime import TaskProblem

EXECUTE_STAGES = (
    ("eager", eager_check.check, "exec_error"),
    ("finite", finite_check.check, "exec_error"),
    ("determinism", determinism_check.check, "exec_error"),
    ("degenerate", degenerate_check.check, "exec_error"),
    ("trivial", trivial_check.check, "exec_error"),
    ("runtime", runtime_check.check, "exec_error"),
    ("compile", compile_check.check, "compile_error"),
)
STAGE_NAMES = tuple(name for name, _, _ in EXECUTE_STAGES)


def _run_stage(check, run: TaskRun, error_reason: str) -> Verdict:
    try:
        return check(run)
    except TaskProblem as problem:
        return Verdict.reject(problem.reason, str(problem))
    except BaseException as error:  # noqa: BLE001 - SystemExit raised by task code is an error too
        if isinstance(error, KeyboardInterrupt):
            raise
        return Verdict.reject(error_reason, f"{type(error).__name__}: {error}")


def check_task(payload: dict) -> dict:
    """Run the execute checks on one task: {"reason", "detail", "metrics", "stages": [[name, seconds], ...]}."""
    run = TaskRun.from_payload(payload)
    threads = payload.get("threads")
    stages: list[list] = []
    verdict = Verdict.ok()
    with isolated_torch_state():
        if threads:
            torch.set_num_threads(int(threads))
        for name, check, error_reason in EXECUTE_STAGES:
            start = time.perf_counter()
            verdict = _run_stage(check, run, error_reason)
            stages.append([name, time.perf_counter() - start])
            if not verdict.keep:
                break
    return {"reason": verdict.reason, "detail": verdict.detail, "metrics": run.metrics, "stages": stages}
