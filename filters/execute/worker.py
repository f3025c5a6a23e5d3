"""The sandbox entry point of the execute checks: `check_task(payload) -> dict`, run in a worker process."""

from __future__ import annotations

import torch

from filters.base import Filter, Verdict, judge
from filters.execute import STAGES
from filters.execute.task_run import TaskRun
from opgen.sandbox.gpus import current_gpu_lock_path, gpu_lock
from opgen.sandbox.torch_state import isolated_torch_state


def _unlocked(check: Filter) -> bool:
    """The compile check runs outside the GPU lock: its first call spends seconds compiling on the CPU, and
    holding the lock through it would keep the timing stage waiting; its GPU work is a few forward calls."""
    return check.name == "compile"


def _judge_sharing_the_gpu(run: TaskRun, lock_path: str) -> Verdict:
    """The checks before compile in one hold of the GPU lock's shared mode (one wait behind a timed trial per
    task, not one per check), then compile unlocked; one verdict as `judge` gives it."""
    locked = [check for check in STAGES if not _unlocked(check)]
    rest = [check for check in STAGES if _unlocked(check)]
    if STAGES[: len(locked)] != tuple(locked):
        raise RuntimeError("the unlocked checks must come last in STAGES")
    with gpu_lock(lock_path, shared=True):
        first = judge(run, locked)
    if not first.keep or not rest:
        return first
    second = judge(run, rest)
    return Verdict(second.keep, second.reason, {**first.metrics, **second.metrics}, second.detail,
                   first.stages + second.stages)


def check_task(payload: dict) -> dict:
    """Run the execute checks on one task: {"reason", "detail", "metrics", "stages": [[name, seconds], ...]}."""
    run = TaskRun.from_payload(payload)
    threads = payload.get("threads")
    with isolated_torch_state():
        if threads:
            torch.set_num_threads(int(threads))
        if run.device.startswith("cuda"):
            verdict = _judge_sharing_the_gpu(run, current_gpu_lock_path())
        else:
            verdict = judge(run, STAGES)
    return {"reason": verdict.reason, "detail": verdict.detail, "metrics": verdict.metrics,
            "stages": [list(stage) for stage in verdict.stages]}
