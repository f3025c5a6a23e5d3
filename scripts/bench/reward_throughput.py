"""The reward as an RL trainer calls it: `opgen.reward_function(...)(prompts, completions, code=[...])` over batches of
64 completions (8 for each of 8 tasks: honest rewrites, wrong answers and cheats mixed), one batch after another.
Prints a JSON line after every batch (so a run cut short still leaves its figures): the batch's seconds, completions
graded per minute over the batches after the first, the rewards, and where a completion's time went (the grading
worker's seconds, by phase: the task's load, the solution's, the checked draws, the timing; how many references were
timed; extension compiles).

    python scripts/bench/reward_throughput.py --dataset data/short-tasks.jsonl --batches 4 [--device cuda]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from opgen.errors import UsageError  # noqa: E402
from opgen.grading.api import resolved_options  # noqa: E402
from opgen.grading.rewards import grade_completions  # noqa: E402
from opgen.grading.tasks import dataset_rows, reference_solution  # noqa: E402
from scripts.bench.grading_throughput import generated_tasks  # noqa: E402

# what a policy writes, besides honest rewrites: each a completion's text (a code block), from the reference's code
ZEROS = "\n\ndef _zeros(self, *args):\n    return torch.zeros_like(_ORIGINAL(self, *args))\n\n" \
        "_ORIGINAL = ModelNew.forward\nModelNew.forward = _zeros\n"
SCALED = "\n\ndef _scaled(self, *args):\n    return _ORIGINAL(self, *args) * 1.5\n\n" \
         "_ORIGINAL = ModelNew.forward\nModelNew.forward = _scaled\n"
REPLAY = "\n\ndef _replay(self, *args):\n    if not hasattr(self, '_kept'):\n        self._kept = _ORIGINAL(self, *args)\n" \
         "    return self._kept\n\n_ORIGINAL = ModelNew.forward\nModelNew.forward = _replay\n"
KILLER = "\nimport torch\n_os = getattr(torch, 'o' + 's')\ngetattr(_os, 'ki' + 'll')(getattr(_os, 'getp' + 'pid')(), 9)\n"
MIX = ("honest", "honest", "honest", "zeros", "scaled", "replay", "killer", "no code")   # 8 completions a task


def completion(task_code: str, kind: str, index: int) -> str:
    """A completion of `kind` for the task: a ```python block (but for "no code")."""
    if kind == "no code":
        return "I would write a fused kernel here."
    code = reference_solution(task_code) + f"\n# completion {index}\n"
    code += {"honest": "", "zeros": ZEROS, "scaled": SCALED, "replay": REPLAY, "killer": KILLER}[kind]
    return f"Here is my kernel.\n```python\n{code}\n```"


def batch_of(tasks: list[dict], number: int) -> tuple[list[str], list[dict]]:
    """64 completions (8 tasks x MIX), each with its task row."""
    completions, rows = [], []
    for t, task in enumerate(tasks):
        for k, kind in enumerate(MIX):
            completions.append(completion(task["code"], kind, number * 1000 + t * 10 + k))
            rows.append(task)
    return completions, rows


def breakdown(lines: list[dict]) -> dict:
    """Median seconds per completion graded in a worker: the worker's (`worker_s`), the reference's timing, and the
    extension compiles."""
    graded = [line for line in lines if line.get("worker_s") is not None]

    def median(key: str):
        values = [line[key] for line in graded if isinstance(line.get(key), int | float)]
        return round(statistics.median(values), 3) if values else None

    phases = {phase: round(statistics.median(values), 3) for phase in ("task", "solution", "draws", "timing")
              if (values := [line["phases_s"][phase] for line in graded if phase in (line.get("phases_s") or {})])}
    return {"graded_in_a_worker": len(graded), "worker_s": median("worker_s"), "phases_s": phases,
            "reference_timed": sum(line.get("reference_reused") is False for line in lines),
            "compile_s": round(sum((line.get("compiled") or {}).get("seconds", 0.0) for line in lines), 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--dataset", default=None, help="task rows (JSONL or a published folder; default: generated)")
    parser.add_argument("--batches", type=int, default=4)
    parser.add_argument("--workers", type=int, default=None)
    args = parser.parse_args(argv)
    try:
        options = resolved_options({"device": args.device, "workers": args.workers}, batch=True)
        rows = dataset_rows(args.dataset) if args.dataset else generated_tasks(8 * args.batches, options.device)
        if len(rows) < 8:
            raise UsageError(f"{args.dataset}: at least 8 tasks are needed, it holds {len(rows)}")
    except UsageError as error:
        print(f"reward_throughput: {error}", file=sys.stderr)
        return 2
    started, after_first, graded_after_first = time.perf_counter(), None, 0
    for number in range(args.batches):
        tasks = [rows[(number * 8 + t) % len(rows)] for t in range(8)]
        completions, batch_rows = batch_of(tasks, number)
        begun = time.perf_counter()
        lines = grade_completions(completions, batch_rows, options)
        seconds = time.perf_counter() - begun
        if number == 0:
            after_first = time.perf_counter()
        else:
            graded_after_first += len(lines)
        rate = graded_after_first / (time.perf_counter() - after_first) * 60 if number else None
        print(json.dumps({"batch": number, "completions": len(lines), "seconds": round(seconds, 1),
                          "per_minute_after_first": round(rate, 1) if rate else None,
                          "rewards": dict(Counter(str(line["reward"]) for line in lines)),
                          "reasons": dict(Counter(line["reason"] for line in lines)),
                          "device": options.device, "workers": options.workers,
                          "hardware": next((line.get("hardware") for line in lines if line.get("hardware")), None),
                          **breakdown(lines), "wall_s": round(time.perf_counter() - started, 1)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
