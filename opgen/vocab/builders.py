"""Shorthands for writing operator specs: default inputs, dimension picks, common operator shapes."""

from __future__ import annotations

import math
import random

from opgen.vocab.spec import ALL_RANKS, OpSpec, Params, Shape, Sizes

LAYOUTS = {
    1: ("batch_size",),
    2: ("batch_size", "in_features"),
    3: ("batch_size", "channels", "length"),
    4: ("batch_size", "channels", "height", "width"),
    5: ("batch_size", "channels", "depth", "height", "width"),
}
SEQUENCE_LAYOUT = ("batch_size", "seq_len", "embed_dim")


def default_input(rng: random.Random, sizes: Sizes, rank: int) -> tuple[Shape, tuple[str, ...]]:
    """A primary input of the given rank drawn from the profile's sizes (dim 0 is the batch)."""
    batch = sizes.pick(rng, "batch")
    if rank == 1:
        shape: Shape = (batch * sizes.pick(rng, "features"),)
    elif rank == 2:
        shape = (batch, sizes.pick(rng, "features"))
    elif rank == 3:
        shape = (batch, sizes.pick(rng, "channels"), sizes.pick(rng, "length"))
    elif rank == 4:
        side = sizes.pick(rng, "spatial")
        shape = (batch, sizes.pick(rng, "channels"), side, side)
    else:
        side = sizes.pick(rng, "volume")
        shape = (batch, sizes.pick(rng, "channels"), side, side, side)
    return shape, LAYOUTS[rank]


def sequence_input(rng: random.Random, sizes: Sizes) -> tuple[Shape, tuple[str, ...]]:
    """A (batch, seq_len, embed_dim) input for sequence operators (attention, recurrent, norms)."""
    heads = max(sizes.heads)
    embed = max(heads, sizes.pick(rng, "features") // heads * heads)
    return (sizes.pick(rng, "batch"), sizes.pick(rng, "length"), embed), SEQUENCE_LAYOUT


def pick_dim(rng: random.Random, shape: Shape) -> int:
    """A non-batch dimension of the shape, written as a non-negative index (the batch dim is 0)."""
    return rng.randrange(1, len(shape)) if len(shape) > 1 else 0


def drop_dim(shape: Shape, dim: int, keepdim: bool = False) -> Shape:
    return tuple(1 if i == dim else d for i, d in enumerate(shape)) if keepdim else shape[:dim] + shape[dim + 1:]


def numel(shape: Shape) -> int:
    return math.prod(shape)


def pointwise(name: str, phrase: str, call: str, *, category: str = "elementwise", ranks=ALL_RANKS,
              draw=None, args: tuple[str, ...] = (), family: str = "") -> OpSpec:
    """A functional operator that keeps the shape, e.g. `torch.tanh({x})`."""
    extra = {"draw": draw} if draw else {}
    return OpSpec(name=name, category=category, phrase=phrase, ranks=ranks, call=call, args=args, family=family,
                  **extra)


def pointwise_module(name: str, phrase: str, module: str, *, category: str = "activation", ranks=ALL_RANKS,
                     draw=None, args: tuple[str, ...] = (), attr: str | None = None, family: str = "") -> OpSpec:
    """An nn module that keeps the shape, e.g. `nn.ReLU()`."""
    extra = {"draw": draw} if draw else {}
    return OpSpec(name=name, category=category, phrase=phrase, ranks=ranks, module=module, args=args,
                  attr=attr, family=family, **extra)


def reduce_dim(name: str, phrase: str, call: str, *, keepdim: bool | None = None, category: str = "reduction",
               min_rank: int = 2) -> OpSpec:
    """A reduction over one non-batch dimension `{dim}`; `keepdim=None` draws it."""

    def draw(rng: random.Random, shape: Shape, sizes: Sizes) -> Params:
        keep = rng.random() < 0.5 if keepdim is None else keepdim
        return {"dim": pick_dim(rng, shape), "keepdim": keep}

    def out(shape: Shape, params: Params) -> Shape:
        return drop_dim(shape, int(params["dim"]), bool(params["keepdim"]))

    return OpSpec(name=name, category=category, phrase=phrase, ranks=tuple(r for r in ALL_RANKS if r >= min_rank),
                  draw=draw, out_shape=out, call=call, args=("dim",))


def fits_numel(shape: Shape, sizes: Sizes) -> bool:
    return numel(shape) <= sizes.max_numel


def place_op(spec: OpSpec, shape: Shape, params: dict, sizes: Sizes) -> tuple[Shape, list[dict]] | None:
    """The output shape and extra inputs (as graph-node dicts) of `spec` with these parameters on an input of
    `shape`, or None when a tensor would exceed the profile's size limit or the operator does not accept the shape
    (`OpSpec.accepts`)."""
    if spec.accepts is not None and not spec.accepts(tuple(shape), params):
        return None
    out = tuple(spec.out_shape(shape, params))
    if not fits_numel(out, sizes):
        return None
    extras = [vars(e).copy() for e in spec.extras(shape, params)] if spec.extras else []
    for extra in extras:
        if not fits_numel(tuple(extra["shape"]), sizes):
            return None
        extra["shape"] = list(extra["shape"])
        extra["dim_names"] = list(extra["dim_names"])
    return out, extras
