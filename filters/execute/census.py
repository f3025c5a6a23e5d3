"""A dispatch mode that counts the aten ops a forward call runs that do work, and names those that may draw
random numbers."""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# Aten ops that move, copy, describe or create data without computing anything from the inputs.
NON_WORK_OPS = frozenset({
    "clone", "copy_", "_to_copy", "detach", "alias", "lift_fresh", "lift_fresh_copy", "empty", "empty_like",
    "empty_strided", "zeros", "ones", "zeros_like", "ones_like", "full", "full_like", "new_empty", "new_zeros",
    "new_ones", "new_full", "fill_", "zero_", "_unsafe_view", "contiguous", "to", "_local_scalar_dense",
    "scalar_tensor", "resize_", "set_", "_reshape_alias", "sym_size", "sym_stride", "sym_numel", "is_same_size",
})


class OpCensus(TorchDispatchMode):
    """Counts the aten ops that do work, and lists the ops tagged as drawing random numbers."""

    def __init__(self) -> None:
        super().__init__()
        self.work_ops = 0
        self.random_ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if torch.Tag.nondeterministic_seeded in func.tags and name not in NON_WORK_OPS:
            self.random_ops.append(name)  # may draw (the eager check compares generator states to be sure)
        if not func.is_view and name not in NON_WORK_OPS:
            self.work_ops += 1
        return func(*args, **(kwargs or {}))
