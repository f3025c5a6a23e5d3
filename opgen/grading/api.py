"""`opgen.grade(...)`: grade one solution from Python (an RL trainer's reward), with the command's protocol."""

from __future__ import annotations

from pathlib import Path

from opgen.errors import UsageError
from opgen.grading.run import GradeOptions, grade_task
from opgen.grading.tasks import dataset_row, read_source, task_from_file
from opgen.sandbox.gpus import resolve_device
from opgen.sandbox.machine_sizing import grading_workers, size_for_machine


def grade(solution: str | Path | None = None, *, solution_code: str | None = None, task: str | Path | None = None,
          task_code: str | None = None, dataset: str | None = None, id: str | None = None, config: str = "default",
          download_to: str | None = None, **options) -> dict:
    """Grade a solution (a file, or `solution_code`) against a task (a file `task`, source `task_code`, or row `id`
    of `dataset`: a published folder, a Hub id or a JSONL file). `options` are GradeOptions' fields: device ("auto" by
    default: CUDA when a GPU is visible, else the CPU; or "cuda", "cpu"), draws, seed, timing, compile_baseline, warmups, trials, min_trials, timeout_s, memory_mb (default:
    the build's limit on this machine; 0 for none).

    Returns the grade: `correct`, `reason` ("ok" or the code of what failed), `detail`, the worst error
    (`max_abs_error`, `tolerance_ratio`), the milestone `reward` (-1, 1, 2, 3), and when timed `solution_ms`,
    `eager_ms`, `compile_ms`, `speedup_eager`, `speedup_compile` (docs/grading.md). Raises UsageError for bad input (a task that itself fails included) and
    MachineFault when the machine cannot run the work; neither is a verdict on the solution."""
    if (solution is None) == (solution_code is None):
        raise UsageError("give exactly one of solution (a file) and solution_code")
    if sum(x is not None for x in (task, task_code, dataset)) != 1 or (dataset is None) != (id is None):
        raise UsageError("give exactly one of task (a file), task_code, or dataset with id")
    code = read_source(solution, "solution file") if solution is not None else solution_code
    if task is not None:
        row = task_from_file(task)
    elif task_code is not None:
        row = {"id": "task", "code": task_code}
    else:
        row = dataset_row(str(dataset), str(id), config, download_to)
    return grade_task(row, code, resolved_options(options))


def resolved_options(options: dict, batch: bool = False) -> GradeOptions:
    """GradeOptions from keyword options, the machine filling what is left out: the device ("auto": CUDA when a GPU
    is visible), the memory limit (the build's on this machine), and for a batch the workers (as a folder's)."""
    options = dict(options)
    device, gpus, _ = resolve_device(options.get("device") or "auto")
    options["device"] = device
    if options.get("memory_mb") is None:   # the build's limit on this machine (0: none)
        options["memory_mb"] = size_for_machine(device, len(gpus), None, None, None).memory_mb
    if batch and options.get("workers") is None:
        options["workers"] = grading_workers(device, len(gpus))
    options = {key: value for key, value in options.items() if value is not None}
    try:
        return GradeOptions(**options)
    except TypeError as error:   # an option GradeOptions does not have
        raise UsageError(f"unknown grading option: {error}") from None
