"""Solutions written as a C++ CPU extension (`load_inline`), for the grader's compile stage, the kernels-only rule, the
rewards and the agent's work folder. Every one embeds the same extension, so it is compiled once per session (the
build is keyed by the extension's sources): honest ones for linear_gelu and matmul_diagonal, a slow one, a wrong one,
and cheats that reach PyTorch's operators from the forward."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from opgen.grading.extensions import build_path

TASKS = Path(__file__).parent / "grade_corpus" / "tasks"
LINEAR_GELU = TASKS / "linear_gelu.py"
MATMUL_DIAGONAL = TASKS / "matmul_diagonal.py"

EXTENSION = r'''
import math

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = """
#include <torch/extension.h>
#include <cmath>

torch::Tensor linear_gelu(torch::Tensor x, torch::Tensor w, torch::Tensor b, int64_t repeat) {
    TORCH_CHECK(x.dim() == 2 && x.is_contiguous() && w.is_contiguous(), "2-d contiguous inputs");
    const int64_t rows = x.size(0), in = x.size(1), out = w.size(0);
    auto y = torch::empty({rows, out}, x.options());
    const float *px = x.data_ptr<float>(), *pw = w.data_ptr<float>(), *pb = b.data_ptr<float>();
    float *py = y.data_ptr<float>();
    for (int64_t r = 0; r < repeat; ++r)
        for (int64_t i = 0; i < rows; ++i)
            for (int64_t j = 0; j < out; ++j) {
                float acc = pb[j];
                for (int64_t k = 0; k < in; ++k) acc += px[i * in + k] * pw[j * in + k];
                py[i * out + j] = 0.5f * acc * (1.0f + std::erf(acc * 0.70710678118654752f));
            }
    return y;
}

torch::Tensor gelu(torch::Tensor x) {
    auto y = torch::empty_like(x);
    const float *px = x.data_ptr<float>();
    float *py = y.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) py[i] = 0.5f * px[i] * (1.0f + std::erf(px[i] * 0.70710678118654752f));
    return y;
}

torch::Tensor linear_gelu_aten(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    return torch::gelu(torch::addmm(b, x, w.t()));
}

torch::Tensor row_dots(torch::Tensor a, torch::Tensor b) {
    const int64_t n = a.size(0), k = a.size(1);
    auto out = torch::empty({n}, a.options());
    const float *pa = a.data_ptr<float>(), *pb = b.data_ptr<float>();
    float *po = out.data_ptr<float>();
    for (int64_t i = 0; i < n; ++i) {
        float acc = 0.0f;
        for (int64_t j = 0; j < k; ++j) acc += pa[i * k + j] * pb[i * k + j];
        po[i] = acc;
    }
    return out;
}
"""

kernels = load_inline(name="opgen_test_kernels", cpp_sources=CPP,
                      functions=["linear_gelu", "gelu", "linear_gelu_aten", "row_dots"])
'''

LINEAR_MODEL = '''

class ModelNew(nn.Module):
    def __init__(self, features, hidden):
        super().__init__()
        self.linear = nn.Linear(features, hidden)   # the reference's parameters, so the grader gives it its weights

    def forward(self, x):
        return {call}
'''

DIAGONAL_MODEL = '''

class ModelNew(nn.Module):
    def forward(self, a, b):
        return kernels.row_dots(a.contiguous(), b.contiguous())   # diag(a @ b.T): one dot product a row
'''

HONEST_CALL = "kernels.linear_gelu(x.contiguous(), self.linear.weight, self.linear.bias, 1)"


def linear_solution(call: str = HONEST_CALL, extra: str = "") -> str:
    """A ModelNew for linear_gelu whose forward returns `call`, after the shared extension (and `extra` code)."""
    return EXTENSION + extra + LINEAR_MODEL.format(call=call)


HONEST = linear_solution()
SLOW = linear_solution("kernels.linear_gelu(x.contiguous(), self.linear.weight, self.linear.bias, 20000)")
WRONG = linear_solution("kernels.linear_gelu(x.contiguous(), self.linear.weight, torch.zeros_like(self.linear.bias), 1)")
DIAGONAL = EXTENSION + DIAGONAL_MODEL

# A C++ source that fails to compile at once (without torch's headers, which take the compiler tens of seconds).
BROKEN = '''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

kernels = load_inline(name="opgen_test_broken", cpp_sources="int broken( {", no_implicit_headers=True)


class ModelNew(nn.Module):
    def forward(self, x):
        return x
'''

# Each reaches PyTorch's compute operators from the forward by another road, with the right values.
CHEATS = {
    "functional": linear_solution("torch.nn.functional.gelu(torch.nn.functional.linear(x, self.linear.weight, "
                                  "self.linear.bias))"),
    "aten_ops": linear_solution("torch.ops.aten.gelu.default(torch.ops.aten.addmm.default(self.linear.bias, x, "
                                "self.linear.weight.t()))"),
    "tensor_methods": linear_solution("gelu_by_methods(x.matmul(self.linear.weight.t()).add(self.linear.bias))",
                                      extra="\n\ndef gelu_by_methods(y):\n"
                                            "    return y.mul(0.5).mul(y.mul(0.7071067811865476).erf().add(1.0))\n"),
    "autograd_function": linear_solution("Hidden.apply(x, self.linear.weight, self.linear.bias)",
                                         extra="\n\nclass Hidden(torch.autograd.Function):\n    @staticmethod\n"
                                               "    def forward(ctx, x, w, b):\n"
                                               "        return torch.nn.functional.gelu(x @ w.t() + b)\n"),
    "module_attribute": linear_solution("self.gelu(self.linear(x))").replace(
        "self.linear = nn.Linear(features, hidden)", "self.linear = nn.Linear(features, hidden)\n"
        "        self.gelu = nn.GELU()"),
    "custom_op": linear_solution("hidden_op(x, self.linear.weight, self.linear.bias)",
                                 extra='\n\n@torch.library.custom_op("opgen_test_cheat::hidden", mutates_args=())\n'
                                       "def hidden_op(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> "
                                       "torch.Tensor:\n    return torch.nn.functional.gelu(x @ w.t() + b)\n"),
    "extension_calls_aten": linear_solution("kernels.linear_gelu_aten(x.contiguous(), self.linear.weight, "
                                            "self.linear.bias)"),
    "numpy": linear_solution("kernels.gelu(torch.from_numpy(x.numpy() @ self.linear.weight.detach().numpy().T "
                             "+ self.linear.bias.detach().numpy()))"),
}


def build_tools_or_fail() -> None:
    """The extension tests need a C++ compiler and ninja (a dev dependency: pip's ninja lands beside the interpreter,
    where the sandbox workers look first)."""
    missing = [tool for tool in (os.environ.get("CXX", "c++"), "ninja") if not shutil.which(tool, path=build_path())]
    if missing:
        pytest.fail(f"building C++ extensions needs {' and '.join(missing)} on PATH (ninja: pip install ninja)")
