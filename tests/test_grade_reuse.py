"""Reuse of the reference's timing within a process: a second grade of a task reuses the figures measured for the
first (the field says so, the verdicts agree), a tampering solution cannot reach them, and reuse off times the
reference beside each solution as before."""

from __future__ import annotations

from pathlib import Path

import pytest

from opgen.grading.reference import cached_reference, clear_reference_cache
from opgen.grading.run import GradeOptions, grade_task, payload_for, run_grades, worker_threads
from opgen.grading.tasks import reference_solution

CORPUS = Path(__file__).parent / "grade_corpus"
TASK = {"id": "linear_gelu", "code": (CORPUS / "tasks" / "linear_gelu.py").read_text()}
HONEST = (CORPUS / "solutions" / "honest_rewrite.py").read_text()
TIMED = GradeOptions(device="cpu", timing=True, warmups=1, trials=3, min_trials=3)
REFERENCE_FIELDS = ("eager_ms", "eager_ms_iqr", "compile_ms", "reference_worker_pid")


@pytest.fixture(autouse=True)
def fresh_cache():
    clear_reference_cache()
    yield
    clear_reference_cache()


def cached(options: GradeOptions) -> dict | None:
    return cached_reference(payload_for(TASK, HONEST, options, worker_threads(options)))


def test_second_grade_reuses_the_reference_timing():
    first = grade_task(TASK, HONEST, TIMED)
    second = grade_task(TASK, reference_solution(TASK["code"]), TIMED)
    assert first["reason"] == second["reason"] == "ok", (first, second)
    assert first["reference_reused"] is False and second["reference_reused"] is True
    assert {k: first[k] for k in REFERENCE_FIELDS} == {k: second[k] for k in REFERENCE_FIELDS}
    # measured in a worker of its own, never the one that ran the solution
    assert first["reference_worker_pid"] != first["worker_pid"]
    assert second["speedup_eager"] == pytest.approx(second["eager_ms"] / second["solution_ms"])
    assert second["trials"]["eager"] == first["trials"]["eager"] and second["trials"]["solution"] >= 3


def test_a_batch_measures_the_reference_once():
    payloads = [payload_for(TASK, code, TIMED, worker_threads(TIMED))
                for code in (HONEST, reference_solution(TASK["code"]), HONEST)]
    lines = run_grades(payloads, TIMED)
    assert [line["reason"] for line in lines] == ["ok"] * 3, lines
    assert [line["reference_reused"] for line in lines] == [False, True, True]
    assert len({line["eager_ms"] for line in lines}) == 1 and len({line["reference_worker_pid"] for line in lines}) == 1


@pytest.mark.parametrize("cheat", ["cheat_host_timer", "cheat_patch_functional"])
def test_a_tampering_solution_cannot_reach_the_cached_reference(cheat):
    code = (CORPUS / "solutions" / f"{cheat}.py").read_text()
    before = grade_task(TASK, code, TIMED, static_scan=False)   # graded before any reference was measured
    assert before["reason"] == "tampering" and "eager_ms" not in before and cached(TIMED) is None
    honest = grade_task(TASK, HONEST, TIMED)
    figures = cached(TIMED)
    assert honest["reason"] == "ok" and honest["reference_reused"] is False
    assert honest["reference_worker_pid"] != before["worker_pid"]
    after = grade_task(TASK, code, TIMED, static_scan=False)    # and again with the figures cached
    assert after["reason"] == "tampering"
    assert cached(TIMED) == figures
    last = grade_task(TASK, HONEST, TIMED)
    assert last["reason"] == "ok" and last["reference_reused"] is True and last["worker_pid"] != after["worker_pid"]
    assert {k: last[k] for k in REFERENCE_FIELDS} == {k: honest[k] for k in REFERENCE_FIELDS}


def test_reuse_off_times_the_reference_beside_each_solution():
    options = GradeOptions(device="cpu", timing=True, warmups=1, trials=3, min_trials=3, reuse_reference=False)
    grades = [grade_task(TASK, HONEST, options) for _ in range(2)]
    for grade in grades:
        assert grade["reason"] == "ok" and grade["reference_reused"] is False, grade
        assert "reference_worker_pid" not in grade and grade["trials"]["eager"] >= 3 and grade["eager_ms"] > 0
    assert cached(options) is None and cached(TIMED) is None


def test_untimed_grades_measure_no_reference():
    grade = grade_task(TASK, HONEST, GradeOptions(device="cpu"))
    assert grade["reason"] == "ok" and "reference_reused" not in grade and grade.get("eager_ms") is None
    assert cached(TIMED) is None
