"""Timing stage: shard records over the visible GPUs, time each in a sandbox pool per GPU, add the columns.

Per GPU, `workers_per_gpu` sandbox workers (pinned with CUDA_VISIBLE_DEVICES) build, compile and time
tasks; an exclusive file lock per GPU lets only one of them run timed code at a time, so model building,
input generation and `torch.compile` of the next tasks proceed on the CPU cores while the GPU times.
All workers share one inductor/FX-graph cache folder.
"""

from __future__ import annotations

import contextlib
import math
import statistics
import threading
from dataclasses import dataclass
from pathlib import Path

from filters.window import DEFAULT_WINDOW_MS, Window
from opgen.errors import MachineFault
from opgen.sandbox import gpu_memory
from opgen.sandbox.faults import ErrorRun, retried_after_harness_failure
from opgen.sandbox.gpus import default_workers_per_gpu, gpu_lock_path, visible_gpus
from opgen.sandbox.pool import KeptPools, SandboxPool, SandboxResult, is_gpu_out_of_memory, out_of_memory
from opgen.sandbox.worker import WARM_UP_ENV
from opgen.timing.guard import recheck
from opgen.timing.measure import empty_result
from opgen.timing.precision import PRECISIONS
from opgen.timing.trials import TrialPlan

__all__ = ["TimingOptions", "time_records", "timing_summary"]

FN_PATH = "opgen.timing.measure:measure_task"
WARM_UP_PATH = "opgen.timing.measure:set_up_worker"


_SHARED_POOLS = KeptPools()


def _pool(workers: int, timeout_s: float, memory_mb: int | None, env: dict[str, str], reuse: bool, lane: int,
          confined: bool = False):
    """A sandbox pool for one GPU: a fresh one, or (reuse) one kept for the life of this process, one per lane."""
    def make() -> SandboxPool:
        return SandboxPool(workers=workers, timeout_s=timeout_s, memory_mb=memory_mb, env=env, confined=confined)

    if not reuse:
        return make()
    return contextlib.nullcontext(_SHARED_POOLS.get(_pool_key(workers, timeout_s, memory_mb, env, lane, confined),
                                                    make))


def _pool_key(workers: int, timeout_s: float, memory_mb: int | None, env: dict[str, str], lane: int,
              confined: bool = False) -> tuple:
    return lane, workers, float(timeout_s), memory_mb, tuple(sorted(env.items())), confined


@dataclass(frozen=True)
class TimingOptions:
    """What decides a timing (the method, not the speed): device, trial plan, seed, precision, compile."""

    device: str = "cuda"
    trials: int = 100            # the cap (adaptive) or the exact count (fixed)
    warmups: int = 10
    trial_mode: str = "adaptive"
    min_trials: int = 10
    seed: int = 0
    precision: str = "default"
    with_compile: bool = True
    # a build's window: compile is not timed for a task whose eager median falls outside it (it is rejected)
    compile_window_ms: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        if self.device not in ("cuda", "cpu"):
            raise ValueError(f"device must be 'cuda' or 'cpu', not {self.device!r}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, not {self.precision!r}")
        TrialPlan(self.warmups, self.trials, min(self.min_trials, self.trials), self.trial_mode)  # validates

    def payload(self, record: dict) -> dict:
        return {"code": record["code"], "id": record.get("id"), "device": self.device, "trials": self.trials,
                "warmups": self.warmups, "trial_mode": self.trial_mode, "min_trials": self.min_trials,
                "seed": self.seed, "precision": self.precision, "compile": self.with_compile,
                "flops": record.get("flops"), "bytes_moved": record.get("bytes_moved"),
                "compile_window_ms": list(self.compile_window_ms) if self.compile_window_ms else None}


