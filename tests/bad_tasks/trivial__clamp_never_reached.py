import torch
import torch.nn as nn


class Model(nn.Module):
    """A sigmoid's output lies in (0, 1), so clamping it to [-2, 2] never changes a value (the every-operator
    rule); the multiply after it keeps the chain from ending on the identity."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = torch.sigmoid(x)
        x = torch.clamp(x, min=-2.0, max=2.0)
        x = x * 3.0
        return x


def get_inputs():
    return [torch.randn(32, 64)]


def get_init_inputs():
    return []
