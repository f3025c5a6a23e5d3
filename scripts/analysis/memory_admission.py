"""What reserving each task's GPU memory for its whole run would cost a build's execute checks: replays a run
folder's execute verdict lines (each task's `worker_s`, its checks' `gpu_peak_mb`, its candidate's `bytes_moved`)
through N workers taking tasks in order, where a task starts only once the reservations held and its own fit a
budget (a task alone always starts), and prints each policy's time against the same workers with no reservation;
first, where the checks' worker-seconds went: waiting for the GPU's lock, and the retries of tasks short of GPU
memory (`memory_retry`), with the checks' peak GPU memory; then the rejections for GPU memory, against the passed
candidates by bytes moved (whether the crowd rejected the large tasks).

    python scripts/analysis/memory_admission.py RUN_DIR [--workers 10] [--budget-gb 64 80 100] [--factor 2 3 4]

RUN_DIR is a build's run folder (`opgen build --out`, or `scripts/analysis/state_preview.py STATE --out P`'s
P/run). A task judged on a fresh worker's retry is counted without the ~15 s of start-up its line includes.
"""

from __future__ import annotations

import argparse
import heapq
import json
import sys
from collections import deque
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from opgen.sandbox.pool import is_gpu_out_of_memory  # noqa: E402

FRESH_WORKER_START_S = 15.0


def bytes_moved_mb(run_dir: Path) -> dict[str, float]:
    """Each candidate's bytes moved (the sampler's estimate), in MB, by id."""
    moved: dict[str, float] = {}
    for path in sorted(run_dir.glob("shards/*/candidates.jsonl")):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            moved[record["id"]] = (record.get("bytes_moved") or 0) / 2**20
    return moved


def load_tasks(run_dir: Path) -> list[tuple[float, float, float]]:
    """(seconds, bytes moved in MB, peak MB) of every task the run's execute checks judged, in shard order."""
    moved = bytes_moved_mb(run_dir)
    tasks = []
    for row in execute_rows(run_dir):
        if not row.get("worker_s"):
            continue
        seconds = row["worker_s"] - (FRESH_WORKER_START_S if row.get("memory_retry") == "fresh worker" else 0)
        tasks.append((max(0.1, seconds), moved.get(row["id"], 0.0), float(row.get("gpu_peak_mb") or 0)))
    return tasks


def execute_rows(run_dir: Path) -> list[dict]:
    """Every execute verdict line of the run, in shard order."""
    return [json.loads(line) for path in sorted(run_dir.glob("shards/*/execute.jsonl"))
            for line in path.read_text().splitlines()]


def where_time_went(rows: list[dict]) -> str:
    """Worker-seconds in all, waiting for the GPU's lock, and by the try that judged a task short of GPU memory (how
    many, their seconds, how many still rejected); the checks' peak GPU memory, median and 90th percentile."""
    seconds = sum(row.get("worker_s") or 0 for row in rows)
    waiting = sum(row.get("worker_lock_wait_s") or 0 for row in rows)
    parts = [f"{len(rows)} candidates, {seconds:,.0f} worker-seconds, {waiting:,.0f} waiting for the GPU's lock"]
    for retry in ("kept worker", "fresh worker"):
        tried = [row for row in rows if row.get("memory_retry") == retry]
        rejected = sum(1 for row in tried if not row.get("keep"))
        parts.append(f"judged on a retry in a {retry}: {len(tried)} ({sum(r['worker_s'] for r in tried):,.0f} s, "
                     f"{rejected} rejected)")
    peaks = sorted(row["gpu_peak_mb"] for row in rows if row.get("gpu_peak_mb"))
    if peaks:
        parts.append(f"peak GPU memory: median {peaks[len(peaks) // 2] / 1024:.1f} GB, "
                     f"90th percentile {peaks[int(0.9 * len(peaks))] / 1024:.1f} GB")
    return "; ".join(parts)


def short_of_gpu_memory(row: dict) -> bool:
    """A rejection because the checks ran out of GPU memory (beside the other workers' tasks, on every try)."""
    return not row.get("keep") and is_gpu_out_of_memory(row.get("detail"))


def memory_rejections(rows: list[dict], moved: dict[str, float]) -> str:
    """How many candidates were rejected for GPU memory, and whether they were the large ones: the median bytes
    moved of those rejections against that of the candidates that passed."""
    def median_gb(group: list[dict]) -> str:
        values = sorted(moved.get(row["id"], 0.0) for row in group)
        return f"{values[len(values) // 2] / 1024:.1f} GB" if values else "—"

    short = [row for row in rows if short_of_gpu_memory(row)]
    passed = [row for row in rows if row.get("keep")]
    share = len(short) / len(rows) if rows else 0.0
    return (f"rejected for GPU memory: {len(short)} of {len(rows)} candidates ({share:.1%}); bytes moved, median: "
            f"theirs {median_gb(short)}, the passed candidates' {median_gb(passed)}")


def replay(tasks: list[tuple[float, float, float]], workers: int, budget_mb: float,
           need_of=lambda task: 0.0) -> float:
    """Seconds for `workers` to run `tasks` in order when a task starts only once `need_of(task)` and the needs
    held fit `budget_mb` (first come, first served; a task alone always starts)."""
    clock, held, running, queue = 0.0, 0.0, [], deque(tasks)
    while queue or running:
        while queue and len(running) < workers:
            need = min(budget_mb, need_of(queue[0]))
            if running and held + need > budget_mb:
                break
            seconds = queue.popleft()[0]
            heapq.heappush(running, (clock + seconds, need))
            held += need
        clock, need = heapq.heappop(running)
        held -= need
    return clock


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--workers", type=int, default=10)
    parser.add_argument("--budget-gb", type=float, nargs="+", default=[64.0, 80.0, 100.0])
    parser.add_argument("--factor", type=float, nargs="+", default=[2.0, 3.0, 4.0],
                        help="a task's reservation: this many times its bytes moved (at least 512 MB)")
    args = parser.parse_args(argv)
    tasks = load_tasks(args.run_dir) if args.run_dir.is_dir() else []
    if not tasks or args.workers < 1:
        print(f"error: {args.run_dir}: no execute verdict lines with worker_s (a build's run folder?), or "
              f"--workers below 1", file=sys.stderr)
        return 2
    rows = execute_rows(args.run_dir)
    print(where_time_went(rows))
    print(memory_rejections(rows, bytes_moved_mb(args.run_dir)))
    free = replay(tasks, args.workers, float("inf"))
    print(f"{len(tasks)} tasks, {args.workers} workers: {free:.0f} s with no reservation")
    print("budget GB | reservation | time against none")
    for budget in args.budget_gb:
        peak = replay(tasks, args.workers, budget * 1024, lambda task: max(512.0, task[2]))
        print(f"{budget:g} | each task's measured peak | {peak / free:.2f}x")
        for factor in args.factor:
            estimated = replay(tasks, args.workers, budget * 1024, lambda task, f=factor: max(512.0, f * task[1]))
            print(f"{budget:g} | {factor:g}x bytes moved | {estimated / free:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
