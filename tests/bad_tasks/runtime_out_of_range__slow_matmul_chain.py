import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(1024, 1024) / 32)

    def forward(self, x):
        for _ in range(7):   # 300 ms on one core of the dev machine; the test's window comes from it
            x = torch.tanh(x @ self.w)
        return x


def get_inputs():
    return [torch.randn(1024, 1024)]


def get_init_inputs():
    return []
