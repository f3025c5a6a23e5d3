"""The sandbox entry point of the execute checks: `check_task(payload) -> dict`, run in a worker process."""

from __future__ import annotations

import torch

from filters.base import Filter, Verdict, judge
from filters.execute import STAGES
from filters.execute.task_run import TaskRun
from opgen.sandbox.gpus import current_gpu_lock_path
from opgen.sandbox.torch_state import isolated_torch_state

# On CUDA every check takes the GPU's lock (shared) itself, around each of its forward passes
# (`TaskRun.forward`): a timed run then waits for the passes under way, never for a check's host work or its
# later passes. The output scans (finite, trivial, the comparisons) go unlocked: one elementwise pass over the
# outputs, microseconds. The compile check locks inductor's autotuning benchmarks only (filters/execute/compile.py).


class ReturningCachedMemory(Filter):
    """A check that gives the GPU memory it freed back to the device when it ends (same name, reasons and
    fields as the check it wraps).

    PyTorch's caching allocator keeps freed blocks for this process, where other processes cannot use them:
    a dozen workers sharing one GPU each kept several GB of a check's temporaries (the determinism check's
    second model and outputs), and their neighbours' tasks ran out of memory (on an H200 with 12 workers, 74
    of 517 candidates rejected for GPU memory; 8 once checks gave it back and built weights outside the GPU
    lock, docs/benchmarks.md, "GPU build").
    """

    def __init__(self, check: Filter):
        self.check = check
        self.name, self.error_reason = check.name, check.error_reason
        self.reads, self.writes = check.reads, check.writes

    def filter(self, run: TaskRun) -> Verdict:
        try:
            return self.check.filter(run)
        finally:
            torch.cuda.empty_cache()


def stages_for(device: str) -> tuple[Filter, ...]:
    if not device.startswith("cuda"):
        return STAGES
    return tuple(ReturningCachedMemory(check) for check in STAGES)


def check_task(payload: dict) -> dict:
    """Run the execute checks on one task: {"reason", "detail", "metrics", "stages": [[name, seconds], ...],
    "lock_wait_s"} (the last: seconds the checks waited for the GPU's lock, included in their stage seconds)."""
    run = TaskRun.from_payload(payload)
    if run.device.startswith("cuda"):
        run.gpu_lock_path = current_gpu_lock_path()
    threads = payload.get("threads")
    measuring = run.device.startswith("cuda") and _reset_gpu_peak()
    with isolated_torch_state():
        if threads:
            torch.set_num_threads(int(threads))
        verdict = judge(run, stages_for(run.device))
    if measuring:
        # the most GPU memory the checks held at once: what the task needs beside other workers' checks
        verdict.metrics["gpu_peak_mb"] = round(torch.cuda.max_memory_reserved() / 2**20)
    return {"reason": verdict.reason, "detail": verdict.detail, "metrics": verdict.metrics,
            "stages": [list(stage) for stage in verdict.stages], "lock_wait_s": round(run.lock_wait_s, 4)}


def _reset_gpu_peak() -> bool:
    """Start counting the GPU memory peak afresh; whether it could (a profile figure never fails a task)."""
    try:
        torch.cuda.reset_peak_memory_stats()
    except Exception:  # noqa: BLE001 - no CUDA in this torch, or a broken context: the checks will say so
        return False
    return True
