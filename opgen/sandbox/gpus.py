"""The GPUs a process may use, how many sandbox workers to give each, and the per-GPU lock timed runs hold."""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

MAX_WORKERS_PER_GPU = 8


def visible_gpus() -> list[str]:
    """Ids of the GPUs this process may use (entries of CUDA_VISIBLE_DEVICES, else 0..n-1)."""
    import torch

    count = torch.cuda.device_count()
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is None:
        return [str(i) for i in range(count)]
    return [entry.strip() for entry in listed.split(",") if entry.strip()][:count]


def default_workers_per_gpu(gpu_count: int) -> int:
    """Half the CPU cores per GPU (compiles are CPU-bound; the rest feed the timed runs), 1 to 8."""
    return max(1, min(MAX_WORKERS_PER_GPU, (os.cpu_count() or 2) // max(1, gpu_count) // 2))


def gpu_slot_envs(device: str) -> list[dict[str, str]] | None:
    """On a machine with several visible GPUs, one CUDA_VISIBLE_DEVICES per worker slot, round-robin."""
    if device != "cuda":
        return None
    gpus = visible_gpus()
    return [{"CUDA_VISIBLE_DEVICES": gpu} for gpu in gpus] if len(gpus) > 1 else None


def gpu_lock_path(gpu_id: str) -> str:
    """One lock file per GPU shared by every opgen process on the machine: one timed run at a time."""
    return str(Path(tempfile.gettempdir()) / f"opgen-gpu-{gpu_id}.lock")


@contextlib.contextmanager
def gpu_lock(path: str | None, shared: bool = False) -> Iterator[None]:
    """Hold the lock on `path`: exclusive for a timed run, shared for untimed GPU work; none when path is None."""
    if not path:
        yield
        return
    with open(path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
