"""Compare timing runs of the same tasks (JSONL from `opgen time`): median |Δ| of eager_ms and compile_ms (CUDA
events) and of their profiler device times between the first two runs, and of each against a third (e.g. 100 fixed
trials), with the trials the runs used; the median ratio (a shift of one run against the other); and the host gap
(events median less device time) of each run, how much it moves between the two runs, and how the eager and
compile gap changes of one task correlate.

    python scripts/analysis/compare_timings.py RUN1.jsonl RUN2.jsonl [REFERENCE.jsonl]
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
    ratios = [a[i][key] / b[i][key] for i in shared]
    deltas = [abs(ratio - 1) for ratio in ratios]
    return {"tasks": len(shared), "median_abs_delta": statistics.median(deltas) if deltas else None,
            "p90_abs_delta": sorted(deltas)[int(0.9 * (len(deltas) - 1))] if deltas else None,
            "median_ratio": statistics.median(ratios) if ratios else None}


def gap_ms(record: dict, prefix: str) -> float | None:
    """Events median less profiler device time (ms): the part of the timed window the kernels do not fill."""
    ms, device_us = record.get(f"{prefix}_ms"), record.get(f"{prefix}_device_us")
    return ms - device_us / 1e3 if ms and device_us else None


def gaps(a: dict, b: dict) -> dict:
    """Each run's median gap, the median |change| of a task's gap between the runs, and the correlation of a
    task's eager and compile gap changes (near 0: not one slow process, but each measurement on its own)."""
    report: dict = {}
    changes: dict[str, dict[str, float]] = {}
    for prefix in ("eager", "compile"):
        pairs = {i: (gap_ms(a[i], prefix), gap_ms(b[i], prefix)) for i in a if i in b}
        pairs = {i: pair for i, pair in pairs.items() if None not in pair}
        changes[prefix] = {i: x - y for i, (x, y) in pairs.items()}
        if pairs:
            report[f"{prefix} gap ms"] = {"run1_median": statistics.median(x for x, _ in pairs.values()),
                                          "run2_median": statistics.median(y for _, y in pairs.values()),
                                          "median_abs_change": statistics.median(abs(d) for d in
                                                                                 changes[prefix].values())}
    both = [i for i in changes["eager"] if i in changes["compile"]]
    if len(both) > 2:
        report["gap change correlation eager vs compile"] = statistics.correlation(
            [changes["eager"][i] for i in both], [changes["compile"][i] for i in both])
    return report


def main(paths: list[str]) -> int:
    runs = [load(p) for p in paths]
    report = {}
    for key in ("eager_ms", "compile_ms", "eager_device_us", "compile_device_us"):
        report[f"{key} run1 vs run2"] = median_delta(runs[0], runs[1], key)
        if len(runs) > 2:
            report[f"{key} run1 vs reference"] = median_delta(runs[0], runs[2], key)
            report[f"{key} run2 vs reference"] = median_delta(runs[1], runs[2], key)
    report.update(gaps(runs[0], runs[1]))
    trials = [r.get("eager_ms_count") for r in runs[0].values() if r.get("eager_ms_count")]
    if trials:
        report["run1 eager trials"] = {"median": statistics.median(trials), "max": max(trials), "n": len(trials)}
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
