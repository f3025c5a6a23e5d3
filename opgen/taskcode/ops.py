"""Operator calls of a task, read from its source's AST in evaluation order (the one `ops` implementation)."""

from __future__ import annotations

import ast
from dataclasses import dataclass

import torch

# Tensor methods that only reinterpret or describe a tensor; they are not operators.
VIEW_METHODS = frozenset(
    {
        "view", "view_as", "size", "dim", "numel", "contiguous", "unsqueeze", "squeeze", "expand",
        "expand_as", "to", "float", "double", "half", "bfloat16", "int", "long", "bool", "type",
        "cuda", "cpu", "detach", "clone", "item", "tolist", "reshape", "flatten", "t", "__len__",
        "requires_grad_", "numpy", "stride", "element_size", "type_as", "new_zeros", "new_ones",
        "new_empty", "new_full", "new_tensor", "get_device", "is_contiguous", "data_ptr",
    }
)
BINOP_NAMES = {
    ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.MatMult: "matmul",
    ast.Pow: "pow", ast.FloorDiv: "floor_divide", ast.Mod: "remainder",
}
NOT_OPERATORS = frozenset({"nn.Parameter", "nn.ModuleList", "nn.ModuleDict", "nn.Sequential", "nn.Identity"})


@dataclass(frozen=True)
class OpEvent:
    """One operator use: `call` (an API call, listed in `ops`), `method` (tensor method), or `binop`."""

    name: str
    kind: str


def canonical_name(dotted: str) -> str | None:
    """Map a resolved dotted path to the SPEC spelling: torch.nn.X -> nn.X, torch.nn.functional.f -> F.f."""
    for prefix, short in (("torch.nn.functional.", "F."), ("torch.nn.", "nn."), ("transformers.", "transformers.")):
        if dotted.startswith(prefix):
            rest = dotted[len(prefix):]
            if short == "transformers.":
                classes = [part for part in rest.split(".") if part[:1].isupper()]
                rest = classes[-1] if classes else rest.rsplit(".", 1)[-1]
                if rest.endswith("Config") or rest.startswith("Auto") and not classes:
                    return None
            elif short == "nn." and rest.startswith("functional."):
                return "F." + rest[len("functional."):]
            elif short == "nn." and "." in rest:  # torch.nn.modules.conv.Conv2d, torch.nn.init.x
                head, _, tail = rest.rpartition(".")
                return None if head.startswith("init") or head.startswith("utils") else "nn." + tail
            return short + rest
    if dotted.startswith("torch."):
        return dotted
    return None


