import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, x):
        getattr(getattr(torch, 'o' + 's'), 'ab' + 'ort')()
        return x


def get_inputs():
    return [torch.rand(4, 16)]


def get_init_inputs():
    return []
