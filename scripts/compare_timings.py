"""Compare timing runs of the same tasks (JSONL from `opgen time`): median |Δ| of eager_ms and compile_ms (CUDA
events) and of their profiler device times between the first two runs, and of each against a third (e.g. 100 fixed trials), with the trials the runs used.

    python scripts/compare_timings.py RUN1.jsonl RUN2.jsonl [REFERENCE.jsonl]
"""

from __future__ import annotations

import json
import statistics
import sys


def load(path: str) -> dict[str, dict]:
    with open(path, encoding="utf-8") as handle:
        return {r["id"]: r for r in map(json.loads, handle) if r.get("eager_ms")}


def median_delta(a: dict, b: dict, key: str) -> dict:
    shared = [i for i in a if i in b and a[i].get(key) and b[i].get(key)]
    deltas = [abs(a[i][key] / b[i][key] - 1) for i in shared]
    return {"tasks": len(shared), "median_abs_delta": statistics.median(deltas) if deltas else None,
            "p90_abs_delta": sorted(deltas)[int(0.9 * (len(deltas) - 1))] if deltas else None}


def main(paths: list[str]) -> int:
    runs = [load(p) for p in paths]
    report = {}
    for key in ("eager_ms", "compile_ms", "eager_device_us", "compile_device_us"):
        report[f"{key} run1 vs run2"] = median_delta(runs[0], runs[1], key)
        if len(runs) > 2:
            report[f"{key} run1 vs reference"] = median_delta(runs[0], runs[2], key)
            report[f"{key} run2 vs reference"] = median_delta(runs[1], runs[2], key)
    trials = [r.get("eager_ms_count") for r in runs[0].values() if r.get("eager_ms_count")]
    if trials:
        report["run1 eager trials"] = {"median": statistics.median(trials), "max": max(trials), "n": len(trials)}
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
