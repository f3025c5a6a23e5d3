"""Convolution operators: 1d/2d/3d, transposed, grouped and depthwise, module and functional spellings."""

from __future__ import annotations

import random

from opgen.vocab.ops_common import conv_out, conv_transpose_out, scale_for
from opgen.vocab.spec import OpSpec, Params, Shape, Sizes

_KERNELS = {1: (1, 3, 5, 7), 2: (1, 3, 5), 3: (1, 3)}


def _groups(rng: random.Random, in_channels: int, out_channels: int) -> tuple[int, int]:
    """(groups, out_channels): mostly dense, sometimes depthwise or two groups."""
    roll = rng.random()
    if roll < 0.15:
        return in_channels, in_channels
    if roll < 0.3 and in_channels % 2 == 0 and out_channels % 2 == 0:
        return 2, out_channels
    return 1, out_channels


def _draw_conv(dims: int, transposed: bool):
    def draw(rng: random.Random, shape: Shape, sizes: Sizes) -> Params | None:
        in_channels = shape[1]
        kernel = rng.choice(_KERNELS[dims])
        stride = rng.choice((1, 1, 2))
        padding = rng.choice((0, kernel // 2))
        dilation = 2 if dims < 3 and kernel > 1 and rng.random() < 0.15 else 1
        groups, out_channels = _groups(rng, in_channels, sizes.pick(rng, "channels"))
        params: Params = {"in_channels": in_channels, "out_channels": out_channels, "kernel_size": kernel,
                          "stride": stride, "padding": padding, "dilation": dilation, "groups": groups,
                          "bias": rng.random() < 0.8}
        if transposed:
            params["output_padding"] = rng.choice((0, 1)) if stride > 1 else 0
        if any(s < 1 for s in _conv_spatial(shape, params, transposed)):
            return None
        return params

    return draw


def _conv_spatial(shape: Shape, p: Params, transposed: bool) -> tuple[int, ...]:
    k, s, pad, d = p["kernel_size"], p["stride"], p["padding"], p["dilation"]
    if transposed:
        return tuple(conv_transpose_out(n, k, s, pad, p["output_padding"], d) for n in shape[2:])
    return tuple(conv_out(n, k, s, pad, d) for n in shape[2:])


def _conv_out_shape(transposed: bool):
    def out(shape: Shape, p: Params) -> Shape:
        return (shape[0], p["out_channels"], *_conv_spatial(shape, p, transposed))

    return out


def _conv_module(dims: int) -> OpSpec:
    return OpSpec(
        name=f"nn.Conv{dims}d", category="conv", phrase=f"applies a {dims}D convolution", ranks=(dims + 2,),
        draw=_draw_conv(dims, False), out_shape=_conv_out_shape(False), attr="conv",
        module=f"nn.Conv{dims}d({{in_channels}}, {{out_channels}}, {{kernel_size}}, stride={{stride}}, "
               "padding={padding}, dilation={dilation}, groups={groups}, bias={bias})",
        args=("in_channels", "out_channels", "kernel_size"))


def _conv_transpose_module(dims: int) -> OpSpec:
    return OpSpec(
        name=f"nn.ConvTranspose{dims}d", category="conv", phrase=f"applies a {dims}D transposed convolution",
        ranks=(dims + 2,), draw=_draw_conv(dims, True), out_shape=_conv_out_shape(True), attr="conv_transpose",
        module=f"nn.ConvTranspose{dims}d({{in_channels}}, {{out_channels}}, {{kernel_size}}, stride={{stride}}, "
               "padding={padding}, output_padding={output_padding}, groups={groups}, bias={bias}, "
               "dilation={dilation})",
        args=("in_channels", "out_channels", "kernel_size"))


def _draw_functional_conv(dims: int):
    base = _draw_conv(dims, False)

    def draw(rng: random.Random, shape: Shape, sizes: Sizes) -> Params | None:
        params = base(rng, shape, sizes)
        if params is None:
            return None
        params["weight_shape"] = (params["out_channels"], params["in_channels"] // params["groups"],
                                  *(params["kernel_size"],) * dims)
        params["scale"] = scale_for(params["in_channels"] // params["groups"] * params["kernel_size"] ** dims)
        return params

    return draw


def _conv_functional(dims: int) -> OpSpec:
    return OpSpec(
        name=f"F.conv{dims}d", category="conv", phrase=f"applies a {dims}D convolution with a learned filter bank",
        ranks=(dims + 2,), draw=_draw_functional_conv(dims), out_shape=_conv_out_shape(False), attr="weight",
        module="nn.Parameter(torch.randn({weight_shape}) * {scale})",
        call=f"F.conv{dims}d({{x}}, {{self}}, stride={{stride}}, padding={{padding}}, dilation={{dilation}}, "
             "groups={groups})")


SPECS: list[OpSpec] = [
    *(_conv_module(d) for d in (1, 2, 3)),
    *(_conv_transpose_module(d) for d in (1, 2, 3)),
    _conv_functional(1),
    _conv_functional(2),
]
