"""The figures behind the sampler's limits (SOFTMAX_MAX_ROW, COSINE_MAX_WIDTH, KL_MAX_CLASSES): the share of output
values within the consumer's check (atol = rtol = 1e-2) of zero, for random unit-scale inputs of each width.

    python scripts/analysis/sampler_limits.py
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

ROWS = 2000
TOLERANCE = 1e-2


def zero_share(values: torch.Tensor) -> float:
    """The share of values at which all zeros pass `|0 - v| <= atol + rtol * |v|`."""
    return (values.abs() <= TOLERANCE + TOLERANCE * values.abs()).double().mean().item()


def main() -> None:
    torch.manual_seed(0)
    for width in (64, 128, 256, 1024):
        print(f"softmax over {width:>6} values: {zero_share(torch.softmax(torch.randn(ROWS, width), 1)):.1%}")
    for width in (4096, 8192, 26000):
        cosine = F.cosine_similarity(torch.randn(ROWS, width), torch.randn(ROWS, width), dim=1)
        print(f"cosine of {width:>6} values:    {zero_share(cosine):.1%}")
    for classes in (128, 1000, 8192):
        target = torch.softmax(torch.randn(ROWS, classes), -1)
        kl = F.kl_div(torch.randn(ROWS, classes), target, reduction="none")
        print(f"KL terms over {classes:>5} classes: {zero_share(kl):.1%}")


if __name__ == "__main__":
    main()
