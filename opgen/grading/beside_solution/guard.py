"""Run-time tamper detection in the grading worker: what the grader relies on (torch's and time's functions and
classes, the grader's own modules, global module hooks, torch function modes) recorded before the solution loads and
verified after each of its calls; and the process-wide settings the reference always runs under."""

from __future__ import annotations

import importlib
import sys
import types

import torch

from opgen.timing.precision import apply_precision

GUARDED_MODULES = (
    "builtins", "time", "math", "statistics", "gc", "torch", "torch.cuda", "torch._C", "torch._C._nn", "torch.nn",
    "torch.nn.functional", "torch.nn.modules.module", "torch.nn.init", "torch.overrides", "torch.library",
    "torch.autograd", "torch.autograd.grad_mode", "torch._C._autograd", "torch.random", "filters.execute.tensors",
    "opgen.sandbox.task", "opgen.timing.trials", "opgen.grading.beside_solution.compare",
    "opgen.grading.beside_solution.configs", "opgen.grading.beside_solution.guard",
    "opgen.grading.beside_solution.timing", "opgen.grading.beside_solution.worker",
    "opgen.grading.beside_solution.solution", "opgen.grading.beside_solution.figures",
    "opgen.grading.beside_solution.integrity", "opgen.grading.beside_solution.introspection",
    "opgen.grading.beside_solution.leftovers",
)
GUARDED_CLASSES = ("torch.Tensor", "torch.nn.Parameter", "torch.cuda.Event", "torch._C._CudaEventBase",
                   "torch.cuda.Stream", "torch._C._CudaStreamBase", "torch.no_grad", "torch.device")
# ... and where the grader's newest defences hold (`hardened`): the worker loop's names and the json modules it
# answers with, whole (plain values too: `json._default_encoder`, which `json.dumps` calls; nothing in them changes
# in an honest run), and the dispatcher handle's class (opgen/grading/beside_solution/dispatcher.py)
HARDENED_MODULES = ("opgen.sandbox.worker", "__main__", "json", "json.encoder", "json.decoder", "secrets")
HARDENED_CLASSES = ("json.encoder.JSONEncoder", "json.decoder.JSONDecoder", "torch._C._DispatchModule")
WHOLE_MODULES = ("json", "json.encoder", "json.decoder")
# The newest defences (the outputs' structure read with the built-in containers' methods, a random timed trial
# checked, the json and dispatcher records, threads `threading` does not list, the backends' switches, the task run
# twice) hold on the CPU; on CUDA once `pytest -m gpu tests/test_grade_gpu.py` has passed with this set to True.
HARDENED_ON_CUDA = False


def hardened(device: str) -> bool:
    """Whether the grader's newest defences hold on `device` (see HARDENED_ON_CUDA)."""
    return device != "cuda" or HARDENED_ON_CUDA


def prepare_torch() -> None:
    """Let torch make its own once-per-process patches (dynamo wraps `torch.manual_seed` when imported, and
    `nn.Module.__init__` on its first compile) before the record is taken, so only a solution's count."""
    from torch._dynamo import mutation_guard

    if hasattr(mutation_guard, "install_generation_tagging_init"):
        mutation_guard.install_generation_tagging_init()


def _guarded_namespaces(strict: bool) -> dict[str, dict]:
    spaces: dict[str, dict] = {}
    for name in GUARDED_MODULES + (HARDENED_MODULES if strict else ()):
        module = sys.modules.get(name)
        if module is None and name.startswith(("opgen.", "filters.")):
            module = importlib.import_module(name)
        if module is not None:
            spaces[name] = vars(module)
            if name.startswith(("opgen.", "filters.")):   # the grader's classes: their methods are its code too
                spaces.update({f"{name}.{key}": value.__dict__ for key, value in vars(module).items()
                               if isinstance(value, type) and value.__module__ == name})
    for dotted in GUARDED_CLASSES + (HARDENED_CLASSES if strict else ()):
        owner, _, attribute = dotted.rpartition(".")
        cls = getattr(sys.modules.get(owner) or importlib.import_module(owner), attribute, None)
        if isinstance(cls, type):
            spaces[dotted] = cls.__dict__
    for name, cls in vars(torch.nn).items():   # the layers a reference is built from, and their methods
        if isinstance(cls, type) and issubclass(cls, torch.nn.Module):
            spaces[f"torch.nn.{name}"] = cls.__dict__
    return spaces


def _global_hooks() -> dict[str, int]:
    module = sys.modules["torch.nn.modules.module"]
    return {name: len(value) for name, value in vars(module).items()
            if name.startswith("_global_") and isinstance(value, dict)}


