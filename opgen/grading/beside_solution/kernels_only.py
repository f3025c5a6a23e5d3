"""The kernels-only rule, enforced at run time: while the solution runs, every PyTorch operator it dispatches (from
Python, from a C++ extension, from inside a custom op or autograd function) is recorded by the profiler, and any that
is not glue (allocation, views, shape queries, copies) breaks the rule, as do torch.compile regions and numpy.

A solution's own kernels pass unseen: a C++/CUDA extension's function is no PyTorch operator, nor is a Triton launch,
nor an operator the solution registers under a namespace of its own (what such an op dispatches is still recorded)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import torch
from torch.overrides import TorchFunctionMode
from torch.profiler import ProfilerActivity, profile

# PyTorch's own operator namespaces: those registered before any solution loaded, and these (registered lazily).
TORCH_NAMESPACES = frozenset({
    "aten", "prims", "quantized", "_quantized", "mkldnn", "mkl", "onednn", "inductor", "c10d", "_c10d_functional",
    "_c10d_functional_autograd", "_dtensor", "higher_order", "torchvision", "xformers", "fbgemm", "cudnn", "cublas",
})
# Record-function scopes that are PyTorch's own bookkeeping, not operators (`profiler::` records user scopes).
IGNORED_NAMESPACES = frozenset({"profiler"})
# Glue: allocation and filling, views and reshapes, copies and conversions, shape and value queries.
GLUE_OPS = frozenset({
    # allocation
    "empty", "empty_like", "empty_strided", "empty_permuted", "new_empty", "new_empty_strided", "zeros", "zeros_like",
    "new_zeros", "ones", "ones_like", "new_ones", "full", "full_like", "new_full", "scalar_tensor", "zero_", "fill_",
    "lift", "lift_fresh", "lift_fresh_copy", "resize_", "set_", "record_stream",
    # views
    "view", "_unsafe_view", "view_as", "reshape", "_reshape_alias", "reshape_as", "as_strided", "as_strided_",
    "expand", "expand_as", "permute", "transpose", "transpose_", "t", "t_", "numpy_T", "mT", "squeeze", "squeeze_",
    "unsqueeze", "unsqueeze_", "flatten", "unflatten", "slice", "select", "narrow", "split", "split_with_sizes",
    "chunk", "unbind", "alias", "detach", "detach_", "movedim", "moveaxis", "swapaxes", "swapdims", "diagonal",
    "view_as_real", "view_as_complex", "_conj", "conj", "resolve_conj", "resolve_neg", "unfold", "real", "imag",
    # copies and conversions
    "contiguous", "clone", "copy_", "_to_copy", "to", "type_as", "_copy_from", "_copy_from_and_resize", "cpu",
    "cuda", "pin_memory", "_pin_memory", "is_pinned",
    # queries
    "size", "sym_size", "stride", "sym_stride", "numel", "sym_numel", "dim", "storage_offset", "sym_storage_offset",
    "is_contiguous", "is_same_size", "_has_compatible_shallow_copy_type", "item", "_local_scalar_dense",
    "result_type", "is_floating_point", "is_complex", "is_signed",
})
# Scopes torch.compile's generated code runs in: its kernels are PyTorch's, not the solution's.
COMPILED_SCOPES = ("Torch-Compiled Region", "## Call CompiledFxGraph", "CompiledFunction", "TorchDynamo")
# Tensor methods that hand the data to another library's kernels (or to Python's, as lists).
FOREIGN_METHODS = frozenset({"numpy", "__array__", "__dlpack__", "tolist"})
GLUE_TEXT = "allocation, views and reshapes, copies and dtype or device conversions, shape and value queries"


def torch_namespaces() -> frozenset[str]:
    """The operator namespaces PyTorch holds now (call before any solution loads): operators registered later
    under a new namespace are the solution's own."""
    names = {name.split("::", 1)[0] for name in torch._C._dispatch_get_all_op_names()}
    return frozenset(names | TORCH_NAMESPACES)


