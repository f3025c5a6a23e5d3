"""Filter `invalid_task`: a KernelBench task defines `Model` (with `forward`), `get_inputs` and `get_init_inputs`."""

from __future__ import annotations

import ast

from filters.base import Filter, Verdict
from opgen.taskcode.syntax import dotted_name, model_class, parse

REQUIRED_FUNCTIONS = ("get_inputs", "get_init_inputs")
PLAIN_MODULE_BASES = frozenset({"nn.Module", "torch.nn.Module", "Module"})


def top_level_names(tree: ast.Module) -> set[str]:
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.ImportFrom, ast.Import)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


class TaskShapeFilter(Filter):
    """Rejects source without the three names the consuming environment calls."""

    name = "task_shape"

    def filter(self, record: dict) -> Verdict:
        tree = parse(record["code"])
        names = top_level_names(tree)
        missing = [n for n in ("Model", *REQUIRED_FUNCTIONS) if n not in names]
        if missing:
            return Verdict.reject("invalid_task", f"missing top-level {', '.join(missing)}")
        for node in tree.body:
            if isinstance(node, ast.AsyncFunctionDef) and node.name in REQUIRED_FUNCTIONS:
                return Verdict.reject("invalid_task", f"{node.name} is async")
        model = model_class(tree)
        if model is not None:
            bases = {dotted_name(b) for b in model.bases}
            methods = {n.name for n in model.body if isinstance(n, ast.FunctionDef)}
            if bases <= PLAIN_MODULE_BASES and "forward" not in methods:
                return Verdict.reject("invalid_task", "Model has no forward method")
        return Verdict.ok()
