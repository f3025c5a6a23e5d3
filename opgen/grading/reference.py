"""The reference's timings reused within a process: measured once per (task, timed configuration, device, options
that change them) in workers that never run solution code, and added to every grade of that task."""

from __future__ import annotations

import functools
import hashlib
import json
from collections import OrderedDict

from opgen.grading.beside_solution import REFERENCE_FUNCTION
from opgen.grading.beside_solution.figures import speedups
from opgen.sandbox.faults import machine_fault
from opgen.sandbox.gpus import gpu_slot_envs, visible_gpu_models
from opgen.sandbox.pool import KeptPools, SandboxPool

CACHE_SIZE = 4096   # reference timings kept per process (a few hundred bytes each)
TIMING_FIELDS = ("device", "seed", "draws", "warmups", "trials", "min_trials", "compile_baseline", "threads")
_CACHE: OrderedDict[tuple, dict] = OrderedDict()
_POOLS = KeptPools()


def reference_key(payload: dict) -> tuple:
    """What the reference's figures depend on: the task's code, its timed (first) configuration, the device (and
    on CUDA the GPUs' models), the draws' seed and count (they fix the timed draws), the trial plan, the compile
    baseline and the worker's threads."""
    hardware = _gpu_models() if payload["device"] == "cuda" else ()
    return (hashlib.sha256(payload["task"].encode()).hexdigest(), json.dumps(payload["configs"][0], sort_keys=True),
            hardware, *(payload.get(field) for field in TIMING_FIELDS))


@functools.lru_cache(maxsize=1)
def _gpu_models() -> tuple[str, ...]:
    return tuple(visible_gpu_models())


def clear_reference_cache() -> None:
    """Forget every reference timing of this process (the next grade of each task measures it again)."""
    _CACHE.clear()


def cached_reference(payload: dict) -> dict | None:
    """The cached figures for a payload's task, if measured (a copy)."""
    figures = _CACHE.get(reference_key(payload))
    return dict(figures) if figures is not None else None


def reference_pool(device: str, timeout_s: float, memory_mb: int | None, threads: int) -> SandboxPool:
    """The workers that time references, kept for the life of this process; one per GPU (one on the CPU). No
    solution is ever sent to them."""
    slots = gpu_slot_envs(device)
    key = (device, float(timeout_s), memory_mb, threads)
    return _POOLS.get(key, lambda: SandboxPool(len(slots or [None]), timeout_s, memory_mb, slot_envs=slots,
                                               threads=threads))


def reference_payload(payload: dict) -> dict:
    """The part of a grade's payload the reference's timing reads: no solution."""
    return {"task": payload["task"], "configs": payload["configs"][:1],
            **{field: payload.get(field) for field in TIMING_FIELDS}}


def add_reference_timings(payloads: list[dict], lines: list[dict], timeout_s: float, memory_mb: int | None) -> None:
    """Give each line whose solution was timed apart from its reference (`reference_timing` "apart") the
    reference's figures and the speed-ups: from this process's cache, else measured now, once per key, in the
    reference workers. Measured only for a correct solution; a failed one gets them when already cached.
    `reference_reused` says whether they were measured for an earlier grade."""
    apart = [i for i, line in enumerate(lines)
             if payloads[i].get("reference_timing") == "apart" and line.get("solution_ms") is not None]
    keys = {i: reference_key(payloads[i]) for i in apart}
    missing: dict[tuple, dict] = {}
    for i in apart:
        if lines[i].get("correct") and keys[i] not in _CACHE:
            missing.setdefault(keys[i], payloads[i])
    failures: dict[tuple, str] = {}
    if missing:
        first = next(iter(missing.values()))
        pool = reference_pool(first["device"], timeout_s, memory_mb, int(first.get("threads") or 1))
        results = pool.run_many(REFERENCE_FUNCTION, [reference_payload(p) for p in missing.values()])
        for key, result in zip(missing, results):
            if result.status == "ok" and result.value.get("ok"):
                _CACHE[key] = {**result.value, "reference_worker_pid": result.pid}
                while len(_CACHE) > CACHE_SIZE:
                    _CACHE.popitem(last=False)
            else:
                failures[key] = (result.value or {}).get("detail") or result.detail or result.status
    measured_now = set(missing) - set(failures)
    for i in apart:
        key = keys[i]
        if key in failures:
            lines[i]["reference_timing_error"] = failures[key][:2000]
            if machine_fault(failures[key]):
                lines[i]["machine_suspect"] = True
            continue
        if key not in _CACHE:
            continue
        _CACHE.move_to_end(key)
        merge_reference(lines[i], _CACHE[key], reused=key not in measured_now)
        measured_now.discard(key)   # the next line of the same key reuses what this one measured


def merge_reference(line: dict, figures: dict, reused: bool) -> None:
    """The reference's fields and the speed-ups added to a line that holds the solution's timing."""
    for field in ("eager_ms", "eager_ms_iqr", "compile_ms", "compile_ms_iqr", "compile_error"):
        if figures.get(field) is not None:
            line[field] = figures[field]
    line.setdefault("compile_ms", None)
    line["trials"] = {**line.get("trials", {}), **figures["reference_trials"]}
    line.update(speedups(line))
    line.update(reference_reused=reused, reference_worker_pid=figures["reference_worker_pid"])
