"""The sandbox entry point of the execute checks: `check_task(payload) -> dict`, run in a worker process."""

from __future__ import annotations

import torch

from filters.base import judge
from filters.execute import STAGES
from filters.execute.task_run import TaskRun
from opgen.sandbox.torch_state import isolated_torch_state


def check_task(payload: dict) -> dict:
    """Run the execute checks on one task: {"reason", "detail", "metrics", "stages": [[name, seconds], ...]}."""
    run = TaskRun.from_payload(payload)
    threads = payload.get("threads")
    with isolated_torch_state():
        if threads:
            torch.set_num_threads(int(threads))
        verdict = judge(run, STAGES)
    return {"reason": verdict.reason, "detail": verdict.detail, "metrics": verdict.metrics,
            "stages": [list(stage) for stage in verdict.stages]}
