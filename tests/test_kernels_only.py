"""The kernels-only rule and the compile stage, on real solutions in the real sandbox: a solution that reaches
PyTorch's compute operators from its forward, by any road, fails with `torch_operator`; one that calls its own C++
extension passes; extensions compile on a CPU worker before the grade, and a compile error never reaches a grading
worker."""

from __future__ import annotations

import pytest

import opgen
from opgen.grading.beside_solution.kernels_only import classify
from opgen.grading.extensions import _compile_pool, needs_compile
from opgen.grading.run import GradeOptions
from opgen.grading.scan import static_verdict
from opgen.grading.tasks import reference_solution
from tests.kernel_solutions import BROKEN, CHEATS, EXTENSION, HONEST, LINEAR_GELU


def grade(code: str, builds, **options) -> dict:
    return opgen.grade(solution_code=code, task=LINEAR_GELU, device="cpu", extensions_dir=str(builds), **options)


def test_the_extension_passes_the_rule_and_is_loaded_not_built_again(kernel_builds):
    [library] = kernel_builds.rglob("opgen_test_kernels*.so")
    built_at = library.stat().st_mtime_ns
    result = grade(HONEST, kernel_builds, kernels_only=True)
    assert (result["reason"], result["kernels_only"], result["reward"]) == ("ok", True, 1.0), result
    assert result["configs"] == ["published", "derived_1", "derived_2"]
    assert result["compiled"]["extensions"][0]["name"] == "opgen_test_kernels"
    assert library.stat().st_mtime_ns == built_at   # the grading worker loaded the CPU worker's build


@pytest.mark.parametrize("road", sorted(CHEATS))
def test_every_road_to_pytorch_operators_breaks_the_rule(road, kernel_builds):
    fair = grade(CHEATS[road], kernel_builds)   # KernelBench's convention: each is a correct solution
    assert fair["reason"] == "ok", fair
    ruled = grade(CHEATS[road], kernel_builds, kernels_only=True)
    assert (ruled["correct"], ruled["reason"], ruled["reward"]) == (False, "torch_operator", -1.0), ruled
    assert ruled["detail"].startswith("published draw 0: ")
    if road == "numpy":
        assert "Tensor.numpy" in ruled["detail"]
    else:   # the operators are named, also those a C++ extension or a custom op dispatched
        assert "aten::gelu" in ruled["detail"] or "aten::erf" in ruled["detail"], ruled["detail"]


def test_the_reference_itself_breaks_the_rule_and_passes_without_it(kernel_builds):
    code = reference_solution(LINEAR_GELU.read_text())
    assert grade(code, kernel_builds)["reason"] == "ok"
    ruled = grade(code, kernel_builds, kernels_only=True)
    assert ruled["reason"] == "torch_operator" and "aten::addmm" in ruled["detail"], ruled


def test_what_the_watch_cannot_see_is_refused_before_running():
    code = EXTENSION + "\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return BODY\n"
    for body, named in (("torch.compile(torch.nn.functional.gelu)(x)", "torch.compile"),
                        ("torch.cuda.CUDAGraph()", "torch.cuda.CUDAGraph"),
                        ("torch.jit.script(torch.nn.functional.gelu)(x)", "torch.jit"),
                        ("torch._C._len_torch_function_stack()", "_len_torch_function_stack")):
        assert static_verdict(code.replace("BODY", body)) is None
        reason, detail = static_verdict(code.replace("BODY", body), kernels_only=True)
        assert reason == "torch_operator" and named in detail


def test_the_watch_tells_glue_from_compute_and_own_ops_from_pytorchs():
    watch = classify(["aten::empty", "aten::view", "aten::contiguous", "aten::clone", "aten::copy_", "aten::to",
                      "aten::_to_copy", "aten::empty_strided", "profiler::_record_function_enter_new",
                      "my_extension::fused", "Hidden"])
    assert watch.describe() is None
    watch = classify(["my_extension::fused", "aten::relu", "aten::clamp_min", "aten::relu"])
    assert watch.operators == {"aten::relu": 2, "aten::clamp_min": 1}
    assert "aten::relu x2" in watch.describe()
    assert "torch.compile" in classify(["Torch-Compiled Region: 0/0"]).describe()


def test_a_compile_error_is_its_own_verdict_and_never_reaches_a_grading_worker(kernel_builds):
    assert needs_compile(BROKEN) and not needs_compile(reference_solution(LINEAR_GELU.read_text()))
    result = grade(BROKEN, kernel_builds)
    assert (result["reason"], result["reward"]) == ("compile_error", -1.0), result
    assert "error" in result["detail"] and "worker_pid" not in result
    pool = _compile_pool(GradeOptions(device="cpu"), 1)
    assert pool.env["CUDA_VISIBLE_DEVICES"] == ""   # compile workers see no GPU


def test_record_function_cannot_be_switched_off_where_the_watch_runs():
    import torch

    import opgen.grading.beside_solution.kernels_only  # noqa: F401 - replaces the switch as the grading worker imports it

    with pytest.raises(PermissionError, match="RecordFunction"):
        torch.autograd._enable_record_function(False)
    with pytest.raises(PermissionError):
        torch._C._autograd._enable_record_function(False)
    torch.autograd._enable_record_function(True)   # switching it on stays allowed


@pytest.mark.parametrize("road", ["thread", "tolist"])
def test_the_watch_sees_a_thread_s_operators_and_data_handed_to_python(road):
    """Two roads past a watch of the calling thread's operators and of numpy alone, on the real watch."""
    import threading

    import torch

    from opgen.grading.beside_solution.kernels_only import KernelsOnly

    x, w = torch.randn(4, 8), torch.randn(8, 8)

    def forward() -> torch.Tensor:
        if road == "thread":   # PyTorch's operators on a thread the forward starts and joins
            box = []
            thread = threading.Thread(target=lambda: box.append(torch.nn.functional.gelu(x @ w)))
            thread.start()
            thread.join()
            return box[0]
        # the data handed to Python as lists, the arithmetic done there
        return torch.tensor([[sum(a * b for a, b in zip(row, column)) for column in w.t().tolist()]
                             for row in x.tolist()])

    with KernelsOnly() as watched:
        forward()
    problem = watched.watch.describe()
    assert problem is not None
    assert ("aten::gelu" in problem) if road == "thread" else ("Tensor.tolist" in problem), problem
