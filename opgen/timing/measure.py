"""In-worker timing of one task: build it as the consuming environment does, time eager and torch.compile."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import replace

from filters.window import Window
from opgen.records import TIMING_COLUMNS
from opgen.sandbox import gpu_memory
from opgen.sandbox.gpus import LockWaits, compiled_graphs_locked, gpu_lock, inductor_benchmarks_locked
from opgen.sandbox.quiet import quiet_host
from opgen.sandbox.task import build_model, describe, draw_inputs, input_seed, load_namespace
from opgen.timing.precision import apply_precision
from opgen.timing.provenance import environment, method_note, peaks
from opgen.timing.trials import (
    SETTLE_WARMUPS,
    TrialPlan,
    flush_bytes,
    profile_calls,
    profiled_time_us,
    profiler_time_us,
    summarize,
    synchronize,
    trial_times_ms,
    warm_up,
)

METHOD_DISAGREEMENT = 0.10  # re-time when events and profiler differ by more than this (unlocked runs only)
MAX_RETIMES = 2
WARMUP_HOLD_MS = 20.0  # GPU time of untimed warm-up calls that one shared hold of the GPU's lock may take
# Another length for that hold, to compare on a GPU: longer holds mean fewer waits for the lock, and a timed run
# waiting for longer holders; the timed trials are the same either way.
WARMUP_HOLD_ENV = "OPGEN_WARMUP_HOLD_MS"


def empty_result() -> dict:
    """Every timing column, null."""
    return dict.fromkeys(TIMING_COLUMNS)


def plan_of(payload: dict) -> TrialPlan:
    return TrialPlan(warmups=int(payload.get("warmups", 10)), max_trials=int(payload.get("trials", 100)),
                     min_trials=min(int(payload.get("min_trials", 10)), int(payload.get("trials", 100))),
                     mode=payload.get("trial_mode", "adaptive"))


def set_up_worker() -> None:
    """A timing worker's set-up before its first task (`WARM_UP_ENV`): torch, the compile stack, and on a GPU Triton
    and the CUDA context. No kernel runs: a worker warming up beside a timed trial does not disturb it."""
    import torch
    import torch._dynamo  # noqa: F401 - imported for its one-time cost
    import torch._inductor.compile_fx  # noqa: F401

    if torch.cuda.is_available():
        import triton  # noqa: F401

        torch.cuda.init()


def measure_task(payload: dict) -> dict:
    """Time one task (see `_measure_task`). On CUDA, a task timed again after it ran out of GPU memory beside other
    workers' tasks (`memory_wait`) first waits for the memory it needs to come free (opgen/sandbox/gpu_memory.py)."""
    waited = gpu_memory.wait_before_retry(payload, default_timeout_s=600.0) if payload.get("device", "cuda") == "cuda" else {}
    result = _measure_task(payload)
    if "memory_wait_s" in waited:
        result["memory_wait_s"] = waited["memory_wait_s"]
    return result


