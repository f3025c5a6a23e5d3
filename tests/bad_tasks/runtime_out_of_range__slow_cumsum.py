import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, x):
        y = x
        for _ in range(10):   # 300 ms on one core of the dev machine; the test's window comes from it
            y = torch.tanh(torch.cumsum(y, dim=1) / 100)
        return y


def get_inputs():
    return [torch.randn(64, 50000)]


def get_init_inputs():
    return []
