"""Activation operators: nn modules and their F / torch functional spellings."""

from __future__ import annotations

import random

from opgen.vocab.builders import pointwise, pointwise_module
from opgen.vocab.spec import ALL_RANKS, OpSpec, Params, Shape, Sizes

DimRanks = (2, 3, 4, 5)


# A softmax over L values of unit scale averages 1/L, so past about 128 values nearly every output is below the
# consumer's atol of 1e-2 and all zeros pass its check: on 77% of the values at L = 128, 93% at 256, 99.8% at 1,024
# (scripts/analysis/sampler_limits.py). Log-softmax has no limit.
SOFTMAX_MAX_ROW = 128


def _draw_log_softmax_dim(rng: random.Random, shape: Shape, sizes: Sizes) -> Params | None:
    dims = [d for d in range(1, len(shape)) if shape[d] > 1]
    return {"dim": rng.choice(dims)} if dims else None


def _draw_softmax_dim(rng: random.Random, shape: Shape, sizes: Sizes) -> Params | None:
    dims = [d for d in range(1, len(shape)) if 1 < shape[d] <= SOFTMAX_MAX_ROW]
    return {"dim": rng.choice(dims)} if dims else None


def _short_rows(shape: Shape, params: Params) -> bool:
    return shape[params["dim"]] <= SOFTMAX_MAX_ROW


def _draw_glu_dim(rng: random.Random, shape: Shape, sizes: Sizes) -> Params | None:
    dims = [d for d in range(1, len(shape)) if shape[d] % 2 == 0]
    return {"dim": rng.choice(dims)} if dims else None


