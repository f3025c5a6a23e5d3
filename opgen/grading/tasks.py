"""Where a grade's task and solutions come from: a task file, or a row of a dataset (a published folder, a Hub id, or
a JSONL file of records with `code`), and solution files."""

from __future__ import annotations

import functools
import re
from pathlib import Path

from opgen.errors import UsageError
from opgen.jsonl import read_inputs, source_text

# The row's columns a grade uses: its tolerance, its held-out sizes, and its recorded timings (reported beside
# the new ones).
ROW_FIELDS = ("id", "code", "atol", "rtol", "dtype", "eager_ms", "compile_ms", "hardware", "families", "held_out_sizes")


def read_source(path: str | Path, what: str) -> str:
    """The text of a task or solution file; UsageError (exit 2) when it cannot be read."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"{what} not found: {path}")
    try:
        return source_text(path)
    except (OSError, UnicodeDecodeError, SyntaxError) as error:
        raise UsageError(f"cannot read {what} {path}: {error}") from None


def task_from_file(path: str | Path) -> dict:
    return {"id": Path(path).stem, "code": read_source(path, "task file")}


def dataset_rows(dataset: str, config: str = "default", download_to: str | None = None) -> list[dict]:
    """The tasks of a dataset: a published folder or Hub id (read with `datasets`, as a consumer would) or a JSONL
    file of records; each with the fields of ROW_FIELDS (None where absent)."""
    return [dict(row) for row in _cached_rows(str(dataset), config, download_to)]


@functools.lru_cache(maxsize=8)
def _cached_rows(dataset: str, config: str, download_to: str | None) -> tuple[dict, ...]:
    path = Path(dataset).expanduser()
    if path.is_file():
        rows = [{field: record.get(field) for field in ROW_FIELDS} for record in read_inputs(path)]
    else:
        from opgen.publish.reading import load_tasks, resolve_dataset  # torch and datasets only when needed

        folder, _ = resolve_dataset(dataset, download_to)
        rows = load_tasks(folder, ROW_FIELDS, fresh=True, config=config)   # the files as they are, not a cache of them
    if not rows:
        raise UsageError(f"{dataset} holds no task")
    return tuple(rows)


def dataset_row(dataset: str, task_id: str, config: str = "default", download_to: str | None = None) -> dict:
    for row in _cached_rows(str(dataset), config, download_to):
        if row["id"] == task_id:
            return dict(row)
    raise UsageError(f"no task with id {task_id!r} in {dataset}")


def solution_files(folder: str | Path) -> dict[str, Path]:
    """The solution files of a folder, by task id (`<id>.py`)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise UsageError(f"--solutions must be a folder of <task id>.py files: {folder}")
    return {path.stem: path for path in sorted(folder.glob("*.py")) if path.is_file()}


def reference_solution(code: str) -> str:
    """The task's own code as a solution: `Model` renamed `ModelNew` (the baseline a grader must find correct and
    about as fast as the reference it times)."""
    return re.sub(r"\bModel\b", "ModelNew", code)
