"""Reductions along non-batch dimensions, arg-reductions, sorting and cumulative scans."""

from __future__ import annotations

import random

from opgen.vocab.ops_common import pick_reduce_dims, reduced_shape
from opgen.vocab.spec import ALL_RANKS, OpSpec, Params, Shape, Sizes

_RANKS = tuple(r for r in ALL_RANKS if r >= 2)


def _draw_reduce(multi: bool, min_size: int = 1, max_size: int | None = None):
    """keepdim drawn; the reduced dims must hold between min_size and max_size elements each."""

    def draw(rng: random.Random, shape: Shape, sizes: Sizes) -> Params | None:
        dim = pick_reduce_dims(rng, shape, allow_multi=multi)
        dims = dim if isinstance(dim, tuple) else (dim,)
        if any(shape[d] < min_size or (max_size and shape[d] > max_size) for d in dims):
            return None
        return {"dim": dim, "keepdim": rng.random() < 0.5}

    return draw


def _reduce_out(shape: Shape, p: Params) -> Shape:
    return reduced_shape(shape, p["dim"], bool(p["keepdim"]))


def _reduce(name: str, phrase: str, *, multi: bool = True, min_size: int = 1, max_size: int | None = None,
            suffix: str = "", extra_args: str = "", last_only: bool = False, family: str = "") -> OpSpec:
    return OpSpec(name=name, category="reduction", phrase=phrase, ranks=_RANKS, family=family,
                  draw=_draw_reduce(multi, min_size, max_size), out_shape=_reduce_out, last_only=last_only,
                  call=f"{name}({{x}}, {extra_args}dim={{dim}}, keepdim={{keepdim}}){suffix}")


def _draw_scan(max_size: int | None = None):
    def draw(rng: random.Random, shape: Shape, sizes: Sizes) -> Params | None:
        dims = [d for d in range(1, len(shape)) if max_size is None or shape[d] <= max_size]
        return {"dim": rng.choice(dims)} if dims else None

    return draw


def _scan(name: str, phrase: str, *, suffix: str = "", max_size: int | None = None) -> OpSpec:
    return OpSpec(name=name, category="reduction", phrase=phrase, ranks=_RANKS, draw=_draw_scan(max_size),
                  call=f"{name}({{x}}, dim={{dim}}){suffix}")


def _draw_topk(rng: random.Random, shape: Shape, sizes: Sizes) -> Params | None:
    dims = [d for d in range(1, len(shape)) if shape[d] >= 4]
    if not dims:
        return None
    dim = rng.choice(dims)
    return {"dim": dim, "k": rng.choice(sorted({1, 2, shape[dim] // 4, shape[dim] // 2} - {0})),
            "largest": rng.random() < 0.7}


SPECS: list[OpSpec] = [
    _reduce("torch.sum", "sums along a dimension"),
    _reduce("torch.mean", "averages along a dimension"),
    _reduce("torch.amax", "takes the maximum along a dimension", family="max"),
    _reduce("torch.amin", "takes the minimum along a dimension", family="min"),
    _reduce("torch.prod", "multiplies along a dimension", multi=False, max_size=16),
    _reduce("torch.std", "computes the standard deviation along a dimension", min_size=2),
    _reduce("torch.var", "computes the variance along a dimension", min_size=2),
    _reduce("torch.logsumexp", "computes log-sum-exp along a dimension"),
    _reduce("torch.norm", "computes the L2 norm along a dimension", multi=False),
    _reduce("torch.linalg.vector_norm", "computes a vector p-norm along a dimension", extra_args="ord=1, ",
            family="norm"),
    _reduce("torch.max", "takes the maximum values along a dimension", multi=False, suffix=".values"),
    _reduce("torch.min", "takes the minimum values along a dimension", multi=False, suffix=".values"),
    _reduce("torch.median", "takes the median along a dimension", multi=False, suffix=".values", min_size=2),
    _reduce("torch.argmax", "returns the index of the maximum along a dimension", multi=False, min_size=2,
            last_only=True),
    _reduce("torch.argmin", "returns the index of the minimum along a dimension", multi=False, min_size=2,
            last_only=True),
    _scan("torch.cumsum", "computes a cumulative sum along a dimension"),
    _scan("torch.cumprod", "computes a cumulative product along a dimension", max_size=16),
    _scan("torch.logcumsumexp", "computes a cumulative log-sum-exp along a dimension"),
    _scan("torch.cummax", "computes a running maximum along a dimension", suffix=".values"),
    _scan("torch.cummin", "computes a running minimum along a dimension", suffix=".values"),
    OpSpec(name="torch.sort", category="reduction", phrase="sorts along a dimension", ranks=_RANKS,
           draw=lambda r, s, z: {**_draw_scan()(r, s, z), "descending": r.random() < 0.5},
           call="torch.sort({x}, dim={dim}, descending={descending}).values"),
    OpSpec(name="torch.topk", category="reduction", phrase="keeps the top-k values along a dimension", ranks=_RANKS,
           draw=_draw_topk, out_shape=lambda s, p: tuple(p["k"] if i == p["dim"] else d for i, d in enumerate(s)),
           call="torch.topk({x}, {k}, dim={dim}, largest={largest}).values"),
]
