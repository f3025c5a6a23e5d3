"""Benchmark of `opgen build`: a small CPU build's wall time per stage, throughput, and the cost of a resume."""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

KERNELBENCH = REPO.parent / "shared" / "kernelbench" / "problems.jsonl"


def bench_build(n: int = 8, seed: int = 0, shard_size: int = 4, workers: int = 2) -> dict:
    """Build n smoke tasks on the CPU, then rerun the finished build; print and return the figures."""
    from opgen.pipeline.build import BuildConfig, run_build
    from opgen.pipeline.executors import LocalExecutor

    config = BuildConfig(n=n, seed=seed, profile="smoke", device="cpu", reference=str(KERNELBENCH),
                         shard_size=shard_size)
    with tempfile.TemporaryDirectory(prefix="opgen-bench-build-") as folder:
        executor = LocalExecutor(workers)
        try:
            started = time.perf_counter()
            result = run_build(config, Path(folder) / "run", executor, progress=False)
            build_s = time.perf_counter() - started
            started = time.perf_counter()
            run_build(config, Path(folder) / "run", executor, progress=False)
            resume_s = time.perf_counter() - started
        finally:
            executor.close()
    figures = {"tasks": result.tasks, "candidates": result.stats["candidates"], "rounds": result.stats["rounds"],
               "build_s": round(build_s, 1), "candidates_per_min": round(60 * result.stats["candidates"] / build_s, 2),
               "finished_rerun_s": round(resume_s, 2),
               "stage_seconds": {name: round(stage["seconds"], 2)
                                 for name, stage in result.stats["funnel"]["stages"].items() if stage["seen"]}}
    print(f"build: {figures['tasks']} tasks from {figures['candidates']} candidates in {figures['rounds']} round(s), "
          f"{figures['build_s']} s ({figures['candidates_per_min']} candidates/min, {workers} workers)")
    print(f"rerun of the finished build (all markers present): {figures['finished_rerun_s']} s")
    print("seconds per stage (summed over workers): "
          + ", ".join(f"{k} {v}" for k, v in figures["stage_seconds"].items()))
    return figures


if __name__ == "__main__":
    bench_build()
