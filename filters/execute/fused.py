"""Exact one-pass comparisons on CUDA: tensors.py's float64 comparisons of outputs, each in one Triton kernel.

The comparisons of filters/execute/tensors.py convert both sides to float64 and run a dozen torch kernels over
them: about 200 bytes of GPU memory traffic for each output value and each comparison, thousands a candidate over
every check and draw (a count of those kernels' reads and writes, not a measurement). A kernel (fused_kernels.py) reads each value once in its own dtype, converts it to float64
in registers and evaluates the same float64 expression as torch's ops, one IEEE-rounded operation at a time:
compiled with `enable_fp_fusion=False`, no multiply and add are contracted into one rounding, and the tolerances
come from a float64 buffer (a Python float argument would reach the kernel as float32). Each value's answer is
therefore the one torch gives, and what the kernels sum from the answers, integer counts and a maximum, does not
depend on the order of the summation: the verdicts are the same bit for bit (tests/test_fused_gpu.py).

Off unless FUSED_ENV is 1 in the build's environment (its workers inherit it); only for float tensors on a CUDA
device, with triton installed.
"""

from __future__ import annotations

import functools
import os
import sys

import torch

FUSED_ENV = "OPGEN_FUSED_COMPARISONS"
FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
BLOCK = 1024
LARGEST_FLOAT64 = sys.float_info.max   # nan_to_num's stand-in for an infinite difference


def enabled(environ: dict | None = None) -> bool:
    """Whether FUSED_ENV asks for the fused comparisons."""
    return (os.environ if environ is None else environ).get(FUSED_ENV, "0") == "1"


def serves(*flats: torch.Tensor) -> bool:
    """Whether the fused kernels compare these flat tensors: asked for, all float and on one CUDA device (or on
    the CPU under triton's interpreter, TRITON_INTERPRET=1, for tests), triton importable."""
    if not enabled() or not flats:
        return False
    device = flats[0].device
    on_device = device.type == "cuda" or (device.type == "cpu" and os.environ.get("TRITON_INTERPRET") == "1")
    return (on_device and all(t.device == device and t.dtype in FLOAT_DTYPES for t in flats)
            and _kernels() is not None)


def not_close_count(x: torch.Tensor, y: torch.Tensor, atol: float, rtol: float) -> torch.Tensor:
    """How many values torch.isclose(x, y, rtol, atol, equal_nan=True) finds not close, in float64 (0-d int64,
    on the device). x and y: flat, of one length."""
    kernels, grid = _kernels(), _grid(x)
    partial = torch.empty(grid, dtype=torch.int64, device=x.device)
    kernels.not_close[(grid,)](x, y, _params(x.device, atol, rtol), partial, x.numel(),
                               ZERO_TOLERANCE=atol == 0 and rtol == 0, BLOCK=BLOCK, enable_fp_fusion=False)
    return partial.sum()


def max_abs_diff(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """(x - y).abs().nan_to_num(nan=inf).max() in float64 (0-d, on the device); x and y flat, of one length."""
    kernels, grid = _kernels(), _grid(x)
    partial = torch.empty(grid, dtype=torch.float64, device=x.device)
    kernels.max_abs_diff[(grid,)](x, y, _params(x.device, 0.0, 0.0), partial, x.numel(), BLOCK=BLOCK,
                                  enable_fp_fusion=False)
    return partial.max()


def accepted_counts(reference: torch.Tensor, constant: torch.Tensor, answer: torch.Tensor | None, atol: float,
                    rtol: float) -> torch.Tensor:
    """How many values of `reference` accept each cheap wrong answer (tensors._accepted, in float64): all zeros,
    `constant` (a 0-d float64 tensor on the device) and, when given, `answer` (flat, as long as `reference`; else
    its count is 0). Three int64 counts, on the device."""
    kernels, grid = _kernels(), _grid(reference)
    partial = torch.zeros(3, grid, dtype=torch.int64, device=reference.device)
    kernels.accepted[(grid,)](reference, reference if answer is None else answer, constant,
                              _params(reference.device, atol, rtol), partial, reference.numel(), grid,
                              HAS_ANSWER=answer is not None, BLOCK=BLOCK, enable_fp_fusion=False)
    return partial.sum(dim=1)


def _grid(flat: torch.Tensor) -> int:
    return max(1, -(-flat.numel() // BLOCK))


@functools.cache
def _params(device: torch.device, atol: float, rtol: float) -> torch.Tensor:
    """atol, rtol and LARGEST_FLOAT64 as float64 on the device, once per process and tolerance."""
    return torch.tensor([atol, rtol, LARGEST_FLOAT64], dtype=torch.float64, device=device)


@functools.cache
def _kernels():
    """The kernels' module (triton compiles each kernel on first use); None without triton. Imported on first use:
    triton reads TRITON_INTERPRET as it defines them."""
    try:
        from filters.execute import fused_kernels
    except ImportError:
        return None
    return fused_kernels
