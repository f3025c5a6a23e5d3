"""Short timed tasks for the grader's GPU runs: N tasks drawn at random (seeded) from the quarter of a build's tasks
with the shortest eager times, written as a JSONL file of records (id, code) that `scripts/gpu/grade.sh` takes as
DATASET. Short tasks keep a throughput run's grades about the grader, not about the task's own minutes.

    python scripts/analysis/state_preview.py builds/opgen-ops-6k/opgen-ops-6k.state --out /tmp/preview
    python scripts/gpu/short_tasks.py /tmp/preview/run/tasks.parquet --out data/short-tasks.jsonl [--n 60] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

SHORTEST_SHARE = 0.25   # drawn from this share of the tasks, the shortest by eager time


def short_tasks(rows: list[dict], n: int, seed: int) -> list[dict]:
    """`n` of the rows (at most as many as there are) drawn from the SHORTEST_SHARE with the shortest `eager_ms`
    (rows without one left out), as (id, code) records in the order drawn."""
    timed = sorted((row for row in rows if row.get("eager_ms") is not None),
                   key=lambda row: (row["eager_ms"], row["id"]))
    pool = timed[:max(1, round(len(timed) * SHORTEST_SHARE))] if timed else []
    drawn = random.Random(seed).sample(pool, min(n, len(pool)))
    return [{"id": row["id"], "code": row["code"]} for row in drawn]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tasks", help="a build's tasks.parquet (a run folder's, or a preview's)")
    parser.add_argument("--out", required=True, help="the JSONL file to write")
    parser.add_argument("--n", type=int, default=60, help="tasks to draw (default 60)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    import pyarrow.parquet as pq

    try:
        rows = pq.read_table(args.tasks, columns=["id", "code", "eager_ms"]).to_pylist()
    except (OSError, KeyError, ValueError) as error:
        print(f"short_tasks: error: cannot read the tasks of {args.tasks} ({type(error).__name__})", file=sys.stderr)
        return 2
    chosen = short_tasks(rows, args.n, args.seed)
    if not chosen:
        print(f"short_tasks: error: {args.tasks} holds no timed task", file=sys.stderr)
        return 2
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("".join(json.dumps(record) + "\n" for record in chosen), encoding="utf-8")
    print(f"{len(chosen)} tasks to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