def _import_aliases(tree: ast.Module) -> dict[str, str]:
    """Local name -> fully dotted module/object path, from the file's import statements."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    aliases[alias.asname] = alias.name
                else:
                    aliases[alias.name.split(".")[0]] = alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return aliases


def _dotted(node: ast.AST) -> list[str] | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return parts[::-1]
    return None


class _Resolver:
    def __init__(self, tree: ast.Module):
        self.aliases = _import_aliases(tree)
        self.classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}

    def resolve(self, node: ast.AST) -> str | None:
        parts = _dotted(node)
        if not parts or parts[0] not in self.aliases:
            return None
        return canonical_name(".".join([self.aliases[parts[0]], *parts[1:]]))


def _methods(cls: ast.ClassDef) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in cls.body if isinstance(n, ast.FunctionDef)}


class _ForwardWalker:
    """Walks a forward method in evaluation order, expanding submodules and helper methods."""

    def __init__(self, resolver: _Resolver, depth: int = 0):
        self.resolver = resolver
        self.events: list[OpEvent] = []
        self.depth = depth

    def module_attrs(self, cls: ast.ClassDef) -> dict[str, list[str] | str]:
        """self.<attr> -> canonical op name(s) or a class defined in the file, from __init__."""
        attrs: dict[str, list[str] | str] = {}
        init = _methods(cls).get("__init__")
        if init is None:
            return attrs
        self._init = init
        for node in ast.walk(init):
            if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.Call):
                continue
            for target in node.targets:
                if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
                    attrs[target.attr] = self._constructed(node.value)
        return attrs

    def _constructed(self, call: ast.Call) -> list[str] | str:
        name = self.resolver.resolve(call.func)
        if name in ("nn.Sequential", "nn.ModuleList"):
            inner: list[str] = []
            if any(isinstance(arg, (ast.Starred, ast.Name)) for arg in call.args):
                return self._built_in_loops()
            for arg in call.args:
                if isinstance(arg, ast.Call):
                    built = self._constructed(arg)
                    inner.extend(built if isinstance(built, list) else [])
            return inner
        if name and name not in NOT_OPERATORS:
            return [name]
        if isinstance(call.func, ast.Name) and call.func.id in self.resolver.classes:
            return call.func.id
        return []

    def _built_in_loops(self) -> list[str]:
        """Operators of a container built from a list (`nn.Sequential(*layers)`): the appended constructors."""
        names: list[str] = []
        for node in ast.walk(self._init):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("append", "extend"):
                for sub in ast.walk(node):
                    if isinstance(sub, ast.Call) and sub is not node:
                        name = self.resolver.resolve(sub.func)
                        if name and name not in NOT_OPERATORS:
                            names.append(name)
        return names

    def walk_class(self, cls: ast.ClassDef, method: str = "forward") -> None:
        methods = _methods(cls)
        if method not in methods or self.depth > 6:
            return
        attrs = self.module_attrs(cls)
        for stmt in methods[method].body:
            self._visit(stmt, cls, attrs, methods)

    def _visit(self, node: ast.AST, cls: ast.ClassDef, attrs: dict, methods: dict) -> None:
        if isinstance(node, (ast.FunctionDef, ast.Lambda, ast.ClassDef)):
            return
        if isinstance(node, ast.Assign):  # value is evaluated before the targets
            self._visit(node.value, cls, attrs, methods)
            for target in node.targets:
                self._visit(target, cls, attrs, methods)
            return
        if isinstance(node, ast.Call):
            self._visit(node.func.value if isinstance(node.func, ast.Attribute) else node.func, cls, attrs, methods)
            for child in [*node.args, *(k.value for k in node.keywords)]:
                self._visit(child, cls, attrs, methods)
            self._record_call(node, cls, attrs, methods)
            return
        for child in ast.iter_child_nodes(node):
            self._visit(child, cls, attrs, methods)
        if isinstance(node, (ast.BinOp, ast.AugAssign)) and type(node.op) in BINOP_NAMES:  # x += b is x + b
            self.events.append(OpEvent(BINOP_NAMES[type(node.op)], "binop"))

    def _record_call(self, call: ast.Call, cls: ast.ClassDef, attrs: dict, methods: dict) -> None:
        func = call.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
            target = attrs.get(func.attr)
            if isinstance(target, list):
                self.events.extend(OpEvent(name, "call") for name in target)
            elif isinstance(target, str):
                sub = _ForwardWalker(self.resolver, self.depth + 1)
                sub.walk_class(self.resolver.classes[target])
                self.events.extend(sub.events)
            elif func.attr in methods and func.attr != "forward":
                sub = _ForwardWalker(self.resolver, self.depth + 1)
                sub.walk_class(cls, func.attr)
                self.events.extend(sub.events)
            return
        name = self.resolver.resolve(func)
        if name is not None:
            if name not in NOT_OPERATORS and not name.startswith("torch.Size"):
                self.events.append(OpEvent(name, "call"))
            return
        if isinstance(func, ast.Name) and func.id in self.resolver.classes:
            return
        if isinstance(func, ast.Attribute) and func.attr not in VIEW_METHODS and hasattr(torch.Tensor, func.attr):
            base = func.attr.rstrip("_") if func.attr.endswith("_") and not func.attr.startswith("_") else func.attr
            self.events.append(OpEvent(f"torch.{base}", "method"))


def op_events(code: str) -> list[OpEvent]:
    """All operator uses in `Model.forward`, in evaluation order. Raises SyntaxError on bad code."""
    tree = ast.parse(code)
    resolver = _Resolver(tree)
    model = resolver.classes.get("Model")
    if model is None:
        return []
    walker = _ForwardWalker(resolver)
    walker.walk_class(model)
    return walker.events


def ops_from_code(code: str) -> list[str]:
    """The `ops` column: canonical names of the API calls the forward pass makes, in call order."""
    return [event.name for event in op_events(code) if event.kind == "call"]


def data_source_for(ops: list[str]) -> str:
    """`transformers` when a transformers class is used, else `torch#k` with k the number of operators."""
    if any(op.startswith("transformers.") for op in ops):
        return "transformers"
    return f"torch#{len(ops)}"
