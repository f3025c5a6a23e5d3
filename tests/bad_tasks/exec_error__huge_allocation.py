import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, x):
        big = torch.ones(2 ** 31)
        return torch.tanh(x) + big[0]


def get_inputs():
    return [torch.rand(4, 16)]


def get_init_inputs():
    return []
