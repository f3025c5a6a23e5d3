"""`opgen grade`: grade a solution (`ModelNew`) against a task, or a folder of solutions against a dataset."""

from __future__ import annotations

import argparse
import json
import sys

from kernels_ref.load import looks_like_path
from opgen.commands.device_option import add_device_option, chosen_device
from opgen.commands.limits import megabytes, seconds
from opgen.commands.paths import require_existing
from opgen.errors import UsageError
from opgen.jsonl import require_writable
from opgen.sandbox.machine_sizing import grading_workers, size_for_machine


def register(sub) -> None:
    parser = sub.add_parser(
        "grade", help="grade a solution (ModelNew) against a task, or a folder of solutions against a dataset",
        description="Grade a KernelBench-style solution (a file defining ModelNew, built with the task's "
                    "get_init_inputs()) in a sandboxed worker: correct on several fresh input draws at the task's "
                    "tolerance, safe against known hacks, and on a GPU timed against eager and torch.compile with "
                    "the dataset's protocol. Each grade carries CUDA-Agent's milestone reward (-1, 1, 2, 3). One "
                    "solution: prints one JSON object, exit 0 correct, 1 not, 2 bad input. A folder (--solutions): "
                    "one JSON line per task and the summary figures (docs/grading.md).")
    source = parser.add_argument_group("what to grade")
    source.add_argument("--task", default=None, help="a task file (KernelBench format)")
    source.add_argument("--dataset", default=None,
                        help="a published dataset folder, a Hub id ORG/NAME, or a JSONL file of records with code")
    source.add_argument("--id", default=None, help="the task id within --dataset")
    source.add_argument("--solution", default=None, help="the solution file (defines ModelNew)")
    source.add_argument("--solutions", default=None, help="a folder of solutions, one <task id>.py per task")
    source.add_argument("--out", default=None, help="with --solutions: the JSON lines go here (a rerun resumes)")
    source.add_argument("--summary", default=None, help="with --solutions: also write the figures as JSON here")
    source.add_argument("--config", default="default", help="the dataset config (a precision: bf16, fp16)")
    source.add_argument("--download-to", default=None, help="where a Hub dataset is downloaded")
    how = parser.add_argument_group("how")
    add_device_option(how, "where the solution runs (and is timed, on cuda)")
    how.add_argument("--draws", type=int, default=5, help="input draws checked per configuration (default 5)")
    how.add_argument("--seed", type=int, default=0, help="seed of the draws and the weights (default 0)")
    how.add_argument("--timing", action=argparse.BooleanOptionalAction, default=None,
                     help="time solution and baselines (default: on CUDA only)")
    how.add_argument("--compile-baseline", action=argparse.BooleanOptionalAction, default=None,
                     help="time torch.compile of the reference too (default: when timing on CUDA)")
    how.add_argument("--reuse-reference", action=argparse.BooleanOptionalAction, default=True,
                     help="time each task's reference once per run, in a worker that runs no solution, and reuse "
                          "its figures for every solution of the task (default: on)")
    how.add_argument("--kernels-only", action="store_true",
                     help="CUDA-Agent's rule: the solution's forward may run only its own kernels (C++/CUDA "
                          "extensions, Triton) and glue, no PyTorch compute operator (reason torch_operator)")
    how.add_argument("--warmups", type=int, default=10)
    how.add_argument("--trials", type=int, default=100, help="the most trials (adaptive, from --min-trials)")
    how.add_argument("--min-trials", type=int, default=10)
    how.add_argument("--timeout", type=seconds, default=300.0, help="seconds per solution (default 300)")
    how.add_argument("--memory-mb", type=megabytes, default=None,
                     help="resident memory limit per worker, 0 for none (default: as opgen build's)")
    how.add_argument("--workers", type=int, default=None,
                     help="sandbox workers for --solutions (with --executor ray: per grading actor)")
    how.add_argument("--executor", choices=("local", "ray"), default="local",
                     help="with --solutions: this machine's sandbox workers (default), or a Ray cluster's grading "
                          "actors, one per GPU (RAY_ADDRESS, else a new local cluster; docs/grading.md)")
    how.add_argument("--ray-actors", type=int, default=None,
                     help="with --executor ray: grading actors (default: one per GPU of the cluster; on a CPU-only "
                          "cluster, one per node)")
    how.add_argument("--no-progress", action="store_true")
    parser.set_defaults(func=run)


