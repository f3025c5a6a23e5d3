"""Near-duplicate tasks by family chain: same families in order, same salient parameters, every size within 2x.

Two tasks are one task in two spellings (`torch.mm -> nn.LSTMCell` and `torch.matmul -> nn.LSTMCell`) when their
family chains are equal, the parameters that change the computation (kernel size, stride, groups, reduced
dimension, mode, ...) are equal, and every main dimension (input shapes, each operator's output shape, size
parameters such as hidden sizes) is within SIZE_RATIO of the other's. A chain may then survive once per regime
(a 1x1 and a 7x7 convolution; 64 and 1,024 channels), and at most `max_per_chain` times in all.
"""

from __future__ import annotations

import ast
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from opgen.sample.render import op_nodes
from opgen.sample.sampler import graph_from_json

SIZE_RATIO = 2.0
DEFAULT_MAX_PER_CHAIN = 3   # tasks of one family chain kept at most (0: no cap); see docs/benchmarks.md

# Integer parameters that measure the work (compared within SIZE_RATIO), not its kind.
SIZE_PARAMS = frozenset({
    "in_features", "out_features", "in1_features", "in2_features", "in_channels", "out_channels", "num_features",
    "num_channels", "normalized_shape", "hidden_size", "input_size", "embed_dim", "d_model", "dim_feedforward",
    "embedding_dim", "intermediate_size", "head_dim", "n", "k", "num_points", "num_parameters",
    "output_size", "unflattened_size", "start", "length", "shifts", "batch_size",
})
# Parameters that set the kernel's structure (compared exactly) even where a bare constant would be a size: a
# second value means another loop nest or memory access pattern, so a second task a person would write apart.
SALIENT_PARAMS: dict[str, str] = {
    "kernel_size": "the window each output reads",
    "stride": "the step between windows: another access pattern",
    "dilation": "the gaps inside a window: another access pattern",
    "groups": "grouped and depthwise convolutions are other kernels than dense ones",
    "dim": "which dimension is reduced or scanned: another loop order",
    "dims": "which dimensions are moved or reduced",
    "dim0": "which dimensions are swapped", "dim1": "which dimensions are swapped",
    "mixed_dim": "which dimension an einsum contracts",
    "num_groups": "how channels are split for the statistics",
    "num_heads": "how attention is split into heads", "nhead": "the same, nn.Transformer's name",
    "num_attention_heads": "the same, transformers' name",
    "num_key_value_heads": "grouped-query attention shares keys and values across heads",
    "num_layers": "stacked recurrent layers run one after another",
    "bidirectional": "a second recurrence in the other direction",
    "norm_first": "where the norm sits in a transformer layer",
    "scale_factor": "the ratio of output to input positions",
    "upscale_factor": "the shuffle's block", "downscale_factor": "the unshuffle's block",
    "repeats": "how often each element is repeated",
    "mode": "nearest against linear interpolation, reflect against constant padding: other gathers",
    "size": "the local response norm's window",
    "param_shape": "the broadcast pattern of a learned operand (compared as which dims are 1)",
    "attn": "the attention implementation a transformers block runs",
}
# Parameters that change neither the kernel's structure nor the amount of work (compared not at all): a second
# value is the same kernel with another constant, flag or formula inside its loops, so a twin.
IGNORED_PARAMS: dict[str, str] = {
    "bias": "one more add of a loaded vector", "affine": "the same, for a norm's learned scale and shift",
    "weight_shape": "restates the convolution's sizes", "padding": "shows in the output shape",
    "output_padding": "shows in the output shape", "value": "a constant", "scale": "an initial weight scale",
    "init": "an initial weight value", "eps": "a constant", "reduction": "mean against sum: a final scale",
    "equation": "restates the einsum's rank and contracted dim (mixed_dim)",
    "p": "the order of a distance or norm: another elementwise power in the same reduction",
    "norm_type": "the same, for LP pooling", "exponent": "another elementwise power",
    "num_embeddings": "the table's length: a lookup gathers the same rows whatever the table's size",
    "is_causal": "a mask predicate inside the same attention kernel",
    "keepdim": "only the view of the result", "diagonal": "the offset of the same triangle predicate",
    "approximate": "another elementwise formula (GELU's tanh form)", "act": "another elementwise activation",
    "activation": "another elementwise activation", "use_gelu_tanh_python": "another elementwise formula",
    "align_corners": "another coordinate formula in the same interpolation",
    "descending": "the direction of the same sort", "largest": "the direction of the same selection",
}

@dataclass(frozen=True)
class TaskShape:
    """What the chain rule compares: the family chain, the salient part (exact) and the main sizes (within 2x)."""

    families: tuple[str, ...]
    salient: tuple
    sizes: tuple[int, ...]


def _frozen(value):
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    return value


