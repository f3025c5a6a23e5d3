"""Elementwise math: unary functions safe on any real input, learned scale/bias, and binary ops with a second input."""

from __future__ import annotations

import random

from opgen.vocab.builders import pointwise
from opgen.vocab.ops_common import channel_param_shape
from opgen.vocab.spec import ALL_RANKS, Extra, OpSpec, Params, Shape, Sizes

_PARAM_RANKS = (2, 3, 4, 5)


def _draw_param_shape(rng: random.Random, shape: Shape, sizes: Sizes) -> Params:
    return {"param_shape": channel_param_shape(shape)}


def _same_extra(name: str, dtype: str = "float"):
    def extras(shape: Shape, params: Params) -> list[Extra]:
        return [Extra(name, tuple(shape), dtype=dtype)]

    return extras


def _learned(name: str, phrase: str, init: str, call: str, attr: str) -> OpSpec:
    return OpSpec(name=name, category="elementwise", phrase=phrase, ranks=_PARAM_RANKS, draw=_draw_param_shape,
                  module=f"nn.Parameter({init})", call=call, args=("param_shape",), attr=attr)


def _binary(name: str, phrase: str, call: str, *, draw=None, other: str = "y", dtype: str = "float",
            family: str = "") -> OpSpec:
    extra = {"draw": draw} if draw else {}
    return OpSpec(name=name, category="elementwise", phrase=phrase, ranks=ALL_RANKS, call=call,
                  extras=_same_extra(other, dtype), family=family, **extra)


def _pick(**options):
    def draw(rng: random.Random, shape: Shape, sizes: Sizes) -> Params:
        return {name: rng.choice(values) for name, values in options.items()}

    return draw


UNARY: list[OpSpec] = [
    pointwise("torch.sin", "applies sine", "torch.sin({x})"),
    pointwise("torch.cos", "applies cosine", "torch.cos({x})"),
    pointwise("torch.atan", "applies arctangent", "torch.atan({x})"),
    pointwise("torch.erf", "applies the error function", "torch.erf({x})"),
    pointwise("torch.erfc", "applies the complementary error function", "torch.erfc({x})"),
    pointwise("torch.abs", "takes absolute values", "torch.abs({x})"),
    pointwise("torch.neg", "negates values", "torch.neg({x})"),
    pointwise("torch.square", "squares values", "torch.square({x})"),
    pointwise("torch.sign", "takes the sign of values", "torch.sign({x})"),
    pointwise("torch.sinc", "applies the normalized sinc function", "torch.sinc({x})"),
    pointwise("torch.exp", "exponentiates values", "torch.exp({x})"),
    pointwise("torch.expm1", "computes exp(x) - 1", "torch.expm1({x})"),
    pointwise("torch.clamp", "clamps values to a range", "torch.clamp({x}, min={min}, max={max})",
              draw=_pick(min=(-0.5, -1.0), max=(0.5, 1.0, 2.0))),
    pointwise("torch.clamp_min", "clamps values from below", "torch.clamp_min({x}, {min})",
              draw=_pick(min=(-0.5, 0.0, 0.1)), family="clamp"),
    pointwise("torch.pow", "raises values to an integer power", "torch.pow({x}, {exponent})",
              draw=_pick(exponent=(2, 3))),
    pointwise("torch.fmod", "takes the remainder of division by a constant (fmod)", "torch.fmod({x}, {divisor})",
              draw=_pick(divisor=(0.5, 1.0, 1.5))),
    pointwise("torch.remainder", "takes the modulus by a constant", "torch.remainder({x}, {divisor})",
              draw=_pick(divisor=(0.5, 1.0, 2.0))),
]

LEARNED: list[OpSpec] = [
    _learned("torch.add", "adds a learned bias", "torch.randn({param_shape})", "torch.add({x}, {self})", "bias"),
    _learned("torch.sub", "subtracts a learned offset", "torch.randn({param_shape})", "torch.sub({x}, {self})",
             "offset"),
    _learned("torch.mul", "scales by a learned per-channel factor", "torch.randn({param_shape})",
             "torch.mul({x}, {self})", "scale"),
    _learned("torch.div", "divides by a learned positive per-channel factor", "torch.rand({param_shape}) + 0.5",
             "torch.div({x}, {self})", "divisor"),
    _learned("torch.addcmul", "adds the input scaled by a learned per-channel gain",
             "torch.randn({param_shape})", "torch.addcmul({x}, {x}, {self}, value=0.5)", "gain"),
]

BINARY: list[OpSpec] = [
    _binary("torch.maximum", "takes the elementwise maximum with a second input", "torch.maximum({x}, {y})"),
    _binary("torch.minimum", "takes the elementwise minimum with a second input", "torch.minimum({x}, {y})"),
    _binary("torch.fmax", "takes the elementwise fmax with a second input", "torch.fmax({x}, {y})",
            family="maximum"),
    _binary("torch.fmin", "takes the elementwise fmin with a second input", "torch.fmin({x}, {y})",
            family="minimum"),
    _binary("torch.lerp", "linearly interpolates towards a second input", "torch.lerp({x}, {y}, {weight})",
            draw=_pick(weight=(0.25, 0.5, 0.75))),
    _binary("torch.hypot", "computes the hypotenuse with a second input", "torch.hypot({x}, {y})"),
    _binary("torch.atan2", "computes the two-argument arctangent with a second input", "torch.atan2({x}, {y})"),
    _binary("torch.logaddexp", "computes log(exp(x) + exp(y)) with a second input", "torch.logaddexp({x}, {y})"),
    _binary("torch.copysign", "copies the sign of a second input", "torch.copysign({x}, {y})"),
    _binary("torch.where", "selects the input where it exceeds a threshold, else a second input",
            "torch.where({x} > {threshold}, {x}, {y})", draw=_pick(threshold=(0.0, 0.5, -0.5))),
]

SPECS: list[OpSpec] = [*UNARY, *LEARNED, *BINARY]
