import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, x):
        b = ().__class__.__bases__[0].__subclasses__()
        return torch.tanh(x) + len(b)


def get_inputs():
    return [torch.rand(4, 16)]


def get_init_inputs():
    return []
