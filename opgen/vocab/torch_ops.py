"""Built-in torch operators (nn modules and torch / F functions) that compose into chains."""

from __future__ import annotations

import random

from opgen.vocab.builders import pick_dim, pointwise, pointwise_module, reduce_dim, sequence_input
from opgen.vocab.spec import Extra, OpSpec, Params, Shape, Sizes


def conv_out(size: int, kernel: int, stride: int = 1, padding: int = 0, dilation: int = 1) -> int:
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def _draw_conv2d(rng: random.Random, shape: Shape, sizes: Sizes) -> Params | None:
    in_channels = shape[1]
    kernel = rng.choice((1, 3, 5))
    stride = rng.choice((1, 1, 2))
    padding = rng.choice((0, kernel // 2))
    if conv_out(shape[2], kernel, stride, padding) < 1 or conv_out(shape[3], kernel, stride, padding) < 1:
        return None
    out_channels = sizes.pick(rng, "channels")
    groups = 1
    if rng.random() < 0.2:  # depthwise
        groups, out_channels = in_channels, in_channels
    elif rng.random() < 0.2 and in_channels % 2 == 0 and out_channels % 2 == 0:
        groups = 2
    return {"in_channels": in_channels, "out_channels": out_channels, "kernel_size": kernel, "stride": stride,
            "padding": padding, "groups": groups}


def _conv2d_out(shape: Shape, p: Params) -> Shape:
    k, s, pad = p["kernel_size"], p["stride"], p["padding"]
    return (shape[0], p["out_channels"], conv_out(shape[2], k, s, pad), conv_out(shape[3], k, s, pad))


def _draw_linear(rng: random.Random, shape: Shape, sizes: Sizes) -> Params:
    return {"in_features": shape[-1], "out_features": sizes.pick(rng, "features"), "bias": rng.random() < 0.8}


def _draw_bmm(rng: random.Random, shape: Shape, sizes: Sizes) -> Params:
    return {"n": sizes.pick(rng, "features")}


def _draw_maxpool2d(rng: random.Random, shape: Shape, sizes: Sizes) -> Params | None:
    kernel = rng.choice((2, 3))
    stride = rng.choice((kernel, 2, 1))
    if conv_out(shape[2], kernel, stride) < 1 or conv_out(shape[3], kernel, stride) < 1:
        return None
    return {"kernel_size": kernel, "stride": stride}


def _pool2d_out(shape: Shape, p: Params) -> Shape:
    k, s = p["kernel_size"], p["stride"]
    return (shape[0], shape[1], conv_out(shape[2], k, s), conv_out(shape[3], k, s))


def _draw_bias(rng: random.Random, shape: Shape, sizes: Sizes) -> Params | None:
    if len(shape) < 2:
        return None
    return {"bias_shape": (shape[1],) + (1,) * (len(shape) - 2)}


def _draw_mha(rng: random.Random, shape: Shape, sizes: Sizes) -> Params | None:
    heads = [h for h in sizes.heads if shape[2] % h == 0]
    if not heads:
        return None
    return {"embed_dim": shape[2], "num_heads": rng.choice(heads)}


def _draw_mse(rng: random.Random, shape: Shape, sizes: Sizes) -> Params:
    return {"reduction": rng.choice(("mean", "sum"))}


SPECS: list[OpSpec] = [
    # gemm
    OpSpec(name="nn.Linear", category="gemm", phrase="applies a linear projection", ranks=(2, 3),
           draw=_draw_linear, out_shape=lambda s, p: s[:-1] + (p["out_features"],),
           module="nn.Linear({in_features}, {out_features}, bias={bias})", args=("in_features", "out_features"),
           attr="linear"),
    OpSpec(name="torch.bmm", category="gemm", phrase="multiplies by a second batch of matrices", ranks=(3,),
           draw=_draw_bmm, out_shape=lambda s, p: (s[0], s[1], p["n"]), call="torch.bmm({x}, {w})",
           extras=lambda s, p: [Extra("w", (s[0], s[2], p["n"]), dim_names=(None, None, "n"))]),
    # conv
    OpSpec(name="nn.Conv2d", category="conv", phrase="applies a 2D convolution", ranks=(4,), draw=_draw_conv2d,
           out_shape=_conv2d_out, attr="conv",
           module="nn.Conv2d({in_channels}, {out_channels}, {kernel_size}, stride={stride}, padding={padding}, groups={groups})",
           args=("in_channels", "out_channels", "kernel_size")),
    # norm
    OpSpec(name="nn.BatchNorm2d", category="norm", phrase="applies batch normalization", ranks=(4,),
           draw=lambda r, s, z: {"num_features": s[1]}, module="nn.BatchNorm2d({num_features})",
           args=("num_features",), attr="bn"),
    OpSpec(name="nn.LayerNorm", category="norm", phrase="applies layer normalization over the last dimension",
           ranks=(2, 3, 4), draw=lambda r, s, z: {"normalized_shape": s[-1]},
           module="nn.LayerNorm({normalized_shape})", args=("normalized_shape",), attr="norm"),
    # activation
    pointwise_module("nn.ReLU", "applies ReLU", "nn.ReLU()", attr="relu"),
    pointwise("torch.tanh", "applies tanh", "torch.tanh({x})", category="activation"),
    pointwise("F.gelu", "applies GELU", "F.gelu({x})", category="activation"),
    OpSpec(name="nn.Softmax", category="activation", phrase="applies softmax along a dimension", ranks=(2, 3, 4, 5),
           draw=lambda r, s, z: {"dim": pick_dim(r, s)}, module="nn.Softmax(dim={dim})", attr="softmax"),
    # elementwise
    OpSpec(name="torch.add", category="elementwise", phrase="adds a learned bias", ranks=(2, 3, 4, 5),
           draw=_draw_bias, module="nn.Parameter(torch.randn({bias_shape}))", call="torch.add({x}, {self})",
           args=("bias_shape",), attr="bias"),
    pointwise("torch.clamp", "clamps values to a range", "torch.clamp({x}, min={min}, max={max})",
              draw=lambda r, s, z: {"min": -r.choice((0.5, 1.0)), "max": r.choice((0.5, 1.0, 2.0))}),
    # pooling
    OpSpec(name="nn.MaxPool2d", category="pooling", phrase="applies 2D max pooling", ranks=(4,),
           draw=_draw_maxpool2d, out_shape=_pool2d_out, module="nn.MaxPool2d(kernel_size={kernel_size}, stride={stride})",
           args=("kernel_size",), attr="pool"),
    # reduction
    reduce_dim("torch.sum", "sums along a dimension", "torch.sum({x}, dim={dim}, keepdim={keepdim})"),
    pointwise("torch.cumsum", "computes a cumulative sum along a dimension", "torch.cumsum({x}, dim={dim})",
              category="reduction", ranks=(2, 3, 4, 5), draw=lambda r, s, z: {"dim": pick_dim(r, s)}, args=("dim",)),
    # shape
    OpSpec(name="torch.flatten", category="shape", phrase="flattens all but the batch dimension", ranks=(3, 4, 5),
           out_shape=lambda s, p: (s[0], int(__import__("math").prod(s[1:]))), call="torch.flatten({x}, 1)"),
    # attention
    OpSpec(name="nn.MultiheadAttention", category="attention", phrase="applies multi-head self-attention",
           ranks=(3,), draw=_draw_mha, make_input=sequence_input, attr="attn",
           module="nn.MultiheadAttention({embed_dim}, {num_heads}, dropout=0.0, batch_first=True)",
           call="{self}({x}, {x}, {x}, need_weights=False)[0]", args=("embed_dim", "num_heads")),
    # recurrent
    OpSpec(name="nn.GRU", category="recurrent", phrase="runs a GRU over the sequence", ranks=(3,),
           draw=lambda r, s, z: {"input_size": s[2], "hidden_size": z.pick(r, "features")},
           out_shape=lambda s, p: (s[0], s[1], p["hidden_size"]), make_input=sequence_input, attr="gru",
           module="nn.GRU({input_size}, {hidden_size}, batch_first=True)", call="{self}({x})[0]",
           args=("input_size", "hidden_size")),
    # loss
    OpSpec(name="nn.MSELoss", category="loss", phrase="computes the mean squared error against a target",
           draw=_draw_mse, out_shape=lambda s, p: (), module="nn.MSELoss(reduction={reduction})",
           call="{self}({x}, {target})", extras=lambda s, p: [Extra("target", s)], last_only=True,
           attr="loss_fn"),
]
