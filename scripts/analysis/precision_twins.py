"""The same tasks in another precision, and the speed-ups between the two: a bf16 (or fp16) build's tasks against
their fp32 twins, the same graph and sizes rendered in fp32.

    python scripts/analysis/precision_twins.py twins TASKS --dtype fp32 --out TWINS.jsonl
    opgen time --input TWINS.jsonl --out TIMED_TWINS.jsonl --device cuda
    python scripts/analysis/precision_twins.py speedups TASKS TIMED_TWINS.jsonl

TASKS: a run folder, a published folder (`--config` names its precision, default bf16), a tasks parquet or a
JSONL, with `graph`, `id` and, for `speedups`, the timing columns. A twin is rendered from the task's stored graph
(sizes as fitted for the task's own precision), so it is the same computation on the same shapes. Sampling the same
seed in fp32 draws other tasks: a precision's vocabulary leaves out the operators without a kernel in it
(`torch.cdist` in bf16 and fp16), which moves every later draw (13 of the 20 chains of `sample_records(0, 0, 20,
"gpu", dtype="bf16")` differ from the fp32 ones of the same call), and sizes are fitted to the window for the
precision.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from opgen.analysis.rows import read_task_rows  # noqa: E402
from opgen.records import task_id  # noqa: E402
from opgen.sample.render import render  # noqa: E402
from opgen.sample.sampler import graph_from_json  # noqa: E402
from opgen.taskcode.dtypes import DEFAULT_DTYPE, DTYPES  # noqa: E402
from opgen.vocab import cached_vocabulary  # noqa: E402


def twin(task: dict, dtype: str, vocab=None) -> dict:
    """`task` rendered from its graph in `dtype`: a record for `opgen time`, `twin_of` naming the task."""
    graph = graph_from_json(task["graph"])
    if dtype == DEFAULT_DTYPE:
        graph.graph.pop("dtype", None)   # an fp32 graph carries no dtype (it renders as before precisions)
    else:
        graph.graph["dtype"] = dtype
    code = render(graph, vocab or cached_vocabulary())
    return {"id": task_id(code), "code": code, "twin_of": task["id"], "dtype": dtype,
            "flops": task.get("flops"), "bytes_moved": task.get("bytes_moved")}


def geomean(values: list[float]) -> float | None:
    return math.exp(statistics.fmean(math.log(v) for v in values)) if values else None


def speedups(tasks: list[dict], twins: list[dict]) -> dict:
    """Per timing (eager, compile): the tasks' speed-up over their twins (twin time / task time), its geometric
    mean, median and p10-p90, over the pairs both timed."""
    by_task = {t["twin_of"]: t for t in twins}
    report: dict = {"tasks": len(tasks), "twins_timed": sum(1 for t in twins if t.get("eager_ms"))}
    for prefix in ("eager", "compile"):
        key = f"{prefix}_ms"
        ratios = sorted(by_task[t["id"]][key] / t[key] for t in tasks
                        if t.get(key) and by_task.get(t["id"], {}).get(key))
        report[prefix] = {"pairs": len(ratios), "geomean_speedup": geomean(ratios),
                          "median_speedup": statistics.median(ratios) if ratios else None,
                          "p10": ratios[len(ratios) // 10] if ratios else None,
                          "p90": ratios[(9 * len(ratios)) // 10] if ratios else None}
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    make = sub.add_parser("twins", help="render each task in another precision")
    make.add_argument("tasks", type=Path)
    make.add_argument("--dtype", choices=DTYPES, default=DEFAULT_DTYPE)
    make.add_argument("--out", type=Path, required=True)
    compare = sub.add_parser("speedups", help="the tasks' speed-ups over their timed twins")
    compare.add_argument("tasks", type=Path)
    compare.add_argument("twins", type=Path)
    for command in (make, compare):
        command.add_argument("--config", default="bf16", help="the published folder's config TASKS come from")
    args = parser.parse_args(argv)
    for path in [args.tasks] + ([args.twins] if args.command == "speedups" else []):
        if not path.exists():
            print(f"error: no such file or folder: {path}", file=sys.stderr)
            return 2
    tasks = read_task_rows(args.tasks, args.config)
    if args.command == "twins":
        with args.out.open("w", encoding="utf-8") as handle:
            for task in tasks:
                handle.write(json.dumps(twin(task, args.dtype)) + "\n")
        print(f"wrote {len(tasks)} {args.dtype} twins to {args.out}")
        return 0
    print(json.dumps(speedups(tasks, read_task_rows(args.twins)), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
