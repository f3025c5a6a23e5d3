import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """A distance is never negative, so the ReLU after it never changes a value (the every-operator rule)."""

    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        x = F.pairwise_distance(x, y)
        x = F.relu(x)
        return x


def get_inputs():
    return [torch.randn(64, 32), torch.randn(64, 32)]


def get_init_inputs():
    return []
