"""Filter `unsafe_code`: an AST scan for imports beyond torch/math/transformers, I/O, processes and escapes."""

from __future__ import annotations

import ast

from filters.base import Filter, Verdict
from opgen.taskcode.syntax import dotted_name, parse

ALLOWED_IMPORT_ROOTS = frozenset({"torch", "math", "transformers", "__future__", "typing"})
FORBIDDEN_MODULE_PREFIXES = (
    "torch.hub", "torch.utils.cpp_extension", "torch.multiprocessing", "torch.distributed", "torch.utils.data",
    "torch.package", "torch.onnx", "torch.utils.tensorboard", "torch.utils.benchmark", "torch.backends.cudnn.rnn",
)
FORBIDDEN_BUILTINS = frozenset({
    "open", "exec", "eval", "compile", "__import__", "globals", "locals", "vars", "breakpoint", "input", "exit",
    "quit", "help", "memoryview", "__builtins__", "__loader__", "__spec__",
})
# Attribute names that do I/O, load native code, or reach interpreter internals, whatever they are called on.
FORBIDDEN_ATTRIBUTES = frozenset({
    "load_library", "from_file", "tofile", "save_pretrained", "from_pretrained", "push_to_hub", "system", "popen",
    "spawn", "fork", "read_text", "write_text", "read_bytes", "write_bytes", "unlink", "rmtree",
    "__globals__", "__builtins__", "__subclasses__", "__code__", "__closure__", "__getattribute__", "__reduce__",
    "__reduce_ex__", "__bases__", "__mro__", "__loader__", "__spec__", "__import__", "__dict__", "f_globals",
    "f_locals", "f_back", "gi_frame", "tb_frame", "co_code", "_getframe",
})
FORBIDDEN_CALLS = frozenset({"torch.save", "torch.load", "torch.jit.save", "torch.jit.load", "torch.export.save",
                             "torch.export.load", "torch.from_file", "torch.ops.load_library"})


def _import_problem(node: ast.AST, allowed: frozenset[str]) -> str | None:
    if isinstance(node, ast.Import):
        modules = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            return "relative import"
        base = node.module or ""
        modules = [base] + [f"{base}.{alias.name}" for alias in node.names]
    else:
        return None
    for module in modules:
        if _allowed(module, allowed):
            continue
        if module.split(".")[0] not in ALLOWED_IMPORT_ROOTS:
            return f"import of {module}"
        if module.startswith(FORBIDDEN_MODULE_PREFIXES):
            return f"import of {module}"
    return None


def _allowed(name: str, allowed: frozenset[str]) -> bool:
    return any(name == module or name.startswith(module + ".") for module in allowed)


def unsafe_reason(tree: ast.Module, allowed: frozenset[str] = frozenset()) -> str | None:
    """A description of the first unsafe construct in the module, or None. `allowed` names modules (and their
    submodules) a caller permits beyond the task rules, e.g. a kernel solution's `triton`."""
    for node in ast.walk(tree):
        problem = _import_problem(node, allowed)
        if problem:
            return problem
        if isinstance(node, ast.Name) and node.id in FORBIDDEN_BUILTINS:
            return f"use of {node.id}"
        if isinstance(node, ast.Attribute):
            if node.attr in FORBIDDEN_ATTRIBUTES:
                return f"use of .{node.attr}"
            name = dotted_name(node)
            if name and not _allowed(name, allowed) and (name in FORBIDDEN_CALLS
                                                          or name.startswith(FORBIDDEN_MODULE_PREFIXES)):
                return f"use of {name}"
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in {"getattr", "setattr"}:
            if len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
                attr = node.args[1].value
                if attr in FORBIDDEN_ATTRIBUTES or attr in FORBIDDEN_BUILTINS or attr in {"save", "load"}:
                    return f"getattr of {attr!r}"
            elif len(node.args) >= 2 and not isinstance(node.args[0], ast.Name | ast.Attribute):
                continue
    return None


# The process and its neighbours, reached through a module that imported them (`torch.os.kill(torch.os.getppid(),
# 9)` killed the grader): no task or kernel needs them. The workers' seccomp filter stops the signals whatever the spelling
# (opgen/sandbox/confine.py); this names the attempt before anything runs.
PROCESS_ATTRIBUTES = frozenset({
    "os", "sys", "subprocess", "ctypes", "socket", "shutil", "multiprocessing", "kill", "killpg", "getppid",
    "getpgid", "pidfd_open", "pidfd_send_signal", "pthread_kill", "setsid", "setpgid", "_exit", "execv", "execve",
    "execvp", "execvpe", "execl", "execle", "execlp", "posix_spawn", "posix_spawnp", "ptrace",
})


def process_reason(tree: ast.Module) -> str | None:
    """The first reach for the process or its neighbours through an attribute (`torch.os`, `.kill`), or None."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in PROCESS_ATTRIBUTES:
            return f"use of .{node.attr}"
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in {"getattr", "hasattr"} \
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) \
                and node.args[1].value in PROCESS_ATTRIBUTES:
            return f"getattr of {node.args[1].value!r}"
    return None


class UnsafeCodeFilter(Filter):
    """Rejects tasks that import, read, write, spawn or reach past the torch API, or reach the process through a
    module that imported it (`torch.os`)."""

    name = "unsafe"

    def filter(self, record: dict) -> Verdict:
        tree = parse(record["code"])
        reason = unsafe_reason(tree) or process_reason(tree)
        return Verdict.reject("unsafe_code", reason) if reason else Verdict.ok()
