"""The held-out stage: held-out input sizes for each task of a finished build or a published dataset folder,
validated in sandboxed workers on the GPU or the CPU, resumable, written into the rows as three columns."""

from __future__ import annotations

import json
import os
from pathlib import Path

from opgen.checkpoint import ChunkLog, inputs_identity, run_in_chunks
from opgen.sandbox.faults import ErrorRun
from opgen.sandbox.gpus import gpu_slot_envs
from opgen.sandbox.pool import SandboxPool

FUNCTION = "opgen.heldout.worker:held_out_task"
CHECK_FUNCTION = "opgen.heldout.worker:check_configs"
HELD_OUT_COLUMNS = ("held_out_sizes", "held_out_count", "held_out_note")
DEFAULT_CONFIGS = 2      # held-out configurations wanted per task, besides the timed one
EXTRA_TRIES = 2          # candidates tried beyond those, to replace configurations that fail
CHUNK = 32               # tasks per logged chunk: what a killed run loses at most


def stage_log(log_path: str | Path, records: list[dict], device: str, configs: int, seed: int) -> ChunkLog:
    """The stage's log of finished chunks (`log_path`.partial), for these records and options only."""
    identity = inputs_identity(records, command="heldout", device=device, configs=configs, seed=seed)
    return ChunkLog(log_path, identity)


def _pool(device: str, workers: int, timeout_s: float, memory_mb: int | None,
          confined: bool = False) -> tuple[SandboxPool, int]:
    """The stage's sandbox workers (spread over the visible GPUs) and the CPU threads each gets."""
    threads = max(1, (os.cpu_count() or 1) // max(1, workers))
    return SandboxPool(workers, timeout_s, memory_mb, slot_envs=gpu_slot_envs(device), threads=threads,
                       confined=confined), threads


def held_out_columns(records: list[dict], *, chunk_log: ChunkLog, device: str = "cpu",
                     configs: int = DEFAULT_CONFIGS, workers: int = 2, timeout_s: float = 600.0,
                     memory_mb: int | None = 4096, seed: int = 0, progress: bool = True) -> tuple[list[dict], int]:
    """The three held-out columns for each record (`id`, `code`), in input order, and how many records were
    reused from an interrupted run's `chunk_log` (`stage_log`; the caller finishes it once the columns are out)."""
    faults = ErrorRun()
    pool, threads = _pool(device, workers, timeout_s, memory_mb)
    with pool:
        def process(chunk: list[dict]) -> tuple[list[dict], None]:
            payloads = [{"code": r["code"], "id": r.get("id"), "device": device, "seed": seed, "configs": configs,
                         "tries": configs + EXTRA_TRIES, "threads": threads} for r in chunk]
            lines = [_columns(result) for result in pool.run_many(FUNCTION, payloads)]
            faults.check(lines, chunk, detail_key="held_out_note", device=device)   # a machine fault is no task's verdict
            return lines, None

        lines, _, reused = run_in_chunks(records, CHUNK, process, chunk_log, "held-out sizes", progress=progress)
    return lines, reused


def _columns(result) -> dict:
    if result.status != "ok" or not isinstance(result.value, dict):
        detail = (result.detail or "").strip().splitlines()[-1:] or [""]
        return {"held_out_sizes": "[]", "held_out_count": 0,
                "held_out_note": f"{result.status}: {detail[0]}"[:500]}
    sizes = result.value["held_out_sizes"]
    return {"held_out_sizes": json.dumps(sizes), "held_out_count": len(sizes),
            "held_out_note": result.value.get("note")}


def check_held_out(records: list[dict], *, device: str = "cpu", workers: int = 2, timeout_s: float = 600.0,
                   memory_mb: int | None = 4096, seed: int = 0, progress: bool = False,
                   confined: bool = False) -> list[list[dict]]:
    """Each record's held-out configurations (`held_out_sizes`) validated again in fresh workers (`confined`, for
    a dataset from elsewhere): per record, one {"sizes", "reason", "detail"} per configuration (reason None when it
    passes; a worker's failure is every configuration's)."""
    from opgen.taskcode.sizes import parse_configs

    configs = [parse_configs(r.get("held_out_sizes")) for r in records]
    if not any(configs):   # rows without held-out sizes (a CPU build's): no worker to start
        return [[] for _ in records]
    payloads = [{"code": r["code"], "id": r.get("id"), "device": device, "seed": seed, "configs": c}
                for r, c in zip(records, configs)]
    pool, _ = _pool(device, workers, timeout_s, memory_mb, confined)
    with pool:
        results = pool.run_many(CHECK_FUNCTION, [p for p, c in zip(payloads, configs) if c], progress=progress)
    answers = iter(results)
    out = []
    for config_list in configs:
        if not config_list:
            out.append([])
            continue
        result = next(answers)
        if result.status == "ok" and isinstance(result.value, dict):
            out.append(result.value["results"])
        else:
            detail = f"{result.status}: {(result.detail or '').strip()[-200:]}"
            out.append([{"sizes": sizes, "reason": "crash" if result.status == "crash" else result.status,
                         "detail": detail} for sizes in config_list])
    return out
