"""Disguised copies of reference problems (renamed, resized, re-documented, reformatted, functional spellings),
the positives that decontamination must catch in the tests and in scripts/analysis/decontam_curve.py."""

from __future__ import annotations

import ast
import builtins
import inspect
import random

import torch
import torch.nn.functional as F

DISGUISES = ("rename", "resize", "redoc", "reformat", "functional")
_FIXED = {"Model", "forward", "__init__", "get_inputs", "get_init_inputs", "self", "super"}
# Module classes whose call becomes a functional call on the module's own parameters.
_PARAMETRIC = {
    "Linear": "F.linear({x}, {m}.weight, {m}.bias)",
    "Conv1d": "F.conv1d({x}, {m}.weight, {m}.bias, {m}.stride, {m}.padding, {m}.dilation, {m}.groups)",
    "Conv2d": "F.conv2d({x}, {m}.weight, {m}.bias, {m}.stride, {m}.padding, {m}.dilation, {m}.groups)",
    "Conv3d": "F.conv3d({x}, {m}.weight, {m}.bias, {m}.stride, {m}.padding, {m}.dilation, {m}.groups)",
    "GroupNorm": "F.group_norm({x}, {m}.num_groups, {m}.weight, {m}.bias, {m}.eps)",
    "LayerNorm": "F.layer_norm({x}, {m}.normalized_shape, {m}.weight, {m}.bias, {m}.eps)",
}
_BINOP_CALLS = {ast.Add: "torch.add", ast.Sub: "torch.sub", ast.Mult: "torch.mul", ast.Div: "torch.div"}
_WORDS = ("alpha", "beta", "gamma", "delta", "omega", "tau", "kappa", "sigma", "rho", "zeta")


_HAS_PARAMETERS = {"in_channels", "in_features", "num_features", "normalized_shape", "num_groups", "embedding_dim",
                   "input_size", "num_parameters", "in1_features", "embed_dim", "d_model", "num_embeddings"}


def _functional_name(module_class: str) -> str | None:
    """F.<name> that a parameter-free nn module class is the module form of (ReLU -> relu, LeakyReLU -> leaky_relu)."""
    module = getattr(torch.nn, module_class, None)
    if module is None or _HAS_PARAMETERS & set(inspect.signature(module.__init__).parameters):
        return None
    wanted = module_class.lower()
    matches = [name for name in dir(F) if name.replace("_", "").lower() == wanted and not name.startswith("_")]
    return matches[0] if matches else None


class _Functional(ast.NodeTransformer):
    """Module calls -> functional calls, torch.f <-> F.f, binops -> torch.add/sub/mul/div (forward only)."""

    def __init__(self, modules: dict[str, ast.Call]):
        self.modules = modules   # self.<attr> -> the nn.<Class>(...) constructor call

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        name = _BINOP_CALLS.get(type(node.op))
        if name is None:
            return node
        return ast.Call(func=ast.parse(name, mode="eval").body, args=[node.left, node.right], keywords=[])

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        func = node.func
        if (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self"
                and func.attr in self.modules and len(node.args) == 1 and not node.keywords):
            constructor = self.modules[func.attr]
            cls = constructor.func.attr if isinstance(constructor.func, ast.Attribute) else ""
            x = ast.unparse(node.args[0])
            if cls in _PARAMETRIC:
                return ast.parse(_PARAMETRIC[cls].format(x=x, m=f"self.{func.attr}"), mode="eval").body
            functional = _functional_name(cls)
            if functional:
                call = ast.parse(f"F.{functional}({x})", mode="eval").body
                call.args.extend(constructor.args)
                call.keywords.extend(k for k in constructor.keywords if k.arg != "inplace")
                return call
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            if func.value.id == "torch" and hasattr(F, func.attr):
                func.value.id = "F"
            elif func.value.id == "F" and hasattr(torch, func.attr):
                func.value.id = "torch"
        return node


def _module_constructors(tree: ast.Module) -> dict[str, ast.Call]:
    model = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"), None)
    found: dict[str, ast.Call] = {}
    for node in ast.walk(model) if model else []:
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Attribute) and ast.unparse(node.value.func.value) == "nn"):
            for target in node.targets:
                if isinstance(target, ast.Attribute) and ast.unparse(target.value) == "self":
                    found[target.attr] = node.value
    return found


