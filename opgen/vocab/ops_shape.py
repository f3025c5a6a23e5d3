"""Layout operators: flatten/unflatten, transposes, padding, pixel shuffles, upsampling, concatenation, flips.

View-producing operators end in `.contiguous()`: shapes are tracked but strides are not, and some later
operators (F.local_response_norm on 4D/5D input, for one) call `.view` and fail on a non-contiguous input.
"""

from __future__ import annotations

import math
import random

from opgen.vocab.ops_common import conv_out, divisors_in
from opgen.vocab.spec import Extra, OpSpec, Params, Shape, Sizes

_PAD_KINDS = {"Zero": "zero-pads", "Reflection": "reflection-pads", "Replication": "replication-pads",
              "Constant": "constant-pads", "Circular": "circular-pads"}
_INTERP_MODES = {3: ("nearest", "linear"), 4: ("nearest", "bilinear", "bicubic"), 5: ("nearest", "trilinear")}


def _draw_pad(dims: int, kind: str):
    """Per-side padding of the last `dims` dims; reflection/circular need pads smaller than the size."""

    def draw(rng: random.Random, shape: Shape, sizes: Sizes) -> Params | None:
        pads = []
        for size in reversed(shape[-dims:]):
            limit = size - 1 if kind in ("Reflection", "Circular") else 3
            if limit < 1:
                return None
            pads.extend(rng.randint(0, min(limit, 3)) for _ in range(2))
        if not any(pads):
            pads[0] = 1
        params: Params = {"padding": tuple(pads)}
        if kind == "Constant":
            params["value"] = rng.choice((0.0, 1.0, -1.0, 0.5))
        return params

    return draw


