"""On the GPU: eager CUDA time of gpu-profile candidates vs the sampler's estimate, to calibrate the profile.

Usage (device): python3 scripts/gpu/calibrate.py CANDIDATES.jsonl OUT.jsonl [PART/PARTS]
                python3 scripts/gpu/calibrate.py --summary OUT.jsonl [OUT2.jsonl ...]
One process per GPU (CUDA_VISIBLE_DEVICES, PART/PARTS = 0/2 and 1/2); lines are written as they finish, so
a run cut short by a time limit still summarises. Candidates come from `opgen sample --profile gpu`; they
are opgen's own rendered code, run in this process one after the other (a failure is recorded, the next
task goes on).
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


def measure(candidates: str, out: str, part: int = 0, parts: int = 1) -> None:
    """Time every `parts`-th candidate from `part` on, appending one line per candidate to `out` as it goes."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    rows = [json.loads(line) for line in open(candidates)][part::parts]
    with open(out, "w") as handle:
        for record in rows:
            try:
                measured, error = eager_ms(torch, record["code"]), None
            except Exception as exc:  # noqa: BLE001 - a failing candidate is a data point, not a stop
                measured, error = None, repr(exc)[:300]
            torch.cuda.empty_cache()
            row = {"id": record["id"], "ops": record["ops"], "estimated_gpu_ms": record.get("estimated_gpu_ms"),
                   "flops": record["flops"], "bytes_moved": record["bytes_moved"], "error": error,
                   **(measured or {})}
            handle.write(json.dumps(row) + "\n")
            handle.flush()


def summarize(paths: list[str]) -> None:
    """Share inside 1-100 ms, quantiles, and measured/estimated spread over the lines of `paths`."""
    results = [json.loads(line) for path in paths for line in open(path) if line.strip()]
    timed = [r for r in results if r.get("eager_ms")]
    inside = [r for r in timed if 1.0 <= r["eager_ms"] <= 100.0]
    ratios = [r["eager_ms"] / r["estimated_gpu_ms"] for r in timed if r["estimated_gpu_ms"]]
    print(f"timed {len(timed)}/{len(results)}; inside 1-100 ms: {len(inside)}/{len(timed)} "
          f"({100 * len(inside) / max(1, len(timed)):.1f}%)")
    if timed:
        ms = sorted(r["eager_ms"] for r in timed)
        print("eager ms quantiles 0/5/25/50/75/95/100:",
              [round(ms[int(q * (len(ms) - 1))], 3) for q in (0, 0.05, 0.25, 0.5, 0.75, 0.95, 1)])
        for r in timed:
            if r not in inside:
                print("outside:", round(r["eager_ms"], 3), "ms", r["ops"], "estimated", r["estimated_gpu_ms"])
    if ratios:
        logs = [math.log(r) for r in ratios]
        print(f"measured/estimated: geomean {math.exp(statistics.mean(logs)):.3f}, "
              f"log-sd {statistics.pstdev(logs):.3f}")
    for r in results:
        if r.get("error"):
            print("failed:", r["ops"], r["error"][:200])


if __name__ == "__main__":
    if sys.argv[1] == "--summary":
        summarize(sys.argv[2:])
    else:
        part, parts = (int(x) for x in (sys.argv[3] if len(sys.argv) > 3 else "0/1").split("/"))
        measure(sys.argv[1], sys.argv[2], part, parts)
