"""In-worker timing of one task: build it as the consuming environment does, time eager and torch.compile."""

from __future__ import annotations

import contextlib
import math
import os
import platform
import statistics
import time
from collections.abc import Callable, Sequence

from opgen.records import TIMING_COLUMNS
from opgen.sandbox.gpus import gpu_lock
from opgen.sandbox.task import build_model, describe, draw_inputs, input_seed, load_namespace

# Vendor datasheet peaks (dense), as leads for the achieved-rate columns: TFLOP/s by precision, GB/s of HBM.
DEVICE_PEAKS: dict[str, dict[str, float]] = {
    "H200": {"fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "gbps": 4800.0},
    "H100": {"fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "gbps": 3350.0},
    "A100": {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0, "gbps": 2039.0},
    "L40S": {"fp32": 91.6, "tf32": 183.0, "bf16": 362.0, "fp16": 362.0, "gbps": 864.0},
}
PROFILER_WARMUPS = 5  # the CUDA-Agent environment's profiler method: 5 warm-ups, 10 iterations
PROFILER_ITERS = 10
MIN_L2_FLUSH_BYTES = 256 * 1024 * 1024  # KernelBench's flush buffer; at least twice the L2 is also required



def summarize(samples: Sequence[float]) -> dict[str, float | int | None]:
    """Median, interquartile range (inclusive quartiles, as numpy's default), mean, sample std, min, count."""
    values = [float(v) for v in samples]
    if not values:
        return {"median": None, "iqr": None, "mean": None, "std": None, "min": None, "count": 0}
    if len(values) > 1:
        q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
        std = statistics.stdev(values)
    else:
        q1 = q3 = values[0]
        std = 0.0
    return {"median": statistics.median(values), "iqr": q3 - q1, "mean": statistics.fmean(values),
            "std": std, "min": min(values), "count": len(values)}


def empty_result() -> dict:
    """Every timing column, null."""
    return dict.fromkeys(TIMING_COLUMNS)



def measure_task(payload: dict) -> dict:
    """Time one task (payload: code, device, trials, warmups, seed, tf32, compile, flops, bytes_moved, gpu_lock).

    Returns every column of TIMING_COLUMNS; a task that fails keeps null timings and says why in
    `timing_error` (`timing_status`: ok | error | compile_error).
    """
    import torch

    device = payload.get("device", "cuda")
    result = empty_result()
    started = time.perf_counter()
    if device == "cuda":
        _exit_if_cuda_context_broken(torch)
    _set_tf32(torch, bool(payload.get("tf32", False)))
    result.update(_environment(torch, device, bool(payload.get("tf32", False))))
    trials, warmups = int(payload.get("trials", 100)), int(payload.get("warmups", 10))
    result["timing_method"] = _method_note(device, trials, warmups, _flush_bytes(torch, device))
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
        with torch.no_grad():
            model = build_model(namespace, device, seed)
            inputs = draw_inputs(namespace, device, input_seed(seed, 0))
            result["dtype"] = _main_dtype(model, inputs)
            model(*inputs)  # a task that cannot run eagerly is not worth a compile
            _synchronize(torch, inputs)
    except Exception as error:  # the task itself is broken: nothing to time
        result.update(timing_status="error", timing_error=f"eager: {describe(error)}")
        return result

    try:
        compiled, compile_error = None, None
        if payload.get("compile", True):
            compiled, result["compile_s"], compile_error = _compile(torch, model, inputs)
        waiting = time.perf_counter()
        with gpu_lock(payload.get("gpu_lock")), torch.no_grad():
            locked = time.perf_counter()
            result["lock_wait_s"] = locked - waiting
            eager = _time_both_methods(torch, model, inputs, device, trials, warmups)
            result.update(_prefixed("eager", eager))
            if compiled is not None:
                compiled_times = _time_both_methods(torch, compiled, inputs, device, trials, warmups)
                result.update(_prefixed("compile", compiled_times))
            result["timed_s"] = time.perf_counter() - locked
    except Exception as error:
        result.update(timing_status="error", timing_error=f"eager: {describe(error)}")
        return result

    if result["eager_ms"] and result["compile_ms"]:
        result["compile_speedup"] = result["eager_ms"] / result["compile_ms"]
    result["peak_tflops"], result["peak_gbps"] = _peaks(result["hardware"], result["dtype"], result["tf32"])
    result.update(_achieved(result, flops, bytes_moved))
    result["timing_status"] = "compile_error" if compile_error else "ok"
    result["timing_error"] = f"compile: {compile_error}" if compile_error else None
    result["timing_wall_s"] = time.perf_counter() - started
    return {key: _finite_or_none(value) for key, value in result.items()}


def _compile(torch, model, inputs) -> tuple[Callable | None, float | None, str | None]:
    """torch.compile (default mode) and its first call; returns (compiled, wall seconds, error)."""
    started = time.perf_counter()
    try:
        compiled = torch.compile(model)
        with torch.no_grad():
            compiled(*inputs)
        _synchronize(torch, inputs)
    except Exception as error:
        return None, None, describe(error)
    return compiled, time.perf_counter() - started, None


METHOD_DISAGREEMENT = 0.10  # re-time when events and profiler differ by more than this
MAX_RETIMES = 2


def _time_both_methods(torch, fn: Callable, inputs: list, device: str, trials: int, warmups: int) -> dict:
    """Per-trial timings (CUDA events with an L2 flush, or the host clock on CPU) and the profiler time.

    On CUDA, other workers' untimed GPU work (a first compiled call, an eager check) can overlap a timed
    run; the profiler's summed kernel time is barely affected while the event median is. When the two
    disagree by more than METHOD_DISAGREEMENT the task is timed again, keeping the best-agreeing attempt.
    """
    best: dict | None = None
    for attempt in range(1 + (MAX_RETIMES if device == "cuda" else 0)):
        samples = _trial_times_ms(torch, fn, inputs, device, trials, warmups)
        stats = summarize(samples)
        stats["device_us"] = _profiler_time_us(torch, fn, inputs, device)
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


def _trial_times_ms(torch, fn: Callable, inputs: list, device: str, trials: int, warmups: int) -> list[float]:
    for _ in range(warmups):
        fn(*inputs)
    if device != "cuda":
        samples = []
        for _ in range(trials):
            start = time.perf_counter()
            fn(*inputs)
            samples.append((time.perf_counter() - start) * 1e3)
        return samples
    torch.cuda.synchronize()
    flush = _flush_buffer(torch)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(trials):
        flush.zero_()
        start.record()
        fn(*inputs)
        end.record()
        torch.cuda.synchronize()
        samples.append(start.elapsed_time(end))
    return samples


def _profiler_time_us(torch, fn: Callable, inputs: list, device: str) -> float:
    """As the CUDA-Agent environment: 5 warm-ups, then 10 profiled calls; summed device time / 10 (µs).

    On CPU the same path runs with the CPU activity and sums the ops' self CPU time.
    """
    from torch.profiler import ProfilerActivity

    for _ in range(PROFILER_WARMUPS):
        fn(*inputs)
    _synchronize(torch, inputs)
    activities = [ProfilerActivity.CUDA] if device == "cuda" else [ProfilerActivity.CPU]
    total = _profiled_total_us(torch, fn, inputs, activities, device)
    if device == "cuda" and total == 0:  # no device events without the CPU activity on this build: add it
        total = _profiled_total_us(torch, fn, inputs, [ProfilerActivity.CPU, *activities], device)
    return total / PROFILER_ITERS


def _profiled_total_us(torch, fn: Callable, inputs: list, activities: list, device: str) -> float:
    from torch.autograd import DeviceType
    from torch.profiler import profile

    with profile(activities=activities) as prof:
        for _ in range(PROFILER_ITERS):
            fn(*inputs)
        _synchronize(torch, inputs)
    events = prof.events()
    if device == "cuda":
        return sum(e.device_time_total for e in events if e.device_type == DeviceType.CUDA)
    return sum(e.self_cpu_time_total for e in events if e.device_type == DeviceType.CPU)


_FLUSH: dict[str, object] = {}


def _flush_bytes(torch, device: str) -> int | None:
    if device != "cuda":
        return None
    l2 = int(getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0) or 0)
    return max(2 * l2, MIN_L2_FLUSH_BYTES)


def _flush_buffer(torch):
    """One int32 buffer per worker, written before every trial to evict the L2 cache."""
    if "buffer" not in _FLUSH:
        _FLUSH["buffer"] = torch.empty(_flush_bytes(torch, "cuda") // 4, dtype=torch.int32, device="cuda")
    return _FLUSH["buffer"]


def _synchronize(torch, inputs: list) -> None:
    if torch.cuda.is_initialized():
        torch.cuda.synchronize()


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
            f"{prefix}_ms_std": stats["std"], f"{prefix}_ms_min": stats["min"],
            f"{prefix}_ms_count": stats["count"], f"{prefix}_device_us": stats["device_us"],
            f"{prefix}_retimes": stats.get("retimes", 0)}


def _set_tf32(torch, enabled: bool) -> None:
    """TF32 for matmul and cuDNN, through the fp32_precision API where it exists (mixing APIs is an error)."""
    cudnn = getattr(torch.backends, "cudnn", None)
    targets = [getattr(torch.backends.cuda, "matmul", None), getattr(cudnn, "conv", None), getattr(cudnn, "rnn", None)]
    if all(hasattr(target, "fp32_precision") for target in targets):
        for target in targets:
            target.fp32_precision = "tf32" if enabled else "ieee"
    else:
        torch.backends.cuda.matmul.allow_tf32 = enabled
        torch.backends.cudnn.allow_tf32 = enabled


def _environment(torch, device: str, tf32: bool) -> dict:
    env = {"torch_version": torch.__version__, "tf32": tf32, "timing_device": device,
           "triton_version": _triton_version()}
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        env.update(hardware=props.name, cuda_version=torch.version.cuda,
                   compute_capability=f"{props.major}.{props.minor}")
    else:
        env.update(hardware=f"cpu: {_cpu_model()}", cuda_version=None, compute_capability=None)
    return env


def _peaks(hardware: str | None, dtype: str | None, tf32: bool) -> tuple[float | None, float | None]:
    for key, peaks in DEVICE_PEAKS.items():
        if hardware and key in hardware:
            precision = {"bfloat16": "bf16", "float16": "fp16"}.get(dtype or "", "tf32" if tf32 else "fp32")
            return peaks[precision], peaks["gbps"]
    return None, None


def _main_dtype(model, inputs: list) -> str:
    import torch

    for tensor in (*inputs, *model.parameters()):
        if isinstance(tensor, torch.Tensor) and tensor.is_floating_point():
            return str(tensor.dtype).removeprefix("torch.")
    return "float32"


def _method_note(device: str, trials: int, warmups: int, flush_bytes: int | None) -> str:
    profiler = (f"profiler: {PROFILER_WARMUPS} warm-ups, {PROFILER_ITERS} iterations, "
                f"{'summed CUDA device time' if device == 'cuda' else 'summed self CPU time'} / iterations")
    if device == "cuda":
        trials_note = (f"cuda-events: {warmups} warm-ups, {trials} trials, L2 flushed before each trial "
                       f"by writing {flush_bytes // 2**20} MiB")
    else:
        trials_note = f"cpu timing (host clock, no cache flush): {warmups} warm-ups, {trials} trials"
    return f"{trials_note}; {profiler}"


def _exit_if_cuda_context_broken(torch) -> None:
    """A sticky CUDA error from an earlier task poisons the process: exit so the pool replaces the worker."""
    try:
        if torch.cuda.is_initialized():
            torch.cuda.synchronize()
    except Exception:
        os._exit(70)


def _triton_version() -> str | None:
    try:
        import triton
    except Exception:
        return None
    return getattr(triton, "__version__", None)


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def _finite_or_none(value):
    """JSON has no NaN/Inf: such floats become null."""
    return None if isinstance(value, float) and not math.isfinite(value) else value
