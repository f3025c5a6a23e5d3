"""On the GPU: eager CUDA time of gpu-profile candidates vs the sampler's estimate, to calibrate the profile.

Usage (device): python3 scripts/device_calibrate.py CANDIDATES.jsonl OUT.jsonl
Candidates come from `opgen sample --profile gpu`; they are opgen's own rendered code. Each task runs in
a fresh subprocess so one failure or out-of-memory cannot disturb the others.
"""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys

CHILD = r"""
import json, sys, torch
record = json.loads(sys.stdin.read())
ns = {}
exec(record["code"], ns)
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch.manual_seed(0)
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
print(json.dumps({"eager_ms": times[len(times) // 2], "peak_gb": torch.cuda.max_memory_allocated() / 1e9}))
"""


def main(candidates: str, out: str) -> None:
    rows = [json.loads(line) for line in open(candidates)]
    results = []
    for record in rows:
        try:
            proc = subprocess.run([sys.executable, "-c", CHILD], input=json.dumps(record), capture_output=True,
                                  text=True, timeout=120)
            measured = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else None
            error = None if measured else proc.stderr.strip().splitlines()[-1][:300]
        except subprocess.TimeoutExpired:
            measured, error = None, "timeout"
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
