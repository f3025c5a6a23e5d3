"""Shrinking a task's module-level size constants to CPU size (for tests and benchmarks on real KernelBench code).

Every module-level int constant (or int expression, or tuple of ints) larger than the cap is halved until it
fits, which keeps powers of two dividing it (channel counts stay divisible by group counts). Constants whose
names say they shape a kernel (kernel, stride, padding, dilation, groups, pool, heads) are left alone so
convolutions and pools still fit their inputs.
"""

from __future__ import annotations

import ast

KEEP_NAME_PARTS = ("kernel", "stride", "pad", "dilation", "group", "pool", "head", "scale", "factor", "eps",
                   "momentum", "dim_")
BATCH_NAME_PARTS = ("batch",)


def _shrunk(value: int, cap: int) -> int:
    while value > cap:
        value //= 2
    return value


def _literal_int(node: ast.AST) -> int | None:
    try:
        value = eval(compile(ast.Expression(node), "<constant>", "eval"), {"__builtins__": {}})  # noqa: S307
    except Exception:  # noqa: BLE001 - anything but plain arithmetic is left alone
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _is_arithmetic(node: ast.AST) -> bool:
    return all(isinstance(n, (ast.Constant, ast.BinOp, ast.UnaryOp, ast.operator, ast.unaryop)) for n in ast.walk(node))


def _cap_for(name: str, cap: int, batch_cap: int) -> int | None:
    lowered = name.lower()
    if any(part in lowered for part in KEEP_NAME_PARTS):
        return None
    if any(part in lowered for part in BATCH_NAME_PARTS):
        return batch_cap
    return cap


def shrink_sizes(code: str, cap: int = 16, batch_cap: int = 4) -> str:
    """The task source with its module-level size constants shrunk (formatting and comments are not kept)."""
    tree = ast.parse(code)
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets)):
            continue
        limits = [_cap_for(t.id, cap, batch_cap) for t in node.targets]  # `height = width = 128` too
        if None in limits:
            continue
        limit = min(limits)
        if isinstance(node.value, ast.Tuple) and all(_is_arithmetic(e) for e in node.value.elts):
            values = [_literal_int(e) for e in node.value.elts]
            if all(v is not None for v in values):
                node.value = ast.Tuple([ast.Constant(_shrunk(v, limit)) for v in values], ast.Load())
        elif _is_arithmetic(node.value):
            value = _literal_int(node.value)
            if value is not None:
                node.value = ast.Constant(_shrunk(value, limit))
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"
