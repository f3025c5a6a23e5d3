"""Shapes, FLOPs and bytes moved of a task, counted on the meta device so no real compute is spent.

This executes the task's module code to build it on meta tensors, so it is meant for code opgen rendered
itself (the sampler); untrusted files go through the sandbox instead.
"""

from __future__ import annotations

import math
import warnings

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.flop_counter import FlopCounterMode

from opgen.taskcode.ops import data_source_for, ops_from_code

_FREE_OPS = {"aten.detach", "aten.alias", "aten.lift_fresh", "aten._to_copy", "aten.empty", "aten.zeros",
             "aten.ones", "aten.randn", "aten.rand", "aten.randint", "aten.normal_", "aten.uniform_"}

# Device model used to estimate eager GPU time from counted work (H200, fp32, PyTorch's default precision: TF32
# for cuDNN convolutions), fitted to 371 gpu-profile tasks of realistic sizes timed on an H200 (docs/benchmarks.md,
# 2026-12-01: estimated/measured 1.04 without convolutions, 1.3 with them, log-sd 0.73). The earlier model (35
# TFLOP/s, 1.8 TB/s, fitted with TF32 off on batch-scaled tasks) over-estimated these by 1.6x.
GPU_FP32_TFLOPS = 60.0
# bf16 and fp16 matrix work runs on tensor cores: an H200's dense peak is 989 TFLOP/s in either, against 67 for fp32
# matrix products and 494 for the TF32 convolutions. Not fitted yet: 300 TFLOP/s lies geometrically between twice
# the fp32 figure and 60% of that peak, and the target's spread (GPU_TARGET_MS, opgen/sample/fit.py) absorbs an
# estimate off by 2-3x either way; at 60 TFLOP/s the compute-bound tasks would be sized 5-10x too small.
GPU_TFLOPS = {"fp32": GPU_FP32_TFLOPS, "bf16": 300.0, "fp16": 300.0}
GPU_BANDWIDTH_GBS = 2500.0
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


_RNN_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _count_recurrent_analytically(model: torch.nn.Module, counter: WorkCounter, extra_flops: list[int]) -> None:
    """Replace RNN/LSTM/GRU forwards by shape-only stand-ins that count their work in closed form.

    On the meta device these modules decompose into one op per time step, which costs seconds; the
    closed form is exact for the matmul FLOPs and counts gate reads and writes as bytes.
    """
    for module in model.modules():
        if not isinstance(module, torch.nn.RNNBase):
            continue

        def forward(x, hx=None, _m=module):
            _m.check_input(x, None)  # the module's own size check: the stand-in must refuse what the layer refuses
            batch_first = _m.batch_first and x.dim() == 3
            seq = x.shape[1] if batch_first else x.shape[0]
            batch = (x.shape[0] if batch_first else x.shape[1]) if x.dim() == 3 else 1
            gates, hidden, dirs = _RNN_GATES[_m.mode], _m.hidden_size, 2 if _m.bidirectional else 1
            size_in = x.shape[-1]
            for _ in range(_m.num_layers):
                extra_flops[0] += 2 * gates * hidden * (size_in + hidden) * batch * seq * dirs
                counter.bytes_moved += 4 * (batch * seq * (size_in + 2 * gates * hidden * dirs)
                                            + gates * hidden * (size_in + hidden) * dirs)
                counter.kernels += 2 * seq * dirs
                size_in = hidden * dirs
            out_shape = (batch, seq, size_in) if batch_first else (seq, batch, size_in)
            if x.dim() == 2:
                out_shape = (seq, size_in)
            output = x.new_empty(out_shape)
            h_n = x.new_empty((_m.num_layers * dirs, batch, hidden) if x.dim() == 3 else (_m.num_layers * dirs, hidden))
            return output, ((h_n, h_n.clone()) if _m.mode == "LSTM" else h_n)

        module.forward = forward


def _shape(value) -> list:
    if isinstance(value, torch.Tensor):
        return list(value.shape)
    if isinstance(value, (tuple, list)) and value and isinstance(value[0], torch.Tensor):
        return list(value[0].shape)
    return []


class AnalysisError(RuntimeError):
    """The task could not be counted (neither on the meta device nor, for small tasks, on the CPU)."""


CPU_FALLBACK_MAX_NUMEL = 1 << 22


def _count(namespace: dict, device: str) -> dict:
    with torch.device(device):
        torch.manual_seed(0)
        inputs = namespace["get_inputs"]()  # first: a task too large for the CPU fails before building its weights
        if device == "cpu" and sum(t.numel() for t in inputs if isinstance(t, torch.Tensor)) > CPU_FALLBACK_MAX_NUMEL:
            raise AnalysisError("too large to count on the CPU")
        model = namespace["Model"](*namespace["get_init_inputs"]()).eval()
        counter = WorkCounter()
        recurrent_flops = [0]
        _count_recurrent_analytically(model, counter, recurrent_flops)
        flops = FlopCounterMode(display=False)
        with warnings.catch_warnings(), torch.no_grad(), flops, counter:
            warnings.simplefilter("ignore")
            output = model(*inputs)
    return {
        "input_shapes": [list(t.shape) for t in inputs if isinstance(t, torch.Tensor)],
        "output_shape": _shape(output),
        "flops": int(flops.get_total_flops()) + recurrent_flops[0],
        "bytes_moved": int(counter.bytes_moved),
        "kernels": counter.kernels,
    }


def analyze_code(code: str, cpu_fallback: bool = True) -> dict:
    """ops, data_source, input/output shapes, FLOPs, bytes moved and kernel count of one forward call.

    Counts on the meta device; an operator without meta support (data-dependent checks such as
    `.item()`) falls back to a real CPU run when the task is small (unless `cpu_fallback` is off).
    """
    ops = ops_from_code(code)
    namespace: dict = {"__name__": "opgen_task"}
    exec(compile(code, "<task>", "exec"), namespace)  # noqa: S102 - opgen-rendered code only
    try:
        facts = _count(namespace, "meta")
    except Exception as meta_error:  # noqa: BLE001 - any meta failure gets the CPU fallback
        if not cpu_fallback:
            raise AnalysisError(f"meta: {meta_error!r}") from None
        try:
            facts = _count(namespace, "cpu")
        except Exception as cpu_error:  # noqa: BLE001
            raise AnalysisError(f"meta: {meta_error!r}; cpu: {cpu_error!r}") from None
    return {"ops": ops, "data_source": data_source_for(ops), "num_ops": len(ops), **facts}


def estimate_gpu_ms(flops: int, bytes_moved: int, kernels: int, dtype: str = "fp32") -> float:
    """Roofline estimate of eager time on the GPU in the task's precision: compute + memory time (bytes as counted,
    in that precision) + per-kernel launch cost."""
    compute = flops / (GPU_TFLOPS[dtype] * 1e12)
    memory = bytes_moved / (GPU_BANDWIDTH_GBS * 1e9)
    return 1e3 * (compute + memory) + kernels * GPU_LAUNCH_US / 1e3


def log_uniform(rng, lo: float, hi: float) -> float:
    return math.exp(rng.uniform(math.log(lo), math.log(hi)))