def _pad_out(shape: Shape, p: Params) -> Shape:
    pads = list(p["padding"])
    out = list(shape)
    for i in range(len(pads) // 2):
        out[len(shape) - 1 - i] += pads[2 * i] + pads[2 * i + 1]
    return tuple(out)


def _pad_module(kind: str, dims: int) -> OpSpec:
    value = ", {value}" if kind == "Constant" else ""
    return OpSpec(name=f"nn.{kind}Pad{dims}d", category="shape", phrase=f"{_PAD_KINDS[kind]} the last {dims} dimension"
                  + ("s" if dims > 1 else ""), ranks=(dims + 2,), draw=_draw_pad(dims, kind), out_shape=_pad_out,
                  module=f"nn.{kind}Pad{dims}d({{padding}}{value})", attr="pad", family="pad")


def _draw_f_pad(rng: random.Random, shape: Shape, sizes: Sizes) -> Params | None:
    dims = len(shape) - 2
    mode = rng.choice(("constant", "reflect", "replicate", "circular"))
    params = _draw_pad(dims, "Constant" if mode in ("constant", "replicate") else "Reflection")(rng, shape, sizes)
    if params is None:
        return None
    params["mode"] = mode
    params.setdefault("value", 0.0)
    if mode != "constant":
        params["value"] = None
    return params


def _draw_pixel_shuffle(rng: random.Random, shape: Shape, sizes: Sizes) -> Params | None:
    factors = [r for r in (2, 3) if shape[1] % (r * r) == 0]
    return {"upscale_factor": rng.choice(factors)} if factors else None


def _draw_pixel_unshuffle(rng: random.Random, shape: Shape, sizes: Sizes) -> Params | None:
    factors = [r for r in (2, 4) if shape[2] % r == 0 and shape[3] % r == 0]
    return {"downscale_factor": rng.choice(factors)} if factors else None


def _draw_upsample(rng: random.Random, shape: Shape, sizes: Sizes) -> Params | None:
    mode = rng.choice(_INTERP_MODES[len(shape)])
    if mode == "bicubic" and min(shape[2:]) < 2:
        return None
    params: Params = {"scale_factor": rng.choice((2, 2, 3)), "mode": mode}
    params["align_corners"] = None if mode == "nearest" else rng.random() < 0.5
    return params


def _upsample_out(shape: Shape, p: Params) -> Shape:
    return (shape[0], shape[1], *(int(n * p["scale_factor"]) for n in shape[2:]))


def _draw_unflatten(rng: random.Random, shape: Shape, sizes: Sizes) -> Params | None:
    splits = [k for k in divisors_in(shape[1], (2, 4, 8)) if shape[1] // k >= 2]
    if not splits:
        return None
    k = rng.choice(splits)
    return {"unflattened_size": (k, shape[1] // k)}


def _draw_transpose(rng: random.Random, shape: Shape, sizes: Sizes) -> Params:
    dim0, dim1 = rng.sample(range(1, len(shape)), 2)
    return {"dim0": dim0, "dim1": dim1}


def _transpose_out(shape: Shape, p: Params) -> Shape:
    out = list(shape)
    out[p["dim0"]], out[p["dim1"]] = out[p["dim1"]], out[p["dim0"]]
    return tuple(out)


def _draw_permute(rng: random.Random, shape: Shape, sizes: Sizes) -> Params:
    rest = list(range(1, len(shape)))
    while rest == sorted(rest):
        rng.shuffle(rest)
    return {"dims": (0, *rest)}


def _draw_cat(rng: random.Random, shape: Shape, sizes: Sizes) -> Params:
    return {"dim": rng.randrange(1, len(shape))}


def _draw_flip(rng: random.Random, shape: Shape, sizes: Sizes) -> Params:
    dims = sorted(rng.sample(range(1, len(shape)), rng.randint(1, min(2, len(shape) - 1))))
    return {"dims": tuple(dims)}


def _draw_roll(rng: random.Random, shape: Shape, sizes: Sizes) -> Params:
    dim = rng.randrange(1, len(shape))
    return {"shifts": rng.randint(1, max(1, shape[dim] - 1)), "dims": dim}


def _draw_repeat(rng: random.Random, shape: Shape, sizes: Sizes) -> Params:
    return {"repeats": rng.choice((2, 3)), "dim": rng.randrange(1, len(shape))}


def _draw_channel_shuffle(rng: random.Random, shape: Shape, sizes: Sizes) -> Params | None:
    groups = [g for g in (2, 4) if shape[1] % g == 0 and shape[1] > g]
    return {"groups": rng.choice(groups)} if groups else None


def _draw_unfold(rng: random.Random, shape: Shape, sizes: Sizes) -> Params | None:
    kernel = rng.choice((2, 3))
    stride = rng.choice((1, 2, kernel))
    padding = rng.choice((0, kernel // 2))
    if conv_out(shape[2], kernel, stride, padding) < 1 or conv_out(shape[3], kernel, stride, padding) < 1:
        return None
    return {"kernel_size": kernel, "stride": stride, "padding": padding}


def _unfold_out(shape: Shape, p: Params) -> Shape:
    k, s, pad = p["kernel_size"], p["stride"], p["padding"]
    blocks = conv_out(shape[2], k, s, pad) * conv_out(shape[3], k, s, pad)
    return (shape[0], shape[1] * k * k, blocks)


def _draw_narrow(rng: random.Random, shape: Shape, sizes: Sizes) -> Params | None:
    dims = [d for d in range(1, len(shape)) if shape[d] >= 2]
    if not dims:
        return None
    dim = rng.choice(dims)
    length = rng.randint(1, shape[dim] - 1)
    return {"dim": dim, "start": rng.randint(0, shape[dim] - length), "length": length}


def _draw_tri(rng: random.Random, shape: Shape, sizes: Sizes) -> Params:
    return {"diagonal": rng.choice((0, 0, 1, -1))}


SPECS: list[OpSpec] = [
    OpSpec(name="torch.flatten", category="shape", phrase="flattens all but the batch dimension", ranks=(3, 4, 5),
           out_shape=lambda s, p: (s[0], math.prod(s[1:])), call="torch.flatten({x}, 1)"),
    OpSpec(name="nn.Flatten", category="shape", phrase="flattens all but the batch dimension", ranks=(3, 4, 5),
           out_shape=lambda s, p: (s[0], math.prod(s[1:])), module="nn.Flatten()", attr="flatten"),
    OpSpec(name="nn.Unflatten", category="shape", phrase="splits the feature dimension in two", ranks=(2, 3),
           draw=_draw_unflatten, out_shape=lambda s, p: (s[0], *p["unflattened_size"], *s[2:]),
           module="nn.Unflatten(1, {unflattened_size})", attr="unflatten"),
    OpSpec(name="torch.transpose", category="shape", phrase="swaps two dimensions", ranks=(3, 4, 5), family="permute",
           draw=_draw_transpose, out_shape=_transpose_out, call="torch.transpose({x}, {dim0}, {dim1}).contiguous()"),
    OpSpec(name="torch.permute", category="shape", phrase="permutes the non-batch dimensions", ranks=(3, 4, 5),
           draw=_draw_permute, out_shape=lambda s, p: tuple(s[d] for d in p["dims"]),
           call="torch.permute({x}, {dims}).contiguous()"),
    *(_pad_module(kind, d) for kind in _PAD_KINDS for d in (1, 2, 3)),
    OpSpec(name="F.pad", category="shape", phrase="pads the spatial dimensions", ranks=(3, 4, 5), draw=_draw_f_pad,
           out_shape=_pad_out, call="F.pad({x}, {padding}, mode={mode}, value={value})"),
    OpSpec(name="nn.PixelShuffle", category="shape", phrase="rearranges channels into space (pixel shuffle)",
           ranks=(4,), draw=_draw_pixel_shuffle, attr="pixel_shuffle",
           out_shape=lambda s, p: (s[0], s[1] // p["upscale_factor"] ** 2, s[2] * p["upscale_factor"],
                                   s[3] * p["upscale_factor"]),
           module="nn.PixelShuffle({upscale_factor})", args=("upscale_factor",)),
    OpSpec(name="nn.PixelUnshuffle", category="shape", phrase="rearranges space into channels (pixel unshuffle)",
           ranks=(4,), draw=_draw_pixel_unshuffle, attr="pixel_unshuffle",
           out_shape=lambda s, p: (s[0], s[1] * p["downscale_factor"] ** 2, s[2] // p["downscale_factor"],
                                   s[3] // p["downscale_factor"]),
           module="nn.PixelUnshuffle({downscale_factor})", args=("downscale_factor",)),
    OpSpec(name="nn.Upsample", category="shape", phrase="upsamples the spatial dimensions", ranks=(3, 4, 5),
           draw=_draw_upsample, out_shape=_upsample_out, attr="upsample", family="interpolate",
           module="nn.Upsample(scale_factor={scale_factor}, mode={mode}, align_corners={align_corners})",
           args=("scale_factor",)),
    OpSpec(name="F.interpolate", category="shape", phrase="interpolates the spatial dimensions to a larger size",
           ranks=(3, 4, 5), draw=_draw_upsample, out_shape=_upsample_out,
           call="F.interpolate({x}, scale_factor={scale_factor}, mode={mode}, align_corners={align_corners})"),
    OpSpec(name="nn.UpsamplingNearest2d", category="shape", phrase="upsamples by nearest neighbour", ranks=(4,),
           draw=lambda r, s, z: {"scale_factor": r.choice((2, 3))}, out_shape=_upsample_out, attr="upsample",
           module="nn.UpsamplingNearest2d(scale_factor={scale_factor})", family="interpolate"),
    OpSpec(name="nn.UpsamplingBilinear2d", category="shape", phrase="upsamples bilinearly", ranks=(4,),
           draw=lambda r, s, z: {"scale_factor": 2}, out_shape=_upsample_out, attr="upsample",
           module="nn.UpsamplingBilinear2d(scale_factor={scale_factor})", family="interpolate"),
    OpSpec(name="nn.ChannelShuffle", category="shape", phrase="shuffles channels across groups", ranks=(3, 4, 5),
           draw=_draw_channel_shuffle, module="nn.ChannelShuffle({groups})", attr="channel_shuffle"),
    OpSpec(name="nn.Unfold", category="shape", phrase="extracts sliding local blocks (im2col)", ranks=(4,),
           draw=_draw_unfold, out_shape=_unfold_out, attr="unfold",
           module="nn.Unfold(kernel_size={kernel_size}, padding={padding}, stride={stride})", args=("kernel_size",)),
    OpSpec(name="torch.cat", category="shape", phrase="concatenates a second input along a dimension",
           ranks=(2, 3, 4, 5), draw=_draw_cat,
           out_shape=lambda s, p: tuple(2 * d if i == p["dim"] else d for i, d in enumerate(s)),
           call="torch.cat([{x}, {y}], dim={dim})", extras=lambda s, p: [Extra("y", tuple(s))]),
    OpSpec(name="torch.flip", category="shape", phrase="reverses the order along some dimensions", ranks=(2, 3, 4, 5),
           draw=_draw_flip, call="torch.flip({x}, {dims})"),
    OpSpec(name="torch.roll", category="shape", phrase="rolls values along a dimension", ranks=(2, 3, 4, 5),
           draw=_draw_roll, call="torch.roll({x}, {shifts}, {dims})"),
    OpSpec(name="torch.repeat_interleave", category="shape", phrase="repeats each element along a dimension",
           ranks=(2, 3, 4, 5), draw=_draw_repeat,
           out_shape=lambda s, p: tuple(d * p["repeats"] if i == p["dim"] else d for i, d in enumerate(s)),
           call="torch.repeat_interleave({x}, {repeats}, dim={dim})"),
    OpSpec(name="torch.narrow", category="shape", phrase="keeps a slice along a dimension", ranks=(2, 3, 4, 5),
           draw=_draw_narrow, out_shape=lambda s, p: tuple(p["length"] if i == p["dim"] else d for i, d in enumerate(s)),
           call="torch.narrow({x}, {dim}, {start}, {length}).contiguous()"),
    OpSpec(name="torch.tril", category="shape", phrase="keeps the lower triangle of the last two dimensions",
           ranks=(3, 4, 5), draw=_draw_tri, call="torch.tril({x}, diagonal={diagonal})"),
    OpSpec(name="torch.triu", category="shape", phrase="keeps the upper triangle of the last two dimensions",
           ranks=(3, 4, 5), draw=_draw_tri, call="torch.triu({x}, diagonal={diagonal})"),
]
