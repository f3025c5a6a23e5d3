"""Tensor comparisons the execute checks share: bit equality, allclose at the environment's tolerance, diffs.

Comparisons run in float64 a chunk at a time: a whole GPU-sized output converted at once, with allclose's
temporaries, held about ten times the output's float32 size, and a dozen workers share the GPU's memory
(docs/benchmarks.md, session 11). Every result is the one a whole-tensor comparison gives.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

CHUNK_ELEMENTS = 1 << 24  # a float64 chunk is 128 MB


def flat_values(t: torch.Tensor) -> torch.Tensor:
    """The tensor's values as one flat tensor in its own dtype (complex as pairs of reals); a view when it can."""
    t = t.detach()
    return (torch.view_as_real(t) if t.is_complex() else t).reshape(-1)


def float64_chunks(t: torch.Tensor) -> Iterator[torch.Tensor]:
    """The tensor's flat values in float64, CHUNK_ELEMENTS at a time."""
    values = flat_values(t)
    for start in range(0, values.numel(), CHUNK_ELEMENTS):
        yield values[start:start + CHUNK_ELEMENTS].double()


def _paired_chunks(x: torch.Tensor, y: torch.Tensor) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    return zip(float64_chunks(x), float64_chunks(y))


def shapes(tensors: list[torch.Tensor]) -> list[list[int]]:
    return [list(t.shape) for t in tensors]


def bit_equal(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return len(a) == len(b) and all(x.shape == y.shape and x.device == y.device and torch.equal(x, y) for x, y in zip(a, b))


def _comparable(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return (len(a) == len(b) and shapes(a) == shapes(b)
            and all(flat_values(x).numel() == flat_values(y).numel() for x, y in zip(a, b)))


def all_close(a: list[torch.Tensor], b: list[torch.Tensor], atol: float, rtol: float) -> bool:
    if not _comparable(a, b):
        return False
    return all(torch.allclose(x, y, atol=atol, rtol=rtol, equal_nan=True)
               for xs, ys in zip(a, b) for x, y in _paired_chunks(xs, ys))


def max_abs_diff(a: list[torch.Tensor], b: list[torch.Tensor]) -> float | None:
    if not _comparable(a, b):
        return None
    diffs = [(x - y).abs().nan_to_num(nan=float("inf")).max().item()
             for xs, ys in zip(a, b) for x, y in _paired_chunks(xs, ys)]
    return max(diffs, default=0.0)


def abs_max(tensors: list[torch.Tensor]) -> float:
    """The largest absolute value over the tensors' values (complex as pairs of reals); NaN if one is NaN."""
    maxima = [chunk.abs().max().item() for t in tensors for chunk in float64_chunks(t)]
    return float("nan") if any(m != m for m in maxima) else max(maxima, default=0.0)


def values_digest(values: list) -> tuple:
    """A fingerprint of a list of inputs: each tensor's dtype, shape and float64 sum (exact bits as hex), each
    other value's repr. Two draws from the same seed give the same fingerprint."""
    return tuple((str(v.dtype), tuple(v.shape), sum(c.sum().item() for c in float64_chunks(v)).hex())
                 if isinstance(v, torch.Tensor) else repr(v) for v in values)
