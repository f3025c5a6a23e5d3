"""The reward's batches graded by the local pool and by a Ray cluster's grading actors (1, 2, 4, ... of them): each
setting grades `--batches` batches of mixed completions (8 a task: honest rewrites, wrong answers, cheats, no code;
scripts/bench/reward_throughput.py's mix) on tasks of its own, the first batch warming its workers. Prints a JSON
line per setting: each batch's seconds and the completions graded per minute after the first batch. On one GPU and
on N, the rate on N should be at least 0.85 x N times the rate on one.

    python scripts/bench/ray_grading.py --device cpu --actors 1,2,4 --tasks 2 --batches 2     # the path, on a CPU
    RAY_ADDRESS=HEAD:6379 python scripts/bench/ray_grading.py --device cuda --actors 1,8 --no-local --batches 4
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from opgen.errors import MachineFault, UsageError  # noqa: E402
from opgen.grading.api import resolved_options  # noqa: E402
from opgen.grading.rewards import grade_completions  # noqa: E402
from opgen.grading.run import LOCAL, GradeOptions  # noqa: E402
from scripts.bench.grading_throughput import generated_tasks  # noqa: E402
from scripts.bench.reward_throughput import MIX, completion  # noqa: E402


def batches_of(tasks: list[dict], per_batch: int, tag: int) -> list[tuple[list[str], list[dict]]]:
    """The batches: `per_batch` tasks each, every task with the 8 completions of MIX."""
    batches = []
    for start in range(0, len(tasks), per_batch):
        chosen = tasks[start:start + per_batch]
        completions = [completion(task["code"], kind, tag * 10_000 + start * 10 + k)
                       for task in chosen for k, kind in enumerate(MIX)]
        batches.append((completions, [task for task in chosen for _ in MIX]))
    return batches


def measure(name: str, grader, options: GradeOptions, tasks: list[dict], per_batch: int, tag: int) -> dict:
    """Grade the batches one after another; the seconds of each and the rate after the first."""
    seconds, reasons = [], Counter()
    for completions, rows in batches_of(tasks, per_batch, tag):
        begun = time.perf_counter()
        lines = grade_completions(completions, rows, options, grader)
        seconds.append(round(time.perf_counter() - begun, 1))
        reasons.update(line["reason"] for line in lines)
    after_first = sum(seconds[1:])
    graded = per_batch * len(MIX) * (len(seconds) - 1)
    return {"setting": name, "batch_s": seconds, "completions_per_batch": per_batch * len(MIX),
            "per_minute_after_first": round(graded / after_first * 60, 1) if after_first else None,
            "reasons": dict(reasons), "device": options.device,
            "sandbox_workers": getattr(grader, "workers", options.workers)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--actors", default="1,2,4", help="grading actor counts, comma-separated")
    parser.add_argument("--tasks", type=int, default=2, help="tasks per batch (8 completions each)")
    parser.add_argument("--batches", type=int, default=2, help="batches per setting, the first one warming up")
    parser.add_argument("--no-local", action="store_true", help="skip the local pool")
    args = parser.parse_args(argv)
    try:
        counts = [int(part) for part in args.actors.split(",") if part.strip()]
        if args.tasks < 1 or args.batches < 2 or any(count < 1 for count in counts):
            raise UsageError("--tasks and every --actors count must be at least 1, --batches at least 2")
        settings = ([] if args.no_local else [("local", None)]) + [(f"ray x{count}", count) for count in counts]
        for tag, (name, actors) in enumerate(settings):
            tasks = generated_tasks(args.tasks * args.batches, "cpu" if args.device == "cpu" else "cuda",
                                    prefix=f"ray{tag}")
            if actors is None:
                grader, options = LOCAL, resolved_options({"device": args.device}, batch=True)
            else:
                from opgen.grading.ray_grader import RayGrader

                grader = RayGrader(args.device, actors)
                options = GradeOptions(device=grader.device)
            try:
                print(json.dumps(measure(name, grader, options, tasks, args.tasks, tag)), flush=True)
            finally:
                if actors is not None:
                    grader.stop_actors()   # the cluster stays up for the next setting
    except (UsageError, MachineFault) as error:
        print(f"ray_grading: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