def _measure_task(payload: dict) -> dict:
    """Time one task (payload: code, id, device, trials, warmups, trial_mode, seed, precision, compile, flops,
    bytes_moved, gpu_lock).

    Returns every column of TIMING_COLUMNS; a task that fails keeps null timings and says why in
    `timing_error` (`timing_status`: ok | error | compile_error).
    """
    import torch

    device = payload.get("device", "cuda")
    result = empty_result()
    started = time.perf_counter()
    if device == "cuda":
        _exit_if_cuda_context_broken(torch)
    result.update(precision=payload.get("precision", "default"),
                  **apply_precision(torch, payload.get("precision", "default")))
    result["tf32"] = result["matmul_precision"] == "tf32"
    result.update(environment(torch, device))
    plan = plan_of(payload)
    result["timing_method"] = method_note(device, plan, flush_bytes(torch, device))
    result["timing_warmups"], result["trial_mode"] = plan.warmups, plan.mode
    lock = payload.get("gpu_lock")
    torch._dynamo.reset()
    try:
        namespace = load_namespace(payload["code"], str(payload.get("id") or "task"))
        flops, bytes_moved = payload.get("flops"), payload.get("bytes_moved")
        if flops is None or bytes_moved is None:
            counted = _count_work(payload["code"])
            flops = counted["flops"] if flops is None else flops
            bytes_moved = counted["bytes_moved"] if bytes_moved is None else bytes_moved
            result.update({k: v for k, v in counted.items() if payload.get(k) is None})
        seed = int(payload.get("seed", 0))
        model = build_model(namespace, "cpu", seed)  # the weights are host work: built outside the GPU lock
        with gpu_lock(lock, shared=True), torch.no_grad():
            model = model.to(device)
            inputs = draw_inputs(namespace, device, input_seed(seed, 0))
            result["compute_dtype"] = _main_dtype(model, inputs)
            model(*inputs)  # a task that cannot run eagerly is not worth a compile
            synchronize(torch)
        result["setup_s"] = time.perf_counter() - started
    except Exception as error:  # the task itself is broken: nothing to time
        result.update(timing_status="error", timing_error=f"eager: {describe(error)}")
        return result

    stage = "warm-up"  # what the error message names if the section below raises
    try:
        compiled, compile_error = None, None
        if payload.get("compile", True):
            hits = torch._dynamo.utils.counters["inductor"]["fxgraph_cache_hit"]
            # the compile's host work goes unlocked; its autotuning and its first call's kernels hold the GPU, shared
            with inductor_benchmarks_locked(lock) as waits, \
                    compiled_graphs_locked(lock, lambda: synchronize(torch), waits):
                compiled, result["compile_s"], compile_error = _compile(torch, model, inputs)
            result["compile_lock_wait_s"] = waits.seconds
            # whether inductor's cache (the compile check's, on one machine) gave the graph: a compile paid once
            result["compile_cache_hit"] = torch._dynamo.utils.counters["inductor"]["fxgraph_cache_hit"] > hits
        timed_plan = plan
        warming = time.perf_counter()
        if lock:  # untimed warm-ups beside other GPU work, in short shared holds; the last few hold the GPU alone
            result["warmup_lock_wait_s"] = 0.0
            with torch.no_grad():
                for fn in (model, compiled):
                    if fn is not None:
                        result["warmup_lock_wait_s"] += _warm_up_in_short_holds(
                            torch, fn, inputs, max(0, plan.warmups - SETTLE_WARMUPS), lock)
            timed_plan = replace(plan, warmups=min(plan.warmups, SETTLE_WARMUPS))
        result["warmup_s"] = time.perf_counter() - warming
        waiting, exclusive = time.perf_counter(), LockWaits()
        # a row the guard times again holds the host quiet too: launch-bound tasks run at the host's speed
        with gpu_lock(lock, waits=exclusive), quiet_host(bool(lock and payload.get("quiet"))) as paused, torch.no_grad():
            locked = time.perf_counter()
            if payload.get("quiet"):
                result["quiet_paused"] = len(paused)
            result["lock_wait_s"] = locked - waiting
            if device == "cuda":  # memory other workers hold: a starved allocator or cuDNN workspace slows trials
                result["gpu_free_gb"] = torch.cuda.mem_get_info()[0] / 2**30
            # Holding the GPU alone, events and profiler can only disagree through the task's own host time.
            retimes = 0 if lock else MAX_RETIMES
            unread: dict[str, tuple] = {}   # prefix -> (fn, profile): read once the GPU is given back
            stage = "eager"
            result.update(_prefixed("eager", _time_both_methods(torch, model, inputs, device, timed_plan, retimes,
                                                                unread, "eager")))
            skip = _outside(payload.get("compile_window_ms"), result["eager_ms"])
            if compiled is not None and skip is None:
                stage = "compile"
                result.update(_prefixed("compile", _time_both_methods(torch, compiled, inputs, device, timed_plan,
                                                                      retimes, unread, "compile")))
            result["timed_s"] = time.perf_counter() - locked
        if exclusive.holds:   # of the wait, the part behind other exclusive holders; the rest, for shared ones to leave
            result["lock_gate_wait_s"] = exclusive.gate_s
        stage = "profile"
        reading = time.perf_counter()
        with torch.no_grad():
            for prefix, (fn, prof) in unread.items():
                result[f"{prefix}_device_us"] = profiled_time_us(torch, fn, inputs, device, prof,
                                                                 alone=lambda: gpu_lock(lock))
        result["profile_read_s"] = time.perf_counter() - reading
    except Exception as error:
        result.update(timing_status="error", timing_error=f"{stage}: {describe(error)}")
        return result

    if result["eager_ms"] and result["compile_ms"]:
        result["compile_speedup"] = result["eager_ms"] / result["compile_ms"]
    result["peak_tflops"], result["peak_gbps"] = peaks(result["hardware"], result["compute_dtype"], result["tf32"])
    result.update(_achieved(result, flops, bytes_moved))
    result["timing_status"] = "compile_error" if compile_error else "ok"
    result["timing_error"] = f"compile: {compile_error}" if compile_error else None
    if compiled is not None and skip is not None:
        result["timing_error"] = f"compile not timed: {skip}"
    result["timing_wall_s"] = time.perf_counter() - started
    return {key: _finite_or_none(value) for key, value in result.items()}


def _warm_up_in_short_holds(torch, fn: Callable, inputs: list, calls: int, lock: str) -> float:
    """`calls` untimed calls, each shared hold of the GPU's lock taking as many as fit in WARMUP_HOLD_MS (the last
    hold's calls say how long one takes), at least one. A timed run waiting for the lock then waits for one short
    hold, while a short task no longer queues for the lock once a call: on an H200 the timing workers spent half
    their time in warm-ups (a median of 0.93 s a task for 16 calls of 2.5 ms). Returns the seconds spent waiting
    for the holds."""
    per_hold, waited = 1, 0.0
    hold_ms = float(os.environ.get(WARMUP_HOLD_ENV, WARMUP_HOLD_MS))
    while calls > 0:
        count = min(per_hold, calls)
        waiting = time.perf_counter()
        with gpu_lock(lock, shared=True):
            started = time.perf_counter()
            waited += started - waiting
            warm_up(torch, fn, inputs, count)
            call_s = (time.perf_counter() - started) / count
        calls -= count
        per_hold = max(1, int(hold_ms / 1e3 / max(call_s, 1e-6)))
    return waited


