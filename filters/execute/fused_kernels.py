"""The Triton kernels of filters/execute/fused.py: float64 comparisons of outputs, one IEEE operation at a time.

Launched with enable_fp_fusion=False; each program writes its block's count (or maximum) to out[pid], summed (or
maxed) by the caller. Lanes past n load 0 and are masked out of every result.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def not_close(x_ptr, y_ptr, params_ptr, out_ptr, n, ZERO_TOLERANCE: tl.constexpr, BLOCK: tl.constexpr):
    """Values torch.isclose(x, y, rtol, atol, equal_nan=True) finds not close: close when x == y, or both are NaN,
    or |x - y| is finite and at most atol + |y * rtol| (params: atol, rtol)."""
    pid = tl.program_id(0)
    offsets = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = offsets < n
    x = tl.load(x_ptr + offsets, mask=inside, other=0.0).to(tl.float64)
    y = tl.load(y_ptr + offsets, mask=inside, other=0.0).to(tl.float64)
    close = (x == y) | ((x != x) & (y != y))
    if not ZERO_TOLERANCE:   # both zero: isclose is the equality alone
        atol = tl.load(params_ptr)
        rtol = tl.load(params_ptr + 1)
        actual = tl.abs(x - y)
        allowed = atol + tl.abs(y * rtol)
        close = close | ((actual < float("inf")) & (actual <= allowed))
    tl.store(out_ptr + pid, tl.sum((inside & ~close).to(tl.int64), axis=0))


@triton.jit
def max_abs_diff(x_ptr, y_ptr, params_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """The largest |x - y| with NaN read as inf and inf as the largest float64 (params[2]): nan_to_num(nan=inf)."""
    pid = tl.program_id(0)
    offsets = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = offsets < n
    x = tl.load(x_ptr + offsets, mask=inside, other=0.0).to(tl.float64)
    y = tl.load(y_ptr + offsets, mask=inside, other=0.0).to(tl.float64)
    largest = tl.load(params_ptr + 2)
    diff = tl.abs(x - y)
    diff = tl.where(diff == float("inf"), largest, diff)
    diff = tl.where(diff != diff, float("inf"), diff)
    tl.store(out_ptr + pid, tl.max(tl.where(inside, diff, 0.0), axis=0))


@triton.jit
def accepted(reference_ptr, answer_ptr, constant_ptr, params_ptr, out_ptr, n, programs,
             HAS_ANSWER: tl.constexpr, BLOCK: tl.constexpr):
    """Values of the reference at which tensors._accepted takes each answer: |reference - answer| <= atol + rtol *
    max(|reference|, |answer|), for zero (out[pid]), the constant (out[programs + pid]) and, with HAS_ANSWER, the
    answer's values (out[2 * programs + pid]). A NaN on either side makes the difference NaN and the answer
    False, whatever the maximum makes of it."""
    pid = tl.program_id(0)
    offsets = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = offsets < n
    reference = tl.load(reference_ptr + offsets, mask=inside, other=0.0).to(tl.float64)
    atol = tl.load(params_ptr)
    rtol = tl.load(params_ptr + 1)
    magnitude = tl.abs(reference)
    zero = tl.zeros_like(reference)
    takes_zero = tl.abs(reference - zero) <= atol + rtol * tl.maximum(magnitude, tl.abs(zero))
    tl.store(out_ptr + pid, tl.sum((inside & takes_zero).to(tl.int64), axis=0))
    constant = tl.load(constant_ptr)
    takes_constant = tl.abs(reference - constant) <= atol + rtol * tl.maximum(magnitude, tl.abs(constant))
    tl.store(out_ptr + programs + pid, tl.sum((inside & takes_constant).to(tl.int64), axis=0))
    if HAS_ANSWER:   # else the count stays the caller's 0
        answer = tl.load(answer_ptr + offsets, mask=inside, other=0.0).to(tl.float64)
        takes_answer = tl.abs(reference - answer) <= atol + rtol * tl.maximum(magnitude, tl.abs(answer))
        tl.store(out_ptr + 2 * programs + pid, tl.sum((inside & takes_answer).to(tl.int64), axis=0))