_TORCH_NAMESPACES = torch_namespaces()   # this module is imported by the worker before any solution


def _all_threads() -> dict:
    """The profiler's option to record the operators of every thread, not only the caller's: a thread the forward
    starts and joins runs operators too. Empty where this torch lacks it."""
    try:
        from torch._C._profiler import _ExperimentalConfig

        return {"experimental_config": _ExperimentalConfig(profile_all_threads=True)}
    except (ImportError, TypeError):
        return {}


def _refuse_record_function_off() -> None:
    """RecordFunction, through which the profiler sees every operator, switched off inside the forward would hide
    them all: the switch (torch.autograd's and torch._C._autograd's names for it) is replaced by one that refuses to
    turn it off. Nothing in a grade turns it off; the guard records the replacement as it records torch's names."""
    original = getattr(torch._C._autograd, "_enable_record_function", None)
    if original is None:
        return

    def switch(enabled: bool) -> None:
        if not enabled:
            raise PermissionError("opgen's grader refuses to switch off RecordFunction (the kernels-only rule)")
        original(enabled)

    for module in (torch._C._autograd, torch.autograd):
        if getattr(module, "_enable_record_function", None) is original:
            module._enable_record_function = switch


_refuse_record_function_off()


class _ForeignCalls(TorchFunctionMode):
    """Notes tensor methods that hand the data to another library (numpy) while the solution runs."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: Counter[str] = Counter()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in FOREIGN_METHODS:
            self.seen[f"Tensor.{name}"] += 1
        return func(*args, **(kwargs or {}))


@dataclass
class Watch:
    """What the solution ran while watched: PyTorch compute operators, compiled regions, foreign libraries."""

    operators: Counter = field(default_factory=Counter)
    problem: str | None = None

    def describe(self) -> str | None:
        """One line naming what broke the rule, or None when nothing did."""
        if self.problem:
            return self.problem
        if not self.operators:
            return None
        listed = ", ".join(f"{name} x{count}" for name, count in sorted(self.operators.items()))
        return (f"the forward ran PyTorch compute operators: {listed}. The kernels-only rule allows only the "
                f"solution's own kernels (a C++/CUDA extension's functions, Triton kernels) and glue ({GLUE_TEXT})")


def classify(names: list[str]) -> Watch:
    """The verdict on the profiler's event names of one watched call."""
    watch = Watch()
    for name in names:
        if name.startswith(COMPILED_SCOPES):
            watch.problem = ("the forward ran torch.compile's generated code: its kernels are PyTorch's, not the "
                             "solution's (the kernels-only rule)")
            continue
        namespace, sep, op = name.partition("::")
        if not sep or namespace in IGNORED_NAMESPACES or namespace not in _TORCH_NAMESPACES:
            continue   # a scope (autograd function, user annotation), or an operator of the solution's own
        if op.split(".", 1)[0] not in GLUE_OPS:
            watch.operators[name] += 1
    return watch


class KernelsOnly:
    """Context manager around one call of the solution: `watch` holds what broke the rule once it exits."""

    def __init__(self) -> None:
        self.watch = Watch()

    def __enter__(self) -> KernelsOnly:
        self.profiler = profile(activities=[ProfilerActivity.CPU], **_all_threads())
        self.foreign = _ForeignCalls()
        self.profiler.__enter__()
        self.foreign.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.foreign.__exit__(*exc)
        finally:
            self.profiler.__exit__(*exc)
        if exc[0] is not None:
            return
        self.watch = classify([event.name for event in self.profiler.events()])
        if self.foreign.seen and not self.watch.problem:
            names = ", ".join(sorted(self.foreign.seen))
            self.watch.problem = (f"the forward handed tensors to another library ({names}): its kernels are not the "
                                  "solution's own (the kernels-only rule)")
