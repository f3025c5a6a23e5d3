"""Variants of a task's source with one statement of `forward` replaced by the identity on its input."""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass

from opgen.taskcode.syntax import model_class, parse

# The function each variant calls in place of the statement: `SKIP(input, expr)` evaluates to `input` when the
# statement's value has the input's shape and dtype, and raises otherwise (the statement is not an identity's
# place). The caller defines it in the variant's namespace.
SKIP = "_opgen_skip"


@dataclass(frozen=True)
class Ablation:
    """One statement of `forward` made the identity: where it is, what it computes, and the variant's source."""

    line: int
    source: str   # the statement's value as written (`F.relu(x)`)
    code: str


def _forward(tree: ast.Module) -> ast.FunctionDef | None:
    cls = model_class(tree)
    if cls is None:
        return None
    return next((node for node in cls.body if isinstance(node, ast.FunctionDef) and node.name == "forward"), None)


# Methods that copy or move a tensor without computing: `residual = x.clone().detach()` keeps a value for later,
# `h0.to(x.device)` moves one; made the identity they change nothing by construction, so they are no operators.
COPY_METHODS = frozenset({"clone", "detach", "contiguous"})
MOVE_METHODS = frozenset({"to", "cuda", "cpu"})


def _is_copy(value: ast.expr) -> bool:
    """`name.clone()`, `name.detach()`, `name.contiguous()`, `name.to(...)` and chains of them."""
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and (
            value.func.attr in MOVE_METHODS or (value.func.attr in COPY_METHODS and not value.args
                                                and not value.keywords)):
        value = value.func.value
    return isinstance(value, ast.Name)


def _assigned(statement: ast.stmt) -> set[str]:
    return {node.id for node in ast.walk(statement) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)}


def _main_input(value: ast.expr, local: set[str]) -> str | None:
    """The first local variable the value reads, in source order: the tensor an identity passes on."""
    names = [node for node in ast.walk(value) if isinstance(node, ast.Name) and node.id in local]
    return min(names, key=lambda n: (n.lineno, n.col_offset)).id if names else None


def ablations(code: str) -> list[Ablation]:
    """One variant per statement of `Model.forward` that computes a value from a local tensor: `v = expr` with one
    name target, or `return expr` (not a bare name, nor a copy of one). Other statements (loops, unpacking, in-place calls) stay."""
    try:
        tree = parse(code)
    except (SyntaxError, ValueError, RecursionError):
        return []
    forward = _forward(tree)
    if forward is None:
        return []
    local = {arg.arg for arg in forward.args.args[1:]} | {arg.arg for arg in forward.args.kwonlyargs}
    variants = []
    for index, statement in enumerate(forward.body):
        value = None
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name):
            value = statement.value
        elif isinstance(statement, ast.Return):
            value = statement.value
        computes = value is not None and not isinstance(value, (ast.Name, ast.Constant)) and not _is_copy(value)
        source = _main_input(value, local) if computes else None
        local |= _assigned(statement)
        if source is None:
            continue
        variant = copy.deepcopy(tree)
        target = _forward(variant).body[index]
        target.value = ast.Call(ast.Name(SKIP, ast.Load()), [ast.Name(source, ast.Load()), target.value], [])
        variants.append(Ablation(statement.lineno, ast.unparse(value), ast.unparse(ast.fix_missing_locations(variant))))
    return variants
