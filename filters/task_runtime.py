"""Worker-side helpers: load a task's source, build its model, draw inputs, run forward, compare outputs.

Runs only inside a sandbox worker. The model is built as the consuming environment does,
`Model(*get_init_inputs()).eval()` then moved to the device, seeded before the build and before each draw.
"""

from __future__ import annotations

import builtins
import linecache
from collections.abc import Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode


class TaskProblem(Exception):
    """The task broke a rule at run time; carries the reason code."""

    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason = reason


def load_namespace(code: str, name: str) -> dict:
    """Execute the task source in a fresh namespace (its own linecache entry, so tracebacks show lines)."""
    filename = f"<task {name}>"
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    namespace = {"__name__": "opgen_task", "__builtins__": builtins}
    exec(compile(code, filename, "exec"), namespace)  # noqa: S102 - we are the sandbox
    for required in ("Model", "get_inputs", "get_init_inputs"):
        if not callable(namespace.get(required)):
            raise TaskProblem("invalid_task", f"{required} is not defined or not callable")
    return namespace


def build_model(namespace: dict, device: str, seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    init_inputs = namespace["get_init_inputs"]()
    if not isinstance(init_inputs, (list, tuple)):
        raise TaskProblem("invalid_task", f"get_init_inputs returned {type(init_inputs).__name__}, not a list")
    model = namespace["Model"](*init_inputs)
    if not isinstance(model, torch.nn.Module):
        raise TaskProblem("invalid_task", f"Model(...) is a {type(model).__name__}, not an nn.Module")
    return model.eval().to(device)


def draw_inputs(namespace: dict, device: str, seed: int) -> list:
    """Seeded `get_inputs()` on the device: on CUDA the factories run there (GPU-sized inputs drawn on the
    CPU cost seconds a draw and host memory; the checks need several draws, not the CPU's exact values)."""
    torch.manual_seed(seed)
    with torch.device(device):
        inputs = namespace["get_inputs"]()
    if not isinstance(inputs, (list, tuple)):
        raise TaskProblem("invalid_task", f"get_inputs returned {type(inputs).__name__}, not a list")
    return [x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs]


def fresh(inputs: list) -> list:
    """Clones of the tensor inputs, so a forward that writes into its inputs cannot affect the next call."""
    return [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]


def run_forward(model: Callable, inputs: list) -> list[torch.Tensor]:
    with torch.no_grad():
        output = model(*fresh(inputs))
    return flatten_output(output)


def flatten_output(output: object) -> list[torch.Tensor]:
    """The output's tensors, in order (a tensor, or nested tuples/lists/dicts of them; numbers become tensors)."""
    tensors: list[torch.Tensor] = []

    def visit(value: object) -> None:
        if isinstance(value, torch.Tensor):
            tensors.append(value.detach())
        elif isinstance(value, (list, tuple)):
            for item in value:
                visit(item)
        elif isinstance(value, dict):
            for item in value.values():
                visit(item)
        elif isinstance(value, (bool, int, float)):
            tensors.append(torch.tensor(value))
        elif hasattr(value, "to_tuple"):  # transformers ModelOutput
            visit(value.to_tuple())

    visit(output)
    if not tensors:
        raise TaskProblem("invalid_task", f"forward returned no tensor ({type(output).__name__})")
    return tensors


def as_float64(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    out = []
    for t in tensors:  # kept on their device: copying GPU-sized outputs to the host is the slow part
        t = t.detach()
        out.append(torch.view_as_real(t).double() if t.is_complex() else t.double())
    return out


def shapes(tensors: list[torch.Tensor]) -> list[list[int]]:
    return [list(t.shape) for t in tensors]


def bit_equal(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return len(a) == len(b) and all(x.shape == y.shape and x.device == y.device and torch.equal(x, y) for x, y in zip(a, b))


def all_close(a: list[torch.Tensor], b: list[torch.Tensor], atol: float, rtol: float) -> bool:
    if len(a) != len(b) or shapes(a) != shapes(b):
        return False
    return all(torch.allclose(x, y, atol=atol, rtol=rtol, equal_nan=True) for x, y in zip(as_float64(a), as_float64(b)))


def max_abs_diff(a: list[torch.Tensor], b: list[torch.Tensor]) -> float | None:
    if len(a) != len(b) or shapes(a) != shapes(b):
        return None
    diffs = [(x - y).abs().nan_to_num(nan=float("inf")).max().item() if x.numel() else 0.0
             for x, y in zip(as_float64(a), as_float64(b))]
    return max(diffs, default=0.0)


# Aten ops that move, copy, describe or create data without computing anything from the inputs.
NON_WORK_OPS = frozenset({
    "clone", "copy_", "_to_copy", "detach", "alias", "lift_fresh", "lift_fresh_copy", "empty", "empty_like",
    "empty_strided", "zeros", "ones", "zeros_like", "ones_like", "full", "full_like", "new_empty", "new_zeros",
    "new_ones", "new_full", "fill_", "zero_", "_unsafe_view", "contiguous", "to", "_local_scalar_dense",
    "scalar_tensor", "resize_", "set_", "_reshape_alias", "sym_size", "sym_stride", "sym_numel", "is_same_size",
})


class OpCensus(TorchDispatchMode):
    """Counts the aten ops a forward call runs that do work, and names the ops that may draw random numbers."""

    def __init__(self) -> None:
        super().__init__()
        self.work_ops = 0
        self.random_ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if torch.Tag.nondeterministic_seeded in func.tags and name not in NON_WORK_OPS:
            self.random_ops.append(name)  # may draw (eager_check compares generator states to be sure)
        if not func.is_view and name not in NON_WORK_OPS:
            self.work_ops += 1
        return func(*args, **(kwargs or {}))