def run(args) -> int:
    folder_mode = args.solutions is not None
    if folder_mode:
        if args.solution or args.task or args.id or not args.dataset:
            raise UsageError("--solutions grades a folder against --dataset (no --task, --id or --solution)")
    elif not args.solution or (args.task is None) == (args.dataset is None) or (args.dataset is None) != (args.id is None):
        raise UsageError("give --solution with either --task or --dataset and --id (or --dataset with --solutions)")
    if (args.out or args.summary) and not folder_mode:
        raise UsageError("--out and --summary go with --solutions")
    if args.executor == "ray" and not folder_mode:
        raise UsageError("--executor ray goes with --solutions")
    if args.ray_actors is not None and (args.executor != "ray" or args.ray_actors < 1):
        raise UsageError("--ray-actors goes with --executor ray, and must be at least 1")
    if args.workers is not None and args.workers < 1:
        raise UsageError("--workers must be at least 1")
    for path, what in ((args.task, "--task"), (args.solution, "--solution"), (args.solutions, "--solutions")):
        require_existing(path, what)
    if args.dataset is not None and looks_like_path(args.dataset):
        require_existing(args.dataset, "--dataset")
    for path, option in ((args.out, "--out"), (args.summary, "--summary")):
        if path:
            require_writable(path, option)
    if args.executor == "ray":
        return _grade_folder_on_ray(args)
    device, gpus = chosen_device(args.device)
    sizing = size_for_machine(device, len(gpus), None, None, args.memory_mb)
    workers = args.workers or (grading_workers(device, len(gpus)) if folder_mode else 1)
    options = _options(args, device, sizing.memory_mb or None, workers)
    if folder_mode:
        return _grade_folder(args, options)
    return _grade_one(args, options)


def _options(args, device: str, memory_mb: int | None, workers: int):
    from opgen.grading.run import GradeOptions

    return GradeOptions(device=device, draws=args.draws, seed=args.seed, timing=args.timing,
                           compile_baseline=args.compile_baseline, warmups=args.warmups, trials=args.trials,
                           min_trials=args.min_trials, timeout_s=args.timeout,
                           memory_mb=memory_mb,
                           workers=workers, kernels_only=args.kernels_only,
                           reuse_reference=args.reuse_reference)


def _grade_folder_on_ray(args) -> int:
    """--solutions on a Ray cluster: each grading actor sizes its memory limit (unless given) from its own node."""
    from opgen.grading.ray_grader import RayGrader

    _options(args, "cpu", None, 1)   # bad options said before the cluster is joined
    grader = RayGrader(args.device, args.ray_actors, args.workers)
    try:
        options = _options(args, grader.device, args.memory_mb, args.workers or 1)
        return _grade_folder(args, options, grader)
    finally:
        grader.close()


def _grade_one(args, options) -> int:
    from opgen.grading.run import grade_task
    from opgen.grading.tasks import dataset_row, read_source, task_from_file

    code = read_source(args.solution, "solution file")
    task = task_from_file(args.task) if args.task else dataset_row(args.dataset, args.id, args.config, args.download_to)
    line = {**grade_task(task, code, options), "solution": args.solution}
    print(json.dumps(line))
    return 0 if line["correct"] else 1


def _grade_folder(args, options, grader=None) -> int:
    from opgen.grading.run import LOCAL, grade_folder
    from opgen.grading.summary import summary_text

    report = grade_folder(args.dataset, args.solutions, options, out=args.out, config=args.config,
                          download_to=args.download_to, progress=not args.no_progress, grader=grader or LOCAL)
    print(summary_text(report.figures), file=sys.stderr if args.out is None else sys.stdout)
    if args.summary:
        with open(args.summary, "w", encoding="utf-8") as handle:
            json.dump(report.figures, handle, indent=1)
    return 0
