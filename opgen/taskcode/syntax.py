"""Parsing a task's source once (cached) and the AST helpers the static filters share."""

from __future__ import annotations

import ast
import functools


@functools.lru_cache(maxsize=512)
def parse(code: str) -> ast.Module:
    """The module AST; raises SyntaxError (or ValueError / RecursionError) for source that does not parse."""
    return ast.parse(code)


def dotted_name(node: ast.AST) -> str | None:
    """`torch.nn.functional.relu` for an Attribute/Name chain, None for anything else (calls, subscripts)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def call_name(call: ast.Call) -> str:
    """The called name's last component (`relu` of `F.relu(x)`, `uniform_` of `x.uniform_()`)."""
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return ""


def model_class(tree: ast.Module) -> ast.ClassDef | None:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            return node
    return None


def module_constants(tree: ast.Module) -> dict[str, object]:
    """Module-level `NAME = <literal>` assignments (the task's size constants)."""
    constants: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                constants[node.targets[0].id] = ast.literal_eval(node.value)
            except (ValueError, TypeError, SyntaxError, RecursionError):
                pass
    return constants
