"""Defaults sized to the machine: sandbox workers, timing workers and the memory limit of a build, and the workers
that grade a batch of solutions."""

from __future__ import annotations

import os
from dataclasses import dataclass

import psutil

from opgen.sandbox.gpus import MAX_WORKERS_PER_GPU, default_workers_per_gpu

# The share of a GPU's cores given to timing lanes, from the 6,000-task build on one H200 (docs/benchmarks.md): on
# one machine, one split after the other, 6 lanes of 16 cores timed 54 tasks a minute and 4 lanes 36 (each lane's
# wall about 6 s a task either way), and the 10 sandbox workers left still passed 40 candidates a minute, so the
# build timed 48 tasks a minute into the window against 31-33. Fewer checks wait for timing, or go to waste.
TIMING_SHARE = 3 / 8
# A limit per worker, not a reservation: workers seldom peak together, and gpu-size tasks hold their
# tensors on the GPU, so a ninth of the host's memory each (at most 14,000 MB) leaves room for the rest.
MEMORY_SHARE = 9
MEMORY_MB_RANGE = (4096, 14000)
CPU_WORKERS = 2
CPU_MEMORY_MB = 4096


@dataclass(frozen=True)
class Sizing:
    """The resolved worker counts and memory limit, and how they were chosen."""

    workers: int
    timing_workers: int | None
    memory_mb: int
    note: str

    def every_worker(self, gpus: int) -> int:
        """Sandbox and timing workers together: what a stage that has the machine to itself runs (held-out sizes)."""
        return self.workers + (self.timing_workers or 0) * gpus


def size_for_machine(device: str, gpu_count: int, workers: int | None, timing_workers: int | None,
                     memory_mb: int | None) -> Sizing:
    """Fill the options left out (None) from the cores, the GPUs and the host memory; given options stay."""
    if device != "cuda":
        return Sizing(CPU_WORKERS if workers is None else workers, timing_workers,
                      CPU_MEMORY_MB if memory_mb is None else memory_mb, "")
    cores = os.cpu_count() or 2
    total_mb = psutil.virtual_memory().total // (1 << 20)
    gpus = max(1, gpu_count)
    per_gpu = max(1, min(MAX_WORKERS_PER_GPU, round(cores // gpus * TIMING_SHARE)))
    timing = per_gpu if timing_workers is None else timing_workers
    sandbox = max(2, cores - timing * gpus) if workers is None else workers
    limit = min(MEMORY_MB_RANGE[1], max(MEMORY_MB_RANGE[0], total_mb // MEMORY_SHARE)) if memory_mb is None \
        else memory_mb
    picked = [f"--workers {sandbox}" + ("" if workers is None else " (given)"),
              f"--timing-workers {timing}" + ("" if timing_workers is None else " (given)"),
              f"--memory-mb {limit}" + ("" if memory_mb is None else " (given)")]
    note = f"sized for {cores} cores, {gpus} GPU(s), {total_mb} MB of memory: {', '.join(picked)}"
    return Sizing(sandbox, timing, limit, note)


def grading_workers(device: str, gpu_count: int) -> int:
    """Sandbox workers grading a batch of solutions: 2 on the CPU, half the cores per GPU on CUDA (correctness runs
    side by side; timed runs take the GPU's lock one at a time)."""
    if device != "cuda":
        return CPU_WORKERS
    return default_workers_per_gpu(gpu_count) * max(1, gpu_count)
