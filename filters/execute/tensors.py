"""Tensor comparisons the execute checks share: bit equality, allclose at the environment's tolerance, diffs."""

from __future__ import annotations

import torch


def as_float64(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    out = []
    for t in tensors:  # kept on their device: copying GPU-sized outputs to the host is the slow part
        t = t.detach()
        out.append(torch.view_as_real(t).double() if t.is_complex() else t.double())
    return out


def shapes(tensors: list[torch.Tensor]) -> list[list[int]]:
    return [list(t.shape) for t in tensors]


def bit_equal(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return len(a) == len(b) and all(x.shape == y.shape and x.device == y.device and torch.equal(x, y) for x, y in zip(a, b))


def all_close(a: list[torch.Tensor], b: list[torch.Tensor], atol: float, rtol: float) -> bool:
    if len(a) != len(b) or shapes(a) != shapes(b):
        return False
    return all(torch.allclose(x, y, atol=atol, rtol=rtol, equal_nan=True) for x, y in zip(as_float64(a), as_float64(b)))


def max_abs_diff(a: list[torch.Tensor], b: list[torch.Tensor]) -> float | None:
    if len(a) != len(b) or shapes(a) != shapes(b):
        return None
    diffs = [(x - y).abs().nan_to_num(nan=float("inf")).max().item() if x.numel() else 0.0
             for x, y in zip(as_float64(a), as_float64(b))]
    return max(diffs, default=0.0)
