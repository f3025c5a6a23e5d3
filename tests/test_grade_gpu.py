"""`opgen grade` on a CUDA device: the cheats only a GPU can show (work left running on a side stream, before or
after the timed calls; a patched CUDA event timer, caught by the static scan and by the run-time guard alone), the
whole CPU corpus again on the device, and the reference graded with its speed-ups. Run by scripts/gpu/grade.sh."""

from __future__ import annotations

import pytest
import torch

import opgen
from opgen.grading.beside_solution.guard import hardened
from opgen.grading.run import GradeOptions, grade_task
from opgen.grading.tasks import reference_solution
from tests.conftest import record_figures
from tests.test_grade import CORPUS, TASKS, corpus

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


def gpu_corpus() -> list:
    cases = []
    for path in sorted((CORPUS / "solutions").glob("gpu_*.py")):
        head = dict(line[2:].split(": ", 1) for line in path.read_text().splitlines()[:2])
        cases.append(pytest.param(path, head, id=path.stem))
    return cases


# `# hardened` cases rest on the grader's newest defences, which hold on CUDA once HARDENED_ON_CUDA is set
@pytest.mark.parametrize("path,head", gpu_corpus() + corpus(lambda head: "hardened" not in head or hardened("cuda")))
def test_corpus_on_the_gpu(path, head):
    result = opgen.grade(path, task=TASKS / f"{head['task']}.py", device="cuda")
    assert result["reason"] == head["expect"], result
    if result["correct"]:   # timed with CUDA events against eager and torch.compile
        assert result["speedup_eager"] > 0 and result["speedup_compile"] > 0 and "CUDA events" in result["timing_method"]
        record_figures(f"corpus {path.stem}", result)


PATCHED_EVENT_TIMER = """
import torch
import torch.nn as nn

torch.cuda.Event.elapsed_time = lambda self, end: 0.001


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.relu(a @ b)
"""


def test_the_reference_itself_passes_with_its_speedups():
    code = (TASKS / "gpu_matmul.py").read_text()
    result = opgen.grade(solution_code=reference_solution(code), task_code=code, device="cuda")
    assert result["reason"] == "ok" and result["speedup_eager"] > 0 and result["speedup_compile"] > 0, result
    record_figures("the reference of gpu_matmul", result)


def test_patched_cuda_timer_caught_by_the_guard_alone():
    task = {"id": "gpu_matmul", "code": (TASKS / "gpu_matmul.py").read_text()}
    result = grade_task(task, PATCHED_EVENT_TIMER, GradeOptions(device="cuda"), static_scan=False)
    assert result["reason"] == "tampering" and "elapsed_time" in result["detail"], result