def time_records(records: list[dict], options: TimingOptions | None = None, *, timeout_s: float = 600,
                 progress: bool = True, workers_per_gpu: int | None = None, cache_dir: str | None = None,
                 memory_mb: int | None = None, reuse_pools: bool = False, stop: threading.Event | None = None,
                 lane: int = 0, guard: bool = True, recheck_only: bool = False, alone: bool = False,
                 confined: bool = False, **option_fields) -> list[dict] | None:
    """The records with the timing columns added, in input order; a task that fails keeps null timings
    and a `timing_error`. device "cpu" times on the host (one worker) so CI runs the same code.
    `options` (or its fields as keywords) say how to time; `reuse_pools` keeps each GPU's workers alive for
    the next call in this process (the build's shards); calls side by side in threads (a stage's lanes) each keep
    their own, by `lane`. On CUDA, `guard` times a row again when its own evidence says its timing was slowed
    (opgen/timing/guard.py); `recheck_only` takes `records` as timed already and only applies the guard (rows
    timed before a guard rule existed, or rechecked under an older one). Once `stop` is set (the build no longer needs these
    timings) the tasks under way finish, none starts, and the call returns None. With `recheck_only`, rows whose
    timing is no verdict yet (`recheck_reason`) are timed again first, on any device. `alone` times each row once,
    each timed section with the host's other sandbox workers paused (the build's quiet pass: nothing else runs)."""
    options = options or TimingOptions(**option_fields)

    def time_once(rows: list[dict], show: bool, quiet: bool = False) -> list[dict] | None:
        return _time_once(rows, options, timeout_s=timeout_s, progress=show, workers_per_gpu=workers_per_gpu,
                          cache_dir=cache_dir, memory_mb=memory_mb, reuse_pools=reuse_pools, stop=stop, lane=lane,
                          quiet=quiet, confined=confined)

    if alone:
        return time_once(records, progress, quiet=True)
    if recheck_only:
        timed = [dict(r) for r in records]
        failed = [index for index, row in enumerate(timed) if recheck_reason(row)]
        again = time_once([timed[index] for index in failed], False) if failed else []
        if again is None:
            return None
        for index, row in zip(failed, again):
            first_error = str(timed[index].get("timing_error") or "").splitlines()[0][:200]
            reason = recheck_reason(timed[index])
            timed[index] = {**row, "timing_rechecked": f"its first timing {reason} ({first_error})"}
    else:
        timed = time_once(records, progress)
    if timed is None or not guard or options.device != "cuda":
        return timed
    return recheck(timed, lambda suspects: time_once(suspects, False, quiet=True))


def _pool_envs(device: str, cache_dir: str | None, workers_per_gpu: int | None) -> tuple[dict[str, dict], int]:
    """The timing pools' environments, one per visible GPU (the host's one on the CPU), and their workers each."""
    env = {WARM_UP_ENV: WARM_UP_PATH}
    if cache_dir:
        env["TORCHINDUCTOR_CACHE_DIR"] = str(Path(cache_dir).resolve())
    if device == "cpu":
        return {"": env}, 1
    gpus = visible_gpus()
    if not gpus:
        raise MachineFault("no CUDA device is visible")
    return {gpu: {**env, "CUDA_VISIBLE_DEVICES": gpu} for gpu in gpus}, workers_per_gpu or default_workers_per_gpu(len(gpus))


def start_kept_pools(device: str, *, timeout_s: float, lanes: int, workers_per_gpu: int | None = None,
                     memory_mb: int | None = None, cache_dir: str | None = None) -> None:
    """Start the kept timing pools of `lanes` lanes now, as `time_records(reuse_pools=True)` would on its first call
    in each lane: their workers import and set up (`warm_up`) while the build's first shard is still being checked,
    so its timing does not wait for them. Without a visible GPU it starts none: the first timing meets that fault."""
    try:
        gpu_envs, workers = _pool_envs(device, cache_dir, workers_per_gpu)
    except MachineFault:
        return
    for lane in range(lanes):
        for env in gpu_envs.values():
            _pool(workers, timeout_s, memory_mb, env, True, lane)


