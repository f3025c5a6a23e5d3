"""The sandbox entry point of the execute checks: `check_task(payload) -> dict`, run in a worker process."""

from __future__ import annotations

import os

import torch

from filters.base import Filter, Verdict, WrappedFilter, judge
from filters.execute import STAGES
from filters.execute.device_time import DeviceTimed
from filters.execute.task_run import TaskRun
from opgen.sandbox import gpu_memory
from opgen.sandbox.gpus import LockWaits, current_gpu_lock_path
from opgen.sandbox.torch_state import isolated_torch_state

# On CUDA every kernel a check runs does so inside a hold of the GPU's lock (shared), so that none runs beside
# another process's timed trial: the output scans too (float64 passes over outputs of up to gigabytes, tens of
# passes a task). With the scans unlocked, a dozen workers' scans overlapped the timed trials of an H200 build
# and slowed about one baseline in eleven by 1.3-3.2x for the whole of its measurement (docs/benchmarks.md,
# "Baselines under load"). A check with host work of its own (building weights, compiling) holds the lock around
# its GPU work itself (`holds_gpu_lock_itself`); the others run whole inside one hold (`OnTheGpu`).


class OnTheGpu(WrappedFilter):
    """A check run on the GPU: inside one shared hold of the GPU's lock unless it holds the lock itself, waited
    for before the hold ends, and giving the GPU memory it freed back to the device when it ends (same name,
    reasons and fields as the check it wraps).

    PyTorch's caching allocator keeps freed blocks for this process, where other processes cannot use them:
    a dozen workers sharing one GPU each kept several GB of a check's temporaries (the determinism check's
    second model and outputs), and their neighbours' tasks ran out of memory (on an H200 with 12 workers, 74
    of 517 candidates rejected for GPU memory; 8 once checks gave it back and built weights outside the GPU
    lock, docs/benchmarks.md, "GPU build").
    """

    def filter(self, run: TaskRun) -> Verdict:
        longest_before, run.lock_waits.longest_s = run.lock_waits.longest_s, 0.0
        held_before = run.lock_waits.held_s
        try:
            if getattr(self.check, "holds_gpu_lock_itself", False):
                return self.check.filter(run)
            with run.sharing_gpu():
                return self.check.filter(run)
        finally:
            torch.cuda.empty_cache()
            if run.lock_waits.longest_s > longest_before:   # this check took the task's longest hold so far
                run.longest_hold_check = self.name
            run.lock_waits.longest_s = max(longest_before, run.lock_waits.longest_s)
            if run.lock_waits.held_s > held_before:
                run.held_by_check[self.name] = round(run.lock_waits.held_s - held_before, 4)


def stages_for(device: str) -> tuple[Filter, ...]:
    if not device.startswith("cuda"):
        return STAGES
    return tuple(OnTheGpu(check) for check in STAGES)


# How much lower than the timing workers a GPU check worker runs on the host's cores. A timed trial's host thread
# launches the task's kernels between the two events; beside a dozen busy check workers (compiles are CPU-bound)
# it waited for a core, and launch-bound tasks (recurrent chains) read 1.3x slow.
CHECK_WORKER_NICENESS = 10


def check_task(payload: dict) -> dict:
    """Run the execute checks (or the payload's `stages` of them) on one task: {"reason", "detail", "metrics",
    "stages": [[name, seconds], ...], "lock_wait_s"} (the last: seconds the checks waited for the GPU's lock,
    included in their stage seconds), "lock_holds" (on CUDA, the checks' holds of it: `_lock_holds`) and, when the
    payload asks for `device_time`, "device_s_by_check" and "float64_device_s_by_check" (filters/execute/
    device_time.py). A task tried again after it ran out of GPU memory beside other workers' tasks (`memory_wait`)
    first waits for the memory it needs to come free (opgen/sandbox/gpu_memory.py)."""
    run = TaskRun.from_payload(payload)
    waited = {}
    if run.device.startswith("cuda"):
        run.gpu_lock_path = current_gpu_lock_path()
        _yield_the_cores_to_timing()
        waited = gpu_memory.wait_before_retry(payload, default_timeout_s=120.0)
    threads = payload.get("threads")
    measuring = run.device.startswith("cuda") and _reset_gpu_peak()
    only = payload.get("stages")   # a subset of the checks, by name (in their own order); None: all of them
    checks = [check for check in stages_for(run.device) if only is None or check.name in only]
    if payload.get("device_time"):   # a diagnosis: each check's device seconds, from the profiler
        checks = [DeviceTimed(check) for check in checks]
    with isolated_torch_state():
        if threads:
            torch.set_num_threads(int(threads))
        verdict = judge(run, checks)
    if measuring:
        # the most GPU memory the checks held at once: what the task needs beside other workers' checks
        verdict.metrics["gpu_peak_mb"] = round(torch.cuda.max_memory_reserved() / 2**20)
    verdict.metrics.update(waited)
    if run.cache_releases:
        verdict.metrics["gpu_cache_releases"] = run.cache_releases
    return {"reason": verdict.reason, "detail": verdict.detail, "metrics": verdict.metrics,
            "stages": [list(stage) for stage in verdict.stages], "lock_wait_s": round(run.lock_wait_s, 4),
            "lock_holds": _lock_holds(run.lock_waits, run.longest_hold_check, run.held_by_check),
            **({"device_s_by_check": run.device_s_by_check,
                "float64_device_s_by_check": run.float64_device_s_by_check} if run.device_s_by_check else {})}


def _lock_holds(waits: LockWaits, longest_check: str | None = None, held_by_check: dict | None = None) -> dict:
    """The checks' holds of the GPU's lock, on CUDA: how many, how many waited, the seconds held (in all and by
    check: where the checks' GPU work goes), the longest and the check that took it (what a timed run waiting at
    the gate waited for, at worst)."""
    if not waits.holds:
        return {}
    return {"lock_holds": waits.holds, "lock_holds_waited": waits.waited, "lock_held_s": round(waits.held_s, 4),
            "lock_hold_max_s": round(waits.longest_s, 4),
            **({"lock_hold_max_check": longest_check} if longest_check else {}),
            **({"lock_held_s_by_check": held_by_check} if held_by_check else {})}


def _reset_gpu_peak() -> bool:
    """Start counting the GPU memory peak afresh; whether it could (a profile figure never fails a task)."""
    try:
        torch.cuda.reset_peak_memory_stats()
    except Exception:  # noqa: BLE001 - no CUDA in this torch, or a broken context: the checks will say so
        return False
    return True


def _yield_the_cores_to_timing() -> None:
    """Lower this worker's scheduling priority to CHECK_WORKER_NICENESS, once (a niceness only ever rises)."""
    current = os.nice(0)
    if current < CHECK_WORKER_NICENESS:
        os.nice(CHECK_WORKER_NICENESS - current)
