"""The agent's environment on a CUDA device: a CUDA extension (`load_inline` with CUDA sources) compiled on a CPU worker
that sees no GPU, loaded by the grading worker without building again, passing the kernels-only rule, as a Triton
kernel does; torch.compile in the forward breaking it at run time; a work folder's profile naming the solution's own
kernel."""

from __future__ import annotations

import json

import pytest
import torch

import opgen
from opgen.agent.folder import main as folder_main
from opgen.cli import main
from opgen.grading.run import GradeOptions, grade_task
from tests.conftest import record_figures
from tests.test_grade import TASKS

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]
GPU_MATMUL = TASKS / "gpu_matmul.py"

CUDA_SOLUTION = r'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = """
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void matmul_relu_kernel(const float* a, const float* b, float* c, int n, int m, int k) {
    __shared__ float ta[16][16], tb[16][16];
    int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
    float acc = 0.0f;
    for (int t = 0; t < k; t += 16) {
        ta[threadIdx.y][threadIdx.x] = (row < n && t + threadIdx.x < k) ? a[row * k + t + threadIdx.x] : 0.0f;
        tb[threadIdx.y][threadIdx.x] = (col < m && t + threadIdx.y < k) ? b[(t + threadIdx.y) * m + col] : 0.0f;
        __syncthreads();
        for (int i = 0; i < 16; ++i) acc += ta[threadIdx.y][i] * tb[i][threadIdx.x];
        __syncthreads();
    }
    if (row < n && col < m) c[row * m + col] = acc > 0.0f ? acc : 0.0f;
}

torch::Tensor matmul_relu(torch::Tensor a, torch::Tensor b) {
    const int n = a.size(0), k = a.size(1), m = b.size(1);
    auto c = torch::empty({n, m}, a.options());
    dim3 threads(16, 16), blocks((m + 15) / 16, (n + 15) / 16);
    matmul_relu_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(), n, m, k);
    return c;
}
"""

kernels = load_inline(name="opgen_gpu_test_kernels", cpp_sources="torch::Tensor matmul_relu(torch::Tensor a, "
                      "torch::Tensor b);", cuda_sources=CUDA, functions=["matmul_relu"])


class ModelNew(nn.Module):
    def forward(self, a, b):
        return kernels.matmul_relu(a.contiguous(), b.contiguous())
'''

COMPILED_IN_FORWARD = '''
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.fused = torch.compile(lambda a, b: torch.relu(a @ b))

    def forward(self, a, b):
        return self.fused(a, b)
'''


TRITON_SOLUTION = r'''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def matmul_relu_kernel(a, b, c, n, m, k, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for step in range(0, tl.cdiv(k, BLOCK_K)):
        inner = step * BLOCK_K + tl.arange(0, BLOCK_K)
        tile_a = tl.load(a + rows[:, None] * k + inner[None, :], mask=(rows[:, None] < n) & (inner[None, :] < k),
                         other=0.0)
        tile_b = tl.load(b + inner[:, None] * m + cols[None, :], mask=(inner[:, None] < k) & (cols[None, :] < m),
                         other=0.0)
        acc += tl.dot(tile_a, tile_b, input_precision="ieee")
    tl.store(c + rows[:, None] * m + cols[None, :], tl.maximum(acc, 0.0), mask=(rows[:, None] < n) & (cols[None, :] < m))


class ModelNew(nn.Module):
    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        n, k = a.shape
        m = b.shape[1]
        out = torch.empty(n, m, device=a.device, dtype=a.dtype)
        grid = (triton.cdiv(n, 64), triton.cdiv(m, 64))
        matmul_relu_kernel[grid](a, b, out, n, m, k, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32)
        return out
'''


def test_a_cuda_extension_compiles_on_a_cpu_worker_and_passes_the_rule(tmp_path):
    result = opgen.grade(solution_code=CUDA_SOLUTION, task=GPU_MATMUL, device="cuda", kernels_only=True,
                         extensions_dir=str(tmp_path))
    assert result["reason"] == "ok" and result["speedup_eager"] > 0 and result["reward"] >= 1.0, result
    assert result["compiled"]["extensions"][0]["name"] == "opgen_gpu_test_kernels"
    record_figures("cuda extension, graded with the kernels-only rule", result)
    [library] = tmp_path.rglob("opgen_gpu_test_kernels*.so")
    built_at = library.stat().st_mtime_ns
    again = opgen.grade(solution_code=CUDA_SOLUTION, task=GPU_MATMUL, device="cuda", kernels_only=True, timing=False,
                        extensions_dir=str(tmp_path))
    assert again["reason"] == "ok" and library.stat().st_mtime_ns == built_at   # loaded, not built again


def test_a_triton_kernel_passes_the_rule():
    result = opgen.grade(solution_code=TRITON_SOLUTION, task=GPU_MATMUL, device="cuda", kernels_only=True)
    assert result["reason"] == "ok" and result["speedup_eager"] > 0 and result["reward"] >= 1.0, result
    record_figures("triton kernel, graded with the kernels-only rule", result)


def test_torch_compile_in_the_forward_breaks_the_rule_at_run_time():
    task = {"id": "gpu_matmul", "code": GPU_MATMUL.read_text()}
    result = grade_task(task, COMPILED_IN_FORWARD, GradeOptions(device="cuda", kernels_only=True, timing=False),
                        static_scan=False)
    assert result["reason"] == "torch_operator", result


def test_the_work_folder_verifies_and_profiles_the_solutions_own_kernel(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OPGEN_EXTENSIONS_DIR", str(tmp_path / "builds"))
    folder = tmp_path / "work"
    assert main(["workdir", "--task", str(GPU_MATMUL), "--out", str(folder), "--device", "cuda"]) == 0
    (folder / "model_new.py").write_text(CUDA_SOLUTION)
    assert folder_main("compile", folder, ["--device", "cuda"]) == 0
    capsys.readouterr()
    assert folder_main("verify", folder, ["--device", "cuda"]) == 0
    verified = capsys.readouterr().out
    assert verified.startswith("PASS: model_new.py is correct") and "The kernels-only rule holds" in verified, verified
    assert folder_main("profile", folder, ["--device", "cuda", "--json"]) == 0
    grade = json.loads(capsys.readouterr().out)
    kernels = [row["name"] for row in grade["breakdown"]["solution"]["rows"]]
    assert any("matmul_relu_kernel" in name for name in kernels), kernels
    assert grade["compile_ms"] is not None and "CUDA events" in grade["timing_method"]
    record_figures("cuda extension, the work folder's profile", grade)