def _time_once(records: list[dict], options: TimingOptions, *, timeout_s: float, progress: bool,
               workers_per_gpu: int | None, cache_dir: str | None, memory_mb: int | None, reuse_pools: bool,
               stop: threading.Event | None, lane: int, quiet: bool = False,
               confined: bool = False) -> list[dict] | None:
    """`time_records` without the guard: each record timed once (`quiet`: its timed section with the host's other
    sandbox workers paused; `confined`: in confined workers, for tasks written elsewhere)."""
    device = options.device
    if not records:
        return []
    payloads = [{**options.payload(r), "quiet": quiet, "timeout_s": timeout_s} for r in records]
    gpu_envs, workers = _pool_envs(device, cache_dir, workers_per_gpu)
    shards = {gpu: list(range(i, len(records), len(gpu_envs))) for i, gpu in enumerate(gpu_envs)}
    if reuse_pools:
        # a process given other GPUs (a reused Ray worker) stops the pools it kept for the old ones (its lane's)
        keep = {_pool_key(workers, timeout_s, memory_mb, e, lane) for e in gpu_envs.values()}
        _SHARED_POOLS.close_except(keep | {key for key in _SHARED_POOLS.keys() if key[0] != lane})
    results: list[dict | None] = [None] * len(records)
    faults: list[MachineFault] = []

    def run_shard(gpu: str, indices: list[int]) -> None:
        # the harness failing is no task's verdict: timed again in fresh workers, then the machine's fault (a
        # resumed build times the shard then)
        def fresh_workers() -> None:
            if reuse_pools:
                _SHARED_POOLS.discard(_pool_key(workers, timeout_s, memory_mb, gpu_envs[gpu], lane))

        try:
            retried_after_harness_failure(lambda: _time_shard(gpu, indices), reset=fresh_workers,
                                          what=f"the timing workers of {'GPU ' + gpu if gpu else 'the host'}",
                                          lost="no task timed", stopped=lambda: stop is not None and stop.is_set())
        except MachineFault as fault:  # a worker that cannot start, or the harness failing twice: nothing written
            faults.append(fault)

    def _time_shard(gpu: str, indices: list[int]) -> None:
        shard_env = gpu_envs[gpu]
        shard_payloads = [{**payloads[i], "gpu_lock": gpu_lock_path(gpu) if device == "cuda" else None}
                          for i in indices]
        size = workers if reuse_pools else min(workers, len(indices))
        with _pool(size, timeout_s, memory_mb, shard_env, reuse_pools, lane, confined) as pool:
            outcomes = pool.run_many(FN_PATH, shard_payloads, progress=progress, stop=stop)
            if stop is not None and stop.is_set():
                return
            # A crash can be another task's fault (a sticky CUDA error makes the next task's worker exit): retry once.
            crashed = [k for k, outcome in enumerate(outcomes) if outcome.status == "crash"]
            if crashed:
                for k, outcome in zip(crashed, pool.run_many(FN_PATH, [shard_payloads[k] for k in crashed])):
                    outcomes[k] = outcome
            # A task that ran out of GPU memory beside the other workers' tasks is timed again, once the memory it
            # needs is free.
            for k in [k for k, outcome in enumerate(outcomes) if out_of_memory(outcome, "timing_error")]:
                again = memory_retry_payload(shard_payloads[k], records[indices[k]], outcomes[k])
                outcomes[k] = pool.run_many(FN_PATH, [again])[0]
        for index, outcome in zip(indices, outcomes):
            results[index] = _timing_columns(outcome)

    threads = [threading.Thread(target=run_shard, args=(gpu, indices), daemon=True)
               for gpu, indices in shards.items() if indices]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if faults:
        raise faults[0]
    if stop is not None and stop.is_set():
        return None
    timed = [{**record, **(result or _failed("error", "timing shard did not finish"))}
             for record, result in zip(records, results)]
    # a timing error that names the machine, or a run of identical ones, is no task's: stop, time them again later
    ErrorRun().check(timed, records, detail_key="timing_error", device=device)
    return timed


