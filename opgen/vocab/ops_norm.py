"""Normalization operators: batch, instance, group, layer, RMS and local response norms, F.normalize."""

from __future__ import annotations

import math
import random

from opgen.vocab.ops_common import divisors_in
from opgen.vocab.spec import OpSpec, Params, Shape, Sizes


def _draw_batch_norm(rng: random.Random, shape: Shape, sizes: Sizes) -> Params:
    return {"num_features": shape[1], "affine": rng.random() < 0.9}


def _draw_instance_norm(rng: random.Random, shape: Shape, sizes: Sizes) -> Params | None:
    if math.prod(shape[2:]) < 2:  # instance statistics need more than one spatial element
        return None
    return {"num_features": shape[1], "affine": rng.random() < 0.5}


def _draw_group_norm(rng: random.Random, shape: Shape, sizes: Sizes) -> Params | None:
    per_channel = math.prod(shape[2:])
    groups = [g for g in divisors_in(shape[1], (1, 2, 4, 8)) if shape[1] // g * per_channel >= 2]
    if not groups:
        return None
    return {"num_groups": rng.choice(groups), "num_channels": shape[1]}


def _draw_normalized(rng: random.Random, shape: Shape, sizes: Sizes) -> Params | None:
    if shape[-1] < 2:  # normalizing a single element gives a constant
        return None
    return {"normalized_shape": shape[-1]}


def _draw_normalize_dim(rng: random.Random, shape: Shape) -> Params | None:
    dims = [d for d in range(1, len(shape)) if shape[d] > 1]
    return {"dim": rng.choice(dims), "p": rng.choice((1.0, 2.0))} if dims else None


def _draw_lrn(rng: random.Random, shape: Shape, sizes: Sizes) -> Params:
    return {"size": rng.choice((2, 3, 5)), "alpha": rng.choice((1e-4, 1e-3)), "beta": 0.75, "k": rng.choice((1.0, 2.0))}


# Running statistics as a trained network has them, one per channel. At their defaults (mean 0, variance 1) an
# eval-mode batch norm is the identity within 1e-5, and a kernel that skips it passes the consumer's check: on one
# H200, 280 of 1,189 gpu-profile candidates had such a batch norm (docs/grader_proof.md).
BATCH_NORM_STATISTICS = ("{self}.running_mean.copy_(torch.linspace(-0.5, 0.5, {num_features}))",
                         "{self}.running_var.copy_(torch.linspace(0.5, 2.0, {num_features}))")


def _batch_norm(dims: int) -> OpSpec:
    ranks = (2, 3) if dims == 1 else (dims + 2,)
    return OpSpec(name=f"nn.BatchNorm{dims}d", category="norm", phrase="applies batch normalization", ranks=ranks,
                  draw=_draw_batch_norm, module=f"nn.BatchNorm{dims}d({{num_features}}, affine={{affine}})",
                  setup=BATCH_NORM_STATISTICS, args=("num_features",), attr="bn", family="batch_norm")


def _instance_norm(dims: int) -> OpSpec:
    return OpSpec(name=f"nn.InstanceNorm{dims}d", category="norm", phrase="applies instance normalization",
                  ranks=(dims + 2,), draw=_draw_instance_norm,
                  module=f"nn.InstanceNorm{dims}d({{num_features}}, affine={{affine}})", args=("num_features",),
                  attr="instance_norm", family="instance_norm")


SPECS: list[OpSpec] = [
    *(_batch_norm(d) for d in (1, 2, 3)),
    *(_instance_norm(d) for d in (1, 2, 3)),
    OpSpec(name="nn.GroupNorm", category="norm", phrase="applies group normalization", ranks=(2, 3, 4, 5),
           draw=_draw_group_norm, module="nn.GroupNorm({num_groups}, {num_channels})",
           args=("num_groups", "num_channels"), attr="group_norm"),
    OpSpec(name="nn.LayerNorm", category="norm", phrase="applies layer normalization over the last dimension",
           ranks=(2, 3, 4, 5), draw=_draw_normalized, module="nn.LayerNorm({normalized_shape})",
           args=("normalized_shape",), attr="norm"),
    OpSpec(name="nn.RMSNorm", category="norm", phrase="applies RMS normalization over the last dimension",
           ranks=(2, 3, 4, 5), draw=lambda r, s, z: {"normalized_shape": s[-1], "eps": r.choice((1e-5, 1e-6))}
           if s[-1] > 1 else None,
           module="nn.RMSNorm({normalized_shape}, eps={eps})", args=("normalized_shape",), attr="rms_norm"),
    OpSpec(name="nn.LocalResponseNorm", category="norm", phrase="applies local response normalization across channels",
           ranks=(3, 4, 5), draw=_draw_lrn, module="nn.LocalResponseNorm({size}, alpha={alpha}, beta={beta}, k={k})",
           args=("size",), attr="lrn"),
    OpSpec(name="F.normalize", category="norm", phrase="L2-normalizes along a dimension", ranks=(2, 3, 4, 5),
           draw=lambda r, s, z: _draw_normalize_dim(r, s),
           call="F.normalize({x}, p={p}, dim={dim})"),
    OpSpec(name="F.layer_norm", category="norm", phrase="applies layer normalization without affine parameters",
           ranks=(2, 3, 4, 5), draw=_draw_normalized, call="F.layer_norm({x}, ({normalized_shape},))",
           args=("normalized_shape",)),
    OpSpec(name="F.rms_norm", category="norm", phrase="applies RMS normalization without a learned scale",
           ranks=(2, 3, 4, 5), draw=_draw_normalized, call="F.rms_norm({x}, ({normalized_shape},))",
           args=("normalized_shape",)),
    OpSpec(name="F.group_norm", category="norm", phrase="applies group normalization without affine parameters",
           ranks=(3, 4, 5), draw=_draw_group_norm, call="F.group_norm({x}, {num_groups})"),
    OpSpec(name="F.instance_norm", category="norm", phrase="applies instance normalization without affine parameters",
           ranks=(3, 4, 5), draw=_draw_instance_norm, call="F.instance_norm({x})"),
    OpSpec(name="F.local_response_norm", category="norm", phrase="applies local response normalization",
           ranks=(3, 4, 5), draw=_draw_lrn, call="F.local_response_norm({x}, {size}, alpha={alpha}, beta={beta}, k={k})"),
]