def _compile(torch, model, inputs) -> tuple[Callable | None, float | None, str | None]:
    """torch.compile (default mode) and its first call; returns (compiled, wall seconds, error)."""
    started = time.perf_counter()
    try:
        compiled = torch.compile(model)
        with torch.no_grad():
            compiled(*inputs)
        synchronize(torch)
    except Exception as error:
        return None, None, describe(error)
    return compiled, time.perf_counter() - started, None


def _outside(window_ms: list[float] | None, eager_ms: float | None) -> str | None:
    """Why compile is not worth timing: the eager median lies outside the build's window (the task is rejected)."""
    if not window_ms or eager_ms is None:
        return None
    verdict = Window(*window_ms).verdict(eager_ms)
    return None if verdict.keep else verdict.detail


def _time_both_methods(torch, fn: Callable, inputs: list, device: str, plan: TrialPlan,
                       max_retimes: int = MAX_RETIMES, unread: dict | None = None, prefix: str = "") -> dict:
    """Per-trial timings (CUDA events with an L2 flush, or the host clock on CPU) and the profiler time.

    When the events median and the profiler's summed kernel time disagree by more than
    METHOD_DISAGREEMENT (other GPU work overlapped the run), the task is timed again, keeping the
    best-agreeing attempt. With no re-time allowed (a run holding the GPU alone) and `unread` given, the profile
    is left there under `prefix`, with its callable, to be read after the hold (`device_us` None until then).
    """
    if max_retimes == 0 and unread is not None:
        stats = summarize(trial_times_ms(torch, fn, inputs, device, plan))
        unread[prefix] = (fn, profile_calls(torch, fn, inputs, device))
        return {**stats, "device_us": None, "retimes": 0}
    best: dict | None = None
    for attempt in range(1 + (max_retimes if device == "cuda" else 0)):
        stats = summarize(trial_times_ms(torch, fn, inputs, device, plan))
        stats["device_us"] = profiler_time_us(torch, fn, inputs, device)
        stats["retimes"] = attempt
        stats["disagreement"] = _disagreement(stats)
        if best is None or (stats["disagreement"] or 0) < (best["disagreement"] or 0):
            best = stats
        if device != "cuda" or (best["disagreement"] or 0) <= METHOD_DISAGREEMENT:
            break
    best.pop("disagreement")
    return best


def _disagreement(stats: dict) -> float | None:
    if not stats.get("device_us") or not stats.get("median"):
        return None
    return abs(stats["device_us"] / 1e3 / stats["median"] - 1.0)


def _count_work(code: str) -> dict:
    """flops and bytes_moved as the sampler counts them (opgen.sample.analyze, on the meta device); null if it fails."""
    try:
        from opgen.sample.analyze import analyze_code

        counted = analyze_code(code)
        return {"flops": counted["flops"], "bytes_moved": counted["bytes_moved"]}
    except Exception:
        return {"flops": None, "bytes_moved": None}


def _achieved(result: dict, flops: int | None, bytes_moved: int | None) -> dict:
    out = {}
    for prefix in ("eager", "compile"):
        ms = result.get(f"{prefix}_ms")
        out[f"{prefix}_tflops"] = flops / (ms * 1e-3) / 1e12 if ms and flops is not None else None
        out[f"{prefix}_gbps"] = bytes_moved / (ms * 1e-3) / 1e9 if ms and bytes_moved is not None else None
    return out


def _prefixed(prefix: str, stats: dict) -> dict:
    return {f"{prefix}_ms": stats["median"], f"{prefix}_ms_iqr": stats["iqr"], f"{prefix}_ms_mean": stats["mean"],
            f"{prefix}_ms_std": stats["std"], f"{prefix}_ms_min": stats["min"], f"{prefix}_ms_max": stats["max"],
            f"{prefix}_ms_count": stats["count"], f"{prefix}_device_us": stats["device_us"],
            f"{prefix}_retimes": stats.get("retimes", 0)}


def _main_dtype(model, inputs: list) -> str:
    import torch

    for tensor in (*inputs, *model.parameters()):
        if isinstance(tensor, torch.Tensor) and tensor.is_floating_point():
            return str(tensor.dtype).removeprefix("torch.")
    return "float32"


def _exit_if_cuda_context_broken(torch) -> None:
    """A sticky CUDA error from an earlier task poisons the process: exit so the pool replaces the worker."""
    try:
        if torch.cuda.is_initialized():
            torch.cuda.synchronize()
    except Exception:
        os._exit(70)


def _finite_or_none(value):
    """JSON has no NaN/Inf: such floats become null."""
    return None if isinstance(value, float) and not math.isfinite(value) else value
