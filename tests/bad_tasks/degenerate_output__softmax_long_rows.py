import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Softmax over rows of 4,096 values: a few outputs per row reach 0.1, but nearly all are far below the
    check's atol of 1e-2, so a kernel that returns zeros passes on over 90% of the values (the visibility rule)."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.softmax(x * 3.0, dim=1)


def get_inputs():
    return [torch.randn(8, 4096)]


def get_init_inputs():
    return []
