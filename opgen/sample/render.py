"""Renders a sampled operator graph as a KernelBench-format task file (docs/spec.md, "A task")."""

from __future__ import annotations

import networkx as nx

from opgen.taskcode.dtypes import DEFAULT_DTYPE, TORCH_SPELLING
from opgen.vocab import Vocabulary
from opgen.vocab.spec import Extra, OpSpec


class _Constants:
    """Module-level size constants: one name per value, `name_2` when a name is taken by another value."""

    def __init__(self) -> None:
        self.values: dict[str, object] = {}

    def name(self, preferred: str, value: object) -> str:
        candidate, suffix = preferred, 2
        while candidate in self.values and self.values[candidate] != value:
            candidate, suffix = f"{preferred}_{suffix}", suffix + 1
        self.values[candidate] = value
        return candidate


class _Names:
    """Unique attribute / variable names in order of first use."""

    def __init__(self, taken: set[str] | None = None) -> None:
        self.taken = set(taken or ())

    def unique(self, preferred: str) -> str:
        candidate, suffix = preferred, 2
        while candidate in self.taken:
            candidate, suffix = f"{preferred}_{suffix}", suffix + 1
        self.taken.add(candidate)
        return candidate


def literal(value: object) -> str:
    if isinstance(value, list):
        value = tuple(value)
    return repr(value)


def describe(phrases: list[str]) -> str:
    """'Model that a, then b, and finally c.' from operator phrases."""
    if len(phrases) == 1:
        return f"Model that {phrases[0]}."
    if len(phrases) == 2:
        return f"Model that {phrases[0]} and then {phrases[1]}."
    return f"Model that {phrases[0]}, then {', then '.join(phrases[1:-1])}, and finally {phrases[-1]}."


def _tensor_factory(dims: list[str], dtype: str, high: object, precision: str = DEFAULT_DTYPE) -> str:
    """The expression that draws one input; floating inputs in `precision` (fp32 is torch's default)."""
    shape = ", ".join(dims)
    if dtype == "long":
        return f"torch.randint(0, {high}, ({shape}{',' if len(dims) == 1 else ''}))"
    cast = "" if precision == DEFAULT_DTYPE else f", dtype={TORCH_SPELLING[precision]}"
    if dtype == "positive":
        return f"torch.rand({shape}{cast})"
    if dtype == "prob":   # the softmax in fp32, then the cast: a distribution rounded once
        return f"torch.softmax(torch.randn({shape}), dim=-1){f'.to({TORCH_SPELLING[precision]})' if cast else ''}"
    return f"torch.randn({shape}{cast})"


def op_nodes(graph: nx.DiGraph) -> list[str]:
    """Operator nodes in execution order."""
    return [n for n in nx.topological_sort(graph) if graph.nodes[n].get("kind") == "op"]


def render(graph: nx.DiGraph, vocab: Vocabulary) -> str:
    """The task source for a sampled graph, in the graph's precision (`dtype`, fp32 when absent): inputs drawn in
    it, and the model's parameters and buffers cast to it at the end of `__init__`, so the file stays
    self-contained KernelBench format."""
    precision = graph.graph.get("dtype", DEFAULT_DTYPE)
    constants = _Constants()
    attrs = _Names({"forward", "training"})
    variables = _Names({"x", "self", "torch", "nn", "F", "math"})
    init_args: list[str] = []
    init_lines: list[str] = []
    forward_lines: list[str] = []
    stored: set[str] = set()
    imports: list[str] = []
    batch = graph.graph["batch_size"]

    source = graph.nodes["x"]
    input_dims = [constants.name(name, size) for name, size in zip(source["layout"], source["shape"])]
    input_sizes = {size: name for name, size in zip(reversed(input_dims), reversed(source["shape"]))}
    inputs = [("x", input_dims, source.get("dtype", "float"), source.get("high", 2))]

    phrases = []
    for node in op_nodes(graph):
        data = graph.nodes[node]
        spec: OpSpec = vocab[data["op"]]
        params: dict = data["params"]
        phrases.append(spec.phrase)
        imports.extend(i for i in spec.imports if i not in imports)
        arg_names = {}
        for arg in spec.args:
            name = constants.name(arg, params[arg])
            arg_names[arg] = name
            if name not in init_args:
                init_args.append(name)
        fields = {"x": "x"}
        for extra in [Extra(**e) for e in data.get("extras", [])]:
            var = variables.unique(extra.name)
            fields[extra.name] = var
            dims = []
            for i, size in enumerate(extra.shape):
                dim_name = extra.dim_names[i] if i < len(extra.dim_names) else None
                if i == 0 and size == batch:
                    dims.append(constants.name("batch_size", size))
                elif dim_name:
                    dims.append(constants.name(dim_name, size))
                elif size in input_sizes:
                    dims.append(input_sizes[size])
                else:
                    dims.append(str(size))
            inputs.append((var, dims, extra.dtype, extra.high))
        module_fields = {**fields, **{k: literal(v) for k, v in params.items()}, **arg_names}
        for helper_name, template in spec.helpers:
            helper_attr = attrs.unique(helper_name)
            init_lines.append(f"self.{helper_attr} = {template.format(**module_fields)}")
            fields[helper_name] = module_fields[helper_name] = f"self.{helper_attr}"
        if spec.module is not None:
            attr = attrs.unique(spec.attr_name)
            init_lines.append(f"self.{attr} = {spec.module.format(**module_fields)}")
            fields["self"] = f"self.{attr}"
            init_lines += [line.format(**module_fields, self=fields["self"]) for line in spec.setup]
        call_fields = {**fields, **{k: literal(v) for k, v in params.items()}}
        for arg, name in arg_names.items():
            if "{" + arg + "}" in spec.call:
                call_fields[arg] = f"self.{name}"
                if name not in stored:
                    stored.add(name)
                    init_lines.append(f"self.{name} = {name}")
        forward_lines.append(f"x = {spec.call.format(**call_fields)}")

    uses_functional = any(line.find("F.") >= 0 for line in forward_lines + init_lines)
    header = ["import torch", "import torch.nn as nn"]
    if uses_functional:
        header.append("import torch.nn.functional as F")
    header.extend(imports)

    signature = ", ".join(["self", *init_args])
    forward_args = ", ".join(["self", *(var for var, *_ in inputs)])
    body = [
        *header, "", "",
        "class Model(nn.Module):",
        '    """',
        f"    {describe(phrases)}",
        '    """',
        "",
        f"    def __init__({signature}):",
        "        super(Model, self).__init__()",
        *(f"        {line}" for line in init_lines),
        *([f"        self.to({TORCH_SPELLING[precision]})"] if precision != DEFAULT_DTYPE else []),
        "",
        f"    def forward({forward_args}):",
        *(f"        {line}" for line in forward_lines),
        "        return x",
        "",
        "",
        *(f"{name} = {literal(value)}" for name, value in constants.values.items()),
        "",
        "",
        "def get_inputs():",
        *(f"    {var} = {_tensor_factory(dims, dtype, high, precision)}" for var, dims, dtype, high in inputs),
        f"    return [{', '.join(var for var, *_ in inputs)}]",
        "",
        "",
        "def get_init_inputs():",
        f"    return [{', '.join(init_args)}]",
        "",
    ]
    return "\n".join(body)
