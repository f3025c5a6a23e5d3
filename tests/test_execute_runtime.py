"""The execute stage's rough runtime check: a task that reads too slow beside other workers is measured again
with the GPU to itself before it is rejected; one that reads too fast is rejected at once."""

from __future__ import annotations

import threading
import time

from filters.execute.eager import EagerCheck
from filters.execute.runtime import ALONE_RUNS, RuntimeCheck
from filters.execute.task_run import TaskRun
from filters.window import Window

# A pass takes SHARED_S while the GPU's lock is shared (other workers' kernels beside it) and ALONE_S while this
# process holds it exclusively: a non-blocking shared hold on the lock file then fails.
TASK = """
import fcntl, time
import torch

LOCK = None
SHARED_S, ALONE_S = {shared_s}, {alone_s}
PASSES = []

def alone():
    if LOCK is None:
        return False
    with open(LOCK, "a+") as probe:
        try:
            fcntl.flock(probe, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(probe, fcntl.LOCK_UN)
        return False

class Model(torch.nn.Module):
    def forward(self, x):
        by_itself = alone()
        started = time.perf_counter()
        pause = ALONE_S if by_itself else SHARED_S
        if pause:   # sleep(0) would give the core up: on a loaded one, the pass would last another process's turn
            time.sleep(pause)
        PASSES.append((started, time.perf_counter(), by_itself))
        return x * 2

def get_inputs():
    return [torch.randn(4, 8)]

def get_init_inputs():
    return []
"""


def _run(tmp_path, shared_s: float, alone_s: float) -> TaskRun:
    lock = str(tmp_path / "gpu.lock")
    run = TaskRun(code=TASK.format(shared_s=shared_s, alone_s=alone_s), name="paced", gpu_lock_path=lock,
                  window=Window(1.0, 200.0), timing_runs=3)
    assert EagerCheck().filter(run).keep
    run.namespace["LOCK"] = lock   # from here on the task can tell a shared hold from an exclusive one
    run.namespace["PASSES"].clear()
    return run


def test_a_task_slow_only_beside_others_is_measured_alone_and_kept(tmp_path):
    run = _run(tmp_path, shared_s=0.3, alone_s=0.02)
    verdict = RuntimeCheck().filter(run)
    assert verdict.keep
    assert verdict.metrics["eager_ms_cpu_shared"] >= 300 and 20 <= verdict.metrics["eager_ms_cpu"] < 200
    alone_passes = [p for p in run.namespace["PASSES"] if p[2]]
    assert len(alone_passes) == ALONE_RUNS


def test_a_task_slow_alone_too_is_rejected_with_both_figures(tmp_path):
    run = _run(tmp_path, shared_s=0.25, alone_s=0.25)
    verdict = RuntimeCheck().filter(run)
    assert verdict.reason == "runtime_out_of_range" and "outside [1, 200] ms" in verdict.detail
    assert verdict.metrics["eager_ms_cpu"] >= 250 and verdict.metrics["eager_ms_cpu_shared"] >= 250


def test_one_pass_far_past_the_bound_alone_decides(tmp_path):
    run = _run(tmp_path, shared_s=0.45, alone_s=0.45)
    verdict = RuntimeCheck().filter(run)
    assert verdict.reason == "runtime_out_of_range" and verdict.metrics["eager_ms_cpu"] >= 450
    assert len([p for p in run.namespace["PASSES"] if p[2]]) == 1


def test_a_task_too_fast_is_rejected_without_taking_the_gpu(tmp_path):
    run = _run(tmp_path, shared_s=0.0, alone_s=0.0)
    verdict = RuntimeCheck().filter(run)
    assert verdict.reason == "runtime_out_of_range" and "eager_ms_cpu_shared" not in verdict.metrics
    assert not any(p[2] for p in run.namespace["PASSES"])


def test_no_other_check_runs_while_the_task_is_measured_alone(tmp_path):
    """Another worker's check keeps taking shared holds of the lock; none of them overlaps the alone passes."""
    from opgen.sandbox.gpus import gpu_lock

    run = _run(tmp_path, shared_s=0.3, alone_s=0.05)
    holds: list[tuple[float, float]] = []
    done = threading.Event()

    def other_worker() -> None:
        while not done.is_set():
            with gpu_lock(run.gpu_lock_path, shared=True):
                started = time.perf_counter()
                time.sleep(0.03)
                holds.append((started, time.perf_counter()))

    neighbour = threading.Thread(target=other_worker)
    neighbour.start()
    try:
        verdict = RuntimeCheck().filter(run)
    finally:
        done.set()
        neighbour.join(10)
    assert verdict.keep and holds
    alone_passes = [p for p in run.namespace["PASSES"] if p[2]]
    assert len(alone_passes) == ALONE_RUNS
    assert not [h for h in holds for p in alone_passes if h[0] < p[1] and h[1] > p[0]], "a check ran beside it"
