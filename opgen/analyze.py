"""Shapes, FLOPs and bytes moved of a task, counted on the meta device so no real compute is spent.

This executes the task's module code to build it on meta tensors, so it is meant for code opgen rendered
itself (the sampler); untrusted files go through the sandbox instead.
"""

from __future__ import annotations

import math

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.flop_counter import FlopCounterMode

from opgen.astops import data_source_for, ops_from_code

_FREE_OPS = {"aten.detach", "aten.alias", "aten.lift_fresh", "aten._to_copy", "aten.empty", "aten.zeros",
             "aten.ones", "aten.randn", "aten.rand", "aten.randint", "aten.normal_", "aten.uniform_"}

# Device model used to estimate eager GPU time from counted work (H200-class, fp32, TF32 off).
GPU_FP32_TFLOPS = 45.0
GPU_BANDWIDTH_GBS = 3300.0
GPU_LAUNCH_US = 6.0


class WorkCounter(TorchDispatchMode):
    """Counts bytes read and written and the kernels launched by every non-view aten op."""

    def __init__(self) -> None:
        super().__init__()
        self.bytes_moved = 0
        self.kernels = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = func._overloadpacket._qualified_op_name.replace("::", ".")
        if not func.is_view and name not in _FREE_OPS:
            tensors = [t for t in tree_leaves((args, kwargs, out)) if isinstance(t, torch.Tensor)]
            self.bytes_moved += sum(t.numel() * t.element_size() for t in tensors)
            self.kernels += 1
        return out


def _shape(value) -> list:
    if isinstance(value, torch.Tensor):
        return list(value.shape)
    if isinstance(value, (tuple, list)) and value and isinstance(value[0], torch.Tensor):
        return list(value[0].shape)
    return []


def analyze_code(code: str) -> dict:
    """ops, data_source, input/output shapes, FLOPs, bytes moved and kernel count of one forward call."""
    ops = ops_from_code(code)
    namespace: dict = {"__name__": "opgen_task"}
    exec(compile(code, "<task>", "exec"), namespace)  # noqa: S102 - opgen-rendered code only
    with torch.device("meta"):
        torch.manual_seed(0)
        model = namespace["Model"](*namespace["get_init_inputs"]()).eval()
        inputs = namespace["get_inputs"]()
        counter = WorkCounter()
        flops = FlopCounterMode(display=False)
        with torch.no_grad(), flops, counter:
            output = model(*inputs)
    return {
        "ops": ops,
        "data_source": data_source_for(ops),
        "num_ops": len(ops),
        "input_shapes": [list(t.shape) for t in inputs if isinstance(t, torch.Tensor)],
        "output_shape": _shape(output),
        "flops": int(flops.get_total_flops()),
        "bytes_moved": int(counter.bytes_moved),
        "kernels": counter.kernels,
    }


def estimate_gpu_ms(flops: int, bytes_moved: int, kernels: int) -> float:
    """Roofline estimate of eager time on the GPU: compute + memory time + per-kernel launch cost."""
    compute = flops / (GPU_FP32_TFLOPS * 1e12)
    memory = bytes_moved / (GPU_BANDWIDTH_GBS * 1e9)
    return 1e3 * (compute + memory) + kernels * GPU_LAUNCH_US / 1e3


def log_uniform(rng, lo: float, hi: float) -> float:
    return math.exp(rng.uniform(math.log(lo), math.log(hi)))
