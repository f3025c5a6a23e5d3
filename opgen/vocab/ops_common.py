"""Shape arithmetic and parameter draws shared by the built-in torch operator files."""

from __future__ import annotations

import math
import random

from opgen.vocab.spec import Params, Shape, Sizes


def conv_out(size: int, kernel: int, stride: int = 1, padding: int = 0, dilation: int = 1) -> int:
    """Output length of a convolution or pooling window along one dimension (floor mode)."""
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def conv_transpose_out(size: int, kernel: int, stride: int = 1, padding: int = 0, output_padding: int = 0,
                       dilation: int = 1) -> int:
    return (size - 1) * stride - 2 * padding + dilation * (kernel - 1) + output_padding + 1


def channel_param_shape(shape: Shape) -> tuple[int, ...]:
    """A per-channel parameter shape that broadcasts against `shape`: (C,) for rank 2, (C, 1, ...) above."""
    return (shape[1],) + (1,) * (len(shape) - 2)


def non_batch_dims(shape: Shape) -> list[int]:
    return list(range(1, len(shape)))


def divisors_in(value: int, options: tuple[int, ...]) -> list[int]:
    return [o for o in options if value % o == 0]


def pick_reduce_dims(rng: random.Random, shape: Shape, allow_multi: bool = True) -> int | tuple[int, ...]:
    """One non-batch dim, or (for rank >= 4, sometimes) all trailing spatial dims as a tuple."""
    if allow_multi and len(shape) >= 4 and rng.random() < 0.3:
        return tuple(range(2, len(shape)))
    return rng.randrange(1, len(shape))


def reduced_shape(shape: Shape, dim, keepdim: bool) -> Shape:
    dims = set(dim) if isinstance(dim, (list, tuple)) else {dim}
    if keepdim:
        return tuple(1 if i in dims else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in dims)


def scale_for(fan_in: int) -> float:
    """Initial scale of a hand-made weight so outputs keep roughly unit variance."""
    return round(1.0 / math.sqrt(max(1, fan_in)), 4)


def spatial_ok(out_sizes, minimum: int = 1) -> bool:
    return all(s >= minimum for s in out_sizes)


def pick_channels(rng: random.Random, sizes: Sizes) -> int:
    return sizes.pick(rng, "channels")


def no_params(rng: random.Random, shape: Shape, sizes: Sizes) -> Params:
    return {}
