"""Where a batch of grades runs, as `executor` names it: "local" (this machine's sandbox workers, the default) or
"ray" (a Ray cluster's grading actors, opgen/grading/ray_grader.py), with the grading options resolved for it."""

from __future__ import annotations

from opgen.errors import UsageError
from opgen.grading.api import resolved_options
from opgen.grading.run import LOCAL, GradeOptions

EXECUTORS = ("local", "ray")


def batch_grader(options: dict, executor: str = "local", ray_actors: int | None = None) -> tuple[object, GradeOptions]:
    """(grader, options): the grader of `executor` and opgen.grade's keyword `options` resolved for it. On Ray the
    device is the cluster's ("auto": CUDA when it has a GPU) and each actor fills what is left out (the memory
    limit, its workers: `workers` is then per actor) from its own node."""
    if executor not in EXECUTORS:
        raise UsageError(f"unknown executor {executor!r} (choose local or ray)")
    if executor == "local":
        if ray_actors is not None:
            raise UsageError("ray_actors goes with executor='ray'")
        return LOCAL, resolved_options(options, batch=True)
    if ray_actors is not None and ray_actors < 1:
        raise UsageError("ray_actors must be at least 1")
    from opgen.grading.ray_grader import cluster_grader

    options = {key: value for key, value in options.items() if value is not None}
    workers = options.pop("workers", None)
    device = options.pop("device", "auto")
    _grade_options(options, "cpu", workers)   # bad options said before any cluster is joined
    grader = cluster_grader(device, ray_actors, workers)
    return grader, _grade_options(options, grader.device, workers)


def _grade_options(options: dict, device: str, workers: int | None) -> GradeOptions:
    try:
        return GradeOptions(**options, device=device, workers=workers or 1)
    except TypeError as error:   # an option GradeOptions does not have
        raise UsageError(f"unknown grading option: {error}") from None
