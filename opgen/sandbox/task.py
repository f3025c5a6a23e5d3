"""The one task loader: execute a task's source, build its model, draw its inputs, run forward.

Used by the execute checks and by timing, inside sandbox workers only. The model is built as the consuming
environment does, `Model(*get_init_inputs()).eval()` then moved to the device, seeded before the build;
input draw k is seeded with `input_seed(seed, k)`.
"""

from __future__ import annotations

import builtins
import linecache
import traceback
from collections.abc import Callable

import torch

from opgen.errors import TaskProblem

TASK_FILENAME_PREFIX = "<task "


def input_seed(seed: int, draw: int) -> int:
    """The torch seed of input draw `draw` of a task built with `seed`."""
    return seed + 1 + draw


def load_namespace(code: str, name: str) -> dict:
    """Execute the task source in a fresh namespace (its own linecache entry, so tracebacks, inspect and
    dynamo can read its lines)."""
    filename = f"{TASK_FILENAME_PREFIX}{name}>"
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    namespace = {"__name__": "opgen_task", "__file__": filename, "__builtins__": builtins}
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


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()



def describe(error: BaseException) -> str:
    """`Type: message [<task name>:line]`, naming the task's own line where the error passed through it."""
    frames = traceback.extract_tb(error.__traceback__)
    where = next((f"{f.filename}:{f.lineno}" for f in reversed(frames)
                  if f.filename.startswith(TASK_FILENAME_PREFIX)), "")
    message = f"{type(error).__name__}: {error}".strip()
    return (f"{message} [{where}]" if where else message)[:1000]
