"""The fused comparisons (filters/execute/fused.py) give the torch path's answers bit for bit: every comparison of
filters/execute/tensors.py that they serve, with them on and off, on values built to sit on each rounding's edge.

On a CUDA device (`pytest -m gpu`: the compiled kernels, where a contracted multiply-add would show); without one,
under triton's interpreter on the CPU when triton is installed (the kernels' logic); else skipped.
"""

from __future__ import annotations

import importlib.util
import sys

import pytest
import torch

from filters.execute import fused, tensors

ON_CUDA = torch.cuda.is_available()
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not ON_CUDA and importlib.util.find_spec("triton") is None,
                                 reason="needs a CUDA device, or triton for its interpreter")]
DEVICE = "cuda" if ON_CUDA else "cpu"
TOLERANCES = [(1e-2, 1e-2), (1e-5, 1.3e-6), (0.0, 1e-2), (1e-2, 0.0), (0.0, 0.0)]


@pytest.fixture
def both_paths(monkeypatch):
    """A function giving what a comparison returns with the fused kernels on and then off."""
    if not ON_CUDA:   # read as the kernels are defined: their module imported again
        monkeypatch.setenv("TRITON_INTERPRET", "1")
        monkeypatch.delitem(sys.modules, "filters.execute.fused_kernels", raising=False)
    fused._kernels.cache_clear()

    def run(compare, *args):
        monkeypatch.setenv(fused.FUSED_ENV, "1")
        on = compare(*args)
        monkeypatch.setenv(fused.FUSED_ENV, "0")
        return on, compare(*args)

    yield run
    fused._kernels.cache_clear()


def edge_pair(dtype: torch.dtype, atol: float, rtol: float, n: int = 6000, seed: int = 0):
    """x and y whose differences sit at atol + rtol * |y| (and one ulp either side), with zeros of both signs,
    subnormals, infinities and NaNs on either side."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(n, generator=generator, dtype=torch.float64) * 10 ** torch.randint(-6, 6, (n,), generator=generator)
    allowed = atol + rtol * x.abs()
    y = x + allowed * torch.randint(-1, 2, (n,), generator=generator)
    y = torch.nextafter(y, y + torch.randint(-1, 2, (n,), generator=generator).double())
    specials = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1e-45, -1e-45, 3.4e38],
                            dtype=torch.float64)
    x[:64] = specials.repeat(8)
    y[:64] = specials.repeat_interleave(8)
    return x.to(dtype).to(DEVICE), y.to(dtype).to(DEVICE)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("atol,rtol", TOLERANCES)
def test_the_counts_behind_all_close_are_isclose_s(both_paths, dtype, atol, rtol):
    x, y = edge_pair(dtype, atol, rtol)
    x64, y64 = x.double(), y.double()
    torch_count = (~torch.isclose(x64, y64, rtol=rtol, atol=atol, equal_nan=True)).sum().item()
    both_paths(lambda: None)   # the kernels defined (under the interpreter off CUDA)
    assert fused.not_close_count(x, y, atol, rtol).item() == torch_count
    assert 0 < torch_count < x.numel()   # the edges split both ways
    # a pair that is close everywhere, and another that differs at one value
    on, off = both_paths(tensors.all_close, [x], [x.clone()], atol, rtol)
    assert on is off is True
    z = x.clone()
    z[-1] = z[-1] * 2 + 1
    on, off = both_paths(tensors.all_close, [x], [z], atol, rtol)
    assert on is off is False


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_max_abs_diff_reads_nan_and_inf_as_torch_does(both_paths, dtype):
    x, y = edge_pair(dtype, 1e-2, 1e-2)
    pairs = [(x[64:], y[64:]),                     # finite only
             (x[:4], y[:4]),                       # an infinite difference: the largest float64
             (x, y)]                               # a NaN difference: inf
    for a, b in pairs:
        on, off = both_paths(tensors.max_abs_diff, [a, b], [b, a])
        assert on == off and off is not None
    assert both_paths(tensors.max_abs_diff, [x[64:]], [y[64:]])[1] < float("inf")
    assert both_paths(tensors.max_abs_diff, [x[:4]], [y[:4]])[0] == 1.7976931348623157e308
    assert both_paths(tensors.max_abs_diff, [x[:5]], [y[:5]])[0] == float("inf")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("atol,rtol", TOLERANCES[:3])
def test_the_visibility_shares_are_the_same(both_paths, monkeypatch, dtype, atol, rtol):
    # draws of two outputs: small values that zeros pass, values that concentrate near a constant, and a later draw
    # near the first (a stale answer), each at the tolerance's edges; a complex output and an empty one beside them
    x, y = edge_pair(dtype, atol, rtol)
    small = torch.rand(3000, dtype=torch.float64).to(dtype).to(DEVICE) * 3 * atol
    draws = [[x, small, torch.zeros(0, device=DEVICE)],
             [y, small.flip(0), torch.zeros(0, device=DEVICE)],
             [x.flip(0), small * 0.5, torch.zeros(0, device=DEVICE)]]
    served = []
    counts = fused.accepted_counts
    monkeypatch.setattr(fused, "accepted_counts", lambda *args: served.append(args[2] is not None) or counts(*args))
    on, off = both_paths(tensors.accepted_shares, draws, atol, rtol)
    assert on == off
    assert 0 < off["stale"] < 1
    assert served == [False, False, True, True, True, True]   # every output but the empty ones, stale from draw 1
    complex_draws = [[torch.randn(50, dtype=torch.complex64).to(DEVICE)] for _ in range(3)]
    on, off = both_paths(tensors.accepted_shares, complex_draws, atol, rtol)
    assert on == off


def test_the_kernels_serve_only_what_they_compare_exactly(both_paths, monkeypatch):
    x = torch.ones(10, device=DEVICE)
    monkeypatch.setenv(fused.FUSED_ENV, "1")
    assert fused.serves(x, x)
    assert not fused.serves(x, torch.ones(10, dtype=torch.int64, device=DEVICE))   # integers: the torch path
    assert not fused.serves(torch.ones(10, dtype=torch.bool, device=DEVICE))
    monkeypatch.setenv(fused.FUSED_ENV, "0")
    assert not fused.serves(x, x)
