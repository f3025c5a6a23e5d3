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
    try:
        yield
    finally:
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
