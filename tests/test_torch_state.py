"""The process-wide torch settings a task or a solution may change are put back when it ends, so none of them holds
for the next task of the worker (a solution's `cudnn.benchmark = True` would have held for the next grade's
reference)."""

from __future__ import annotations

import warnings

import torch

from opgen.sandbox.torch_state import isolated_torch_state


def test_settings_and_backend_switches_are_put_back():
    cudnn, matmul = torch.backends.cudnn, torch.backends.cuda.matmul
    before = (torch.get_default_dtype(), torch.are_deterministic_algorithms_enabled(), cudnn.benchmark,
              cudnn.deterministic, cudnn.enabled, matmul.allow_fp16_reduced_precision_reduction,
              torch.get_float32_matmul_precision())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with isolated_torch_state(reset_compiled=False):
            torch.set_default_dtype(torch.float64)
            torch.use_deterministic_algorithms(True)
            cudnn.benchmark, cudnn.deterministic, cudnn.enabled = True, True, False
            matmul.allow_fp16_reduced_precision_reduction = not before[5]
            torch.set_float32_matmul_precision("medium")
    after = (torch.get_default_dtype(), torch.are_deterministic_algorithms_enabled(), cudnn.benchmark,
             cudnn.deterministic, cudnn.enabled, matmul.allow_fp16_reduced_precision_reduction,
             torch.get_float32_matmul_precision())
    assert after == before
