"""The sandbox entry point of the execute checks: `check_task(payload) -> dict`, run in a worker process."""

from __future__ import annotations

import torch

from filters.base import Filter, Verdict, judge
from filters.execute import STAGES
from filters.execute.task_run import TaskRun
from opgen.sandbox.gpus import current_gpu_lock_path
from opgen.sandbox.torch_state import isolated_torch_state

# Checks that take the lock themselves, around their GPU work only (eager and determinism build models on the
# host first; compile, see below), or need none: the output scans' GPU work is one elementwise pass over the
# outputs (microseconds), and waiting for the lock would cost them more than their overlap could cost a timed trial.
UNLOCKED_CHECKS = frozenset({"eager", "determinism", "finite", "trivial", "compile"})


class _Wrapped(Filter):
    """A check run inside something: same name, reasons and fields as the check it wraps."""

    def __init__(self, check: Filter):
        self.check = check
        self.name, self.error_reason = check.name, check.error_reason
        self.reads, self.writes = check.reads, check.writes


class ReturningCachedMemory(_Wrapped):
    """A check that gives the GPU memory it freed back to the device when it ends.

    PyTorch's caching allocator keeps freed blocks for this process, where other processes cannot use them:
    a dozen workers sharing one GPU each kept several GB of a check's temporaries (the determinism check's
    second model and outputs), and their neighbours' tasks ran out of memory (docs/benchmarks.md, session 6).
    """

    def filter(self, run: TaskRun) -> Verdict:
        try:
            return self.check.filter(run)
        finally:
            torch.cuda.empty_cache()


class SharingTheGpu(_Wrapped):
    """A check that holds its GPU's lock in shared mode while it runs, so it never overlaps a timed trial.

    Checks that run the model take it (eager and determinism take it themselves, after building a model on
    the host). The compile check takes it itself (`run.gpu_lock_path`) for
    inductor's autotuning benchmarks alone, which keep the GPU busy for tens of milliseconds a kernel config:
    its compile spends seconds on the CPU, and holding the lock through that would keep the timing stage
    waiting; its few forward calls are as short as the other checks' and go unlocked.
    """

    def __init__(self, check: Filter, lock_path: str):
        super().__init__(check)
        self.lock_path = lock_path

    def filter(self, run: TaskRun) -> Verdict:
        with run.sharing_gpu(self.lock_path):
            return self.check.filter(run)


def stages_for(device: str) -> tuple[Filter, ...]:
    if not device.startswith("cuda"):
        return STAGES
    lock = current_gpu_lock_path()
    freeing = [ReturningCachedMemory(check) for check in STAGES]
    return tuple(check if check.name in UNLOCKED_CHECKS else SharingTheGpu(check, lock) for check in freeing)


def check_task(payload: dict) -> dict:
    """Run the execute checks on one task: {"reason", "detail", "metrics", "stages": [[name, seconds], ...],
    "lock_wait_s"} (the last: seconds the checks waited for the GPU's lock, included in their stage seconds)."""
    run = TaskRun.from_payload(payload)
    if run.device.startswith("cuda"):
        run.gpu_lock_path = current_gpu_lock_path()
    threads = payload.get("threads")
    with isolated_torch_state():
        if threads:
            torch.set_num_threads(int(threads))
        verdict = judge(run, stages_for(run.device))
    return {"reason": verdict.reason, "detail": verdict.detail, "metrics": verdict.metrics,
            "stages": [list(stage) for stage in verdict.stages], "lock_wait_s": round(run.lock_wait_s, 4)}
