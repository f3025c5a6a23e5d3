"""Where the execute workers' seconds went in the shards one run folder executed beyond another's: the same build's
state previewed before and after some of its runs (scripts/analysis/state_preview.py), so the runs between them are
measured apart from the ones before. Prints, for each folder's own shards and for the new ones: candidates, worker
seconds a candidate and by check, the shares spent waiting for the GPU's lock and for free GPU memory, the GPU-memory
retries, those that waited their whole bound and the seconds of the short tries before them, the checks' holds of
the lock (where the verdict lines count them), the lock wait by the size of the task (its shared-GPU eager median),
and how busy a lane's workers were while it held a shard.

    python scripts/analysis/execute_since.py OLD/run NEW/run [--json] [--lane-workers N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from opgen.analysis.run_profile import execute_profile  # noqa: E402
from opgen.pipeline.rundir import RunDir  # noqa: E402
from opgen.pipeline.stages import EXECUTE  # noqa: E402


def executed_shards(run: Path) -> set[str]:
    return {marker.parent.name for marker in run.glob("shards/*/execute.done")}


def memory_waits(run: RunDir, shards: set[str]) -> dict:
    """Seconds the shards' candidates waited for free GPU memory before a retry, the retries that waited out, the
    seconds of the short tries before them (outside `worker_s`), the shards that held retries and a retry's seconds."""
    by_shard = {shard: run.rows(run.root / "shards" / shard, "execute") for shard in sorted(shards)}
    lines = [line for rows in by_shard.values() for line in rows]
    retried = [line["worker_s"] for line in lines if line.get("memory_retry") and line.get("worker_s")]
    return {"memory_wait_s": round(sum(line.get("memory_wait_s") or 0.0 for line in lines), 1),
            "retry_lost_s": round(sum(line.get("memory_retry_lost_s") or 0.0 for line in lines), 1),
            "waited_out": sum(1 for line in lines if line.get("memory_waited_out")),
            "retry_shards": sum(1 for rows in by_shard.values() if any(line.get("memory_retry") for line in rows)),
            "retried_worker_s_mean": round(statistics.mean(retried), 2) if retried else None,
            "worker_s": round(sum(line.get("worker_s") or 0.0 for line in lines), 1)}


def lane_busy_share(run: RunDir, shards: set[str], lane_workers: int) -> float | None:
    """The share of a lane's worker-seconds its workers spent on candidates while it held a shard: per shard, the
    candidates' worker seconds over `lane_workers` times the busiest worker's (the shard ends with its last
    candidate; the others wait for it). Below 1: workers idle on the shard's tail."""
    busy = span = 0.0
    for shard in shards:
        by_worker: dict = {}
        for line in run.rows(run.root / "shards" / shard, "execute"):
            if line.get("worker_s") is not None:
                by_worker[line.get("worker_pid")] = by_worker.get(line.get("worker_pid"), 0.0) + line["worker_s"]
        if by_worker:
            busy += sum(by_worker.values())
            span += lane_workers * max(by_worker.values())
    return round(busy / span, 3) if span else None


def figures(run: Path, shards: set[str], lane_workers: int = EXECUTE.lane_workers) -> dict:
    rundir = RunDir(run)   # one reader: its rows are read once for the profile and the waits
    profile = execute_profile(rundir, skip=executed_shards(run) - shards)
    checks = dict(sorted(profile["check_s_per_candidate_seen"].items(), key=lambda item: -item[1]))
    waits = memory_waits(rundir, shards)
    return {"shards": len(shards), "candidates": profile["candidates"], "worker_s_mean": profile["worker_s_mean"],
            "check_s_per_candidate": checks, "lock_wait_share": profile["lock_wait_share"],
            "memory_wait_share": round(waits["memory_wait_s"] / waits["worker_s"], 4) if waits["worker_s"] else None,
            "cpu_share": profile["cpu_share"], "memory_retry": profile["memory_retry"],
            "lock_holds": profile["lock_holds"], "lock_wait_by_eager_ms": profile["lock_wait_by_eager_ms"],
            "lane_busy_share": lane_busy_share(rundir, shards, lane_workers),
            "measured_alone": profile["measured_alone"], **waits}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", type=Path, help="the run folder of the earlier preview")
    parser.add_argument("new", type=Path, help="the run folder of the later preview of the same build")
    parser.add_argument("--json", action="store_true", help="one JSON document")
    parser.add_argument("--lane-workers", type=int, default=EXECUTE.lane_workers,
                        help=f"sandbox workers in an execute lane (default {EXECUTE.lane_workers}, the build's)")
    args = parser.parse_args(argv)
    old_shards, new_shards = executed_shards(args.old), executed_shards(args.new)
    if not new_shards >= old_shards:
        print(f"{args.new} lacks shards {args.old} executed: not a later preview of the same build", file=sys.stderr)
        return 2
    report = {"before": figures(args.old, old_shards, args.lane_workers),
              "since": figures(args.new, new_shards - old_shards, args.lane_workers)}
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    for name, part in report.items():
        print(f"{name}: {part['candidates']} candidates in {part['shards']} shards, {part['worker_s_mean']} worker-s "
              f"a candidate; lock wait {part['lock_wait_share']}, memory wait {part['memory_wait_share']}, CPU "
              f"{part['cpu_share']}; retries {part['memory_retry']}, {part['waited_out']} waited out, short tries "
              f"before them {part['retry_lost_s']} s, {part['retry_shards']} shards held retries, a retry "
              f"{part['retried_worker_s_mean']} s; lanes busy "
              f"{part['lane_busy_share']} of their shards' span")
        print("  seconds a candidate by check: " + ", ".join(f"{k} {v}" for k, v in part["check_s_per_candidate"].items()))
        if part["lock_holds"]:
            print(f"  the GPU's lock: {json.dumps(part['lock_holds'])}")
        if part["lock_wait_by_eager_ms"]:
            print("  lock wait a candidate by shared-GPU eager ms: " + ", ".join(
                f"{band} {figures['lock_wait_s_mean']} s ({figures['candidates']})"
                for band, figures in part["lock_wait_by_eager_ms"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
