import torch
import torch.nn as nn


class Model(nn.Module):
    """A mean squared error per row of 65,536 random values: about 2.0 on every row of every input draw, so a
    kernel that returns 2.0 (or one stored answer) passes the check on nearly every row, while a row or two over
    the tolerance keeps it from the all-draws-alike check (the visibility rule)."""

    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return ((x - y) ** 2).mean(dim=1)


def get_inputs():
    return [torch.randn(64, 65536), torch.randn(64, 65536)]


def get_init_inputs():
    return []
