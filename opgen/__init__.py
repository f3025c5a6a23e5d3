"""opgen: builds KernelBench-format GPU-kernel training tasks, filtered, decontaminated and timed."""

from opgen.version import __version__

__all__ = ["__version__", "grade"]


def grade(*args, **kwargs) -> dict:
    """Grade a solution (`ModelNew`) against a task in a sandboxed worker; see `opgen.grading.api.grade`."""
    from opgen.grading.api import grade as grade_solution

    return grade_solution(*args, **kwargs)
