"""The GPUs a process may use, how many sandbox workers to give each, and the per-GPU lock timed runs hold."""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from opgen.errors import UsageError
from opgen.sandbox.quiet import holding_exclusive

MAX_WORKERS_PER_GPU = 8


def visible_gpus() -> list[str]:
    """Ids of the GPUs this process may use (entries of CUDA_VISIBLE_DEVICES, else 0..n-1)."""
    import torch

    count = torch.cuda.device_count()
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is None:
        return [str(i) for i in range(count)]
    return [entry.strip() for entry in listed.split(",") if entry.strip()][:count]


def visible_gpu_models() -> list[str]:
    """The model name of each visible GPU (as torch and the timed rows' `hardware` spell it, e.g. "NVIDIA H100 80GB
    HBM3"), read from nvidia-smi so this process does not initialise CUDA; from torch when nvidia-smi is missing."""
    gpus = visible_gpus()
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        done = subprocess.run(["nvidia-smi", "--query-gpu=index,uuid,name", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30)
        if done.returncode == 0:
            listed = [[field.strip() for field in line.split(",", 2)] for line in done.stdout.splitlines()
                      if line.count(",") >= 2]
            names = [name for gpu in gpus for index, uuid, name in listed if gpu in (index, uuid) or
                     (gpu.startswith("GPU-") and uuid.startswith(gpu))]
            if len(names) == len(gpus):
                return names
    import torch

    return [torch.cuda.get_device_name(i) for i in range(len(gpus))]


def visible_gpu_arch_list() -> str | None:
    """TORCH_CUDA_ARCH_LIST for the visible GPUs, spelt as torch's extension builder derives it from the devices
    ("8.0;9.0+PTX"), read from nvidia-smi so this process does not initialise CUDA; None when it cannot tell."""
    gpus = visible_gpus()
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        done = subprocess.run(["nvidia-smi", "--query-gpu=index,uuid,compute_cap", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30)
        if done.returncode == 0:
            listed = [[field.strip() for field in line.split(",", 2)] for line in done.stdout.splitlines()
                      if line.count(",") >= 2]
            caps = sorted({cap for gpu in gpus for index, uuid, cap in listed
                           if gpu in (index, uuid) or (gpu.startswith("GPU-") and uuid.startswith(gpu))},
                          key=lambda cap: tuple(int(part) for part in cap.split(".")))
            if caps:
                return ";".join(caps[:-1] + [caps[-1] + "+PTX"])
    return None


def require_cuda(option: str = "--device cuda") -> list[str]:
    """The visible GPUs, or UsageError (one line, exit 2, before any work) saying why there are none: a CPU-only
    torch, no driver, a driver too old, CUDA_VISIBLE_DEVICES naming none."""
    import torch

    gpus = visible_gpus()
    if gpus:
        return gpus
    try:
        torch.cuda.init()   # raises with the reason when CUDA cannot be used at all
        why = "no CUDA device is visible"
    except Exception as error:  # noqa: BLE001 - AssertionError (CPU build), RuntimeError (driver), ...
        why = (str(error).strip().splitlines() or [type(error).__name__])[0][:200]
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    where = f" (CUDA_VISIBLE_DEVICES={listed!r})" if listed is not None else ""
    raise UsageError(f"{option}: no CUDA device here{where}: {why}; run on a GPU machine or use --device cpu")


def resolve_device(requested: str) -> tuple[str, list[str], str]:
    """(cuda or cpu, the visible GPUs, what auto chose: "" for an explicit device). An explicit cuda needs a GPU
    (else one UsageError line saying why there is none); auto takes CUDA when a GPU is visible, else the CPU."""
    if requested == "cuda":
        return "cuda", require_cuda(), ""
    if requested == "cpu":
        return "cpu", [], ""
    gpus = visible_gpus()
    device = "cuda" if gpus else "cpu"
    seen = f"GPU(s) {', '.join(gpus)} visible" if gpus else "no CUDA device visible"
    return device, gpus, f"--device auto: {device} ({seen})"


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


@dataclass
class LockWaits:
    """Holds of the GPU's lock and what they cost: how many were taken, how many waited at all, the seconds spent
    waiting (`gate_s` of them for the gate: behind exclusive holders, where a shared hold waits all its wait; the
    rest, an exclusive hold's wait for the shared holders to leave), and the seconds held, the longest hold too.
    How long holds last is what an exclusive holder waits for; how many holds a task takes, how often it can be
    stopped at the gate."""

    seconds: float = 0.0
    holds: int = 0
    waited: int = 0
    gate_s: float = 0.0
    held_s: float = 0.0
    longest_s: float = 0.0

    def count(self, waiting: float, gated: float, locked: float, released: float) -> None:
        """One hold: asked for at `waiting`, past the gate at `gated`, taken at `locked`, given back at `released`."""
        self.holds += 1
        self.seconds += locked - waiting
        self.gate_s += gated - waiting
        self.waited += locked - waiting > WAITED_S
        self.held_s += released - locked
        self.longest_s = max(self.longest_s, released - locked)


WAITED_S = 0.001   # a hold that waited longer than this for the lock found it taken (an untaken flock is microseconds)


# Locks this thread holds now (path -> [depth, shared]): a nested hold of the same lock is free, never a
# self-deadlock (an exclusive hold's own compiled calls may autotune, which takes the shared lock).
_holding = threading.local()


def _held() -> dict[str, list]:
    if not hasattr(_holding, "depths"):
        _holding.depths = {}
    return _holding.depths


def holding_gpu_lock(path: str | None) -> bool:
    """Whether this thread holds the lock at `path` now (shared or exclusive)."""
    return bool(path) and path in _held()


# Set in a build's environment (its workers inherit it): at most this many shared holders of a GPU's lock at once,
# 0 (the default) for any number. A timed run that wants the lock waits for every shared holder inside to finish.
# At 2 on one H100 that wait fell from 0.22 to 0.10 s a timed task, but the checks waited 76% of their time for the
# lock instead of 62% and the build made fewer tasks a minute (docs/benchmarks.md, run 12): hence no bound.
SHARED_SLOTS_ENV = "OPGEN_GPU_SHARED_SLOTS"
SLOT_POLL_S = 0.001   # how often a shared holder with no free slot tries the slots again


def shared_slots(environ: dict | None = None) -> int:
    """How many shared holders may hold a GPU's lock at once (SHARED_SLOTS_ENV; 0: any number); UsageError (one
    line, exit 2) for a value that is not a whole number from 0 (a build checks it before any work)."""
    text = (os.environ if environ is None else environ).get(SHARED_SLOTS_ENV, "").strip()
    if not text:
        return 0
    if not text.isdigit():
        raise UsageError(f"{SHARED_SLOTS_ENV}={text!r}: how many shared holders of a GPU's lock at once, a whole "
                         "number (0: any number)")
    return int(text)


@contextlib.contextmanager
def _shared_slot(path: str, slots: int) -> Iterator[None]:
    """One of the `slots` slot files of the lock at `path`, held exclusively (none when slots is 0): tried in a
    random order, all of them again every SLOT_POLL_S until one is free."""
    if slots <= 0:
        yield
        return
    handles = [open(f"{path}.slot{index}", "a+") for index in random.sample(range(slots), slots)]
    try:
        taken = None
        while taken is None:
            for handle in handles:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue
                taken = handle
                break
            else:
                time.sleep(SLOT_POLL_S)
        try:
            yield
        finally:
            fcntl.flock(taken, fcntl.LOCK_UN)
    finally:
        for handle in handles:
            handle.close()


@contextlib.contextmanager
def gpu_lock(path: str | None, shared: bool = False, waits: LockWaits | None = None) -> Iterator[None]:
    """Hold the GPU's lock: exclusive for a timed run, shared for untimed GPU work; nothing when path is None.

    Writers come first: a waiting exclusive holder takes the gate (`path`.gate) before waiting for the
    shared holders to leave, and a new shared holder must pass the gate, so a stream of validation work
    cannot starve a timed run. Re-entrant within a thread: a hold inside a hold of the same path is free, but an
    exclusive hold asked for inside a shared one is an error (it would not be exclusive). `waits`, when given,
    counts the hold (`LockWaits.count`); a free nested hold is not one.
    """
    held = _held()
    if not path or path in held:
        if path:
            if held[path][1] and not shared:
                raise RuntimeError(f"an exclusive hold of {path} asked for inside a shared one")
            held[path][0] += 1
        try:
            yield
        finally:
            if path:
                held[path][0] -= 1
        return
    waiting = time.perf_counter()
    # a slot first, the gate after: a holder waiting for a slot holds nothing a timed run waits for
    with _shared_slot(path, shared_slots() if shared else 0), open(path + ".gate", "a+") as gate, \
            open(path, "a+") as lock:
        fcntl.flock(gate, fcntl.LOCK_EX)
        gated = time.perf_counter()
        if shared:
            fcntl.flock(lock, fcntl.LOCK_SH)
            fcntl.flock(gate, fcntl.LOCK_UN)
        else:
            fcntl.flock(lock, fcntl.LOCK_EX)
        locked = time.perf_counter()
        held[path] = [1, shared]
        try:
            with contextlib.nullcontext() if shared else holding_exclusive():
                yield
        finally:
            del held[path]
            fcntl.flock(lock, fcntl.LOCK_UN)
            fcntl.flock(gate, fcntl.LOCK_UN)
            if waits is not None:
                waits.count(waiting, gated, locked, time.perf_counter())


@contextlib.contextmanager
def inductor_benchmarks_locked(path: str | None, waits: LockWaits | None = None) -> Iterator[LockWaits]:
    """Inductor's autotuning benchmarks (tens of ms of GPU per kernel config, run on a compiled kernel's first
    call) hold the shared lock, so a compile beside a timed trial never runs them inside its window. Yields the
    benchmarks' holds of the lock (`waits`, else new ones), each counted as it ends.

    Uses torch's own hook (`set_gpu_benchmark_lock_context`, torch >= 2.13); older releases get the module
    benchmarker's `benchmark_gpu` wrapped for the duration.
    """
    waits = LockWaits() if waits is None else waits
    if not path:
        yield waits
        return
    from torch._inductor.runtime import benchmarking

    @contextlib.contextmanager
    def shared_hold() -> Iterator[None]:
        with gpu_lock(path, shared=True, waits=waits):
            yield

    if hasattr(benchmarking, "set_gpu_benchmark_lock_context"):
        previous = benchmarking.set_gpu_benchmark_lock_context(shared_hold)
        try:
            yield waits
        finally:
            benchmarking.set_gpu_benchmark_lock_context(previous)
        return
    instance = benchmarking.benchmarker
    unwrapped, own = instance.benchmark_gpu, instance.__dict__.get("benchmark_gpu")

    def benchmark_gpu(*args, **kwargs):
        with shared_hold():
            return unwrapped(*args, **kwargs)

    instance.benchmark_gpu = benchmark_gpu
    try:
        yield waits
    finally:
        if own is None:
            del instance.benchmark_gpu  # the class's method shows through again
        else:
            instance.benchmark_gpu = own


@contextlib.contextmanager
def compiled_graphs_locked(path: str | None, synchronize: Callable[[], None],
                           waits: LockWaits | None = None) -> Iterator[LockWaits]:
    """Inductor's compiled graphs, run while inside, each hold the GPU's lock shared and are waited for
    (`synchronize`) before it is given back: a compiled model's first call compiles for seconds of host work
    outside the lock, then runs its kernels, which must never run beside another process's timed trial. Use it
    with `inductor_benchmarks_locked`, for the benchmarks a compile runs before its graph does. Yields the graphs'
    holds of the lock (`waits`, else new ones).

    Patches `CompiledFxGraph.__call__` for the duration (torch >= 2.6); on a torch without it the whole of each
    call inside holds the lock. Eager code between graphs (a graph break) runs unlocked, as a few kernels at most.
    """
    waits = LockWaits() if waits is None else waits
    if not path:
        yield waits
        return
    try:
        from torch._inductor.output_code import CompiledFxGraph
    except ImportError:
        CompiledFxGraph = None
    if CompiledFxGraph is None:
        with gpu_lock(path, shared=True, waits=waits):
            yield waits
        return
    unlocked = CompiledFxGraph.__dict__["__call__"]

    def locked_call(self, inputs):
        with gpu_lock(path, shared=True, waits=waits):
            try:
                return unlocked(self, inputs)
            finally:
                synchronize()

    CompiledFxGraph.__call__ = locked_call
    try:
        yield waits
    finally:
        CompiledFxGraph.__call__ = unlocked