def _ints(value) -> list[int] | None:
    """The integers of a size value (an int or a list of ints), None when it is something else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return [value]
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return list(value)
    return None


def classify(name: str, value, unknown: str = "salient") -> str | None:
    """`size`, `salient`, or None (ignored) for one parameter; an unlisted integer is `unknown`."""
    if name in IGNORED_PARAMS or value is None:
        return None
    if name in SIZE_PARAMS and _ints(value) is not None:
        return "size"
    if name in SALIENT_PARAMS or isinstance(value, (bool, str)):
        return "salient"
    if isinstance(value, float):
        return None
    if _ints(value) is not None:
        return unknown
    return "salient"


def _salient_value(name: str, value, params: dict):
    if name == "groups" and isinstance(value, int) and value > 1 and value == params.get("in_channels"):
        return "depthwise"
    if name == "param_shape" and isinstance(value, (list, tuple)):
        return tuple(d == 1 for d in value)  # the broadcast pattern, not the sizes
    return _frozen(value)


def _split(params: dict, unknown: str, rank: int = 0) -> tuple[tuple, list[int]]:
    salient, sizes = [], []
    if params.get("mixed_dim") == rank - 1:  # an einsum over the last dim is a plain matmul
        params = {name: value for name, value in params.items() if name != "mixed_dim"}
    for name in sorted(params):
        kind = classify(name, params[name], unknown)
        if kind == "salient":
            salient.append((name, _salient_value(name, params[name], params)))
        elif kind == "size":
            sizes.extend(_ints(params[name]))
    return tuple(salient), sizes


def _graph_parts(graph) -> tuple[list, list[list[int]]]:
    """Per operator node (in chain order): its salient parameters and size groups (output shape, size params)."""
    graph = graph_from_json(graph if isinstance(graph, str) else json.dumps(graph))
    salient, groups = [], []
    for node in op_nodes(graph):
        data = graph.nodes[node]
        node_salient, node_sizes = _split(data.get("params") or {}, "salient", len(data.get("in_shape") or ()))
        salient.append(node_salient)
        groups += [list(data.get("out_shape") or []), node_sizes]
    return salient, groups


def _constant_params(code: str) -> dict:
    """Module-level `name = literal` constants of a task file (KernelBench problems keep their sizes there)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return {}
    params = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                params[node.targets[0].id] = ast.literal_eval(node.value)
            except (ValueError, SyntaxError, TypeError):
                continue
    return params


def task_shape(record: dict, families: Sequence[str]) -> TaskShape:
    """The TaskShape of a record: from its sampled graph when it has one, else from the code's constants."""
    groups: list[list[int]] = [list(shape) for shape in record.get("input_shapes") or [] if isinstance(shape, list)]
    if record.get("graph"):
        salient, graph_groups = _graph_parts(record["graph"])
        groups += graph_groups
    else:
        constants_salient, constant_sizes = _split(_constant_params(record.get("code", "")), "size")
        salient, groups = [constants_salient], groups + [constant_sizes]
    layout = tuple(len(group) for group in groups)
    sizes = tuple(int(d) for group in groups for d in group)
    return TaskShape(tuple(families), (tuple(salient), layout), sizes)


def same_regime(first: TaskShape, second: TaskShape, ratio: float = SIZE_RATIO) -> bool:
    """Same family chain and salient part, and every main size within `ratio` of the other's."""
    if first.families != second.families or first.salient != second.salient:
        return False
    return all(max(a, b) <= ratio * max(1, min(a, b)) for a, b in zip(first.sizes, second.sizes))


def chain_duplicates(new: Sequence[tuple[tuple, str, tuple[str, ...], dict]],
                     existing: Sequence[tuple[str, tuple[str, ...], dict]],
                     max_per_chain: int = DEFAULT_MAX_PER_CHAIN,
                     ratio: float = SIZE_RATIO) -> dict[int, tuple[str, str]]:
    """New records that repeat a kept task's regime, or exceed `max_per_chain` (0: no cap) tasks of a chain.

    `new`: (order key, id, family chain, record) per candidate, where the order key sorts survivors first (the
    smallest id wins, whatever the input order); `existing`: (id, family chain, record) of tasks kept earlier,
    which always survive and count towards the cap. Records with an empty chain take no part. Returns
    {position in `new`: (survivor id, "chain" or "chain_cap")}.
    """
    members = Counter(chain for _, _, chain, _ in new) + Counter(chain for _, chain, _ in existing)
    shapes: dict[int, TaskShape] = {}

    def shape_of(chain: tuple[str, ...], record: dict) -> TaskShape:
        """Only a chain met twice is ever compared, so only those records pay for their shapes."""
        if members[chain] < 2:
            return TaskShape(chain, (), ())
        if id(record) not in shapes:
            shapes[id(record)] = task_shape(record, chain)
        return shapes[id(record)]

    kept: dict[tuple[str, ...], list[tuple[str, TaskShape]]] = {}
    for task_id, chain, record in sorted(existing, key=lambda entry: str(entry[0])):
        if chain:
            kept.setdefault(chain, []).append((task_id, shape_of(chain, record)))
    duplicates: dict[int, tuple[str, str]] = {}
    for position in sorted(range(len(new)), key=lambda i: (new[i][0], i)):
        _, task_id, chain, record = new[position]
        if not chain:
            continue
        shape = shape_of(chain, record)
        twins = kept.setdefault(chain, [])
        twin = next((kept_id for kept_id, other in twins if same_regime(shape, other, ratio)), None)
        if twin is not None:
            duplicates[position] = (twin, "chain")
        elif max_per_chain and len(twins) >= max_per_chain:
            duplicates[position] = (twins[0][0], "chain_cap")
        else:
            twins.append((task_id, shape))
    return duplicates
