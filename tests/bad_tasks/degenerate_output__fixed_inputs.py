import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, x):
        return torch.tanh(x) * 2


def get_inputs():
    return [torch.arange(64.0).view(4, 16) / 64]


def get_init_inputs():
    return []
