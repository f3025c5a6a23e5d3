"""Validation: the static chain in this process, then the execute checks in sandboxed workers; one verdict per record."""

from __future__ import annotations

import os
import threading

from filters.base import Funnel, Verdict
from filters.execute import STAGE_NAMES
from filters.static import STATIC_FILTERS, static_verdicts
from opgen.sandbox.faults import ErrorRun
from opgen.sandbox.gpu_memory import retry_payload
from opgen.sandbox.gpus import gpu_slot_envs
from opgen.sandbox.pool import KeptPools, SandboxPool, SandboxResult, out_of_memory, over_memory_limit

CHECK_FUNCTION = "filters.execute.worker:check_task"
SANDBOX_STAGE = "sandbox"
VALIDATION_STAGES = (*(f.name for f in STATIC_FILTERS), SANDBOX_STAGE, *STAGE_NAMES)


def _payload(record: dict, device: str, threads: int, runtime_window_ms, seed: int, draws: int,
             checks: tuple[str, ...] | None = None, timeout_s: float | None = None, device_time: bool = False) -> dict:
    return {"code": record["code"], "id": record.get("id"), "device": device, "threads": threads, "seed": seed,
            "draws": draws, "runtime_window_ms": list(runtime_window_ms) if runtime_window_ms else None,
            "stages": list(checks) if checks is not None else None,
            # the memory a retry short of GPU memory waits for, and how long it may (opgen/sandbox/gpu_memory.py)
            "bytes_moved": record.get("bytes_moved"), "timeout_s": timeout_s,
            **({"device_time": True} if device_time else {})}


MEMORY_RETRIES = 2   # tries again in a kept worker for a task whose checks ran short of GPU memory beside others


def _verdict(result: SandboxResult) -> Verdict:
    """The verdict of one sandbox result; its stages are the sandbox, then the checks the worker ran.

    The sandbox stage's seconds are the worker's time on the task outside the checks (start-up of a fresh
    worker, loading the payload, the clean-up after the worker's previous task, the pipes): with the checks'
    seconds they add up to the task's time in its worker (`worker_s`; `worker_cpu_s` is its CPU time, and
    `worker_lock_wait_s`, on CUDA, its wait for the GPU's lock, with its holds of it: `worker_lock_holds`, those
    that waited, `worker_lock_held_s` and the longest, `worker_lock_hold_max_s`).

    A task past the pool's resident-memory limit (judged alone, in a fresh worker) did not crash: it cannot run
    in the memory the build allows, as a task whose allocation raises (`exec_error`, flagged `memory_limit`)."""
    if over_memory_limit(result):
        verdict = Verdict.reject("exec_error", f"alone in a fresh worker, {result.detail}", memory_limit=True)
    elif result.status in ("crash", "timeout"):
        verdict = Verdict.reject(result.status, result.detail)
    elif result.status != "ok":  # check_task itself failed: report it on the record rather than lose the record
        verdict = Verdict.reject("exec_error", f"checker failed: {result.detail}")
    else:
        value = result.value
        checks = [(name, seconds) for name, seconds in value.get("stages", [])]
        overhead = max(0.0, result.seconds - sum(seconds for _, seconds in checks))
        keep = value["reason"] is None
        verdict = Verdict(keep, value["reason"], value["metrics"], None if keep else value.get("detail"),
                          [(SANDBOX_STAGE, overhead), *checks])
        if value.get("lock_wait_s"):
            verdict.metrics["worker_lock_wait_s"] = value["lock_wait_s"]
        verdict.metrics.update({f"worker_{key}": figure for key, figure in (value.get("lock_holds") or {}).items()})
        for key in ("device_s_by_check", "float64_device_s_by_check"):
            if value.get(key):
                verdict.metrics[f"worker_{key}"] = value[key]
    if not verdict.stages:
        verdict.stages = [(SANDBOX_STAGE, result.seconds)]
    # the worker's wall and CPU seconds on the task, and which worker and which of its tasks it was (a first task
    # pays for the worker's imports and first compile): a profile of the stage, line by line
    verdict.metrics.update(worker_s=round(result.seconds, 3), worker_cpu_s=round(result.cpu_s, 3),
                           worker_pid=result.pid, worker_task=result.task_number)
    return verdict


_KEPT_POOLS = KeptPools()