class Guard:
    """The record taken before the solution loads; `problem()` names the first thing changed since."""

    def __init__(self, strict: bool = True) -> None:
        prepare_torch()
        self.spaces = _guarded_namespaces(strict)
        # functions, classes and modules: what a solution would swap; plain values (flags torch sets lazily, such as
        # torch.cuda._initialized) change in honest runs, and the settings among them are put back anyway
        self.record = {name: {key: value for key, value in space.items()
                              if _swappable(value) or name in WHOLE_MODULES}
                       for name, space in self.spaces.items()}
        self.names = {name: set(space) for name, space in self.spaces.items()}
        self.hooks = _global_hooks()
        self.tracers = _tracers()
        self.kernels = _registered_kernels()

    def problem(self) -> str | None:
        for name, saved in self.record.items():
            now = self.spaces[name]
            for key, value in saved.items():
                if now.get(key, _MISSING) is not value:
                    return f"{name}.{key} was replaced or deleted"
            # a new name shadows a builtin in a module (`int` in the comparison's) or an inherited method in a class
            # (`Linear.__call__`), and a plain value made a function or property (a dataclass field's default)
            # changes what reading it does; a submodule imported later is the one such name an honest run adds
            added = [key for key in list(now) if key not in saved and _swappable(now[key])
                     and not isinstance(now[key], types.ModuleType)]
            if added:
                return f"{name}.{added[0]} was " + ("added" if added[0] not in self.names[name] else "replaced")
        if torch.random.default_generator is not torch._C.default_generator:
            return "torch's default random generator was replaced"
        if _tracers() != self.tracers:
            return "a trace or profile function was set (it would run inside the grader's own code)"
        kernels = _registered_kernels() - self.kernels
        if kernels:
            return f"a kernel was registered for torch's operator {sorted(kernels)[0]} (it would run for the reference)"
        if _global_hooks() != self.hooks:
            return "a global module hook was registered (it would run on the reference too)"
        if torch._C._len_torch_function_stack() or torch._C._len_torch_dispatch_stack():
            return "a torch function or dispatch mode was left active (it would run on the reference too)"
        if _eval_frame_callback() is not None:
            return "a frame-evaluation callback was left set (it would run on the grader's own frames)"
        return None


_MISSING = object()


def _tracers() -> tuple:
    """The trace and profile functions, of this thread and of threads started later."""
    import threading

    return (sys.gettrace(), sys.getprofile(), getattr(threading, "_trace_hook", None),
            getattr(threading, "_profile_hook", None))


def _registered_kernels() -> set[str]:
    """Python kernels registered for aten's operators (torch.library), but Meta ones (torch registers those
    lazily, for its compiler): a solution's would run for the reference's calls too."""
    import torch.library

    return {key for key in getattr(torch.library, "_impls", ())
            if key.startswith("aten/") and not key.endswith("/Meta")}


def _eval_frame_callback() -> object:
    """The callback dynamo's frame evaluation hook runs on every Python frame: None outside a compiled call."""
    frame_hook = getattr(getattr(torch._C, "_dynamo", None), "eval_frame", None)
    getter = getattr(frame_hook, "get_eval_frame_callback", None)
    return getter() if getter is not None else None


def _swappable(value: object) -> bool:
    return callable(value) or isinstance(value, types.ModuleType | staticmethod | classmethod | property)


class Settings:
    """The process-wide settings the reference runs under: PyTorch's default precisions and flags, put back before
    every reference call (a solution may change them for its own kernels)."""

    def __init__(self, strict: bool = True) -> None:
        apply_precision(torch, "default")
        self.matmul_precision = torch.get_float32_matmul_precision()
        cudnn = torch.backends.cudnn
        self.cudnn = (cudnn.enabled, cudnn.benchmark, cudnn.deterministic)
        self.default_dtype = torch.get_default_dtype()
        self.deterministic = torch.are_deterministic_algorithms_enabled()
        self.grad = torch.is_grad_enabled()
        self.threads = torch.get_num_threads()
        self.flags = {name: flag.get() for name, flag in _backend_flags().items()} if strict else {}

    def restore(self) -> None:
        torch.set_float32_matmul_precision(self.matmul_precision)
        apply_precision(torch, "default")
        cudnn = torch.backends.cudnn
        cudnn.enabled, cudnn.benchmark, cudnn.deterministic = self.cudnn
        torch.set_default_dtype(self.default_dtype)
        torch.use_deterministic_algorithms(self.deterministic)
        torch.set_grad_enabled(self.grad)
        torch.set_num_threads(self.threads)
        flags = _backend_flags() if self.flags else {}
        for name, value in self.flags.items():
            flags[name].set(value)


class _Flag:
    """One of the backends' on/off settings: a value read and written through functions or an attribute."""

    def __init__(self, get, put) -> None:
        self.get, self.set = get, put


def _attribute(owner: object, name: str) -> _Flag:
    return _Flag(lambda: getattr(owner, name), lambda value: setattr(owner, name, value))


def _backend_flags() -> dict[str, _Flag]:
    """The backends' switches a solution could turn to slow the reference (oneDNN off, flash attention off) or to
    change its numbers (reduced-precision reductions), where this torch has them."""
    backends = torch.backends
    flags = {"mkldnn": _attribute(backends.mkldnn, "enabled"), "opt_einsum": _attribute(backends.opt_einsum, "enabled")}
    matmul = backends.cuda.matmul
    for name in ("allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction"):
        if hasattr(matmul, name):
            flags[name] = _attribute(matmul, name)
    for kind in ("flash", "mem_efficient", "math", "cudnn"):
        enabled, enable = (getattr(backends.cuda, f"{kind}_sdp_enabled", None),
                           getattr(backends.cuda, f"enable_{kind}_sdp", None))
        if enabled is not None and enable is not None:
            flags[f"{kind}_sdp"] = _Flag(enabled, enable)
    return flags
