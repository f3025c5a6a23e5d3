"""Pooling operators: max, average, adaptive and power-average pooling in 1d/2d/3d."""

from __future__ import annotations

import random

from opgen.vocab.ops_common import conv_out
from opgen.vocab.spec import OpSpec, Params, Shape, Sizes


def _draw_window(with_padding: bool):
    def draw(rng: random.Random, shape: Shape, sizes: Sizes) -> Params | None:
        kernel = rng.choice((2, 3))
        stride = rng.choice((kernel, 2, 1))
        padding = rng.choice((0, kernel // 2)) if with_padding else 0
        if any(conv_out(n, kernel, stride, padding) < 1 for n in shape[2:]):
            return None
        return {"kernel_size": kernel, "stride": stride, "padding": padding}

    return draw


def _window_out(shape: Shape, p: Params) -> Shape:
    k, s, pad = p["kernel_size"], p["stride"], p["padding"]
    return (shape[0], shape[1], *(conv_out(n, k, s, pad) for n in shape[2:]))


def _draw_adaptive(rng: random.Random, shape: Shape, sizes: Sizes) -> Params:
    smallest = min(shape[2:])
    options = sorted({1, 2, 4, max(1, smallest // 2)} & set(range(1, smallest + 1)))
    return {"output_size": rng.choice(options)}


def _adaptive_out(shape: Shape, p: Params) -> Shape:
    return (shape[0], shape[1], *(p["output_size"],) * (len(shape) - 2))


def _draw_lp(rng: random.Random, shape: Shape, sizes: Sizes) -> Params | None:
    params = _draw_window(False)(rng, shape, sizes)
    if params is not None:
        params["norm_type"] = 2.0
    return params


def _max_pool(dims: int) -> OpSpec:
    return OpSpec(name=f"nn.MaxPool{dims}d", category="pooling", phrase=f"applies {dims}D max pooling",
                  ranks=(dims + 2,), draw=_draw_window(True), out_shape=_window_out, attr="max_pool",
                  module=f"nn.MaxPool{dims}d(kernel_size={{kernel_size}}, stride={{stride}}, padding={{padding}})",
                  args=("kernel_size",))


def _avg_pool(dims: int) -> OpSpec:
    return OpSpec(name=f"nn.AvgPool{dims}d", category="pooling", phrase=f"applies {dims}D average pooling",
                  ranks=(dims + 2,), draw=_draw_window(True), out_shape=_window_out, attr="avg_pool",
                  module=f"nn.AvgPool{dims}d(kernel_size={{kernel_size}}, stride={{stride}}, padding={{padding}})",
                  args=("kernel_size",))


def _adaptive(kind: str, dims: int) -> OpSpec:
    word = "average" if kind == "Avg" else "max"
    return OpSpec(name=f"nn.Adaptive{kind}Pool{dims}d", category="pooling",
                  phrase=f"applies {dims}D adaptive {word} pooling", ranks=(dims + 2,), draw=_draw_adaptive,
                  out_shape=_adaptive_out, attr=f"adaptive_{kind.lower()}_pool",
                  module=f"nn.Adaptive{kind}Pool{dims}d({{output_size}})", args=("output_size",))


def _lp_pool(dims: int) -> OpSpec:
    return OpSpec(name=f"nn.LPPool{dims}d", category="pooling", phrase=f"applies {dims}D power-average pooling",
                  ranks=(dims + 2,), draw=_draw_lp, out_shape=_window_out, attr="lp_pool",
                  module=f"nn.LPPool{dims}d({{norm_type}}, {{kernel_size}}, stride={{stride}})", args=("kernel_size",))


def _functional(name: str, dims: int, phrase: str) -> OpSpec:
    return OpSpec(name=name, category="pooling", phrase=phrase, ranks=(dims + 2,), draw=_draw_window(True),
                  out_shape=_window_out,
                  call=f"{name}({{x}}, kernel_size={{kernel_size}}, stride={{stride}}, padding={{padding}})")


SPECS: list[OpSpec] = [
    *(_max_pool(d) for d in (1, 2, 3)),
    *(_avg_pool(d) for d in (1, 2, 3)),
    *(_adaptive(kind, d) for kind in ("Avg", "Max") for d in (1, 2, 3)),
    _lp_pool(1),
    _lp_pool(2),
    _functional("F.max_pool1d", 1, "applies 1D max pooling"),
    _functional("F.max_pool2d", 2, "applies 2D max pooling"),
    _functional("F.avg_pool1d", 1, "applies 1D average pooling"),
    _functional("F.avg_pool2d", 2, "applies 2D average pooling"),
    OpSpec(name="F.adaptive_avg_pool2d", category="pooling", phrase="applies 2D adaptive average pooling",
           ranks=(4,), draw=_draw_adaptive, out_shape=_adaptive_out, call="F.adaptive_avg_pool2d({x}, {output_size})"),
    OpSpec(name="F.adaptive_max_pool1d", category="pooling", phrase="applies 1D adaptive max pooling",
           ranks=(3,), draw=_draw_adaptive, out_shape=_adaptive_out, call="F.adaptive_max_pool1d({x}, {output_size})"),
]
