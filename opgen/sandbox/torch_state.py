"""Saving and restoring the process-wide torch settings a task could change, so one task cannot taint the next."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


@contextmanager
def isolated_torch_state(reset_compiled: bool = True) -> Iterator[None]:
    """The settings put back on leaving; `reset_compiled` False keeps what torch.compile compiled (a worker that
    keeps a compiled model warm for its next call)."""
    import torch._dynamo.config as dynamo_config
    import torch._inductor.config as inductor_config

    saved = (dynamo_config.save_config(), inductor_config.save_config(), torch.get_default_dtype(),
             torch.get_num_threads(), torch.are_deterministic_algorithms_enabled(),
             torch.get_float32_matmul_precision(), torch.is_grad_enabled())
    flags = {(holder, name): getattr(holder, name) for holder, name in _backend_flags()}
    try:
        yield
    finally:
        for (holder, name), value in flags.items():
            setattr(holder, name, value)
        dynamo, inductor, dtype, threads, deterministic, precision, grad = saved
        dynamo_config.load_config(dynamo)
        inductor_config.load_config(inductor)
        torch.set_default_dtype(dtype)
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(deterministic)
        torch.set_float32_matmul_precision(precision)
        torch.set_grad_enabled(grad)
        if reset_compiled:
            torch._dynamo.reset()


def _backend_flags() -> list[tuple[object, str]]:
    """The cuDNN and cuBLAS switches a task or a solution may flip (`torch.backends.cudnn.benchmark = True`), which
    would otherwise hold for every later task of the worker, its reference included."""
    cudnn, matmul = torch.backends.cudnn, torch.backends.cuda.matmul
    wanted = [(cudnn, "enabled"), (cudnn, "benchmark"), (cudnn, "deterministic"), (cudnn, "allow_tf32"),
              (matmul, "allow_tf32"), (matmul, "allow_fp16_reduced_precision_reduction"),
              (matmul, "allow_bf16_reduced_precision_reduction")]
    found = []
    for holder, name in wanted:
        try:
            getattr(holder, name)
        except (AttributeError, RuntimeError):   # a torch without it
            continue
        found.append((holder, name))
    return found
