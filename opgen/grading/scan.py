"""Static checks of a solution's source, run before any of it executes: it parses, passes the unsafe-code scan
(with the imports kernel code needs), defines ModelNew, and does not patch the modules it imports."""

from __future__ import annotations

import ast

from filters.static.unsafe import process_reason, unsafe_reason
from opgen.taskcode.syntax import dotted_name

# What kernel solutions import beyond the task rules: Triton, and torch's C++/CUDA extension builder.
SOLUTION_MODULES = frozenset({"triton", "torch.utils.cpp_extension"})
# Process-wide settings a solution may change for its own kernels: the grader restores them before every reference
# call and every reference timing, so they never reach the reference.
SETTINGS_PREFIXES = ("torch.backends.",)
# Calls that hook every module or operator of the process, the reference's included.
GLOBAL_HOOK_NAMES = frozenset({
    "register_module_forward_hook", "register_module_forward_pre_hook", "register_module_full_backward_hook",
    "register_module_full_backward_pre_hook", "register_module_backward_hook", "register_module_buffer_registration_hook",
    "register_module_module_registration_hook", "register_module_parameter_registration_hook",
    "_push_mode", "_set_torch_function_mode", "_set_torch_dispatch_mode",
})
PATCHING_ATTRIBUTES = frozenset({"__setattr__", "__delattr__"})
# Under the kernels-only rule, what the run-time watch cannot see: kernels PyTorch generates or replays for the
# solution (torch.compile built before the watched call, TorchScript, ahead-of-time compiled models, CUDA graphs
# captured at construction, Triton's bundled library kernels), and probes for the watch itself.
KERNELS_ONLY_FORBIDDEN = ("torch.compile", "torch.jit", "torch._dynamo", "torch._inductor", "torch.export",
                          "torch._export", "torch.cuda.graph", "torch.cuda.CUDAGraph", "torch.cuda.graphs",
                          "torch.cuda.make_graphed_callables", "torch.profiler", "torch.autograd.profiler",
                          "torch.overrides", "torch.utils._python_dispatch", "triton.ops")
WATCH_PROBES = frozenset({
    "CUDAGraph", "make_graphed_callables", "_profiler_enabled", "_disable_profiler", "_len_torch_function_stack",
    "_len_torch_dispatch_stack", "_get_current_dispatch_mode", "_get_current_dispatch_mode_stack",
    "_is_torch_function_mode_enabled", "is_torch_function_mode_enabled", "_get_current_function_mode",
    "_get_current_function_mode_stack", "_pop_mode", "_pop_torch_function_stack", "_pop_torch_dispatch_stack",
    "DisableTorchFunction", "DisableTorchFunctionSubclass", "_DisableTorchDispatch", "_disable_current_modes",
})


def static_verdict(code: str, kernels_only: bool = False) -> tuple[str, str] | None:
    """(reason, detail) of the first static problem of a solution's source, or None when it may run; with
    `kernels_only`, also what the kernels-only rule's run-time watch cannot see (`torch_operator`)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError) as error:
        return "parse_error", f"{type(error).__name__}: {error}"
    unsafe = unsafe_reason(tree, SOLUTION_MODULES) or process_reason(tree)
    if unsafe:
        return "unsafe_code", unsafe
    if not _defines(tree, "ModelNew"):
        return "invalid_solution", "the solution defines no ModelNew"
    patched = tamper_reason(tree)
    if patched:
        return "tampering", patched
    if kernels_only:
        unseen = kernels_only_reason(tree)
        if unseen:
            return "torch_operator", f"{unseen} (the kernels-only rule: only the solution's own kernels may run)"
    return None


def kernels_only_reason(tree: ast.Module) -> str | None:
    """The first use of PyTorch's kernel generators or graph replay, or of a probe for the run-time watch."""
    imported = _module_names(tree)
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Attribute | ast.Name):
            name = dotted_name(node)
            if name and name.split(".")[0] in imported:
                names = [_expand(name, imported)]
            if (node.attr if isinstance(node, ast.Attribute) else node.id) in WATCH_PROBES:
                return f"use of {name or getattr(node, 'attr', '')}"
        for name in names:
            if any(name == banned or name.startswith(banned + ".") for banned in KERNELS_ONLY_FORBIDDEN):
                return f"use of {name}"
    return None


