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


def current_gpu_lock_path() -> str:
    """The lock of the GPU this worker runs on (the first entry of its CUDA_VISIBLE_DEVICES, else 0)."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0].strip() or "0"
    return gpu_lock_path(listed)


@contextlib.contextmanager
def gpu_lock(path: str | None, shared: bool = False) -> Iterator[None]:
    """Hold the GPU's lock: exclusive for a timed run, shared for untimed GPU work; nothing when path is None.

    Writers come first: a waiting exclusive holder takes the gate (`path`.gate) before waiting for the
    shared holders to leave, and a new shared holder must pass the gate, so a stream of validation work
    cannot starve a timed run.
    """
    if not path:
        yield
        return
    with open(path + ".gate", "a+") as gate, open(path, "a+") as lock:
        fcntl.flock(gate, fcntl.LOCK_EX)
        if shared:
            fcntl.flock(lock, fcntl.LOCK_SH)
            fcntl.flock(gate, fcntl.LOCK_UN)
        else:
            fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
            fcntl.flock(gate, fcntl.LOCK_UN)
