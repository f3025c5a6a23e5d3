"""Where and how a timing was taken: GPU, driver, CUDA, torch and triton versions, the method, the peaks."""

from __future__ import annotations

import contextlib
import platform
import subprocess

from opgen.timing.trials import PROFILER_ITERS, PROFILER_WARMUPS, SETTLE_WARMUPS, TrialPlan

# Vendor datasheet peaks (dense), as leads for the achieved-rate columns: TFLOP/s by precision, GB/s of HBM.
DEVICE_PEAKS: dict[str, dict[str, float]] = {
    "H200": {"fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "gbps": 4800.0},
    "H100": {"fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "gbps": 3350.0},
    "A100": {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0, "gbps": 2039.0},
    "L40S": {"fp32": 91.6, "tf32": 183.0, "bf16": 362.0, "fp16": 362.0, "gbps": 864.0},
}
COMPILE_MODE = "default"   # torch.compile(model) with no options: inductor, default mode


def environment(torch, device: str) -> dict:
    """hardware, driver_version, cuda_version, compute_capability, torch_version, triton_version, timing_device."""
    env = {"torch_version": torch.__version__, "timing_device": device, "triton_version": triton_version(),
           "compile_mode": COMPILE_MODE}
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        env.update(hardware=props.name, cuda_version=torch.version.cuda, driver_version=driver_version(),
                   compute_capability=f"{props.major}.{props.minor}")
    else:
        env.update(hardware=f"cpu: {cpu_model()}", cuda_version=None, driver_version=None, compute_capability=None)
    return env


def driver_version() -> str | None:
    """The NVIDIA driver version, from /proc (Linux) or nvidia-smi; None when neither answers."""
    with contextlib.suppress(OSError):
        with open("/proc/driver/nvidia/version", encoding="utf-8") as handle:
            for word in handle.readline().split():
                if word.count(".") >= 1 and word.replace(".", "").isdigit():
                    return word
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        done = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20)
        if done.returncode == 0 and done.stdout.strip():
            return done.stdout.strip().splitlines()[0].strip()
    return None


def method_note(device: str, plan: TrialPlan, flush_bytes: int | None) -> str:
    """The timing method in words, as published in `timing_method`."""
    profiler = (f"profiler: {PROFILER_WARMUPS} warm-ups, {PROFILER_ITERS} iterations, "
                f"{'summed CUDA device time' if device == 'cuda' else 'summed self CPU time'} / iterations")
    if plan.mode == "adaptive":
        trials = (f"{plan.min_trials}-{plan.max_trials} trials, stopping when the median's 95% CI is within "
                  f"±{plan.rel_ci:.0%}")
    else:
        trials = f"{plan.max_trials} trials"
    if device == "cuda":
        measured = (f"cuda-events: {plan.warmups} warm-ups (the last {min(plan.warmups, SETTLE_WARMUPS)} with the GPU "
                    f"held alone), {trials}, L2 flushed before each trial "
                    f"by writing {flush_bytes // 2**20} MiB and waited for")
    else:
        measured = f"cpu timing (host clock, no cache flush): {plan.warmups} warm-ups, {trials}"
    return f"{measured}; {profiler}"


def peaks(hardware: str | None, dtype: str | None, tf32: bool) -> tuple[float | None, float | None]:
    for key, values in DEVICE_PEAKS.items():
        if hardware and key in hardware:
            precision = {"bfloat16": "bf16", "float16": "fp16"}.get(dtype or "", "tf32" if tf32 else "fp32")
            return values[precision], values["gbps"]
    return None, None


def triton_version() -> str | None:
    try:
        import triton
    except Exception:
        return None
    return getattr(triton, "__version__", None)


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()