def _defines(tree: ast.Module, name: str) -> bool:
    for node in tree.body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef) and node.name == name:
            return True
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return True
        if isinstance(node, ast.ImportFrom) and any((a.asname or a.name) == name for a in node.names):
            return True
    return False


def tamper_reason(tree: ast.Module) -> str | None:
    """A description of the first construct that would change objects beyond the solution's own: an assignment to
    (or deletion of) an attribute of an imported module or of what it holds (`torch.cuda.Event.elapsed_time = ...`,
    also through an alias `ev = torch.cuda.Event`), setattr/delattr on anything but `self`, global module hooks and
    torch function modes, and torch.library registrations for aten operators (which would change the reference)."""
    imported = _module_names(tree)
    for node in ast.walk(tree):
        for target in _assigned(node):
            name = dotted_name(target)
            if name and name.split(".")[0] in imported and not _is_setting(name, imported):
                return f"assignment to {name}"
        if isinstance(node, ast.Call):
            problem = _call_problem(node, imported)
            if problem:
                return problem
        if isinstance(node, ast.Attribute) and node.attr in GLOBAL_HOOK_NAMES:
            return f"use of .{node.attr}"
        if isinstance(node, ast.Name) and node.id in GLOBAL_HOOK_NAMES:
            return f"use of {node.id}"
    return None


def _module_names(tree: ast.Module) -> dict[str, str]:
    """Names bound to imported modules or their members, and names assigned from them without a call
    (`ev = torch.cuda.Event`), each with the dotted path it stands for."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                names[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    for _ in range(3):   # aliases of aliases
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                value = dotted_name(node.value)
                if value and value.split(".")[0] in names:
                    for target in node.targets:
                        if isinstance(target, ast.Name):
                            names[target.id] = _expand(value, names)
    return names


def _expand(name: str, imported: dict[str, str]) -> str:
    root, _, rest = name.partition(".")
    return imported[root] + (f".{rest}" if rest else "")


def _is_setting(name: str, imported: dict[str, str]) -> bool:
    return _expand(name, imported).startswith(SETTINGS_PREFIXES)


def _assigned(node: ast.AST) -> list[ast.AST]:
    """The attribute targets an assignment, augmented assignment or deletion writes (subscripts of them too)."""
    if isinstance(node, ast.Assign):
        targets = list(node.targets)
    elif isinstance(node, ast.AugAssign | ast.AnnAssign):
        targets = [node.target]
    elif isinstance(node, ast.Delete):
        targets = list(node.targets)
    else:
        return []
    found = []
    while targets:
        target = targets.pop()
        if isinstance(target, ast.Tuple | ast.List):
            targets.extend(target.elts)
        elif isinstance(target, ast.Starred):
            targets.append(target.value)
        elif isinstance(target, ast.Subscript):
            targets.append(target.value)
        elif isinstance(target, ast.Attribute):
            found.append(target)
    return found


def _call_problem(call: ast.Call, imported: dict[str, str]) -> str | None:
    func = call.func
    if isinstance(func, ast.Name) and func.id in ("setattr", "delattr"):
        if not (call.args and _is_self(call.args[0])):
            return f"{func.id} on an object other than self"
    if isinstance(func, ast.Attribute) and func.attr in PATCHING_ATTRIBUTES and not _is_self(func.value):
        if not (call.args and _is_self(call.args[0])):
            return f"use of .{func.attr}"
    name = dotted_name(func) or ""
    if name.split(".")[0] in imported:
        name = _expand(name, imported)
    if name.startswith("torch.library."):
        texts = [a.value for a in (*call.args, *(k.value for k in call.keywords))
                 if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        if any(text.strip().startswith("aten") for text in texts):
            return f"{name} on an aten operator"
    return None


def _is_self(node: ast.AST) -> bool:
    if isinstance(node, ast.Name):
        return node.id == "self"
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"
