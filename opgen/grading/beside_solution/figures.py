"""The reference's figures on a grade's line, and the speed-ups over them: filled in by the grading worker when it
times the reference itself, else by the grader's process from the reference worker's figures."""

from __future__ import annotations


def reference_figures(eager: dict, compiled: dict | None, compile_error: str | None) -> dict:
    """The reference's fields of a grade from its eager and compiled trial statistics."""
    figures = {"eager_ms": eager["median"], "eager_ms_iqr": eager["iqr"],
               "compile_ms": compiled["median"] if compiled else None,
               "compile_ms_iqr": compiled["iqr"] if compiled else None,
               "reference_trials": {"eager": eager["count"], "compile": compiled["count"] if compiled else None}}
    if compile_error:
        figures["compile_error"] = compile_error
    return figures


def speedups(line: dict) -> dict:
    """`speedup_eager` and `speedup_compile` of a line with `solution_ms`, `eager_ms` and `compile_ms`."""
    solution = line.get("solution_ms")
    return {key: line[ms] / solution if solution and line.get(ms) is not None else None
            for key, ms in (("speedup_eager", "eager_ms"), ("speedup_compile", "compile_ms"))}
