"""Matrix-multiply operators: linear layers, mm/bmm/matmul/addmm/baddbmm/mv and einsum contractions.

Every product with a learned weight matrix (linear, F.linear, matmul, mm, addmm, einsum) is family `matmul`.
"""

from __future__ import annotations

import random

from opgen.vocab.ops_common import scale_for
from opgen.vocab.spec import Extra, OpSpec, Params, Shape, Sizes


def _draw_linear(rng: random.Random, shape: Shape, sizes: Sizes) -> Params:
    return {"in_features": shape[-1], "out_features": sizes.pick(rng, "features"), "bias": rng.random() < 0.8}


def _draw_weight(rng: random.Random, shape: Shape, sizes: Sizes) -> Params:
    in_features, out_features = shape[-1], sizes.pick(rng, "features")
    return {"in_features": in_features, "out_features": out_features, "scale": scale_for(in_features)}


def _last_to_out(shape: Shape, p: Params) -> Shape:
    return tuple(shape[:-1]) + (p["out_features"],)


def _draw_bilinear(rng: random.Random, shape: Shape, sizes: Sizes) -> Params:
    return {"in1_features": shape[-1], "in2_features": sizes.pick(rng, "features"),
            "out_features": sizes.pick(rng, "features")}


def _draw_bmm(rng: random.Random, shape: Shape, sizes: Sizes) -> Params:
    return {"n": sizes.pick(rng, "features")}


def _draw_baddbmm(rng: random.Random, shape: Shape, sizes: Sizes) -> Params:
    return {"n": sizes.pick(rng, "features"), "beta": rng.choice((1.0, 0.5)), "alpha": rng.choice((1.0, 0.5, 2.0))}


def _draw_einsum(rng: random.Random, shape: Shape, sizes: Sizes) -> Params:
    """A contraction with a learned weight: feature mixing on the last dim, or channel mixing on dim 1."""
    letters = "bcdhw"[: len(shape)] if len(shape) > 2 else "bi"
    out_features = sizes.pick(rng, "features" if len(shape) <= 3 else "channels")
    if len(shape) >= 4 or (len(shape) == 3 and rng.random() < 0.5):
        # mix dim 1 (channels): "bchw,ck->bkhw"
        inputs, out = letters, "k" + letters[2:]
        return {"equation": f"{inputs},{letters[1]}k->b{out}", "in_features": shape[1], "out_features": out_features,
                "mixed_dim": 1, "scale": scale_for(shape[1])}
    last = letters[-1]
    return {"equation": f"{letters},{last}k->{letters[:-1]}k", "in_features": shape[-1],
            "out_features": out_features, "mixed_dim": len(shape) - 1, "scale": scale_for(shape[-1])}


def _einsum_out(shape: Shape, p: Params) -> Shape:
    dim = p["mixed_dim"]
    return tuple(p["out_features"] if i == dim else d for i, d in enumerate(shape))


SPECS: list[OpSpec] = [
    OpSpec(name="nn.Linear", category="gemm", family="matmul", phrase="applies a linear projection", ranks=(2, 3, 4),
           draw=_draw_linear, out_shape=_last_to_out, attr="linear",
           module="nn.Linear({in_features}, {out_features}, bias={bias})", args=("in_features", "out_features")),
    OpSpec(name="F.linear", category="gemm", family="matmul", phrase="applies a linear map with a learned weight matrix",
           ranks=(2, 3), draw=_draw_weight, out_shape=_last_to_out, attr="weight",
           module="nn.Parameter(torch.randn({out_features}, {in_features}) * {scale})", call="F.linear({x}, {self})",
           args=("in_features", "out_features")),
    OpSpec(name="nn.Bilinear", category="gemm", phrase="applies a bilinear form with a second input",
           ranks=(2, 3), draw=_draw_bilinear, out_shape=_last_to_out, attr="bilinear",
           module="nn.Bilinear({in1_features}, {in2_features}, {out_features})", call="{self}({x}, {y})",
           extras=lambda s, p: [Extra("y", tuple(s[:-1]) + (p["in2_features"],),
                                      dim_names=(None,) * (len(s) - 1) + ("in2_features",))],
           args=("in1_features", "in2_features", "out_features")),
    OpSpec(name="torch.matmul", category="gemm", family="matmul", phrase="multiplies by a learned weight matrix", ranks=(2, 3, 4, 5),
           draw=_draw_weight, out_shape=_last_to_out, attr="weight",
           module="nn.Parameter(torch.randn({in_features}, {out_features}) * {scale})",
           call="torch.matmul({x}, {self})", args=("in_features", "out_features")),
    OpSpec(name="torch.mm", category="gemm", family="matmul", phrase="multiplies by a learned weight matrix with mm", ranks=(2,),
           draw=_draw_weight, out_shape=_last_to_out, attr="weight",
           module="nn.Parameter(torch.randn({in_features}, {out_features}) * {scale})",
           call="torch.mm({x}, {self})", args=("in_features", "out_features")),
    OpSpec(name="torch.addmm", category="gemm", family="matmul", phrase="applies an affine map with addmm", ranks=(2,),
           draw=_draw_linear, out_shape=_last_to_out, attr="proj",
           module="nn.Linear({in_features}, {out_features})",
           call="torch.addmm({self}.bias, {x}, {self}.weight.t())", args=("in_features", "out_features")),
    OpSpec(name="torch.mv", category="gemm", phrase="multiplies by a learned vector", ranks=(2,),
           draw=lambda r, s, z: {"in_features": s[-1], "scale": scale_for(s[-1])},
           out_shape=lambda s, p: (s[0],), attr="weight",
           module="nn.Parameter(torch.randn({in_features}) * {scale})", call="torch.mv({x}, {self})",
           args=("in_features",)),
    OpSpec(name="torch.bmm", category="gemm", phrase="multiplies by a second batch of matrices", ranks=(3,),
           draw=_draw_bmm, out_shape=lambda s, p: (s[0], s[1], p["n"]), call="torch.bmm({x}, {w})",
           extras=lambda s, p: [Extra("w", (s[0], s[2], p["n"]), dim_names=(None, None, "n"))]),
    OpSpec(name="torch.baddbmm", category="gemm", family="bmm", phrase="adds a learned bias to a batched matrix product",
           ranks=(3,), draw=_draw_baddbmm, out_shape=lambda s, p: (s[0], s[1], p["n"]), attr="bias",
           module="nn.Parameter(torch.randn({n}))", call="torch.baddbmm({self}, {x}, {w}, beta={beta}, alpha={alpha})",
           extras=lambda s, p: [Extra("w", (s[0], s[2], p["n"]), dim_names=(None, None, "n"))], args=("n",)),
    OpSpec(name="torch.einsum", category="gemm", family="matmul", phrase="contracts a dimension with a learned weight via einsum",
           ranks=(2, 3, 4, 5), draw=_draw_einsum, out_shape=_einsum_out, attr="weight",
           module="nn.Parameter(torch.randn({in_features}, {out_features}) * {scale})",
           call="torch.einsum({equation}, {x}, {self})", args=("in_features", "out_features")),
]