def shared_pool(workers: int, timeout_s: float, memory_mb: int | None,
                slot_envs: list[dict[str, str]] | None = None, lane: int = 0, threads: int | None = None,
                confined: bool = False) -> SandboxPool:
    """The execute checks' pool of `lane`, kept for the life of this process (see `KeptPools`); its workers get
    `threads` OpenMP threads when it starts."""
    return _KEPT_POOLS.get((workers, float(timeout_s), memory_mb, repr(slot_envs), confined, lane),
                           lambda: SandboxPool(workers, timeout_s, memory_mb, slot_envs=slot_envs, threads=threads,
                                               confined=confined))


def forget_kept_pools(lane: int) -> None:
    """Stop the execute checks' kept pools of `lane`: its next call starts fresh workers."""
    _KEPT_POOLS.close_except({key for key in _KEPT_POOLS.keys() if key[-1] != lane})


def execute_verdicts(records: list[dict], *, device: str = "cpu", workers: int = 2, timeout_s: float = 120,
                     memory_mb: int | None = 4096, runtime_window_ms: tuple[float, float] | None = None,
                     funnel: Funnel | None = None, progress: bool = False, seed: int = 0, draws: int = 3,
                     reuse_pool: bool = False, lane: int = 0, lanes: int = 1,
                     stop: threading.Event | None = None, faults: ErrorRun | None = None,
                     checks: tuple[str, ...] | None = None, device_time: bool = False,
                     confined: bool = False) -> list[dict] | None:
    """Verdict lines of the sandboxed execute checks, one per record, in input order.

    `reuse_pool` keeps the workers alive for the next call in this process (the build's shards); a build
    running `lanes` such calls side by side gives each its `lane` number: its own kept pool, its share of
    the CPU threads, and its next GPUs on a machine with several. Once `stop` is set (the build no longer needs
    these verdicts) the checks under way finish, none starts, and the call returns None. `checks` names the
    execute checks to run (in their own order; all of them by default). `device_time` runs each check under torch's
    profiler and puts the device's seconds on it on the line (`worker_device_s_by_check`): a diagnosis, slower.
    `confined` runs them in confined workers (opgen/sandbox/confine.py), as for tasks written elsewhere: no network,
    no signals past the worker, no writes past its scratch, no secrets of the user's.

    A rejection whose message names the machine, or a run of identical ones (`faults`, which may carry the run
    over from earlier calls: opgen/sandbox/faults.py), raises MachineFault: the call returns no verdict at all."""
    if not records:
        return []
    if funnel is not None:
        funnel.declare([SANDBOX_STAGE, *STAGE_NAMES])
    threads = max(1, (os.cpu_count() or 1) // (workers * lanes))
    unknown = sorted(set(checks or ()) - set(STAGE_NAMES))
    if unknown:
        raise ValueError(f"unknown execute checks: {', '.join(unknown)} (known: {', '.join(STAGE_NAMES)})")
    payloads = [_payload(r, device, threads, runtime_window_ms, seed, draws, checks, timeout_s, device_time)
                for r in records]
    slot_envs = gpu_slot_envs(device)
    if slot_envs:  # lane k's workers start on the GPU after lane k-1's
        offset = (lane * workers) % len(slot_envs)
        slot_envs = slot_envs[offset:] + slot_envs[:offset]
    sharing = workers * lanes > 1   # other workers' checks on the same GPU
    retried: dict[int, str] = {}
    lost_s: dict[int, float] = {}   # the seconds of a task's tries that ran short of GPU memory
    if reuse_pool:
        pool = shared_pool(workers, timeout_s, memory_mb, slot_envs, lane, threads, confined)
        # GPU memory runs short only while other checks hold it: such a task is tried again in a kept worker, twice
        # at most, each time once the memory it needs is free (bounded: opgen/sandbox/gpu_memory.py). A try in a
        # fresh worker took a median 23.7 s on an H100 against 5.2 s in a kept one (its imports and first compile),
        # one after another while the shard waited: 23% of the execute workers' time on the first 1,018 candidates
        # of the 6,000-task build. The try again is queued as soon as the short one ends: run after the whole
        # shard's first tries, it left a lane's other worker idle (89 of 122 shards of that build's run at 1,508-2,019
        # tasks held such tries again, 215 of 681 candidates, and a lane's workers were busy 78% of a shard's span).
        retried_times: dict[int, int] = {}

        def again(index: int, result: SandboxResult) -> dict | None:
            if not sharing or not _short_of_gpu_memory(result) or retried_times.get(index, 0) >= MEMORY_RETRIES:
                return None
            retried_times[index] = retried_times.get(index, 0) + 1
            retried[index] = "kept worker"
            lost_s[index] = lost_s.get(index, 0.0) + result.seconds
            return _retry_payload(payloads[index], result)

        results = pool.run_many(CHECK_FUNCTION, payloads, progress=progress, stop=stop, again=again)
    else:
        with SandboxPool(workers, timeout_s, memory_mb, slot_envs=slot_envs, threads=threads, confined=confined) as pool:
            results = pool.run_many(CHECK_FUNCTION, payloads, progress=progress, stop=stop)
    if stop is not None and stop.is_set():
        return None
    crowded = [i for i, result in enumerate(results)
               if over_memory_limit(result) or (sharing and not reuse_pool and _short_of_gpu_memory(result))]
    if crowded:
        # A kept worker's resident memory holds what its earlier tasks left: a task past the resident limit (or,
        # without kept workers, short of GPU memory beside others) is judged again alone in a fresh worker, so its
        # verdict is about the task, not about its predecessors.
        with SandboxPool(1, timeout_s, memory_mb, max_tasks_per_worker=1, confined=confined) as pool:
            again = [_retry_payload(payloads[i], results[i]) if _short_of_gpu_memory(results[i]) else payloads[i]
                     for i in crowded]
            for index, result in zip(crowded, pool.run_many(CHECK_FUNCTION, again)):
                results[index], retried[index] = result, "fresh worker"
    lines = []
    for index, (record, result) in enumerate(zip(records, results)):
        verdict = _verdict(result)
        if index in retried:   # judged on a second try (see above): where, and the seconds its short tries took
            verdict.metrics["memory_retry"] = retried[index]
            if index in lost_s:
                verdict.metrics["memory_retry_lost_s"] = round(lost_s[index], 3)
        if funnel is not None:
            funnel.count(verdict)
        lines.append(verdict.line(record))
    (faults if faults is not None else ErrorRun()).check(lines, records, device=device)
    return lines


def _retry_payload(payload: dict, failed: SandboxResult) -> dict:
    """The payload of a task tried again after it ran short of GPU memory: it first waits for the memory its failed
    try showed it needs (the checks' peak and the allocation that failed), else for the estimate from its bytes moved
    (opgen/sandbox/gpu_memory.py)."""
    value = failed.value if isinstance(failed.value, dict) else {}
    metrics = value.get("metrics") if isinstance(value.get("metrics"), dict) else {}
    return retry_payload(payload, metrics.get("gpu_peak_mb"), value.get("detail") or failed.detail)


def _short_of_gpu_memory(result: SandboxResult) -> bool:
    """The task's checks ran out of GPU memory (not past the pool's resident limit, which kills the worker)."""
    return not over_memory_limit(result) and out_of_memory(result, "detail")


def validate_records(records: list[dict], *, device: str = "cpu", workers: int = 2, timeout_s: float = 120,
                     memory_mb: int | None = 4096, runtime_window_ms: tuple[float, float] | None = None,
                     funnel: Funnel | None = None, progress: bool = False, seed: int = 0,
                     draws: int = 3, reuse_pool: bool = False, faults: ErrorRun | None = None,
                     checks: tuple[str, ...] | None = None, confined: bool = False) -> list[dict]:
    """Static chain, then the execute checks (`checks` by name, default all; in `confined` workers) on the
    survivors; one verdict line per record, in input order."""
    funnel = funnel if funnel is not None else Funnel()
    funnel.declare(VALIDATION_STAGES)
    lines = static_verdicts(records, funnel)
    survivors = [i for i, line in enumerate(lines) if line["keep"]]
    executed = execute_verdicts([records[i] for i in survivors], device=device, workers=workers,
                                timeout_s=timeout_s, memory_mb=memory_mb, runtime_window_ms=runtime_window_ms,
                                funnel=funnel, progress=progress, seed=seed, draws=draws, reuse_pool=reuse_pool,
                                faults=faults, checks=checks, confined=confined)
    for index, line in zip(survivors, executed):
        lines[index] = line
    return lines
