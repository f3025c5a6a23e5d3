"""Shrinking a task's module-level size constants to CPU size (for tests and benchmarks on real KernelBench code).

Every module-level int constant (or int expression, or tuple of ints) larger than the cap is halved until it
fits: to the largest power of two under the cap that divides it when there is one (so channel counts stay
divisible by group and head counts, which shrink the same way), else by halving. Constants whose names say
they shape a kernel (kernel, stride, padding, dilation, pool, scale) are left alone.
"""

from __future__ import annotations

import ast

KEEP_NAME_PARTS = ("kernel", "stride", "pad", "dilation", "pool", "scale", "factor", "eps", "momentum")
SPATIAL_NAME_PARTS = ("height", "width", "length", "seq", "len")
SPATIAL_NAMES = frozenset({"d", "h", "w", "l"})


def _shrunk(value: int, cap: int, halve_only: bool = False) -> int:
    """The largest power of two <= cap dividing `value` (keeps divisibility by group counts), else halvings."""
    if value <= cap:
        return value
    power = 1 if not halve_only else cap + 1
    while power * 2 <= cap and value % (power * 2) == 0 and not halve_only:
        power *= 2
    if 4 <= power <= cap:
        return power
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


def _cap_for(name: str, cap: int, spatial_cap: int) -> int | None:
    lowered = name.lower()
    if any(part in lowered for part in KEEP_NAME_PARTS):
        return None
    if lowered in SPATIAL_NAMES or any(part in lowered for part in SPATIAL_NAME_PARTS):
        return spatial_cap
    return cap


def _shrink_value(node: ast.AST, limit: int, halve_only: bool) -> ast.AST:
    if isinstance(node, ast.Tuple) and all(_is_arithmetic(e) for e in node.elts):
        values = [_literal_int(e) for e in node.elts]
        if all(v is not None for v in values):
            return ast.Tuple([ast.Constant(_shrunk(v, limit, halve_only)) for v in values], ast.Load())
    elif _is_arithmetic(node):
        value = _literal_int(node)
        if value is not None:
            return ast.Constant(_shrunk(value, limit, halve_only))
    return node


def shrink_sizes(code: str, cap: int = 16, spatial_cap: int = 32) -> str:
    """The task source with its module-level size constants shrunk (formatting and comments are not kept).

    Spatial sizes (height, width, length, sequence) get the larger `spatial_cap` so dilated kernels still fit.
    """
    tree = ast.parse(code)
    for node in tree.body:
        if not isinstance(node, ast.Assign):
            continue
        if all(isinstance(t, ast.Name) for t in node.targets):  # `x = 1`, `height = width = 128`
            limits = [_cap_for(t.id, cap, spatial_cap) for t in node.targets]
            if None not in limits:
                node.value = _shrink_value(node.value, min(limits), min(limits) == spatial_cap)
        elif (len(node.targets) == 1 and isinstance(node.targets[0], ast.Tuple) and isinstance(node.value, ast.Tuple)
              and len(node.targets[0].elts) == len(node.value.elts)
              and all(isinstance(t, ast.Name) for t in node.targets[0].elts)):  # `height, width = 64, 64`
            elements = []
            for target, value in zip(node.targets[0].elts, node.value.elts):
                limit = _cap_for(target.id, cap, spatial_cap)
                elements.append(value if limit is None else _shrink_value(value, limit, limit == spatial_cap))
            node.value = ast.Tuple(elements, ast.Load())
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"
