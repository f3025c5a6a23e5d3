"""Records one forward call of a real model as operator-family events: data-flow pairs and the sizes each op sees.

A module that is a chain operator of the vocabulary (`nn.Conv2d`, `nn.MultiheadAttention`), or a module without
children whose family is one (`transformers.LlamaRMSNorm` -> rms_norm), is recorded once, as a leaf, through
global module hooks; everything else is recorded at the torch-function level (`F.gelu`, `Tensor.add`,
`torch.matmul`), so a block (an attention layer, an MLP, a decoder layer) is seen as the operators it runs.
Reshapes, views, dtype casts and eval-time no-ops pass their producer through, so `linear -> view -> permute ->
matmul` counts as the pair `matmul -> matmul`. An op none of whose inputs derives from the model's inputs (mask and
position plumbing, rotary tables built from buffers), or with no floating-point input (index arithmetic on token
ids), is not recorded. Runs on the meta device: no memory, no
arithmetic, no weights.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch.overrides import TorchFunctionMode, resolve_name
from torch.utils._pytree import tree_leaves

from opgen.taskcode.ops import VIEW_METHODS, canonical_name
from opgen.vocab import Vocabulary
from opgen.vocab.families import NO_OP_FAMILIES, FamilyTable

# Calls that move or relabel data without computing: the output keeps its producer.
PASS_THROUGH = VIEW_METHODS | {
    "__getitem__", "transpose", "permute", "movedim", "swapaxes", "split", "chunk", "unbind", "select",
    "unflatten", "mT", "T", "clone", "contiguous", "expand", "repeat", "broadcast_to", "view_as_real",
}
# Calls that make a new tensor from another's shape only: their output carries no data of the model's.
CREATION = {"new_zeros", "new_ones", "new_empty", "new_full", "new_tensor", "zeros_like", "ones_like", "empty_like",
            "full_like", "rand_like", "randn_like", "randint_like"}
# Tensor operators spelled as dunders, by the operator they are.
DUNDERS = {
    "add": "add", "radd": "add", "iadd": "add", "sub": "sub", "rsub": "sub", "isub": "sub",
    "mul": "mul", "rmul": "mul", "imul": "mul", "truediv": "div", "rtruediv": "div", "itruediv": "div",
    "div": "div", "matmul": "matmul", "rmatmul": "matmul", "pow": "pow", "rpow": "pow", "neg": "neg",
}
MODEL_INPUT = "<input>"  # the producer of the model's own inputs (not a family: pairs from it are not counted)
CATEGORY_SIZES = {"conv", "pooling", "norm"}  # categories whose rank-3..5 inputs give channels and spatial sizes


@dataclass
class OpUse:
    """One recorded operator: its family, the families that produced its tensor inputs, and the sizes it saw."""

    family: str
    producers: tuple[str, ...]
    sizes: dict[str, list[int]] = field(default_factory=dict)


def call_name(func) -> str | None:
    """The `ops` spelling of a torch function or tensor method (`torch.Tensor.__add__` -> `torch.add`), or None
    for what is not an operator (property reads, metadata, `torch.finfo`)."""
    dotted = resolve_name(func)
    if not dotted:
        return None
    if dotted.startswith("torch.Tensor."):
        method = dotted[len("torch.Tensor."):]
        if "." in method:  # torch.Tensor.shape.__get__ and other property reads
            return None
        if method.startswith("__") and method.endswith("__"):
            core = method.strip("_")
            if core in DUNDERS:
                return "torch." + DUNDERS[core]
            return "torch.__getitem__" if core == "getitem" else None
        return "torch." + method.rstrip("_")
    return canonical_name(dotted)


class FamilyTracer(TorchFunctionMode):
    """Collects `OpUse`s of every forward call made while it is active (use with `trace_forward`)."""

    def __init__(self, vocab: Vocabulary, table: FamilyTable):
        super().__init__()
        self.table = table
        self.chain_names = {spec.name for spec in vocab.chain_ops}
        self.chain_families = {spec.family for spec in vocab.chain_ops}
        self.category = {spec.family: spec.category for spec in vocab.chain_ops}
        self.uses: list[OpUse] = []
        self._producers: dict[int, tuple[torch.Tensor, tuple[str, ...]]] = {}
        self._leaf: torch.nn.Module | None = None
        self._leaf_inputs: list[torch.Tensor] = []

    # tagging --------------------------------------------------------------------------------------------------
    def _producers_of(self, tensors: list[torch.Tensor]) -> tuple[str, ...]:
        found: list[str] = []
        for tensor in tensors:
            for family in self._producers.get(id(tensor), (None, ()))[1]:
                if family not in found:
                    found.append(family)
        return tuple(found)

    def tag_inputs(self, inputs) -> None:
        """Mark the model's inputs, so ops on them are recorded (and ops on buffers alone are not)."""
        self._tag(inputs, (MODEL_INPUT,))

    def _tag(self, output, families: tuple[str, ...]) -> None:
        for tensor in tree_leaves(output):
            if isinstance(tensor, torch.Tensor) and families:
                self._producers[id(tensor)] = (tensor, families)  # the tensor is held so its id stays unique

    def _record(self, family: str, inputs: list[torch.Tensor], output) -> None:
        producers = self._producers_of(inputs)
        if not producers:  # plumbing on buffers and constants only
            return
        if family in NO_OP_FAMILIES:
            self._tag(output, producers)
            return
        outputs = [t for t in tree_leaves(output) if isinstance(t, torch.Tensor)]
        self.uses.append(OpUse(family, tuple(p for p in producers if p != MODEL_INPUT),
                               self._sizes(family, inputs, outputs)))
        self._tag(output, (family,))

    def _sizes(self, family: str, inputs: list[torch.Tensor], outputs: list[torch.Tensor]) -> dict[str, list[int]]:
        """The model sizes this use shows: channels and spatial sizes of conv/pool/norm inputs, hidden sizes of
        matmul and norm inputs, heads and sequence length of attention scores."""
        if not inputs:
            return {}
        shape, out = tuple(inputs[0].shape), tuple(outputs[0].shape) if outputs else ()
        sizes: dict[str, list[int]] = {}
        category = self.category.get(family)
        if category in CATEGORY_SIZES and 3 <= len(shape) <= 5 and family not in ("layer_norm", "rms_norm"):
            sizes["channels"] = sorted({shape[1], *(out[1:2] if len(out) == len(shape) else ())})
            kind = {3: "length", 4: "spatial", 5: "volume"}[len(shape)]
            sizes[kind] = [round(math.prod(shape[2:]) ** (1 / (len(shape) - 2)))]
        elif family in ("matmul", "layer_norm", "rms_norm", "embedding") and shape:
            sizes["features"] = sorted({shape[-1], *(out[-1:] if out else ())})
            if len(shape) == 3 and family != "embedding":
                sizes["length"] = [shape[1]]
        if family in ("matmul", "bmm", "softmax", "scaled_dot_product_attention") and len(shape) == 4:
            sizes = {"heads": [shape[1]], "length": [shape[2]]}  # (batch, heads, seq, head_dim) attention scores
        return sizes

    # torch functions --------------------------------------------------------------------------------------------
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        output = func(*args, **kwargs)
        if self._leaf is not None:
            return output
        name = call_name(func)
        if name is None:
            return output
        inputs = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        base = name.rsplit(".", 1)[-1]
        # creation ops (arange, zeros, new_zeros) carry no data in; integer and boolean work is index and mask
        # plumbing (position ids, padding masks), not a kernel of the model
        if not inputs or base in CREATION or not any(t.is_floating_point() for t in inputs):
            return output
        if base in PASS_THROUGH:
            self._tag(output, self._producers_of(inputs))
        else:
            self._record(self.table.family(name), inputs, output)
        return output

    # leaf modules -------------------------------------------------------------------------------------------------
    def leaf_family(self, module: torch.nn.Module) -> str | None:
        """The family of a module recorded as one op: a chain operator of the vocabulary (`nn.Conv2d`), or a module
        without children in a chain family (`transformers.LlamaRMSNorm` -> rms_norm); else None."""
        cls = type(module)
        if cls.__module__.startswith("torch.nn"):
            name = f"nn.{cls.__name__}"
        elif cls.__module__.startswith("transformers"):
            name = f"transformers.{cls.__name__}"
        else:
            return None
        if name in self.chain_names:
            return self.table.family(name)
        if name not in self.table.by_name or next(module.children(), None) is not None:
            return None
        family = self.table.family(name)
        return family if family in self.chain_families else None

    def before(self, module: torch.nn.Module, args) -> None:
        if self._leaf is None and self.leaf_family(module) is not None:
            self._leaf = module
            self._leaf_inputs = [t for t in tree_leaves(args) if isinstance(t, torch.Tensor)]

    def after(self, module: torch.nn.Module, args, output) -> None:
        if module is self._leaf:
            self._leaf = None
            self._record(self.leaf_family(module), self._leaf_inputs, output)


def trace_forward(model: torch.nn.Module, inputs: dict, vocab: Vocabulary, table: FamilyTable) -> list[OpUse]:
    """The operator uses of `model(**inputs)` (no grad), in call order."""
    tracer = FamilyTracer(vocab, table)
    pre = torch.nn.modules.module.register_module_forward_pre_hook(lambda m, a: tracer.before(m, a))
    post = torch.nn.modules.module.register_module_forward_hook(lambda m, a, o: tracer.after(m, a, o))
    tracer.tag_inputs(list(inputs.values()))
    try:
        with torch.no_grad(), tracer:
            model(**inputs)
    finally:
        pre.remove()
        post.remove()
    return tracer.uses