def _user_names(tree: ast.Module) -> set[str]:
    imported = {alias.asname or alias.name.split(".")[0] for node in ast.walk(tree)
                if isinstance(node, (ast.Import, ast.ImportFrom)) for alias in node.names}
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            names.add(node.attr)
    return names - _FIXED - imported - set(dir(builtins))


class _Rename(ast.NodeTransformer):
    def __init__(self, mapping: dict[str, str], local_callables: set[str]):
        self.mapping, self.local_callables = mapping, local_callables

    def visit_Name(self, node: ast.Name) -> ast.AST:
        node.id = self.mapping.get(node.id, node.id)
        return node

    def visit_arg(self, node: ast.arg) -> ast.AST:
        node.arg = self.mapping.get(node.arg, node.arg)
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        node.name = self.mapping.get(node.name, node.name)
        self.generic_visit(node)
        return node

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        node.name = self.mapping.get(node.name, node.name)
        self.generic_visit(node)
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.value, ast.Name) and node.value.id == "self":
            node.attr = self.mapping.get(node.attr, node.attr)
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        local = isinstance(node.func, ast.Name) and node.func.id in self.local_callables
        self.generic_visit(node)
        if local:  # keyword arguments of the file's own classes and functions follow their renamed parameters
            for keyword in node.keywords:
                keyword.arg = self.mapping.get(keyword.arg, keyword.arg) if keyword.arg else None
        return node


class _Resize(ast.NodeTransformer):
    """Module-level integer constants (the sizes) changed."""

    def __init__(self, rng: random.Random):
        self.rng = rng

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        if isinstance(node.value, int) and not isinstance(node.value, bool) and node.value > 1:
            node.value = max(2, node.value * self.rng.choice((2, 3)) // self.rng.choice((1, 2)))
        return node


def _redocument(tree: ast.Module, rng: random.Random) -> None:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                body.pop(0)
            if isinstance(node, ast.ClassDef) or rng.random() < 0.5:
                body.insert(0, ast.Expr(ast.Constant(f"{rng.choice(_WORDS).title()} block: see the tests.")))


def _reformat(source: str, rng: random.Random) -> str:
    """Layout changes on top of ast.unparse: blank lines, a comment, and wrapped long statements."""
    lines = []
    for line in source.splitlines():
        if line.strip().startswith(("def ", "class ")):
            lines.append("")
            lines.append(" " * (len(line) - len(line.lstrip())) + f"# {rng.choice(_WORDS)} step")
        if "(" in line and line.rstrip().endswith(")") and len(line) > 40 and "=" in line and ":" not in line:
            head, _, rest = line.partition("(")
            indent = " " * (len(line) - len(line.lstrip()) + 4)
            lines.append(f"{head}(\n{indent}{rest[:-1]}\n{indent[:-4]})")
            continue
        lines.append(line)
    return "\n".join(lines) + "\n"


def disguise(code: str, rng: random.Random, kinds: tuple[str, ...] = DISGUISES) -> str:
    """A copy of `code` with the given disguises applied (any subset of DISGUISES)."""
    tree = ast.parse(code)
    if "functional" in kinds:
        modules = _module_constructors(tree)
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name == "Model":
                for item in node.body:
                    if isinstance(item, ast.FunctionDef) and item.name == "forward":
                        _Functional(modules).visit(item)
        if not any(isinstance(n, ast.ImportFrom | ast.Import) and "functional" in ast.unparse(n) for n in tree.body):
            tree.body.insert(0, ast.parse("import torch.nn.functional as F").body[0])
    if "resize" in kinds:
        for node in tree.body:
            if isinstance(node, ast.Assign):
                _Resize(rng).visit(node)
    if "rename" in kinds:
        names = sorted(_user_names(tree))
        mapping = {name: f"{rng.choice(_WORDS)}_{index}" for index, name in enumerate(names)}
        local = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        _Rename(mapping, local).visit(tree)
    if "redoc" in kinds:
        _redocument(tree, rng)
    ast.fix_missing_locations(tree)
    source = ast.unparse(tree)
    if "reformat" in kinds:
        source = _reformat(source, rng)
    elif "redoc" not in kinds and "functional" not in kinds and "rename" not in kinds and "resize" not in kinds:
        return code
    return source
