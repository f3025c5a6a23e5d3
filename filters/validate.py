"""Validation: the static chain in this process, then the execute checks in sandboxed workers; one verdict per record."""

from __future__ import annotations

import os

from filters.base import Funnel, Verdict
from filters.execute import STAGE_NAMES
from filters.static import STATIC_FILTERS, static_verdicts
from opgen.sandbox.gpus import gpu_slot_envs
from opgen.sandbox.pool import KeptPools, SandboxPool, SandboxResult, out_of_memory

CHECK_FUNCTION = "filters.execute.worker:check_task"
SANDBOX_STAGE = "sandbox"
VALIDATION_STAGES = (*(f.name for f in STATIC_FILTERS), SANDBOX_STAGE, *STAGE_NAMES)


def _payload(record: dict, device: str, threads: int, runtime_window_ms, seed: int, draws: int) -> dict:
    return {"code": record["code"], "id": record.get("id"), "device": device, "threads": threads, "seed": seed,
            "draws": draws, "runtime_window_ms": list(runtime_window_ms) if runtime_window_ms else None}


def _verdict(result: SandboxResult) -> Verdict:
    """The verdict of one sandbox result; its stages are the sandbox, then the checks the worker ran."""
    if result.status in ("crash", "timeout"):
        verdict = Verdict.reject(result.status, result.detail)
        verdict.stages = [(SANDBOX_STAGE, 0.0)]
        return verdict
    if result.status != "ok":  # check_task itself failed: report it on the record rather than lose the record
        verdict = Verdict.reject("exec_error", f"checker failed: {result.detail}")
        verdict.stages = [(SANDBOX_STAGE, 0.0)]
        return verdict
    value = result.value
    stages = [(SANDBOX_STAGE, 0.0), *((name, seconds) for name, seconds in value.get("stages", []))]
    keep = value["reason"] is None
    return Verdict(keep, value["reason"], value["metrics"], None if keep else value.get("detail"), stages)


_KEPT_POOLS = KeptPools()


def shared_pool(workers: int, timeout_s: float, memory_mb: int | None,
                slot_envs: list[dict[str, str]] | None = None) -> SandboxPool:
    """The execute checks' pool kept for the life of this process (see `KeptPools`)."""
    return _KEPT_POOLS.get((workers, float(timeout_s), memory_mb, repr(slot_envs)),
                           lambda: SandboxPool(workers, timeout_s, memory_mb, slot_envs=slot_envs))


def execute_verdicts(records: list[dict], *, device: str = "cpu", workers: int = 2, timeout_s: float = 120,
                     memory_mb: int | None = 4096, runtime_window_ms: tuple[float, float] | None = None,
                     funnel: Funnel | None = None, progress: bool = False, seed: int = 0, draws: int = 3,
                     reuse_pool: bool = False) -> list[dict]:
    """Verdict lines of the sandboxed execute checks, one per record, in input order.

    `reuse_pool` keeps the workers alive for the next call in this process (the build's shards)."""
    if not records:
        return []
    if funnel is not None:
        funnel.declare([SANDBOX_STAGE, *STAGE_NAMES])
    threads = max(1, (os.cpu_count() or 1) // workers)
    payloads = [_payload(r, device, threads, runtime_window_ms, seed, draws) for r in records]
    slot_envs = gpu_slot_envs(device)
    if reuse_pool:
        results = shared_pool(workers, timeout_s, memory_mb, slot_envs).run_many(CHECK_FUNCTION, payloads,
                                                                                  progress=progress)
    else:
        with SandboxPool(workers, timeout_s, memory_mb, slot_envs=slot_envs) as pool:
            results = pool.run_many(CHECK_FUNCTION, payloads, progress=progress)
    crowded = [i for i, result in enumerate(results) if out_of_memory(result, "detail")]
    if crowded and workers > 1:
        # Workers share the GPU (and the host's memory): a task that ran out of memory beside others is
        # judged again alone, so its verdict is about the task, not about its neighbours.
        with SandboxPool(1, timeout_s, memory_mb) as pool:
            for index, result in zip(crowded, pool.run_many(CHECK_FUNCTION, [payloads[i] for i in crowded])):
                results[index] = result
    lines = []
    for record, result in zip(records, results):
        verdict = _verdict(result)
        if funnel is not None:
            funnel.count(verdict)
        lines.append(verdict.line(record))
    return lines


def validate_records(records: list[dict], *, device: str = "cpu", workers: int = 2, timeout_s: float = 120,
                     memory_mb: int | None = 4096, runtime_window_ms: tuple[float, float] | None = None,
                     funnel: Funnel | None = None, progress: bool = False, seed: int = 0,
                     draws: int = 3, reuse_pool: bool = False) -> list[dict]:
    """Static chain, then the execute checks on the survivors; one verdict line per record, in input order."""
    funnel = funnel if funnel is not None else Funnel()
    funnel.declare(VALIDATION_STAGES)
    lines = static_verdicts(records, funnel)
    survivors = [i for i, line in enumerate(lines) if line["keep"]]
    executed = execute_verdicts([records[i] for i in survivors], device=device, workers=workers,
                                timeout_s=timeout_s, memory_mb=memory_mb, runtime_window_ms=runtime_window_ms,
                                funnel=funnel, progress=progress, seed=seed, draws=draws, reuse_pool=reuse_pool)
    for index, line in zip(survivors, executed):
        lines[index] = line
    return lines
