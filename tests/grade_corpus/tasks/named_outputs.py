import torch
import torch.nn as nn


class Model(nn.Module):
    """Two outputs, named: a sum and a product."""

    def forward(self, a, b):
        return {"sum": a + b, "product": a * b}


rows, cols = 8, 16


def get_inputs():
    return [torch.randn(rows, cols), torch.randn(rows, cols)]


def get_init_inputs():
    return []
