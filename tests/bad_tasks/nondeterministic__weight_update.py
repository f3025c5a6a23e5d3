import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(16, 8)

    def forward(self, x):
        out = self.linear(x)
        self.linear.weight.mul_(1.5)
        return out


def get_inputs():
    return [torch.rand(4, 16)]


def get_init_inputs():
    return []
