"""GPU memory shared by many workers' tasks: a task that ran out of it beside the others waits, before it is tried
again, until the GPU has the memory it is expected to need free (bounded), so that its retry does not meet the same
crowd; and a check worker gives its allocator's cache back between its holds while the device is short."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable

# A task's need, from the sampler's estimate of the bytes its forward moves: on the 1,009 candidates of the
# 6,000-task build's first 805 tasks (one H100), the checks' peak was a median 2.6x that estimate, at most 4.5x for
# nine tasks in ten; the half-GB floor covers the small tasks' allocator blocks.
NEED_PER_BYTE_MOVED = 4
NEED_FLOOR_MB = 512
# A task without an estimate (a hand-written candidate, a KernelBench problem) waits for this share of the GPU.
UNKNOWN_NEED_SHARE = 1 / 8
# A retry whose failed try says what it held waits for that instead: the checks' peak (`gpu_peak_mb`) plus the
# allocation that failed, times this margin. The estimate from bytes moved overshoots where a chain's large
# intermediates are never live at once: in the 6,000-task build's runs 5-6 (one H100, 512 candidates), 8 retries
# asked 42-125 GB by it, each waited its whole bound (30-39 s) for memory that never came free, then ran anyway,
# and their checks peaked at 8.5-17.7 GB; those 8 waits were 45% of the retries' 571 s of waiting.
SHOWN_NEED_MARGIN = 1.25
_FAILED_ALLOCATION = re.compile(r"Tried to allocate ([0-9.]+) (GiB|MiB|KiB|bytes|B)\b")
_MB_PER_UNIT = {"GiB": 1024.0, "MiB": 1.0, "KiB": 1 / 1024, "bytes": 1 / 2**20, "B": 1 / 2**20}
# A retry waits at most this share of its sandbox time limit (and never over a minute), then runs anyway, so waiting
# never becomes a timeout, nor holds a timing lane long.
MAX_WAIT_SHARE = 0.25
MAX_WAIT_S = 60.0
POLL_S = 0.1


def estimated_need_mb(bytes_moved: float | None, total_mb: float) -> float:
    """The GPU memory a task is expected to need at its peak: NEED_PER_BYTE_MOVED times the bytes its forward moves
    (at least NEED_FLOOR_MB), or UNKNOWN_NEED_SHARE of the GPU without an estimate; never more than the GPU."""
    if not bytes_moved or bytes_moved <= 0:
        return max(NEED_FLOOR_MB, total_mb * UNKNOWN_NEED_SHARE)
    return min(total_mb, max(NEED_FLOOR_MB, NEED_PER_BYTE_MOVED * bytes_moved / 2**20))


def failed_allocation_mb(detail: str | None) -> float | None:
    """The size of the allocation an out-of-memory error names ("Tried to allocate 2.87 GiB"), in MB."""
    found = _FAILED_ALLOCATION.search(detail or "")
    return float(found.group(1)) * _MB_PER_UNIT[found.group(2)] if found else None


def need_shown_by_failure(peak_mb: float | None, detail: str | None) -> float | None:
    """What a try that ran out of GPU memory showed it needs: SHOWN_NEED_MARGIN times the peak it held plus the
    allocation that failed; None when its result says neither."""
    allocation = failed_allocation_mb(detail)
    if allocation is None and not peak_mb:
        return None
    return SHOWN_NEED_MARGIN * ((peak_mb or 0.0) + (allocation or 0.0))


def retry_payload(payload: dict, peak_mb: float | None, detail: str | None) -> dict:
    """The payload of a task tried again after it ran short of GPU memory (`memory_wait`): the need its failed try
    showed (`need_shown_by_failure` of the peak it held and the allocation that failed) as `memory_need_mb`, if any;
    without one the retry waits for the estimate from its bytes moved."""
    shown = need_shown_by_failure(peak_mb, detail)
    return {**payload, "memory_wait": True, **({"memory_need_mb": round(shown)} if shown else {})}


def retry_need_mb(payload: dict, total_mb: float) -> float:
    """The memory a retry waits for: what its failed try showed (`memory_need_mb`), else the estimate from its bytes
    moved; at least NEED_FLOOR_MB, never more than the GPU."""
    shown = payload.get("memory_need_mb")
    if not shown:
        return estimated_need_mb(payload.get("bytes_moved"), total_mb)
    return min(total_mb, max(NEED_FLOOR_MB, float(shown)))


def wait_for_free_memory(need_mb: float, max_wait_s: float, free_mb: Callable[[], float],
                         sleep: Callable[[float], None] = time.sleep) -> dict:
    """Poll `free_mb()` until it reaches `need_mb` or `max_wait_s` has passed. The figures a verdict line keeps:
    `memory_wait_s`, and `memory_waited_out` when the memory never came free (the task runs anyway)."""
    started = time.perf_counter()
    while free_mb() < need_mb:
        if time.perf_counter() - started >= max_wait_s:
            return {"memory_wait_s": round(time.perf_counter() - started, 3), "memory_waited_out": True}
        sleep(POLL_S)
    return {"memory_wait_s": round(time.perf_counter() - started, 3)}


def wait_before_retry(payload: dict, default_timeout_s: float) -> dict:
    """In a worker, on CUDA: wait for the memory a retried task (`payload["memory_wait"]`) needs, bounded by its
    `timeout_s`: what its failed try showed (`memory_need_mb`, from `need_shown_by_failure`), else the estimate from
    its `bytes_moved`; {} for a first try, or when the device cannot say."""
    if not payload.get("memory_wait"):
        return {}
    import torch

    try:
        torch.cuda.empty_cache()   # what this worker's allocator keeps is free memory for its own task
        total_mb = torch.cuda.mem_get_info()[1] / 2**20
    except Exception:  # noqa: BLE001 - a broken context: the task's own run will say so
        return {}
    need = retry_need_mb(payload, total_mb)
    max_wait = min(MAX_WAIT_S, MAX_WAIT_SHARE * float(payload.get("timeout_s") or default_timeout_s))
    return wait_for_free_memory(need, max_wait, lambda: torch.cuda.mem_get_info()[0] / 2**20)


# A check worker gives its allocator's cached blocks back to the device at the end of a hold of the GPU's lock
# whenever the device has less than this share of its memory free. Blocks a process caches are free memory only to
# itself: on one H100 with 16 workers (the 6,000-task build's run at 2,019-2,818 tasks) the device was over 70 GB
# used in 45% of the memory sampler's samples, 496 of 1,137 candidates ran short of GPU memory beside the others
# (their short tries 2,737 worker-seconds), and 179 were rejected for it (`opgen profile`). The checks
# already give the cache back after each check; a check of many passes (the every-operator rule, the rough
# runtime, the input draws) kept its largest pass's temporaries through every wait for the lock in between.
RELEASE_BELOW_FREE_SHARE = 0.25
# Set in a build's environment (its workers inherit it), another share: 0 never gives the cache back within a check,
# as before, for comparing the two on one machine (scripts/gpu/dataset.sh MODE=restart).
RELEASE_SHARE_ENV = "OPGEN_GPU_CACHE_RELEASE_SHARE"


def release_share(environ: dict | None = None) -> float:
    """The share of free memory under which a check worker gives its cache back: RELEASE_SHARE_ENV, else
    RELEASE_BELOW_FREE_SHARE; UsageError (one line, exit 2) for a value that is not a number from 0 to 1 (a build
    checks it before any work)."""
    from opgen.errors import UsageError

    text = (os.environ if environ is None else environ).get(RELEASE_SHARE_ENV)
    if text is None:
        return RELEASE_BELOW_FREE_SHARE
    try:
        share = float(text)
    except ValueError:
        share = -1.0
    if not 0.0 <= share <= 1.0:
        raise UsageError(f"{RELEASE_SHARE_ENV}={text!r}: a share of the GPU's memory from 0 to 1 (0: never)")
    return share


def release_cache_if_short(below_share: float | None = None,
                           free_and_total: Callable[[], tuple[int, int]] | None = None,
                           cached_bytes: Callable[[], int] | None = None,
                           release: Callable[[], None] | None = None) -> bool:
    """In a worker on CUDA: give this process's cached GPU blocks back to the device (`torch.cuda.empty_cache`) when
    the device has less than `below_share` of its memory free (default: `release_share()`) and this process caches
    any; whether it did. Never raises: a broken context is for the
    task's own run to report. The callables stand in for torch's in tests."""
    import torch

    try:
        if below_share is None:
            below_share = release_share()
        if free_and_total is None and not torch.cuda.is_initialized():
            return False
        free, total = (free_and_total or torch.cuda.mem_get_info)()
        if free >= below_share * total:
            return False
        cached = (cached_bytes or (lambda: torch.cuda.memory_reserved() - torch.cuda.memory_allocated()))()
        if cached <= 0:
            return False
        (release or torch.cuda.empty_cache)()
    except Exception:  # noqa: BLE001 - see above
        return False
    return True
