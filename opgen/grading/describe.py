"""What a grade will check a task at, told before any solution exists: its tolerance and each input configuration
(the task's own sizes, then the held-out ones, derived as a grade derives them when the row holds none) with its
input and output shapes. The task runs in a sandboxed worker, as in a grade
(opgen/grading/beside_solution/describe_worker.py)."""

from __future__ import annotations

from opgen.errors import UsageError
from opgen.grading.beside_solution import DESCRIBE_FUNCTION


def describe_task(task: dict, options) -> dict:
    """{"atol", "rtol", "configs": [{"name", "sizes", "inputs", "outputs"}], "held_out_sizes", "held_out_note"} for a
    task (a row with `code`, as a grade takes it); UsageError when the task fails by itself."""
    from opgen.grading.run import grading_pool, payload_for, worker_threads

    payload = payload_for(task, "", options, worker_threads(options))
    [result] = grading_pool(options).run_many(DESCRIBE_FUNCTION, [payload])
    if result.status != "ok":
        raise UsageError(f"task {task.get('id')} cannot be described: {result.status}: {result.detail[-500:]}")
    if result.value.get("error"):
        raise UsageError(f"task {task.get('id')}: {result.value['error']}")
    return result.value