def memory_retry_payload(payload: dict, record: dict, failed: SandboxResult) -> dict:
    """The payload of a task timed again after it ran short of GPU memory: it first waits for what its execute checks
    showed it needs (their peak, `gpu_peak_mb`, and the allocation that failed here; opgen/sandbox/gpu_memory.py),
    else for the estimate from its bytes moved. That estimate counts every byte a chain's operators move, not what
    is live at once: in the 6,000-task build's first 3,288 timed tasks (one H100), 28 of 162 such retries asked for
    more than the device ever had free and waited their whole bound (60 s) for it."""
    value = failed.value if isinstance(failed.value, dict) else {}
    return gpu_memory.retry_payload(payload, record.get("gpu_peak_mb"), value.get("timing_error") or failed.detail)


def recheck_reason(row: dict) -> str | None:
    """Why a timed row is no verdict yet, to be timed again once by a recheck (`recheck_only`; the row then says so
    in `timing_rechecked`): its timing failed in the harness (`harness_failed`), or it ran short of GPU memory
    beside other workers' tasks on its try and its try again (what it met was the others' memory: in the 6,000-task
    build's first 3,288 timed tasks on one H100, 19 tasks that had passed every check). None for the task's own
    verdict, and for a row timed again already."""
    if harness_failed(row):
        return "failed in the harness"
    if (row.get("timing_status") == "error" and not row.get("timing_rechecked")
            and is_gpu_out_of_memory(row.get("timing_error"))):
        return "ran short of GPU memory beside other workers' tasks"
    return None


def harness_failed(row: dict) -> bool:
    """A row whose timing failed for the harness's reason, not the task's: the timing function itself raised (the
    task's own errors come back inside its result), or the shard never finished. Such a row is no verdict: a
    recheck (`recheck_only`) times it again, once (the row then says so in `timing_rechecked`)."""
    return (row.get("timing_status") == "error" and str(row.get("timing_error") or "").startswith("error: ")
            and not row.get("timing_rechecked"))


def _timing_columns(outcome) -> dict:
    if outcome.status == "ok" and isinstance(outcome.value, dict):
        return {**empty_result(), **outcome.value, "timing_cpu_s": outcome.cpu_s}
    return _failed(outcome.status, outcome.detail)


def _failed(status: str, detail: str) -> dict:
    result = empty_result()
    result.update(timing_status=status, timing_error=f"{status}: {(detail or '').strip()[-800:]}")
    return result


def geomean(values: list[float]) -> float | None:
    values = [v for v in values if v and v > 0]
    return math.exp(statistics.fmean(math.log(v) for v in values)) if values else None


def timing_summary(timed: list[dict], lo_ms: float = DEFAULT_WINDOW_MS[0], hi_ms: float = DEFAULT_WINDOW_MS[1]) -> dict:
    """Figures over timed records: counts, eager median, compile geomean speed-up, share in the window (the one
    window rule, filters/window.py), and the agreement of the two methods (median of profiler time / CUDA-events
    median)."""
    window = Window(lo_ms, hi_ms)
    eager = [r["eager_ms"] for r in timed if r.get("eager_ms") is not None]
    ratios = [r["eager_device_us"] / 1e3 / r["eager_ms"] for r in timed
              if r.get("eager_device_us") and r.get("eager_ms")]
    ratios += [r["compile_device_us"] / 1e3 / r["compile_ms"] for r in timed
               if r.get("compile_device_us") and r.get("compile_ms")]
    compile_s = [r["compile_s"] for r in timed if r.get("compile_s") is not None]
    return {
        "tasks": len(timed),
        "timed": len(eager),
        "compiled": sum(1 for r in timed if r.get("compile_ms") is not None),
        "failed": sum(1 for r in timed if r.get("eager_ms") is None),
        "eager_ms_median": statistics.median(eager) if eager else None,
        "compile_speedup_geomean": geomean([r.get("compile_speedup") for r in timed]),
        "in_window": sum(1 for v in eager if window.contains(v)),
        "in_window_share": sum(1 for v in eager if window.contains(v)) / len(eager) if eager else None,
        "method_ratio_median": statistics.median(ratios) if ratios else None,
        "compile_s_median": statistics.median(compile_s) if compile_s else None,
    }
