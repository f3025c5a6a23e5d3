"""Grading throughput: solutions graded per minute for a folder of N honest solutions for each of T tasks, with the
reference's timing reused within the run and without (`--no-reuse` alone, or both by default), on the device given."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from opgen.errors import UsageError  # noqa: E402
from opgen.grading.api import resolved_options  # noqa: E402
from opgen.grading.reference import clear_reference_cache  # noqa: E402
from opgen.grading.run import GradeOptions, finish_line, payload_for, run_grades, worker_threads  # noqa: E402
from opgen.grading.tasks import dataset_rows, reference_solution  # noqa: E402

TASK = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        return torch.tanh(self.linear(x)) * {scale}


def get_inputs():
    return [torch.randn({batch}, {features})]


def get_init_inputs():
    return [{features}]
'''
SIZES = {"cpu": (16, 64), "cuda": (4096, 4096)}   # (batch, features) of the generated tasks


def generated_tasks(count: int, device: str, prefix: str = "bench") -> list[dict]:
    """`count` small tasks of distinct code (a linear layer, tanh, a scale of their own per prefix and index)."""
    batch, features = SIZES[device]
    offset = sum(map(ord, prefix)) % 97   # each run's tasks compile afresh: no run rides on another's compiles
    return [{"id": f"{prefix}_{i}", "code": TASK.format(scale=1.0 + offset + i / 8, batch=batch, features=features)}
            for i in range(count)]


def variants(code: str, count: int) -> list[str]:
    """The reference solution and honest variants of it: the same computation, code of their own."""
    base = reference_solution(code)
    return [base if k == 0 else f"{base}\n# honest variant {k}\nVARIANT = {k}\n" for k in range(count)]


def write_folder(folder: Path, tasks: list[dict], per_task: int) -> dict[str, list[Path]]:
    """`folder/<task id>/<k>.py` for each task's solutions."""
    files: dict[str, list[Path]] = {}
    for task in tasks:
        (folder / task["id"]).mkdir(parents=True, exist_ok=True)
        files[task["id"]] = []
        for k, code in enumerate(variants(task["code"], per_task)):
            path = folder / task["id"] / f"{k}.py"
            path.write_text(code)
            files[task["id"]].append(path)
    return files


def grade_run(tasks: list[dict], files: dict[str, list[Path]], options: GradeOptions) -> list[dict]:
    """Every solution of the folder graded in one run, grouped by task (the order a trainer's batch comes in)."""
    pairs = [(task, path.read_text()) for task in tasks for path in files[task["id"]]]
    threads = worker_threads(options)
    lines = run_grades([payload_for(task, code, options, threads) for task, code in pairs], options)
    return [finish_line(line, task) for (task, _), line in zip(pairs, lines)]


def measure(mode: str, tasks: list[dict], files: dict[str, list[Path]], options: GradeOptions,
            wave_tasks: int = 0) -> dict:
    """One mode's figures. `wave_tasks`: the folder graded a batch of that many tasks' solutions at a time (as a
    trainer's steps come), the figures so far printed after each batch, so that a run cut short still says them."""
    clear_reference_cache()
    started = time.perf_counter()
    lines: list[dict] = []
    size = wave_tasks or len(tasks)
    for first in range(0, len(tasks), size):
        lines += grade_run(tasks[first:first + size], files, options)
        if first + size < len(tasks):
            print(json.dumps({**figures(mode, tasks[:first + size], lines, time.perf_counter() - started, options),
                              "partial": True}), flush=True)
    return figures(mode, tasks, lines, time.perf_counter() - started, options)


