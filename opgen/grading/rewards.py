"""Rewards for RL trainers: model completions with their tasks, each completion's code block graded in sandboxed
workers with `opgen grade`'s protocol, one float each (CUDA-Agent's milestone reward: -1, 1, 2, 3), in the shapes
TRL's GRPOTrainer and verl call reward functions with. A bad completion (no code block, broken code, a solution
that crashes or hangs) scores -1; only bad input (a task that cannot be found or fails by itself) or a failing
machine raises."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from opgen.errors import UsageError
from opgen.grading.completions import extract_code
from opgen.grading.graders import batch_grader
from opgen.grading.run import LOCAL, GradeOptions, finish_line, payload_for, static_line, worker_threads
from opgen.grading.tasks import ROW_FIELDS, dataset_row

ID_COLUMNS = ("id", "task_id")
TASK_OPTIONS = ("dataset", "config", "download_to")
EXECUTOR_OPTIONS = ("executor", "ray_actors")


def grade_completions(completions: Sequence, tasks: Sequence[dict], options: GradeOptions, grader=LOCAL) -> list[dict]:
    """The grade of each completion against its task (a row: `code`, and optionally `id`, `atol`, `rtol`,
    `held_out_sizes`, recorded timings), with `reward`; in order, one per completion. `grader` grades the batch
    (this machine's workers, or a Ray cluster's: opgen/grading/graders.py)."""
    if len(completions) != len(tasks):
        raise UsageError(f"{len(completions)} completions but {len(tasks)} tasks")
    started = time.perf_counter()
    lines: list[dict | None] = []
    codes: list[str] = []
    for completion in completions:
        try:
            code = extract_code(completion)
            line = static_line(code, options) if code is not None else \
                {"correct": False, "reason": "parse_error", "detail": "no ```python code block in the completion"}
        except Exception as error:  # noqa: BLE001 - whatever a completion holds, it scores, it never raises
            code, line = None, {"correct": False, "reason": "parse_error",
                                "detail": f"the completion cannot be read: {type(error).__name__}: {error}"}
        codes.append(code or "")
        lines.append(line)
    todo = [i for i, line in enumerate(lines) if line is None]
    threads = worker_threads(options)
    graded = grader.run_grades([payload_for(tasks[i], codes[i], options, threads) for i in todo], options)
    for index, line in zip(todo, graded):
        if line["reason"] == "reference_error":
            raise UsageError(f"task {tasks[index].get('id')}: {line.get('detail')}")
        lines[index] = line
    seconds = round((time.perf_counter() - started) / max(1, len(lines)), 3)
    return [finish_line({**line, "seconds": seconds}, task) for line, task in zip(lines, tasks)]


def tasks_from_columns(count: int, columns: dict, dataset: str | None = None, config: str = "default",
                       download_to: str | None = None) -> list[dict]:
    """Each completion's task from the dataset columns a trainer passes beside it (a list per column): the task's
    source in `code` (with the row's other columns), or its id in `id` (or `task_id`) looked up in `dataset`."""
    lists = {name: value for name, value in columns.items() if isinstance(value, list | tuple) and len(value) == count}
    ids = next((lists[name] for name in ID_COLUMNS if name in lists), None)
    if "code" in lists:
        return [{"id": str(ids[i]) if ids is not None else f"task-{i}",
                 **{field: lists[field][i] for field in ROW_FIELDS if field in lists and field != "id"}}
                for i in range(count)]
    if ids is not None and dataset:
        return [dataset_row(str(dataset), str(task_id), config, download_to) for task_id in ids]
    raise UsageError("each completion needs its task: a `code` column (the task's source), or an `id` column with "
                     "dataset=... (opgen.reward_function(dataset=...))")


def reward_function(*, dataset: str | None = None, config: str = "default", download_to: str | None = None,
                    executor: str = "local", ray_actors: int | None = None, **options) -> Callable[..., list[float]]:
    """A reward function for TRL's GRPOTrainer (`reward_funcs=[opgen.reward_function(kernels_only=True)]`):
    `f(prompts, completions, **columns) -> list[float]`, the tasks read from the dataset's columns (`code`, or `id`
    with `dataset`). `options` are opgen.grade's (device, kernels_only, timeout_s, ...); resolved once.
    `executor="ray"` grades on a Ray cluster (the one this process joined, else $RAY_ADDRESS, else a new local one)
    with `ray_actors` grading actors (default: one per GPU of the cluster; on a CPU-only one, one per node)."""
    grader, grade_options = batch_grader(options, executor, ray_actors)

    def opgen_reward(prompts: Sequence | None = None, completions: Sequence | None = None, **columns) -> list[float]:
        """One milestone reward per completion (-1 incorrect, 1 correct, 2 faster than eager, 3 than both)."""
        if completions is None:
            raise UsageError("completions are required")
        tasks = tasks_from_columns(len(completions), columns, dataset, config, download_to)
        return [line["reward"] for line in grade_completions(completions, tasks, grade_options, grader)]

    return opgen_reward


def compute_score_batch(data_sources: Sequence | None = None, solution_strs: Sequence = (),
                        ground_truths: Sequence = (), extra_infos: Sequence | None = None, **kwargs) -> list[float]:
    """verl's batch reward (BatchRewardManager): `ground_truth` is the task's source or its id (then `dataset` is a
    keyword, from `reward_kwargs`, or in `extra_info`); `extra_info` may hold the row's other columns. Keywords are
    opgen.grade's options, and `executor`/`ray_actors` as for reward_function (a Ray cluster's actors are kept
    between calls)."""
    task_options = {name: kwargs.pop(name) for name in TASK_OPTIONS if name in kwargs}
    executor_options = {name: kwargs.pop(name) for name in EXECUTOR_OPTIONS if name in kwargs}
    known = set(GradeOptions.__dataclass_fields__)
    grader, grade_options = batch_grader({k: v for k, v in kwargs.items() if k in known}, **executor_options)
    infos = list(extra_infos) if extra_infos is not None else [None] * len(solution_strs)
    tasks = [_verl_task(truth, info or {}, task_options) for truth, info in zip(ground_truths, infos)]
    return [line["reward"] for line in grade_completions(list(solution_strs), tasks, grade_options, grader)]


def compute_score(data_source: str | None = None, solution_str: str = "", ground_truth: str | None = None,
                  extra_info: dict | None = None, **kwargs) -> float:
    """verl's reward function (`custom_reward_function.name=compute_score`): one completion's milestone reward."""
    return compute_score_batch([data_source], [solution_str], [ground_truth], [extra_info], **kwargs)[0]


def _verl_task(ground_truth: object, info: dict, options: dict) -> dict:
    if isinstance(ground_truth, dict):   # the row itself
        info, ground_truth = {**info, **ground_truth}, ground_truth.get("code") or ground_truth.get("id")
    text = str(ground_truth or "")
    if "def get_inputs" in text:
        return {"id": str(info.get("id") or "task"), "code": text,
                **{field: info[field] for field in ROW_FIELDS if field in info and field not in ("id", "code")}}
    dataset = info.get("dataset") or options.get("dataset")
    if not text or not dataset:
        raise UsageError("verl's ground_truth must be the task's source, or its id with a dataset (reward_kwargs "
                         "or extra_info['dataset'])")
    return dataset_row(str(dataset), text, options.get("config", "default"), options.get("download_to"))