def _glu_out(shape: Shape, p: Params) -> Shape:
    return tuple(d // 2 if i == p["dim"] else d for i, d in enumerate(shape))


def _choice(**options):
    """A draw that picks each named parameter from its tuple of options."""

    def draw(rng: random.Random, shape: Shape, sizes: Sizes) -> Params:
        return {name: rng.choice(values) for name, values in options.items()}

    return draw


_LEAKY = _choice(negative_slope=(0.01, 0.1, 0.2))
_ALPHA = _choice(alpha=(0.5, 1.0, 1.5))
_SOFTPLUS = _choice(beta=(1.0, 2.0), threshold=(20.0, 10.0))
_HARDTANH = _choice(min_val=(-1.0, -2.0, -0.5), max_val=(1.0, 2.0, 0.5))
_LAMBD = _choice(lambd=(0.5, 0.25, 1.0))
_THRESHOLD = _choice(threshold=(0.0, 0.1, 0.5), value=(0.0, -1.0, 0.5))
_GELU = _choice(approximate=("none", "tanh"))


def _draw_prelu(rng: random.Random, shape: Shape, sizes: Sizes) -> Params:
    per_channel = len(shape) >= 2 and rng.random() < 0.6
    return {"num_parameters": shape[1] if per_channel else 1, "init": rng.choice((0.25, 0.1))}


def _draw_f_prelu(rng: random.Random, shape: Shape, sizes: Sizes) -> Params:
    return {"num_parameters": shape[1] if len(shape) >= 2 else 1}


def _dim_draw(name: str):
    return _draw_log_softmax_dim if "log" in name.lower() else _draw_softmax_dim


def _dim_accepts(name: str):
    return None if "log" in name.lower() else _short_rows


def _dim_module(name: str, phrase: str, attr: str) -> OpSpec:
    return OpSpec(name=f"nn.{name}", category="activation", phrase=phrase, ranks=DimRanks, draw=_dim_draw(name),
                  accepts=_dim_accepts(name),
                  module=f"nn.{name}(dim={{dim}})", attr=attr)


def _dim_function(name: str, phrase: str) -> OpSpec:
    return OpSpec(name=name, category="activation", phrase=phrase, ranks=DimRanks, draw=_dim_draw(name),
                  accepts=_dim_accepts(name), call=f"{name}({{x}}, dim={{dim}})")


MODULES: list[OpSpec] = [
    pointwise_module("nn.ReLU", "applies ReLU", "nn.ReLU()", attr="relu"),
    pointwise_module("nn.ReLU6", "applies ReLU6", "nn.ReLU6()", attr="relu6"),
    pointwise_module("nn.LeakyReLU", "applies leaky ReLU", "nn.LeakyReLU(negative_slope={negative_slope})",
                     draw=_LEAKY, attr="leaky_relu"),
    pointwise_module("nn.ELU", "applies ELU", "nn.ELU(alpha={alpha})", draw=_ALPHA, attr="elu"),
    pointwise_module("nn.SELU", "applies SELU", "nn.SELU()", attr="selu"),
    pointwise_module("nn.CELU", "applies CELU", "nn.CELU(alpha={alpha})", draw=_ALPHA, attr="celu"),
    pointwise_module("nn.GELU", "applies GELU", "nn.GELU(approximate={approximate})", draw=_GELU, attr="gelu"),
    pointwise_module("nn.SiLU", "applies SiLU (swish)", "nn.SiLU()", attr="silu"),
    pointwise_module("nn.Mish", "applies Mish", "nn.Mish()", attr="mish"),
    pointwise_module("nn.Softplus", "applies softplus", "nn.Softplus(beta={beta}, threshold={threshold})",
                     draw=_SOFTPLUS, attr="softplus"),
    pointwise_module("nn.Softsign", "applies softsign", "nn.Softsign()", attr="softsign"),
    pointwise_module("nn.Hardtanh", "applies hardtanh", "nn.Hardtanh(min_val={min_val}, max_val={max_val})",
                     draw=_HARDTANH, attr="hardtanh"),
    pointwise_module("nn.Hardswish", "applies hardswish", "nn.Hardswish()", attr="hardswish"),
    pointwise_module("nn.Hardsigmoid", "applies hardsigmoid", "nn.Hardsigmoid()", attr="hardsigmoid"),
    pointwise_module("nn.Hardshrink", "applies hard shrinkage", "nn.Hardshrink(lambd={lambd})", draw=_LAMBD,
                     attr="hardshrink"),
    pointwise_module("nn.Softshrink", "applies soft shrinkage", "nn.Softshrink(lambd={lambd})", draw=_LAMBD,
                     attr="softshrink"),
    pointwise_module("nn.Tanhshrink", "applies tanhshrink", "nn.Tanhshrink()", attr="tanhshrink"),
    pointwise_module("nn.Sigmoid", "applies sigmoid", "nn.Sigmoid()", attr="sigmoid"),
    pointwise_module("nn.LogSigmoid", "applies log-sigmoid", "nn.LogSigmoid()", attr="log_sigmoid"),
    pointwise_module("nn.Tanh", "applies tanh", "nn.Tanh()", attr="tanh"),
    pointwise_module("nn.Threshold", "thresholds values", "nn.Threshold({threshold}, {value})", draw=_THRESHOLD,
                     attr="threshold"),
    OpSpec(name="nn.PReLU", category="activation", phrase="applies PReLU with a learned slope", ranks=ALL_RANKS,
           draw=_draw_prelu, module="nn.PReLU(num_parameters={num_parameters}, init={init})", attr="prelu"),
    OpSpec(name="nn.GLU", category="activation", phrase="applies a gated linear unit along a dimension",
           ranks=DimRanks, draw=_draw_glu_dim, out_shape=_glu_out, module="nn.GLU(dim={dim})", attr="glu"),
    _dim_module("Softmax", "applies softmax along a dimension", "softmax"),
    _dim_module("LogSoftmax", "applies log-softmax along a dimension", "log_softmax"),
    _dim_module("Softmin", "applies softmin along a dimension", "softmin"),
    OpSpec(name="nn.Softmax2d", category="activation", phrase="applies softmax over channels at each location",
           ranks=(4,), draw=lambda r, s, z: {} if 1 < s[1] <= SOFTMAX_MAX_ROW else None,
           accepts=lambda s, p: s[1] <= SOFTMAX_MAX_ROW, module="nn.Softmax2d()", attr="softmax2d",
           family="softmax"),
]

FUNCTIONS: list[OpSpec] = [
    pointwise("torch.relu", "applies ReLU", "torch.relu({x})", category="activation"),
    pointwise("F.relu", "applies ReLU", "F.relu({x})", category="activation"),
    pointwise("F.relu6", "applies ReLU6", "F.relu6({x})", category="activation"),
    pointwise("F.leaky_relu", "applies leaky ReLU", "F.leaky_relu({x}, negative_slope={negative_slope})",
              category="activation", draw=_LEAKY),
    pointwise("F.elu", "applies ELU", "F.elu({x}, alpha={alpha})", category="activation", draw=_ALPHA),
    pointwise("F.selu", "applies SELU", "F.selu({x})", category="activation"),
    pointwise("F.celu", "applies CELU", "F.celu({x}, alpha={alpha})", category="activation", draw=_ALPHA),
    pointwise("F.gelu", "applies GELU", "F.gelu({x}, approximate={approximate})", category="activation",
              draw=_GELU),
    pointwise("F.silu", "applies SiLU (swish)", "F.silu({x})", category="activation"),
    pointwise("F.mish", "applies Mish", "F.mish({x})", category="activation"),
    pointwise("F.softplus", "applies softplus", "F.softplus({x}, beta={beta}, threshold={threshold})",
              category="activation", draw=_SOFTPLUS),
    pointwise("F.softsign", "applies softsign", "F.softsign({x})", category="activation"),
    pointwise("F.hardtanh", "applies hardtanh", "F.hardtanh({x}, min_val={min_val}, max_val={max_val})",
              category="activation", draw=_HARDTANH),
    pointwise("F.hardswish", "applies hardswish", "F.hardswish({x})", category="activation"),
    pointwise("F.hardsigmoid", "applies hardsigmoid", "F.hardsigmoid({x})", category="activation"),
    pointwise("F.hardshrink", "applies hard shrinkage", "F.hardshrink({x}, lambd={lambd})", category="activation",
              draw=_LAMBD),
    pointwise("F.softshrink", "applies soft shrinkage", "F.softshrink({x}, lambd={lambd})", category="activation",
              draw=_LAMBD),
    pointwise("F.tanhshrink", "applies tanhshrink", "F.tanhshrink({x})", category="activation"),
    pointwise("torch.sigmoid", "applies sigmoid", "torch.sigmoid({x})", category="activation"),
    pointwise("F.logsigmoid", "applies log-sigmoid", "F.logsigmoid({x})", category="activation",
              family="log_sigmoid"),
    pointwise("torch.tanh", "applies tanh", "torch.tanh({x})", category="activation"),
    pointwise("F.threshold", "thresholds values", "F.threshold({x}, {threshold}, {value})", category="activation",
              draw=_THRESHOLD),
    OpSpec(name="F.prelu", category="activation", phrase="applies PReLU with a learned per-channel slope",
           ranks=ALL_RANKS, draw=_draw_f_prelu, module="nn.Parameter(torch.full(({num_parameters},), 0.25))",
           call="F.prelu({x}, {self})", attr="slope"),
    OpSpec(name="F.glu", category="activation", phrase="applies a gated linear unit along a dimension",
           ranks=DimRanks, draw=_draw_glu_dim, out_shape=_glu_out, call="F.glu({x}, dim={dim})"),
    _dim_function("F.softmax", "applies softmax along a dimension"),
    _dim_function("F.log_softmax", "applies log-softmax along a dimension"),
    _dim_function("F.softmin", "applies softmin along a dimension"),
    _dim_function("torch.softmax", "applies softmax along a dimension"),
    _dim_function("torch.log_softmax", "applies log-softmax along a dimension"),
]

SPECS: list[OpSpec] = [*MODULES, *FUNCTIONS]