def figures(mode: str, tasks: list[dict], lines: list[dict], wall: float, options: GradeOptions) -> dict:
    wrong = [line for line in lines if not line["correct"]]
    return {"mode": mode, "device": options.device, "hardware": next((line.get("hardware") for line in lines), None),
            "tasks": len(tasks), "solutions": len(lines), "correct": len(lines) - len(wrong),
            "first_failure": (wrong[0]["reason"], (wrong[0].get("detail") or "")[:200]) if wrong else None,
            "reference_reused": sum(bool(line.get("reference_reused")) for line in lines),
            "wall_s": round(wall, 2), "solutions_per_minute": round(60 * len(lines) / wall, 1),
            "workers": options.workers, "compile_baseline": options.with_compile}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--tasks", type=int, default=8, help="tasks (default 8)")
    parser.add_argument("--solutions", type=int, default=25, help="solutions per task (default 25)")
    parser.add_argument("--dataset", default=None, help="take the first --tasks rows of this dataset (default: "
                        "generated tasks, tiny on the CPU)")
    parser.add_argument("--workers", type=int, default=None, help="grading workers (default: as a folder's)")
    parser.add_argument("--wave-tasks", type=int, default=0, help="grade the solutions of this many tasks at a time "
                        "and print the figures so far after each batch (default 0: all at once)")
    parser.add_argument("--no-reuse", action="store_true", help="only the run with reuse off")
    parser.add_argument("--reuse-only", action="store_true", help="only the run with reuse on")
    parser.add_argument("--compile-baseline", action=argparse.BooleanOptionalAction, default=None,
                        help="time torch.compile of the reference (default: on CUDA)")
    parser.add_argument("--warmups", type=int, default=None, help="default: the protocol's on CUDA, 2 on the CPU")
    parser.add_argument("--trials", type=int, default=None, help="default: the protocol's on CUDA, 10 on the CPU")
    parser.add_argument("--min-trials", type=int, default=None)
    args = parser.parse_args(argv)
    try:
        if args.tasks < 1 or args.solutions < 1 or (args.no_reuse and args.reuse_only):
            raise UsageError("--tasks and --solutions must be at least 1; --no-reuse and --reuse-only exclude each other")
        cpu = args.device == "cpu"
        plan = {"warmups": args.warmups if args.warmups is not None else (2 if cpu else None),
                "trials": args.trials if args.trials is not None else (10 if cpu else None),
                "min_trials": args.min_trials if args.min_trials is not None else (5 if cpu else None)}
        base = resolved_options({"device": args.device, "timing": True, "compile_baseline": args.compile_baseline,
                                 "workers": args.workers, **plan}, batch=True)
        rows = dataset_rows(args.dataset)[:args.tasks] if args.dataset else None
        modes = [("reuse", True), ("no_reuse", False)]
        modes = [m for m in modes if not (args.no_reuse and m[1]) and not (args.reuse_only and not m[1])]
        with tempfile.TemporaryDirectory(prefix="opgen-grading-bench-") as folder:
            # a compile cache of this run's own (the workers inherit it): no figure rides on an earlier run's compiles
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(Path(folder) / "inductor-cache")
            warm = generated_tasks(1, args.device, prefix="warm_up")
            warm_files = write_folder(Path(folder) / "warm", warm, 2 * base.workers)   # every worker a first task
            for mode, reuse in modes:   # start every pool (workers, imports, a first compile) outside the figures
                warming = time.perf_counter()
                grade_run(warm, warm_files, GradeOptions(**{**base.__dict__, "reuse_reference": reuse}))
                # on stderr as it happens: a run cut short by its time limit still says where its time went
                print(f"grading_throughput: {mode}: the pool started, {2 * base.workers} warm-up grades in "
                      f"{time.perf_counter() - warming:.1f} s", file=sys.stderr, flush=True)
            results = []
            for mode, reuse in modes:   # generated tasks: each mode its own (dataset rows: the same for both)
                tasks = rows or generated_tasks(args.tasks, args.device, prefix=mode)
                files = write_folder(Path(folder) / mode, tasks, args.solutions)
                results.append(measure(mode, tasks, files, GradeOptions(**{**base.__dict__, "reuse_reference": reuse}),
                                       args.wave_tasks))
    except UsageError as error:
        print(f"grading_throughput: {error}", file=sys.stderr)
        return 2
    for result in results:
        print(json.dumps(result))
    if len(results) == 2:
        print(json.dumps({"throughput_ratio": round(results[0]["solutions_per_minute"] /
                                                    results[1]["solutions_per_minute"], 2)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
