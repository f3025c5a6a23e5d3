"""On the GPU: eager CUDA time of gpu-profile candidates vs the sampler's estimate, to calibrate the profile.

Usage (device): python3 scripts/device_calibrate.py CANDIDATES.jsonl OUT.jsonl
Candidates come from `opgen sample --profile gpu`; they are opgen's own rendered code, run in this process
one after the other (a failure is recorded and the next task goes on).
"""

from __future__ import annotations

import json
import math
import statistics
import sys


def eager_ms(torch, code: str) -> dict:
    """Median of 10 CUDA-event timings of one eager forward after 3 warm-ups (inputs made on the GPU)."""
    ns: dict = {}
    exec(code, ns)  # opgen's own rendered code
    torch.manual_seed(0)
    torch.cuda.reset_peak_memory_stats()
    with torch.device("cuda"):
        model = ns["Model"](*ns["get_init_inputs"]()).eval()
        inputs = ns["get_inputs"]()
    times = []
    with torch.no_grad():
        for _ in range(3):
            model(*inputs)
        torch.cuda.synchronize()
        for _ in range(10):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            model(*inputs)
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
    times.sort()
    return {"eager_ms": times[len(times) // 2], "peak_gb": torch.cuda.max_memory_allocated() / 1e9}


def main(candidates: str, out: str) -> None:
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    rows = [json.loads(line) for line in open(candidates)]
    results = []
    for record in rows:
        try:
            measured, error = eager_ms(torch, record["code"]), None
        except Exception as exc:  # noqa: BLE001 - a failing candidate is a data point, not a stop
            measured, error = None, repr(exc)[:300]
        torch.cuda.empty_cache()
        row = {"id": record["id"], "ops": record["ops"], "estimated_gpu_ms": record.get("estimated_gpu_ms"),
               "flops": record["flops"], "bytes_moved": record["bytes_moved"], "error": error,
               **(measured or {})}
        results.append(row)
        print(json.dumps(row), flush=True)
    with open(out, "w") as handle:
        handle.writelines(json.dumps(r) + "\n" for r in results)
    timed = [r for r in results if r.get("eager_ms")]
    inside = [r for r in timed if 1.0 <= r["eager_ms"] <= 100.0]
    ratios = [r["eager_ms"] / r["estimated_gpu_ms"] for r in timed if r["estimated_gpu_ms"]]
    print(f"timed {len(timed)}/{len(results)}; inside 1-100 ms: {len(inside)}/{len(timed)} "
          f"({100 * len(inside) / max(1, len(timed)):.1f}%)")
    if timed:
        ms = sorted(r["eager_ms"] for r in timed)
        print("eager ms quantiles 5/25/50/75/95:",
              [round(ms[int(q * (len(ms) - 1))], 3) for q in (0.05, 0.25, 0.5, 0.75, 0.95)])
    if ratios:
        logs = [math.log(r) for r in ratios]
        print(f"measured/estimated: geomean {math.exp(statistics.mean(logs)):.3f}, "
              f"log-sd {statistics.pstdev(logs):.3f}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
