"""The solution's module, run in a fresh namespace of its own: by the grading worker, and by the CPU worker that
compiles its extensions."""

from __future__ import annotations

import builtins
import linecache

from opgen.grading.beside_solution.introspection import SOLUTION_FILENAME, SOLUTION_MODULE


def solution_namespace(code: str) -> dict:
    """The solution's module run in a fresh namespace (its own linecache entry, so tracebacks name its lines)."""
    linecache.cache[SOLUTION_FILENAME] = (len(code), None, code.splitlines(True), SOLUTION_FILENAME)
    namespace = {"__name__": SOLUTION_MODULE, "__file__": SOLUTION_FILENAME, "__builtins__": builtins}
    exec(compile(code, SOLUTION_FILENAME, "exec"), namespace)  # noqa: S102 - the sandbox worker
    return namespace
